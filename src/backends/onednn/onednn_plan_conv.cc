// Convolutions: Conv and ConvTranspose as oneDNN primitives (weights in the layout the primitive
// picks, reordered once), per-channel affine post-ops folded into the weights, and ConvTranspose
// with kernel == stride as a tiling matmul.
#include "backends/onednn/onednn_plan_builder.h"
#include "ops/nn_geometry.h"

namespace tessera::onednn {

using dnnl::prop_kind;

Result<size_t> PlanBuilder::fold_affine(const std::vector<PostOp>& post_ops, const Dims& dst_dims,
                                        int& w, int& b,
                                        const std::function<int64_t(int64_t)>& oc_of) {
  if (!is_constant(w) || !is_plain(md(w)) || (b >= 0 && (!is_constant(b) || !is_plain(md(b)))))
    return size_t{0};
  const size_t rank = dst_dims.size();
  const int64_t oc = dst_dims[1];
  // y = conv * scale + shift per output channel, composed over the folded post-ops.
  std::vector<double> scale(oc, 1.0), shift(oc, 0.0);
  size_t n = 0;
  for (; n < post_ops.size(); ++n) {
    const PostOp& p = post_ops[n];
    if (p.kind == PostOp::Kind::kEltwise) {
      if (p.eltwise.alg != algorithm::eltwise_linear) break;
      for (int64_t o = 0; o < oc; ++o) {
        scale[o] *= p.eltwise.alpha;
        shift[o] = p.eltwise.alpha * shift[o] + p.eltwise.beta;
      }
      continue;
    }
    const Tensor& c = p.operand.constant;
    if (!p.operand.is_constant() || c.dtype() != DType::kFloat32 ||
        c.rank() > static_cast<int>(rank))
      break;
    Dims padded(rank - c.rank(), 1);
    padded.insert(padded.end(), c.dims().begin(), c.dims().end());
    bool per_channel = padded[1] == oc;
    for (size_t i = 0; i < rank; ++i) per_channel = per_channel && (i == 1 || padded[i] == 1);
    if (c.numel() != 1 && !per_channel) break;
    auto at = [&](int64_t o) {
      return static_cast<double>(c.data<float>()[c.numel() == 1 ? 0 : o]);
    };
    const algorithm alg = p.binary_alg;
    if (alg != algorithm::binary_mul && alg != algorithm::binary_add &&
        alg != algorithm::binary_sub && alg != algorithm::binary_div) {
      break;
    }
    for (int64_t o = 0; o < oc; ++o) {
      const double v = at(o);
      if (alg == algorithm::binary_mul)
        scale[o] *= v, shift[o] *= v;
      else if (alg == algorithm::binary_add)
        shift[o] += v;
      else if (alg == algorithm::binary_sub)
        shift[o] -= v;
      else
        scale[o] /= v, shift[o] /= v;
    }
  }
  if (n == 0) return size_t{0};
  const float* wsrc =
      static_cast<const float*>(tensors_[tensors_[w].root].constant.get_data_handle());
  Tensor nw(DType::kFloat32, dims(w));
  for (int64_t i = 0; i < nw.numel(); ++i)
    nw.data<float>()[i] = static_cast<float>(wsrc[i] * scale[oc_of(i)]);
  Tensor nb(DType::kFloat32, {oc});
  const float* bsrc =
      b >= 0 ? static_cast<const float*>(tensors_[tensors_[b].root].constant.get_data_handle())
             : nullptr;
  for (int64_t o = 0; o < oc; ++o)
    nb.data<float>()[o] = static_cast<float>((bsrc ? bsrc[o] : 0.0) * scale[o] + shift[o]);
  w = constant_tensor(nw);
  b = constant_tensor(nb);
  return n;
}

Result<int> PlanBuilder::build_conv(const Unit& u) {
  const Node& node = g_.node(u.node);
  TESSERA_ASSIGN_OR_RETURN(int x, operand_tensor(u.inputs[0]));
  TESSERA_ASSIGN_OR_RETURN(int w, operand_tensor(u.inputs[1]));
  const Dims xd = dims(x), wd = dims(w);
  const size_t rank = xd.size();
  if (wd.size() != rank || rank < 3) return invalid_argument("X and W ranks differ");
  const int64_t group = node.attr_int("group", 1), oc = wd[0];
  if (xd[1] % group != 0 || oc % group != 0 || wd[1] * group != xd[1])
    return invalid_argument("channels do not match group");
  TESSERA_ASSIGN_OR_RETURN(nn::WindowGeometry geo,
                           nn::forward_window(node, Dims(xd.begin() + 2, xd.end()),
                                              Dims(wd.begin() + 2, wd.end()), false));
  Dims dst{xd[0], oc};
  dst.insert(dst.end(), geo.out.begin(), geo.out.end());
  Dims wdims = wd;
  if (group > 1) {
    wdims = {group, oc / group, wd[1]};
    wdims.insert(wdims.end(), wd.begin() + 2, wd.end());
  }
  Dims dil = geo.dilations;
  for (int64_t& d : dil) d -= 1;  // oneDNN counts dilation from 0
  int b = -1;
  if (u.inputs.size() > 2 && (u.inputs[2].value >= 0 || u.inputs[2].is_constant())) {
    TESSERA_ASSIGN_OR_RETURN(b, operand_tensor(u.inputs[2]));
  }
  const int64_t per_oc = shape_numel(wd) / oc;
  std::vector<PostOp> post = u.post_ops;
  TESSERA_ASSIGN_OR_RETURN(
      size_t folded, fold_affine(post, dst, w, b, [per_oc](int64_t i) { return i / per_oc; }));
  post.erase(post.begin(), post.begin() + static_cast<std::ptrdiff_t>(folded));
  const bool has_bias = b >= 0;
  Anchor a;
  a.label = u.label;
  a.dst_dims = dst;
  const memory::desc src_any = any_desc(xd), wei_any = any_desc(wdims), bias_any = any_desc({oc});
  const memory::dims strides = mdims(geo.strides), dilates = mdims(dil), pl = mdims(geo.pads_begin),
                     pr = mdims(geo.pads_end);
  a.make_pd = [=](const memory::desc& dst_md,
                  const dnnl::primitive_attr& attr) -> dnnl::primitive_desc {
    auto d = has_bias ? dnnl::convolution_forward::desc(
                            prop_kind::forward_inference, algorithm::convolution_direct, src_any,
                            wei_any, bias_any, dst_md, strides, dilates, pl, pr)
                      : dnnl::convolution_forward::desc(prop_kind::forward_inference,
                                                        algorithm::convolution_direct, src_any,
                                                        wei_any, dst_md, strides, dilates, pl, pr);
    return dnnl::convolution_forward::primitive_desc(d, attr, cpu_engine());
  };
  a.bind = [=, this](const dnnl::primitive_desc& pd) -> Result<Args> {
    TESSERA_ASSIGN_OR_RETURN(int src, to_layout(x, pd.src_desc()));
    TESSERA_ASSIGN_OR_RETURN(int wv, reshape(w, wdims));
    TESSERA_ASSIGN_OR_RETURN(int wl, to_layout(wv, pd.weights_desc()));
    Args args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wl}};
    if (has_bias) {
      TESSERA_ASSIGN_OR_RETURN(int bl, to_layout(b, pd.query_md(dnnl::query::weights_md, 1)));
      args.emplace_back(DNNL_ARG_BIAS, bl);
    }
    return args;
  };
  return emit(a, post);
}

Result<int> PlanBuilder::build_deconv(const Unit& u) {
  const Node& node = g_.node(u.node);
  TESSERA_ASSIGN_OR_RETURN(int x, operand_tensor(u.inputs[0]));
  TESSERA_ASSIGN_OR_RETURN(int w, operand_tensor(u.inputs[1]));
  TESSERA_ASSIGN_OR_RETURN(w, to_plain(w));
  const Dims xd = dims(x), wd = dims(w);
  const size_t rank = xd.size();
  if (wd.size() != rank || rank < 3) return invalid_argument("X and W ranks differ");
  const int64_t group = node.attr_int("group", 1), ic = xd[1];
  if (wd[0] != ic || ic % group != 0) return invalid_argument("channels do not match group");
  const int64_t ocg = wd[1], icg = ic / group, oc = ocg * group;
  const Dims in(xd.begin() + 2, xd.end()), kernel(wd.begin() + 2, wd.end());
  TESSERA_ASSIGN_OR_RETURN(nn::WindowGeometry geo, nn::transposed_window(node, in, kernel));
  Dims pr(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const int64_t full = geo.strides[i] * (in[i] - 1) + (kernel[i] - 1) * geo.dilations[i] + 1;
    pr[i] = full - geo.out[i] - geo.pads_begin[i];
    if (pr[i] < 0 || geo.pads_begin[i] < 0)
      return unimplemented("output padding beyond the pads (oneDNN has none)");
  }
  Dims dst{xd[0], oc};
  dst.insert(dst.end(), geo.out.begin(), geo.out.end());
  // ONNX stores W as [C_in, C_out/group, k...]: per group (ic, oc, k). Describe those bytes with
  // oneDNN's (g, oc, ic, k) dims by strides.
  const int64_t ksize = product(kernel, 0, kernel.size());
  Dims kstrides(kernel.size());
  for (size_t i = kernel.size(); i-- > 0;) kstrides[i] = product(kernel, i + 1, kernel.size());
  Dims wdims, wstrides;
  if (group > 1) {
    wdims = {group, ocg, icg};
    wstrides = {icg * ocg * ksize, ksize, ocg * ksize};
  } else {
    wdims = {oc, ic};
    wstrides = {ksize, oc * ksize};
  }
  wdims.insert(wdims.end(), kernel.begin(), kernel.end());
  wstrides.insert(wstrides.end(), kstrides.begin(), kstrides.end());
  Dims dil = geo.dilations;
  for (int64_t& d : dil) d -= 1;
  int b = -1;
  if (u.inputs.size() > 2 && (u.inputs[2].value >= 0 || u.inputs[2].is_constant())) {
    TESSERA_ASSIGN_OR_RETURN(b, operand_tensor(u.inputs[2]));
  }
  // oneDNN 2.6 applies a deconvolution's post-ops in slow reference code (30x the deconvolution
  // itself): fold what is affine into the weights, run the rest as separate steps.
  std::vector<PostOp> post = u.post_ops;
  TESSERA_ASSIGN_OR_RETURN(size_t folded, fold_affine(post, dst, w, b, [=](int64_t i) {
                             const int64_t icw = i / ksize / ocg, o = i / ksize % ocg;
                             return icw / icg * ocg + o;
                           }));
  post.erase(post.begin(), post.begin() + static_cast<std::ptrdiff_t>(folded));
  const bool has_bias = b >= 0;
  const bool tiles = rank == 4 && group == 1 && kernel == geo.strides &&
                     geo.dilations == Dims{1, 1} && geo.out[0] == in[0] * kernel[0] &&
                     geo.out[1] == in[1] * kernel[1] && geo.pads_begin == Dims{0, 0} &&
                     is_constant(w) && (b < 0 || is_constant(b));
  if (tiles) return build_tiling_deconv(u, x, w, b, dst, post);
  const int wview = alias(w, wdims, strided_desc(wdims, wstrides));
  Anchor a;
  a.fuse_post_ops = false;
  a.label = u.label;
  a.dst_dims = dst;
  const memory::desc src_any = any_desc(xd), wei_any = any_desc(wdims), bias_any = any_desc({oc});
  const memory::dims strides = mdims(geo.strides), dilates = mdims(dil), pl = mdims(geo.pads_begin),
                     pad_r = mdims(pr);
  a.make_pd = [=](const memory::desc& dst_md,
                  const dnnl::primitive_attr& attr) -> dnnl::primitive_desc {
    auto d = has_bias ? dnnl::deconvolution_forward::desc(
                            prop_kind::forward_inference, algorithm::deconvolution_direct, src_any,
                            wei_any, bias_any, dst_md, strides, dilates, pl, pad_r)
                      : dnnl::deconvolution_forward::desc(
                            prop_kind::forward_inference, algorithm::deconvolution_direct, src_any,
                            wei_any, dst_md, strides, dilates, pl, pad_r);
    return dnnl::deconvolution_forward::primitive_desc(d, attr, cpu_engine());
  };
  if (oc < 8) {
    // A few channels in 8- or 16-channel blocks would multiply the data: prefer plain output.
    try {
      if (!is_reference_impl(a.make_pd(plain_desc(dst), dnnl::primitive_attr())))
        a.fixed_dst = plain_desc(dst);
    } catch (const dnnl::error&) {
    }
  }
  a.bind = [=, this](const dnnl::primitive_desc& pd) -> Result<Args> {
    TESSERA_ASSIGN_OR_RETURN(int src, to_layout(x, pd.src_desc()));
    TESSERA_ASSIGN_OR_RETURN(int wl, to_layout(wview, pd.weights_desc()));
    Args args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wl}};
    if (has_bias) {
      TESSERA_ASSIGN_OR_RETURN(int bl, to_layout(b, pd.query_md(dnnl::query::weights_md, 1)));
      args.emplace_back(DNNL_ARG_BIAS, bl);
    }
    return args;
  };
  return emit(a, post);
}

// A ConvTranspose whose kernel equals its stride (no padding or dilation) writes disjoint
// KH x KW tiles: y[n, oc, h*KH + kh, w*KW + kw] = sum_ic x[n, ic, h, w] * W[ic, oc, kh, kw].
// That is one batched matmul over channels-last data, [N*H, 1, W, IC] x [1, KH, IC, KW*OC],
// whose destination strides place every tile straight into y (channels-last); oneDNN's
// deconvolution is 10x slower on these shapes.
Result<int> PlanBuilder::build_tiling_deconv(const Unit& u, int x, int w, int b, const Dims& dst,
                                             const std::vector<PostOp>& post_ops) {
  const Dims xd = dims(x), wd = dims(w);
  const int64_t n = xd[0], ic = xd[1], h = xd[2], wi = xd[3], oc = wd[1], kh = wd[2], kw = wd[3];
  TESSERA_ASSIGN_OR_RETURN(int xl, to_layout(x, channels_last_desc(xd)));
  const Dims src_dims{n * h, 1, wi, ic};
  const int src = alias(xl, src_dims, strided_desc(src_dims, {wi * ic, wi * ic, ic, 1}));
  // W'[kh][ic][kw * OC + oc] = W[ic][oc][kh][kw]; the bias repeats per kw.
  const float* wsrc =
      static_cast<const float*>(tensors_[tensors_[w].root].constant.get_data_handle());
  Tensor wt(DType::kFloat32, {1, kh, ic, kw * oc});
  for (int64_t a = 0; a < kh; ++a)
    for (int64_t c = 0; c < ic; ++c)
      for (int64_t k = 0; k < kw; ++k)
        for (int64_t o = 0; o < oc; ++o)
          wt.data<float>()[((a * ic + c) * kw + k) * oc + o] =
              wsrc[((c * oc + o) * kh + a) * kw + k];
  const int wp = constant_tensor(wt);
  int bias = -1;
  if (b >= 0) {
    const float* bsrc =
        static_cast<const float*>(tensors_[tensors_[b].root].constant.get_data_handle());
    Tensor bt(DType::kFloat32, {1, 1, 1, kw * oc});
    for (int64_t i = 0; i < kw * oc; ++i) bt.data<float>()[i] = bsrc[i % oc];
    bias = constant_tensor(bt);
  }
  // Elementwise post-ops commute with the tile placement: they fuse; the rest run on y.
  size_t eltwise = 0;
  while (eltwise < post_ops.size() && post_ops[eltwise].kind == PostOp::Kind::kEltwise) ++eltwise;
  const std::vector<PostOp> fused(post_ops.begin(),
                                  post_ops.begin() + static_cast<std::ptrdiff_t>(eltwise));
  const Dims mm_dims{n * h, kh, wi, kw * oc};
  Anchor a;
  a.label = u.label;
  a.dst_dims = mm_dims;
  a.fixed_dst = strided_desc(mm_dims, {kh * wi * kw * oc, wi * kw * oc, kw * oc, 1});
  const memory::desc src_md = md(src), wei_any = any_desc(dims(wp));
  const std::optional<memory::desc> bias_md = bias >= 0 ? std::optional(md(bias)) : std::nullopt;
  a.make_pd = [=](const memory::desc& dst_md,
                  const dnnl::primitive_attr& attr) -> dnnl::primitive_desc {
    auto d = bias_md ? dnnl::matmul::desc(src_md, wei_any, *bias_md, dst_md)
                     : dnnl::matmul::desc(src_md, wei_any, dst_md);
    return dnnl::matmul::primitive_desc(d, attr, cpu_engine());
  };
  a.bind = [=, this](const dnnl::primitive_desc& pd) -> Result<Args> {
    TESSERA_ASSIGN_OR_RETURN(int wl, to_layout(wp, pd.weights_desc()));
    Args args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wl}};
    if (bias >= 0) args.emplace_back(DNNL_ARG_BIAS, bias);
    return args;
  };
  TESSERA_ASSIGN_OR_RETURN(int out, emit(a, fused));
  const int y = alias(out, dst, channels_last_desc(dst));
  return emit_rest(y, post_ops, eltwise, u.label);
}

}  // namespace tessera::onednn
