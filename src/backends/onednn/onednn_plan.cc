#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backends/backend.h"
#include "backends/onednn/onednn_plan_builder.h"

namespace tessera::onednn {
namespace {

constexpr size_t kArenaAlignment = 64;

size_t align_up(size_t n) { return (n + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; }

// Numpy broadcasting of two dims lists, or nullopt.
std::optional<Dims> broadcast_dims(const Dims& a, const Dims& b) {
  const size_t r = std::max(a.size(), b.size());
  Dims out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t x = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t y = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (x != y && x != 1 && y != 1) return std::nullopt;
    out[i] = x == 1 ? y : x;
  }
  return out;
}

Dims left_pad(const Dims& d, size_t rank) {
  Dims out(rank - std::min(rank, d.size()), 1);
  out.insert(out.end(), d.begin(), d.end());
  return out;
}

bool commutative(algorithm alg) {
  return alg == algorithm::binary_add || alg == algorithm::binary_mul ||
         alg == algorithm::binary_max || alg == algorithm::binary_min;
}

bool verbose() {
  static const bool v = [] {
    const char* e = std::getenv("TESSERA_ONEDNN_VERBOSE");
    return e && *e && std::strcmp(e, "0") != 0;
  }();
  return v;
}

}  // namespace

PlanBuilder::PlanBuilder(const SubGraph& sg, int threads, bool channels_last)
    : sg_(sg), g_(sg.graph()), threads_(threads), channels_last_io_(channels_last), build_stream_(cpu_engine()) {}

memory::desc PlanBuilder::io_desc(const Dims& dims) const {
  return channels_last_io_ && dims.size() == 4 ? channels_last_desc(dims) : plain_desc(dims);
}

// ---- tensors ----

int PlanBuilder::add_tensor(Dims d, memory::desc m, Storage storage) {
  TensorInfo t;
  t.dims = std::move(d);
  t.md = std::move(m);
  t.storage = storage;
  t.root = static_cast<int>(tensors_.size());
  tensors_.push_back(std::move(t));
  return tensors_.back().root;
}

int PlanBuilder::alias(int t, Dims d, memory::desc m) {
  int id = add_tensor(std::move(d), std::move(m), tensors_[t].storage);
  tensors_[id].root = tensors_[t].root;
  return id;
}

int PlanBuilder::constant_tensor(const Tensor& data) {
  Dims d = data.dims();
  memory::desc m = plain_desc(d);
  int t = add_tensor(d, m, Storage::kConstant);
  tensors_[t].constant = dnnl::memory(m, cpu_engine());
  std::memcpy(tensors_[t].constant.get_data_handle(), data.raw_data(), data.nbytes());
  return t;
}

int PlanBuilder::zero_tensor(const Dims& d) {
  memory::desc m = plain_desc(d);
  int t = add_tensor(d, m, Storage::kConstant);
  tensors_[t].constant = dnnl::memory(m, cpu_engine());
  std::memset(tensors_[t].constant.get_data_handle(), 0, m.get_size());
  return t;
}

Result<int> PlanBuilder::operand_tensor(const Operand& o) {
  if (o.is_constant()) {
    if (o.constant.dtype() != DType::kFloat32)
      return unimplemented("constant of dtype " + std::string(dtype_name(o.constant.dtype())));
    if (o.value >= 0) {
      for (const auto& [v, t] : constant_of_value_)
        if (v == o.value) return t;
    }
    int t = constant_tensor(o.constant);
    if (o.value >= 0) constant_of_value_.emplace_back(o.value, t);
    return t;
  }
  if (o.value < 0 || value_tensor_[o.value] < 0)
    return internal_error("onednn plan: a value is read before it is produced");
  return value_tensor_[o.value];
}

Result<int> PlanBuilder::to_layout(int t, memory::desc want) {
  if (md(t) == want) return t;
  for (const auto& [from, to] : layout_cache_)
    if (from == t && md(to) == want) return to;
  dnnl::reorder::primitive_desc pd(cpu_engine(), md(t), cpu_engine(), want);
  dnnl::reorder reorder(pd);
  int out;
  if (is_constant(t)) {
    // Constants (weights) are reordered once, now.
    out = add_tensor(dims(t), want, Storage::kConstant);
    tensors_[out].constant = dnnl::memory(want, cpu_engine());
    dnnl::memory src(md(t), cpu_engine(), tensors_[tensors_[t].root].constant.get_data_handle());
    reorder.execute(build_stream_, src, tensors_[out].constant);
    build_stream_.wait();
  } else {
    out = add_tensor(dims(t), want, Storage::kArena);
    add_step(reorder, {{DNNL_ARG_FROM, t}, {DNNL_ARG_TO, out}}, "reorder", pd.impl_info_str());
  }
  layout_cache_.emplace_back(t, out);
  return out;
}

Result<int> PlanBuilder::reshape(int t, const Dims& new_dims) {
  if (dims(t) == new_dims) return t;
  TESSERA_ASSIGN_OR_RETURN(int p, to_plain(t));
  return alias(p, new_dims, plain_desc(new_dims));
}

void PlanBuilder::add_step(const dnnl::primitive& p, Args args, std::string label,
                           std::string impl) {
  steps_.push_back({p, std::move(args), std::move(label), std::move(impl), unit_threads_});
}

// A primitive splits its output among the threads; below a few thousand elements the split saves
// less than the fork and join of OpenMP's team cost. Measured on PP-OCR cls at 2 threads
// (`tessera run --plan`, 3000 runs, alternated): running the units with outputs under 2048
// elements on one thread (squeeze-excite pooling and FCs, the classifier) took the median from
// 0.424 to 0.393 ms; thresholds from 500 to 4000 gave the same, 6000 and above less. A unit
// that reads a large tensor (a global pooling) keeps every thread for the reading.
constexpr int64_t kSerialOutputElements = 2048;
constexpr int64_t kSerialInputElements = 65536;

int PlanBuilder::threads_for(const Unit& u) const {
  auto numel = [&](int v) {  // unknown dims count as large
    const TensorType& t = g_.value(v).type;
    return t.is_static() ? shape_numel(t.static_dims()) : kSerialInputElements;
  };
  if (threads_ <= 1 || numel(u.output) >= kSerialOutputElements) return threads_;
  for (const Operand& o : u.inputs)
    if (o.value >= 0 && numel(o.value) >= kSerialInputElements) return threads_;
  return 1;
}

// ---- anchors and post-ops ----

namespace {

PostOp scalar_binary(algorithm alg, float v) {
  return PostOp{PostOp::Kind::kBinary, {}, alg, Operand{-1, Tensor::from_vector<float>({1}, {v})}};
}

// oneDNN 2.6's JIT post-op injectors keep one table of constants per eltwise algorithm: a second
// eltwise of the same algorithm with other parameters computes with the first one's (seen with
// brgconv: Conv, linear, hardswish, linear gives wrong results). So adjacent linears merge, a
// repeated linear or clip becomes binary ops with scalars, and any other repeat ends the prefix
// that may be fused (*limit).
std::vector<PostOp> sanitize_post_ops(const std::vector<PostOp>& in,
                                      const std::optional<EltwiseOp>& anchor, size_t* limit) {
  std::vector<PostOp> out;
  for (const PostOp& p : in) {
    if (p.kind == PostOp::Kind::kEltwise && p.eltwise.alg == algorithm::eltwise_linear &&
        !out.empty() && out.back().kind == PostOp::Kind::kEltwise &&
        out.back().eltwise.alg == algorithm::eltwise_linear) {
      EltwiseOp& q = out.back().eltwise;  // a2 * (a1 * x + b1) + b2
      q.beta = p.eltwise.alpha * q.beta + p.eltwise.beta;
      q.alpha = p.eltwise.alpha * q.alpha;
      continue;
    }
    out.push_back(p);
  }
  std::vector<PostOp> result;
  std::vector<EltwiseOp> seen;
  if (anchor) seen.push_back(*anchor);
  *limit = SIZE_MAX;
  for (const PostOp& p : out) {
    if (p.kind == PostOp::Kind::kEltwise) {
      bool clash = false;
      for (const EltwiseOp& e : seen)
        clash = clash || (e.alg == p.eltwise.alg &&
                          (e.alpha != p.eltwise.alpha || e.beta != p.eltwise.beta));
      if (clash && p.eltwise.alg == algorithm::eltwise_linear) {
        if (p.eltwise.alpha != 1.0f)
          result.push_back(scalar_binary(algorithm::binary_mul, p.eltwise.alpha));
        if (p.eltwise.beta != 0.0f)
          result.push_back(scalar_binary(algorithm::binary_add, p.eltwise.beta));
        continue;
      }
      if (clash && p.eltwise.alg == algorithm::eltwise_clip) {
        result.push_back(scalar_binary(algorithm::binary_max, p.eltwise.alpha));
        result.push_back(scalar_binary(algorithm::binary_min, p.eltwise.beta));
        continue;
      }
      if (clash) *limit = std::min(*limit, result.size());
      seen.push_back(p.eltwise);
    }
    result.push_back(p);
  }
  return result;
}

}  // namespace

Result<int> PlanBuilder::emit(Anchor& a, const std::vector<PostOp>& raw_post_ops) {
  size_t limit = 0;
  const std::vector<PostOp> post_ops = sanitize_post_ops(raw_post_ops, a.anchor_eltwise, &limit);
  // The leading post-ops whose operands fit inside the destination (no broadcast of the dst).
  const size_t rank = a.dst_dims.size();
  std::vector<int> operands(post_ops.size(), -1);
  size_t k = 0;
  if (!a.fuse_post_ops) limit = 0;
  for (; k < post_ops.size() && k < limit; ++k) {
    if (post_ops[k].kind != PostOp::Kind::kBinary) continue;
    TESSERA_ASSIGN_OR_RETURN(operands[k], operand_tensor(post_ops[k].operand));
    const Dims& od = dims(operands[k]);
    if (od.size() > rank) break;
    Dims padded = left_pad(od, rank);
    bool fits = true;
    for (size_t i = 0; i < rank; ++i) fits = fits && (padded[i] == 1 || padded[i] == a.dst_dims[i]);
    if (!fits) break;
  }
  auto base_attr = [&] {
    dnnl::primitive_attr attr;
    // fp32 arithmetic even if ONEDNN_DEFAULT_FPMATH_MODE asks for bf16 shortcuts.
    attr.set_fpmath_mode(dnnl::fpmath_mode::strict);
    if (a.output_scale != 1.0f) attr.set_output_scales(0, {a.output_scale});
    return attr;
  };
  const memory::desc dst =
      a.fixed_dst
          ? *a.fixed_dst
          : a.make_pd(memory::desc(a.dst_dims, memory::data_type::f32, memory::format_tag::any),
                      base_attr())
                .dst_desc();
  // Binary operands as the primitive reads them: full tensors in the dst layout, broadcast ones
  // plain.
  std::vector<memory::desc> operand_md(k);
  size_t first_full = k;
  for (size_t i = 0; i < k; ++i) {
    if (post_ops[i].kind != PostOp::Kind::kBinary) continue;
    Dims padded = left_pad(dims(operands[i]), rank);
    operand_md[i] = padded == a.dst_dims ? dst : plain_desc(padded);
    if (padded == a.dst_dims && first_full == k) first_full = i;
  }
  // Creates the primitive with post-ops [0, n), the one at sum_at as a sum (dst holds the operand).
  auto attempt = [&](size_t n, size_t sum_at) -> std::optional<dnnl::primitive_desc> {
    dnnl::primitive_attr attr = base_attr();
    dnnl::post_ops ops;
    for (size_t i = 0; i < n; ++i) {
      const PostOp& p = post_ops[i];
      if (p.kind == PostOp::Kind::kEltwise)
        ops.append_eltwise(1.0f, p.eltwise.alg, p.eltwise.alpha, p.eltwise.beta);
      else if (i == sum_at)
        ops.append_sum(1.0f);
      else
        ops.append_binary(p.binary_alg, operand_md[i]);
    }
    attr.set_post_ops(ops);
    try {
      return a.make_pd(dst, attr);
    } catch (const dnnl::error&) {
      return std::nullopt;
    }
  };
  const dnnl::primitive_desc base = a.make_pd(dst, base_attr());
  const bool base_ref = is_reference_impl(base);
  // Fusing must not push the primitive onto oneDNN's slow reference code: oneDNN 2.6's JIT
  // convolutions take no full-tensor binary post-op, but do take a sum (residual add).
  dnnl::primitive_desc pd = base;
  size_t fused = 0, sum_at = SIZE_MAX;
  auto good = [&](const std::optional<dnnl::primitive_desc>& c) {
    return c && (base_ref || !is_reference_impl(*c));
  };
  if (k > 0) {
    if (auto c = attempt(k, SIZE_MAX); good(c)) {
      pd = *c;
      fused = k;
    } else if (first_full < k && post_ops[first_full].binary_alg == algorithm::binary_add &&
               a.in_place < 0) {
      size_t n = first_full + 1;
      while (n < k && !(post_ops[n].kind == PostOp::Kind::kBinary && operand_md[n] == dst)) ++n;
      if (auto c2 = attempt(n, first_full); good(c2)) {
        pd = *c2;
        fused = n;
        sum_at = first_full;
      }
    }
    if (fused == 0 && first_full > 0 && first_full < k) {
      if (auto c3 = attempt(first_full, SIZE_MAX); good(c3)) {
        pd = *c3;
        fused = first_full;
      }
    }
  }
  TESSERA_ASSIGN_OR_RETURN(Args args, a.bind(pd));
  int out = a.in_place;
  if (sum_at != SIZE_MAX) {
    TESSERA_ASSIGN_OR_RETURN(out, sum_destination(operands[sum_at], post_ops[sum_at].operand.value,
                                                  pd.dst_desc(), args));
  } else if (out < 0) {
    out = add_tensor(a.dst_dims, pd.dst_desc(), Storage::kArena);
  }
  args.emplace_back(DNNL_ARG_DST, out);
  for (size_t i = 0; i < fused; ++i) {
    if (post_ops[i].kind != PostOp::Kind::kBinary || i == sum_at) continue;
    int t = operands[i];
    if (dims(t).size() != rank) {
      TESSERA_ASSIGN_OR_RETURN(t, reshape(t, left_pad(dims(t), rank)));
    }
    TESSERA_ASSIGN_OR_RETURN(t, to_layout(t, operand_md[i]));
    args.emplace_back(DNNL_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(i)) | DNNL_ARG_SRC_1, t);
  }
  std::string label = a.label;
  if (fused > 0)
    label += " +" + std::to_string(fused) + " post-ops" + (sum_at != SIZE_MAX ? " (sum)" : "");
  add_step(dnnl::primitive(pd), std::move(args), label, pd.impl_info_str());
  return emit_rest(out, post_ops, fused, a.label);
}

Result<int> PlanBuilder::sum_destination(int operand, int value, const memory::desc& dst,
                                         const Args& args) {
  const size_t before = tensors_.size();
  TESSERA_ASSIGN_OR_RETURN(int t, to_layout(operand, dst));
  const bool fresh = tensors_.size() > before && !is_constant(t);
  bool reads_it = false;
  for (const auto& [arg, x] : args) reads_it = reads_it || tensors_[x].root == tensors_[t].root;
  const TensorInfo& root = tensors_[tensors_[t].root];
  const bool dead = value >= 0 && t == value_tensor_[value] &&
                    last_reader_unit_[value] == current_unit_ && !is_output_value_[value] &&
                    root.storage == Storage::kArena;
  if (!reads_it && (fresh || dead)) {
    // The primitive accumulates into the operand's own buffer.
    if (fresh) {
      std::erase_if(layout_cache_, [t](const std::pair<int, int>& e) { return e.second == t; });
    }
    return t;
  }
  const int out = add_tensor(dims(t), dst, Storage::kArena);
  dnnl::reorder::primitive_desc rpd(cpu_engine(), md(t), cpu_engine(), dst);
  add_step(dnnl::reorder(rpd), {{DNNL_ARG_FROM, t}, {DNNL_ARG_TO, out}}, "residual copy",
           rpd.impl_info_str());
  return out;
}

Result<int> PlanBuilder::emit_rest(int t, const std::vector<PostOp>& post_ops, size_t from,
                                   const std::string& label) {
  if (from >= post_ops.size()) return t;
  const PostOp& p = post_ops[from];
  std::vector<PostOp> rest(post_ops.begin() + static_cast<std::ptrdiff_t>(from) + 1,
                           post_ops.end());
  if (p.kind == PostOp::Kind::kEltwise)
    return emit_eltwise(t, p.eltwise, rest, true, label + " (split)");
  TESSERA_ASSIGN_OR_RETURN(int o, operand_tensor(p.operand));
  return emit_binary(t, o, p.binary_alg, std::move(rest), label + " (split)");
}

Result<int> PlanBuilder::emit_eltwise(int x, const EltwiseOp& op,
                                      const std::vector<PostOp>& post_ops, bool in_place,
                                      const std::string& label) {
  if (!is_plain(md(x))) {
    // Blocked layouts with few channels (a 1-channel map in 16-channel blocks) have no JIT
    // eltwise kernel in oneDNN 2.6: run those on channels-last data.
    dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, op.alg, md(x), op.alpha,
                                  op.beta);
    if (is_reference_impl(dnnl::eltwise_forward::primitive_desc(d, cpu_engine()))) {
      const size_t before = tensors_.size();
      TESSERA_ASSIGN_OR_RETURN(
          x, to_layout(x, dims(x).size() >= 3 ? channels_last_desc(dims(x)) : plain_desc(dims(x))));
      in_place = in_place || tensors_.size() > before;  // a private copy may be overwritten
      if (tensors_.size() > before) {
        std::erase_if(layout_cache_, [x](const std::pair<int, int>& e) { return e.second == x; });
      }
    }
  }
  Anchor a;
  a.label = label + " eltwise";
  a.dst_dims = dims(x);
  a.fixed_dst = md(x);
  a.in_place = in_place && !is_constant(x) ? x : -1;
  a.anchor_eltwise = op;
  memory::desc src = md(x);
  a.make_pd = [src, op](const memory::desc&,
                        const dnnl::primitive_attr& attr) -> dnnl::primitive_desc {
    dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, op.alg, src, op.alpha,
                                  op.beta);
    return dnnl::eltwise_forward::primitive_desc(d, attr, cpu_engine());
  };
  a.bind = [x](const dnnl::primitive_desc&) -> Result<Args> { return Args{{DNNL_ARG_SRC, x}}; };
  return emit(a, post_ops);
}

Result<int> PlanBuilder::emit_binary(int a, int b, algorithm alg, std::vector<PostOp> post_ops,
                                     const std::string& label) {
  auto out_dims = broadcast_dims(dims(a), dims(b));
  if (!out_dims) {
    return invalid_argument(label + ": shapes " + dims_to_string(dims(a)) + " and " +
                            dims_to_string(dims(b)) + " do not broadcast");
  }
  const size_t rank = out_dims->size();
  if (dims(a).size() != rank) {
    TESSERA_ASSIGN_OR_RETURN(a, reshape(a, left_pad(dims(a), rank)));
  }
  if (dims(b).size() != rank) {
    TESSERA_ASSIGN_OR_RETURN(b, reshape(b, left_pad(dims(b), rank)));
  }
  if (dims(a) != *out_dims) {
    if (dims(b) == *out_dims && commutative(alg)) {
      std::swap(a, b);
    } else if (dims(b) == *out_dims && alg == algorithm::binary_sub) {
      std::swap(a, b);  // a - b = -(b - a)
      post_ops.insert(
          post_ops.begin(),
          PostOp{PostOp::Kind::kEltwise, {algorithm::eltwise_linear, -1.0f, 0.0f}, {}, {}});
    } else {
      // oneDNN broadcasts only the second source: expand the first one as 0 + a.
      TESSERA_ASSIGN_OR_RETURN(
          a, emit_binary(zero_tensor(*out_dims), a, algorithm::binary_add, {}, label + " expand"));
    }
  }
  if (is_constant(a)) {
    TESSERA_ASSIGN_OR_RETURN(a, to_plain(a));
  }
  // oneDNN 2.6 has JIT binary kernels for plain and channels-last data, not for blocked
  // layouts with a broadcast operand (those run its reference code): move such data first.
  if (dims(b) != *out_dims && !is_plain(md(a))) {
    dnnl::binary::primitive_desc probe(dnnl::binary::desc(alg, md(a), plain_desc(dims(b)), md(a)),
                                       cpu_engine());
    if (is_reference_impl(probe)) {
      TESSERA_ASSIGN_OR_RETURN(
          a, to_layout(a, rank >= 3 ? channels_last_desc(dims(a)) : plain_desc(dims(a))));
    }
  }
  int src1 = b;
  if (dims(b) == *out_dims) {
    TESSERA_ASSIGN_OR_RETURN(src1, to_layout(b, md(a)));
  } else {
    TESSERA_ASSIGN_OR_RETURN(src1, to_plain(b));
  }
  Anchor an;
  an.label = label + " binary";
  an.dst_dims = *out_dims;
  // Constants never become the dst layout: a constant first source gets a plain dst.
  an.fixed_dst = is_constant(a) ? plain_desc(*out_dims) : md(a);
  memory::desc m0 = md(a), m1 = md(src1);
  an.make_pd = [alg, m0, m1](const memory::desc& dst,
                             const dnnl::primitive_attr& attr) -> dnnl::primitive_desc {
    dnnl::binary::desc d(alg, m0, m1, dst);
    return dnnl::binary::primitive_desc(d, attr, cpu_engine());
  };
  an.bind = [a, src1](const dnnl::primitive_desc&) -> Result<Args> {
    return Args{{DNNL_ARG_SRC_0, a}, {DNNL_ARG_SRC_1, src1}};
  };
  return emit(an, post_ops);
}

// ---- finishing ----

Status PlanBuilder::bind_outputs() {
  const auto& outs = sg_.outputs();
  for (size_t o = 0; o < outs.size(); ++o) {
    const int v = outs[o];
    if (value_tensor_[v] < 0)
      return internal_error("onednn plan: output '" + g_.value(v).name + "' is not produced");
    const int t = value_tensor_[v];
    TensorInfo& root = tensors_[tensors_[t].root];
    if (root.storage == Storage::kArena && md(t) == io_desc(dims(t)) &&
        root.md.get_size() == md(t).get_size() && root.md == io_desc(root.dims)) {
      // Written directly into the output buffer.
      root.storage = Storage::kOutput;
      root.slot = static_cast<int>(o);
      for (TensorInfo& x : tensors_)
        if (x.root == tensors_[t].root) {
          x.storage = Storage::kOutput;
          x.slot = static_cast<int>(o);
        }
      continue;
    }
    int out = add_tensor(dims(t), io_desc(dims(t)), Storage::kOutput);
    tensors_[out].slot = static_cast<int>(o);
    dnnl::reorder::primitive_desc pd(cpu_engine(), md(t), cpu_engine(), md(out));
    add_step(dnnl::reorder(pd), {{DNNL_ARG_FROM, t}, {DNNL_ARG_TO, out}}, "output reorder",
             pd.impl_info_str());
  }
  return Status();
}

Status PlanBuilder::plan_memory(Plan& plan) {
  for (size_t s = 0; s < steps_.size(); ++s) {
    for (const auto& [arg, t] : steps_[s].args) {
      (void)arg;
      TensorInfo& r = tensors_[tensors_[t].root];
      if (r.first < 0) r.first = static_cast<int>(s);
      r.last = static_cast<int>(s);
    }
  }
  // Greedy placement, largest first, at the lowest offset free during the tensor's lifetime.
  std::vector<int> roots;
  for (size_t t = 0; t < tensors_.size(); ++t) {
    const TensorInfo& x = tensors_[t];
    if (x.root == static_cast<int>(t) && x.storage == Storage::kArena && x.first >= 0)
      roots.push_back(static_cast<int>(t));
  }
  std::stable_sort(roots.begin(), roots.end(),
                   [&](int a, int b) { return md(a).get_size() > md(b).get_size(); });
  std::vector<int> placed;
  size_t total = 0;
  for (int t : roots) {
    TensorInfo& x = tensors_[t];
    const size_t size = align_up(x.md.get_size());
    std::vector<std::pair<size_t, size_t>> busy;
    for (int p : placed) {
      const TensorInfo& y = tensors_[p];
      if (y.first <= x.last && x.first <= y.last)
        busy.emplace_back(y.offset, y.offset + align_up(y.md.get_size()));
    }
    std::sort(busy.begin(), busy.end());
    size_t offset = 0;
    for (const auto& [lo, hi] : busy) {
      if (offset + size <= lo) break;
      offset = std::max(offset, hi);
    }
    x.offset = offset;
    total = std::max(total, offset + size);
    placed.push_back(t);
  }
  plan.arena_bytes_ = total;
  if (total > 0) {
    plan.arena_ = std::aligned_alloc(kArenaAlignment, align_up(total));
    if (!plan.arena_)
      return invalid_argument("onednn plan: cannot allocate " + std::to_string(total) + " bytes");
  }
  // One memory object per tensor, bound to its bytes (inputs and outputs at run time).
  std::vector<dnnl::memory> mems(tensors_.size());
  plan.input_memories_.assign(sg_.inputs().size(), {});
  plan.output_memories_.assign(sg_.outputs().size(), {});
  auto memory_of = [&](int t) -> dnnl::memory& {
    if (mems[t]) return mems[t];
    const TensorInfo& x = tensors_[t];
    const TensorInfo& r = tensors_[x.root];
    switch (r.storage) {
      case Storage::kArena:
        mems[t] = dnnl::memory(x.md, cpu_engine(), static_cast<char*>(plan.arena_) + r.offset);
        break;
      case Storage::kConstant:
        mems[t] = x.root == t ? r.constant
                              : dnnl::memory(x.md, cpu_engine(), r.constant.get_data_handle());
        plan.constants_.push_back(r.constant);
        break;
      case Storage::kInput:
      case Storage::kOutput:
        mems[t] = dnnl::memory(x.md, cpu_engine(), DNNL_MEMORY_NONE);
        (r.storage == Storage::kInput ? plan.input_memories_ : plan.output_memories_)[r.slot]
            .push_back(mems[t]);
        break;
    }
    return mems[t];
  };
  for (PendingStep& s : steps_) {
    Plan::Step step;
    step.primitive = s.primitive;
    step.label = s.label;
    step.impl = s.impl;
    step.threads = s.threads;
    for (const auto& [arg, t] : s.args) step.args.emplace(arg, memory_of(t));
    plan.steps_.push_back(std::move(step));
  }
  return Status();
}

Result<std::unique_ptr<Plan>> PlanBuilder::build(const Program& prog,
                                                 const std::vector<Dims>& input_dims, bool trial) {
  if (input_dims.size() != sg_.inputs().size())
    return internal_error("onednn plan: wrong number of input shapes");
  set_threads(threads_);
  value_tensor_.assign(g_.num_values(), -1);
  for (size_t i = 0; i < input_dims.size(); ++i) {
    int t = add_tensor(input_dims[i], io_desc(input_dims[i]), Storage::kInput);
    tensors_[t].slot = static_cast<int>(i);
    value_tensor_[sg_.inputs()[i]] = t;
  }
  last_reader_unit_.assign(g_.num_values(), -1);
  is_output_value_.assign(g_.num_values(), false);
  for (int v : sg_.outputs()) is_output_value_[v] = true;
  for (size_t i = 0; i < prog.units.size(); ++i) {
    for (const Operand& o : prog.units[i].inputs)
      if (o.value >= 0) last_reader_unit_[o.value] = static_cast<int>(i);
    for (const PostOp& p : prog.units[i].post_ops)
      if (p.operand.value >= 0) last_reader_unit_[p.operand.value] = static_cast<int>(i);
  }
  for (const Unit& u : prog.units) {
    ++current_unit_;
    unit_threads_ = threads_for(u);
    set_threads(unit_threads_);  // oneDNN sizes a primitive's work split when it creates it
    Status st = guarded(u.label, [&]() -> Status {
      TESSERA_ASSIGN_OR_RETURN(int t, build_unit(u));
      value_tensor_[u.output] = t;
      return Status();
    });
    if (!st.ok()) return Status(st.code(), g_.node(u.node).describe() + ": " + st.message());
  }
  unit_threads_ = threads_;  // the output reorders
  set_threads(threads_);
  std::unique_ptr<Plan> plan(new Plan());
  plan->threads_ = threads_;
  plan->stream_ = dnnl::stream(cpu_engine());
  TESSERA_RETURN_IF_ERROR(guarded("outputs", [&] { return bind_outputs(); }));
  if (trial) return plan;
  TESSERA_RETURN_IF_ERROR(guarded("memory", [&] { return plan_memory(*plan); }));
  for (int v : sg_.outputs()) {
    Dims d = dims(value_tensor_[v]);
    if (channels_last_io_ && d.size() == 4) d = channels_last_dims(d);  // the buffer's dims
    plan->output_dims_.push_back(d);
  }
  if (verbose())
    std::fprintf(stderr, "onednn plan %s\n%s", sg_.label().c_str(), plan->describe().c_str());
  return plan;
}

// ---- Plan ----

Result<std::unique_ptr<Plan>> Plan::build(const SubGraph& sg, const Program& prog,
                                          const std::vector<Dims>& input_dims, int threads,
                                          bool channels_last, bool trial) {
  return PlanBuilder(sg, threads, channels_last).build(prog, input_dims, trial);
}

Plan::~Plan() { std::free(arena_); }

Status Plan::run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs,
                 TensorAllocator& alloc) {
  return guarded("onednn run", [&]() -> Status {
    set_threads(threads_);
    for (size_t i = 0; i < inputs.size() && i < input_memories_.size(); ++i) {
      void* p = const_cast<void*>(inputs[i]->raw_data());
      for (dnnl::memory& m : input_memories_[i]) m.set_data_handle(p);
    }
    outputs.resize(output_dims_.size());
    for (size_t o = 0; o < output_dims_.size(); ++o) {
      // Written whole (by a primitive, the parts of a concatenation or the output reorder).
      outputs[o] = alloc.allocate_uninitialized(DType::kFloat32, output_dims_[o]);
      for (dnnl::memory& m : output_memories_[o]) m.set_data_handle(outputs[o].raw_data());
    }
    int threads = threads_;
    for (Step& s : steps_) {
      if (s.threads != threads) set_threads(threads = s.threads);
      s.primitive.execute(stream_, s.args);
    }
    if (threads != threads_) set_threads(threads_);
    stream_.wait();
    return Status();
  });
}

std::string Plan::describe() const {
  std::string s;
  for (const Step& st : steps_) {
    s += "  " + st.label + "  [" + st.impl + "]";
    if (st.threads != threads_) s += "  (" + std::to_string(st.threads) + " thread)";
    s += "\n";
  }
  s += "  arena " + std::to_string(arena_bytes_ / 1024) + " KiB\n";
  return s;
}

}  // namespace tessera::onednn
