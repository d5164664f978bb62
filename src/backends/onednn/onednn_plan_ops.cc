// One builder per unit kind: reads the anchor node's attributes with the concrete input dims,
// describes the primitive (source and weights in format `any` where oneDNN may pick a blocked
// layout) and hands it to PlanBuilder::emit, which fuses the post-ops.

#include "backends/onednn/onednn_plan_builder.h"
#include "backends/onednn/onednn_support.h"
#include "ops/nn_geometry.h"

namespace tessera::onednn {
namespace {

using dnnl::prop_kind;

Result<int> normalized_axis(int64_t axis, int rank, const Node& node) {
  if (axis < -rank || axis >= rank)
    return invalid_argument(node.describe() + ": axis out of range");
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

// Broadcasts constant `t` to `to` dims (numpy rules), as float32.
Result<Tensor> broadcast_constant(const Tensor& t, const Dims& to) {
  if (t.rank() > static_cast<int>(to.size()))
    return invalid_argument("constant " + t.describe() + " does not broadcast");
  const size_t off = to.size() - t.dims().size();
  Dims strides(to.size(), 0);
  int64_t s = 1;
  for (size_t i = t.dims().size(); i-- > 0;) {
    const int64_t d = t.dims()[i];
    if (d != 1 && d != to[off + i])
      return invalid_argument("constant " + t.describe() + " does not broadcast to " +
                              dims_to_string(to));
    strides[off + i] = d == 1 ? 0 : s;
    s *= d;
  }
  Tensor out(DType::kFloat32, to);
  float* dst = out.data<float>();
  const float* src = t.data<float>();
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t rem = i, at = 0;
    for (size_t d = to.size(); d-- > 0;) {
      at += (rem % to[d]) * strides[d];
      rem /= to[d];
    }
    dst[i] = src[at];
  }
  return out;
}

}  // namespace

Result<int> PlanBuilder::build_unit(const Unit& u) {
  switch (u.kind) {
    case UnitKind::kConv: return build_conv(u);
    case UnitKind::kDeconv: return build_deconv(u);
    case UnitKind::kMatMul: return build_matmul(u);
    case UnitKind::kGemm: return build_gemm(u);
    case UnitKind::kPool: return build_pool(u);
    case UnitKind::kSoftmax: return build_softmax(u);
    case UnitKind::kLayerNorm: return build_layer_norm(u);
    case UnitKind::kConcat: return build_concat(u);
    case UnitKind::kResize: return build_resize(u);
    case UnitKind::kReduce: return build_reduce(u);
    case UnitKind::kEltwise: {
      TESSERA_ASSIGN_OR_RETURN(int x, operand_tensor(u.inputs[0]));
      return emit_eltwise(x, u.eltwise, u.post_ops, false, u.label);
    }
    case UnitKind::kBinary: {
      TESSERA_ASSIGN_OR_RETURN(int a, operand_tensor(u.inputs[0]));
      TESSERA_ASSIGN_OR_RETURN(int b, operand_tensor(u.inputs[1]));
      return emit_binary(a, b, u.binary_alg, u.post_ops, u.label);
    }
  }
  return internal_error("unknown unit kind");
}

Result<int> PlanBuilder::build_matmul(const Unit& u) {
  TESSERA_ASSIGN_OR_RETURN(int a0, operand_tensor(u.inputs[0]));
  TESSERA_ASSIGN_OR_RETURN(int b0, operand_tensor(u.inputs[1]));
  const Dims da = dims(a0), db = dims(b0);
  // ONNX MatMul: 1-D operands gain a dim that the result drops again; batch dims broadcast.
  Dims a2 = da.size() == 1 ? Dims{1, da[0]} : da;
  Dims b2 = db.size() == 1 ? Dims{db[0], 1} : db;
  const size_t rank = std::max(a2.size(), b2.size());
  a2.insert(a2.begin(), rank - a2.size(), 1);
  b2.insert(b2.begin(), rank - b2.size(), 1);
  const int64_t m = a2[rank - 2], k = a2[rank - 1], n = b2[rank - 1];
  if (b2[rank - 2] != k)
    return invalid_argument("inner dims differ: " + dims_to_string(da) + " x " +
                            dims_to_string(db));
  Dims dst(rank), onnx_out;
  for (size_t i = 0; i + 2 < rank; ++i) {
    if (a2[i] != b2[i] && a2[i] != 1 && b2[i] != 1)
      return invalid_argument("batch dims do not broadcast");
    dst[i] = std::max(a2[i], b2[i]);
    onnx_out.push_back(dst[i]);
  }
  dst[rank - 2] = m;
  dst[rank - 1] = n;
  if (da.size() != 1) onnx_out.push_back(m);
  if (db.size() != 1) onnx_out.push_back(n);
  TESSERA_ASSIGN_OR_RETURN(int a, reshape(a0, a2));
  TESSERA_ASSIGN_OR_RETURN(int b, reshape(b0, b2));
  const bool const_b = is_constant(b);
  // Operands in a layout oneDNN's fast matmul does not read (a rank-4 attention tensor that a
  // channels-last plan stores channels-last, say) get only its reference implementation (about
  // 3 ms for each of PP-OCR rec's attention products): reorder them to plain first.
  if (!is_plain(md(a)) || (!const_b && !is_plain(md(b)))) {
    dnnl::matmul::desc probe(md(a), const_b ? any_desc(b2) : md(b), plain_desc(dst));
    if (is_reference_impl(dnnl::matmul::primitive_desc(probe, cpu_engine()))) {
      TESSERA_ASSIGN_OR_RETURN(a, to_plain(a));
      if (!const_b) {
        TESSERA_ASSIGN_OR_RETURN(b, to_plain(b));
      }
    }
  }
  Anchor an;
  an.label = u.label;
  an.dst_dims = dst;
  an.fixed_dst = plain_desc(dst);
  const memory::desc src_md = md(a), wei_md = const_b ? any_desc(b2) : md(b);
  an.make_pd = [=](const memory::desc& dst_md,
                   const dnnl::primitive_attr& attr) -> dnnl::primitive_desc {
    dnnl::matmul::desc d(src_md, wei_md, dst_md);
    return dnnl::matmul::primitive_desc(d, attr, cpu_engine());
  };
  an.bind = [=, this](const dnnl::primitive_desc& pd) -> Result<Args> {
    TESSERA_ASSIGN_OR_RETURN(int wl, to_layout(b, pd.weights_desc()));
    return Args{{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, wl}};
  };
  TESSERA_ASSIGN_OR_RETURN(int out, emit(an, u.post_ops));
  return reshape(out, onnx_out);
}

Result<int> PlanBuilder::build_gemm(const Unit& u) {
  const Node& node = g_.node(u.node);
  TESSERA_ASSIGN_OR_RETURN(int a0, operand_tensor(u.inputs[0]));
  TESSERA_ASSIGN_OR_RETURN(int b0, operand_tensor(u.inputs[1]));
  TESSERA_ASSIGN_OR_RETURN(a0, to_plain(a0));
  TESSERA_ASSIGN_OR_RETURN(b0, to_plain(b0));
  const bool ta = node.attr_int("transA", 0) != 0, tb = node.attr_int("transB", 0) != 0;
  const Dims da = dims(a0), db = dims(b0);
  const int64_t m = ta ? da[1] : da[0], k = ta ? da[0] : da[1];
  const int64_t n = tb ? db[0] : db[1];
  if ((tb ? db[1] : db[0]) != k) return invalid_argument("inner dims differ");
  // Transposed operands are the same bytes described with swapped strides.
  const int a = alias(a0, {m, k}, ta ? strided_desc({m, k}, {1, m}) : plain_desc({m, k}));
  const int b = alias(b0, {k, n}, tb ? strided_desc({k, n}, {1, k}) : plain_desc({k, n}));
  const float alpha = node.attr_float("alpha", 1.0f), beta = node.attr_float("beta", 1.0f);
  std::vector<PostOp> post;
  const bool has_c = u.inputs.size() > 2 && (u.inputs[2].value >= 0 || u.inputs[2].is_constant());
  if (has_c && beta != 0.0f) {
    PostOp add{PostOp::Kind::kBinary, {}, algorithm::binary_add, u.inputs[2]};
    if (u.inputs[2].is_constant() && beta != 1.0f) {
      // beta * C, as the reference computes it, once.
      Tensor c(DType::kFloat32, u.inputs[2].constant.dims());
      for (int64_t i = 0; i < c.numel(); ++i)
        c.data<float>()[i] = beta * u.inputs[2].constant.data<float>()[i];
      add.operand = Operand{-1, c};
    } else if (beta != 1.0f) {
      return unimplemented("beta != 1 with a non-constant C");
    }
    post.push_back(std::move(add));
  }
  post.insert(post.end(), u.post_ops.begin(), u.post_ops.end());
  const bool const_b = is_constant(b);
  Anchor an;
  an.label = u.label;
  an.dst_dims = {m, n};
  an.fixed_dst = plain_desc({m, n});
  an.output_scale = alpha;  // applied before the post-ops: alpha * AB + beta * C
  const memory::desc src_md = md(a), wei_md = const_b ? any_desc({k, n}) : md(b);
  an.make_pd = [=](const memory::desc& dst_md,
                   const dnnl::primitive_attr& attr) -> dnnl::primitive_desc {
    dnnl::matmul::desc d(src_md, wei_md, dst_md);
    return dnnl::matmul::primitive_desc(d, attr, cpu_engine());
  };
  an.bind = [=, this](const dnnl::primitive_desc& pd) -> Result<Args> {
    TESSERA_ASSIGN_OR_RETURN(int wl, to_layout(b, pd.weights_desc()));
    return Args{{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, wl}};
  };
  return emit(an, post);
}

Result<int> PlanBuilder::build_pool(const Unit& u) {
  const Node& node = g_.node(u.node);
  TESSERA_ASSIGN_OR_RETURN(int x, operand_tensor(u.inputs[0]));
  const Dims xd = dims(x);
  const size_t sp = xd.size() - 2;
  const bool global = node.op_type == "GlobalAveragePool" || node.op_type == "GlobalMaxPool";
  Dims kernel(xd.begin() + 2, xd.end()), strides(sp, 1), dil(sp, 0), pl(sp, 0), pr(sp, 0),
      out(sp, 1);
  if (!global) {
    TESSERA_ASSIGN_OR_RETURN(
        nn::WindowGeometry geo,
        nn::forward_window(node, Dims(xd.begin() + 2, xd.end()), node.attr_ints("kernel_shape"),
                           node.attr_int("ceil_mode", 0) != 0));
    kernel = geo.kernel;
    strides = geo.strides;
    pl = geo.pads_begin;
    out = geo.out;
    for (size_t i = 0; i < sp; ++i) {
      dil[i] = geo.dilations[i] - 1;
      // The right padding that gives exactly `out` windows (ceil_mode adds some).
      pr[i] =
          (out[i] - 1) * strides[i] + (kernel[i] - 1) * geo.dilations[i] + 1 - xd[i + 2] - pl[i];
      if (pr[i] < 0) pr[i] = 0;
    }
  }
  algorithm alg = algorithm::pooling_max;
  if (node.op_type == "AveragePool" || node.op_type == "GlobalAveragePool") {
    alg = node.attr_int("count_include_pad", 0) != 0 ? algorithm::pooling_avg_include_padding
                                                     : algorithm::pooling_avg_exclude_padding;
  }
  Dims dst{xd[0], xd[1]};
  dst.insert(dst.end(), out.begin(), out.end());
  Anchor a;
  a.label = u.label;
  a.dst_dims = dst;
  const memory::desc src_md = md(x);
  a.make_pd = [=](const memory::desc& dst_md,
                  const dnnl::primitive_attr& attr) -> dnnl::primitive_desc {
    dnnl::pooling_v2_forward::desc d(prop_kind::forward_inference, alg, src_md, dst_md,
                                     mdims(strides), mdims(kernel), mdims(dil), mdims(pl),
                                     mdims(pr));
    return dnnl::pooling_v2_forward::primitive_desc(d, attr, cpu_engine());
  };
  a.bind = [=, this](const dnnl::primitive_desc& pd) -> Result<Args> {
    TESSERA_ASSIGN_OR_RETURN(int src, to_layout(x, pd.src_desc()));
    return Args{{DNNL_ARG_SRC, src}};
  };
  return emit(a, u.post_ops);
}

Result<int> PlanBuilder::build_softmax(const Unit& u) {
  const Node& node = g_.node(u.node);
  TESSERA_ASSIGN_OR_RETURN(int x0, operand_tensor(u.inputs[0]));
  TESSERA_ASSIGN_OR_RETURN(x0, to_plain(x0));
  const Dims xd = dims(x0);
  const int rank = static_cast<int>(xd.size());
  int x = x0, axis;
  if (node.opset >= 13) {
    TESSERA_ASSIGN_OR_RETURN(axis, normalized_axis(node.attr_int("axis", -1), rank, node));
  } else {
    // Before opset 13 the input is coerced to 2-D at axis.
    int64_t ax = node.attr_int("axis", 1);
    if (ax < 0) ax += rank;
    if (ax < 0 || ax > rank) return invalid_argument(node.describe() + ": axis out of range");
    TESSERA_ASSIGN_OR_RETURN(x, reshape(x0, Dims{product(xd, 0, ax), product(xd, ax, xd.size())}));
    axis = 1;
  }
  Anchor a;
  a.label = u.label;
  a.dst_dims = dims(x);
  a.fixed_dst = md(x);
  const memory::desc src_md = md(x);
  a.make_pd = [=](const memory::desc&, const dnnl::primitive_attr& attr) -> dnnl::primitive_desc {
    dnnl::softmax_forward::desc d(prop_kind::forward_inference, src_md, axis);
    return dnnl::softmax_forward::primitive_desc(d, attr, cpu_engine());
  };
  a.bind = [x](const dnnl::primitive_desc&) -> Result<Args> { return Args{{DNNL_ARG_SRC, x}}; };
  TESSERA_ASSIGN_OR_RETURN(int out, emit(a, u.post_ops));
  return reshape(out, xd);
}

Result<int> PlanBuilder::build_layer_norm(const Unit& u) {
  const Node& node = g_.node(u.node);
  TESSERA_ASSIGN_OR_RETURN(int x0, operand_tensor(u.inputs[0]));
  const Dims xd = dims(x0);
  TESSERA_ASSIGN_OR_RETURN(
      int axis, normalized_axis(node.attr_int("axis", -1), static_cast<int>(xd.size()), node));
  const Dims norm_dims(xd.begin() + axis, xd.end());
  const int64_t inner = product(xd, axis, xd.size()), outer = product(xd, 0, axis);
  TESSERA_ASSIGN_OR_RETURN(int x, reshape(x0, {outer, inner}));
  // Scale and B as [inner] vectors: constants broadcast once, runtime ones are full already.
  auto param = [&](const Operand& o) -> Result<int> {
    if (o.is_constant()) {
      TESSERA_ASSIGN_OR_RETURN(Tensor full, broadcast_constant(o.constant, norm_dims));
      return constant_tensor(full.reshaped({inner}));
    }
    TESSERA_ASSIGN_OR_RETURN(int t, operand_tensor(o));
    if (shape_numel(dims(t)) != inner) return unimplemented("a runtime Scale/B that broadcasts");
    return reshape(t, {inner});
  };
  TESSERA_ASSIGN_OR_RETURN(int scale, param(u.inputs[1]));
  const bool has_bias =
      u.inputs.size() > 2 && (u.inputs[2].value >= 0 || u.inputs[2].is_constant());
  int shift = -1;
  if (has_bias) {
    TESSERA_ASSIGN_OR_RETURN(shift, param(u.inputs[2]));
  }
  const float eps = node.attr_float("epsilon", 1e-5f);
  auto flags = dnnl::normalization_flags::use_scale;
  if (has_bias) flags |= dnnl::normalization_flags::use_shift;
  Anchor a;
  a.label = u.label;
  a.dst_dims = dims(x);
  a.fixed_dst = md(x);
  const memory::desc src_md = md(x);
  a.make_pd = [=](const memory::desc&, const dnnl::primitive_attr& attr) -> dnnl::primitive_desc {
    dnnl::layer_normalization_forward::desc d(prop_kind::forward_inference, src_md, eps, flags);
    return dnnl::layer_normalization_forward::primitive_desc(d, attr, cpu_engine());
  };
  a.bind = [=](const dnnl::primitive_desc&) -> Result<Args> {
    Args args{{DNNL_ARG_SRC, x}, {DNNL_ARG_SCALE, scale}};
    if (has_bias) args.emplace_back(DNNL_ARG_SHIFT, shift);
    return args;
  };
  TESSERA_ASSIGN_OR_RETURN(int out, emit(a, u.post_ops));
  return reshape(out, xd);
}

Result<int> PlanBuilder::build_concat(const Unit& u) {
  const Node& node = g_.node(u.node);
  std::vector<int> srcs;
  for (const Operand& o : u.inputs) {
    TESSERA_ASSIGN_OR_RETURN(int t, operand_tensor(o));
    srcs.push_back(t);
  }
  const Dims d0 = dims(srcs[0]);
  TESSERA_ASSIGN_OR_RETURN(
      int axis, normalized_axis(node.attr_int("axis", 0), static_cast<int>(d0.size()), node));
  Dims out = d0;
  out[axis] = 0;
  for (int t : srcs) out[axis] += dims(t)[axis];
  // Sources of equal dims share one layout (the first runtime one's) so oneDNN copies blocks;
  // otherwise each stays as produced.
  bool same_dims = true;
  for (int t : srcs) same_dims = same_dims && dims(t) == d0;
  memory::desc common = plain_desc(d0);
  for (int t : srcs)
    if (!is_constant(t)) {
      common = md(t);
      break;
    }
  std::vector<memory::desc> mds;
  Args args;
  for (size_t i = 0; i < srcs.size(); ++i) {
    int t = srcs[i];
    if (same_dims) {
      TESSERA_ASSIGN_OR_RETURN(t, to_layout(t, common));
    }
    mds.push_back(md(t));
    args.emplace_back(DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), t);
  }
  dnnl::concat::primitive_desc pd(axis, mds, cpu_engine());
  const int dst = add_tensor(out, pd.dst_desc(), Storage::kArena);
  args.emplace_back(DNNL_ARG_DST, dst);
  add_step(dnnl::concat(pd), std::move(args), u.label, pd.impl_info_str());
  return emit_rest(dst, u.post_ops, 0, u.label);
}

Result<int> PlanBuilder::build_resize(const Unit& u) {
  const Node& node = g_.node(u.node);
  TESSERA_ASSIGN_OR_RETURN(int x, operand_tensor(u.inputs[0]));
  TESSERA_ASSIGN_OR_RETURN(ResizeSpec spec, resize_spec(g_, node));
  TESSERA_ASSIGN_OR_RETURN(Dims out, resize_output_dims(spec, dims(x)));
  Anchor a;
  a.label = u.label;
  a.dst_dims = out;
  const memory::desc src_md = md(x);
  const algorithm alg = spec.alg;
  a.make_pd = [=](const memory::desc& dst_md,
                  const dnnl::primitive_attr& attr) -> dnnl::primitive_desc {
    dnnl::resampling_forward::desc d(prop_kind::forward_inference, alg, src_md, dst_md);
    return dnnl::resampling_forward::primitive_desc(d, attr, cpu_engine());
  };
  a.bind = [=, this](const dnnl::primitive_desc& pd) -> Result<Args> {
    TESSERA_ASSIGN_OR_RETURN(int src, to_layout(x, pd.src_desc()));
    return Args{{DNNL_ARG_SRC, src}};
  };
  return emit(a, u.post_ops);
}

Result<int> PlanBuilder::build_reduce(const Unit& u) {
  const Node& node = g_.node(u.node);
  TESSERA_ASSIGN_OR_RETURN(int x, operand_tensor(u.inputs[0]));
  TESSERA_ASSIGN_OR_RETURN(x, to_plain(x));
  const Dims xd = dims(x);
  TESSERA_ASSIGN_OR_RETURN(ReduceSpec spec, reduce_spec(g_, node, static_cast<int>(xd.size())));
  Dims kept = xd, squeezed;
  for (size_t i = 0; i < xd.size(); ++i) {
    if (spec.reduced[i]) kept[i] = 1;
    if (!spec.reduced[i] || spec.keepdims) squeezed.push_back(kept[i]);
  }
  Anchor a;
  a.label = u.label;
  a.dst_dims = kept;
  a.fixed_dst = plain_desc(kept);
  const memory::desc src_md = md(x);
  const algorithm alg = spec.alg;
  a.make_pd = [=](const memory::desc& dst_md,
                  const dnnl::primitive_attr& attr) -> dnnl::primitive_desc {
    dnnl::reduction::desc d(alg, src_md, dst_md, 0.0f, 0.0f);
    return dnnl::reduction::primitive_desc(d, attr, cpu_engine());
  };
  a.bind = [x](const dnnl::primitive_desc&) -> Result<Args> { return Args{{DNNL_ARG_SRC, x}}; };
  TESSERA_ASSIGN_OR_RETURN(int out, emit(a, u.post_ops));
  if (squeezed == kept) return out;
  TESSERA_ASSIGN_OR_RETURN(out, to_plain(out));
  return alias(out, squeezed, plain_desc(squeezed));
}

}  // namespace tessera::onednn
