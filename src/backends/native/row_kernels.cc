// Reductions, Softmax and LayerNormalization as (outer, len, inner) problems: contiguous rows
// when inner == 1, else columns of `inner` floats down len rows. Parallel over outer rows (and
// column blocks); a single long row is split into partial results.
#include "backends/native/row_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/native/kernel_io.h"

namespace tessera::native {
namespace {

constexpr int64_t kGrainElements = 16384;

struct Split3 {
  int64_t outer = 1, len = 1, inner = 1;
};

// Column blocks of an (outer, len, inner) problem: tasks = outer * blocks, each `width` wide.
struct ColumnBlocks {
  int64_t blocks, width;
};
ColumnBlocks column_blocks(const Split3& s, int threads) {
  int64_t width = s.inner;
  if (s.outer < threads)
    width = std::max<int64_t>(64, ((s.inner + threads - 1) / threads + 15) / 16 * 16);
  return {(s.inner + width - 1) / width, width};
}

// ---------------------------------------------------------------------------------------------
// ReduceSum / ReduceMean / ReduceMax

struct ReducePlan {
  ReduceKind kind = ReduceKind::kSum;
  bool mean = false;
  int64_t count = 1;           // input elements per output element
  std::vector<Split3> passes;  // one per group of adjacent reduced dims, innermost first
  std::vector<int64_t> out_dims;
};

Result<std::vector<int64_t>> reduce_axes(const Graph& g, const Node& node, bool& noop) {
  const bool from_input = node.opset >= 18 || (node.op_type == "ReduceSum" && node.opset >= 13);
  noop = false;
  std::vector<int64_t> axes;
  if (from_input) {
    if (node.inputs.size() > 1 && node.inputs[1] != kNoValue) {
      const Value& a = g.value(node.inputs[1]);
      if (!a.constant) return unimplemented("axes must be a constant");
      if (!dtype_is_integer(a.constant->dtype())) return invalid_argument("axes must be integers");
      axes = a.constant->to_int64_vector();
    }
    noop = axes.empty() && node.attr_int("noop_with_empty_axes", 0) != 0;
  } else {
    if (node.inputs.size() > 1 && node.inputs[1] != kNoValue)
      return invalid_argument("axes input before opset 18");
    axes = node.attr_ints("axes");
  }
  return axes;
}

Result<ReducePlan> plan_reduce(const Graph& g, const Node& node) {
  ReducePlan plan;
  plan.kind = node.op_type == "ReduceMax" ? ReduceKind::kMax : ReduceKind::kSum;
  plan.mean = node.op_type == "ReduceMean";
  const std::vector<int64_t> dims = g.value(node.inputs[0]).type.static_dims();
  const int rank = static_cast<int>(dims.size());
  bool noop = false;
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> axes, reduce_axes(g, node, noop));
  std::vector<bool> reduced(rank, !noop && axes.empty());
  for (int64_t a : axes) {
    const int64_t axis = a < 0 ? a + rank : a;
    if (axis < 0 || axis >= rank || reduced[axis])
      return invalid_argument(node.describe() + ": bad axes");
    reduced[axis] = true;
  }
  const bool keepdims = node.attr_int("keepdims", 1) != 0;
  // Groups of adjacent dims with the same role, dims of 1 dropped.
  std::vector<std::pair<int64_t, bool>> groups;
  for (int d = 0; d < rank; ++d) {
    if (reduced[d]) plan.count *= dims[d];
    if (!reduced[d] || keepdims) plan.out_dims.push_back(reduced[d] ? 1 : dims[d]);
    if (dims[d] == 1) continue;
    if (!groups.empty() && groups.back().second == reduced[d]) {
      groups.back().first *= dims[d];
    } else {
      groups.push_back({dims[d], reduced[d]});
    }
  }
  for (;;) {
    int last = -1;
    for (int i = 0; i < static_cast<int>(groups.size()); ++i)
      if (groups[i].second) last = i;
    if (last < 0) break;
    Split3 s;
    for (int i = 0; i < static_cast<int>(groups.size()); ++i)
      (i < last ? s.outer : i == last ? s.len : s.inner) *= groups[i].first;
    plan.passes.push_back(s);
    groups.erase(groups.begin() + last);
    if (last > 0 && last < static_cast<int>(groups.size()) &&
        groups[last - 1].second == groups[last].second) {
      groups[last - 1].first *= groups[last].first;
      groups.erase(groups.begin() + last);
    }
  }
  return plan;
}

float combine(ReduceKind kind, const float* v, int n) {
  float r = v[0];
  for (int i = 1; i < n; ++i) {
    if (kind == ReduceKind::kSum) {
      r += v[i];
    } else if (std::isnan(v[i]) || v[i] > r) {
      if (!std::isnan(r)) r = v[i];
    }
  }
  return r;
}

void reduce_pass(const IsaKernels& isa, ReduceKind kind, const Split3& s, const float* x, float* y,
                 ThreadPool* pool) {
  const int threads = pool_threads(pool);
  if (s.inner == 1) {
    if (s.outer >= threads || s.len < 4 * kGrainElements) {
      parallel(pool, s.outer, std::max<int64_t>(1, kGrainElements / s.len),
               [&](int64_t r0, int64_t r1) {
                 isa.reduce_rows(kind, x + r0 * s.len, r1 - r0, s.len, y + r0);
               });
      return;
    }
    // Few long rows: each thread reduces a part of every row, then the parts combine.
    std::vector<float> partial(s.outer * threads);
    const int64_t part = (s.len + threads - 1) / threads;
    parallel(pool, s.outer * threads, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t row = t / threads, begin = (t % threads) * part;
        const int64_t n = std::min(part, s.len - begin);
        if (n > 0) {
          isa.reduce_rows(kind, x + row * s.len + begin, 1, n, &partial[t]);
        } else {
          partial[t] = kind == ReduceKind::kSum ? 0.0f : -INFINITY;
        }
      }
    });
    for (int64_t r = 0; r < s.outer; ++r) y[r] = combine(kind, &partial[r * threads], threads);
    return;
  }
  const ColumnBlocks cb = column_blocks(s, threads);
  const int64_t grain = std::max<int64_t>(1, kGrainElements / (s.len * cb.width));
  parallel(pool, s.outer * cb.blocks, grain, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t o = t / cb.blocks, c0 = (t % cb.blocks) * cb.width;
      const int64_t w = std::min(cb.width, s.inner - c0);
      isa.reduce_columns(kind, x + o * s.len * s.inner + c0, s.len, s.inner, w,
                         y + o * s.inner + c0);
    }
  });
}

class ReduceKernel final : public Kernel {
 public:
  ReduceKernel(const IsaKernels& isa, ReducePlan plan, ValueSource x)
      : isa_(isa), plan_(std::move(plan)), x_(std::move(x)) {}

  Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs,
             KernelRunContext& ctx) override {
    TESSERA_ASSIGN_OR_RETURN(const float* x, resolve_float(x_, inputs));
    outputs.resize(1);
    outputs[0] = ctx.alloc.allocate(DType::kFloat32, plan_.out_dims);
    float* y = outputs[0].data<float>();
    if (plan_.passes.empty()) {
      std::memcpy(y, x, outputs[0].nbytes());
      return Status();
    }
    std::vector<float> temp[2];
    const float* src = x;
    for (size_t i = 0; i < plan_.passes.size(); ++i) {
      const Split3& s = plan_.passes[i];
      float* dst = y;
      if (i + 1 < plan_.passes.size()) {
        temp[i % 2].resize(s.outer * s.inner);
        dst = temp[i % 2].data();
      }
      reduce_pass(isa_, plan_.kind, s, src, dst, ctx.pool);
      src = dst;
    }
    if (plan_.mean) {
      const float count = static_cast<float>(plan_.count);
      for (int64_t i = 0, n = outputs[0].numel(); i < n; ++i) y[i] /= count;
    }
    return Status();
  }

 private:
  const IsaKernels& isa_;
  ReducePlan plan_;
  ValueSource x_;
};

// ---------------------------------------------------------------------------------------------
// Softmax

Result<Split3> plan_softmax(const Graph& g, const Node& node) {
  const std::vector<int64_t> dims = g.value(node.inputs[0]).type.static_dims();
  const int rank = static_cast<int>(dims.size());
  if (rank == 0) return invalid_argument("Softmax of a scalar");
  const int64_t attr = node.attr_int("axis", node.opset >= 13 ? -1 : 1);
  const int64_t axis = attr < 0 ? attr + rank : attr;
  Split3 s;
  if (node.opset >= 13) {
    if (axis < 0 || axis >= rank) return invalid_argument(node.describe() + ": axis out of range");
    for (int d = 0; d < rank; ++d) (d < axis ? s.outer : d == axis ? s.len : s.inner) *= dims[d];
  } else {
    // Before opset 13 the input is a 2-D [prod(dims[:axis]), prod(dims[axis:])] matrix.
    if (axis < 0 || axis > rank) return invalid_argument(node.describe() + ": axis out of range");
    for (int d = 0; d < rank; ++d) (d < axis ? s.outer : s.len) *= dims[d];
  }
  return s;
}

class SoftmaxKernel final : public Kernel {
 public:
  SoftmaxKernel(const IsaKernels& isa, Split3 s, ValueSource x, std::vector<int64_t> dims)
      : isa_(isa), s_(s), x_(std::move(x)), dims_(std::move(dims)) {}

  Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs,
             KernelRunContext& ctx) override {
    TESSERA_ASSIGN_OR_RETURN(const float* x, resolve_float(x_, inputs));
    outputs.resize(1);
    outputs[0] = ctx.alloc.allocate_uninitialized(DType::kFloat32, dims_);  // every row written
    float* y = outputs[0].data<float>();
    const Split3 s = s_;
    if (s.inner == 1) {
      parallel(ctx.pool, s.outer, std::max<int64_t>(1, kGrainElements / s.len),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r)
                   isa_.softmax_row(x + r * s.len, s.len, y + r * s.len);
               });
      return Status();
    }
    const ColumnBlocks cb = column_blocks(s, pool_threads(ctx.pool));
    const int64_t grain = std::max<int64_t>(1, kGrainElements / (s.len * cb.width));
    parallel(ctx.pool, s.outer * cb.blocks, grain, [&](int64_t t0, int64_t t1) {
      ScratchBuffer scratch(2 * cb.width);
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t o = t / cb.blocks, c0 = (t % cb.blocks) * cb.width;
        const int64_t off = o * s.len * s.inner + c0;
        isa_.softmax_columns(x + off, s.len, s.inner, std::min(cb.width, s.inner - c0), y + off,
                             scratch.data());
      }
    });
    return Status();
  }

 private:
  const IsaKernels& isa_;
  Split3 s_;
  ValueSource x_;
  std::vector<int64_t> dims_;
};

// ---------------------------------------------------------------------------------------------
// LayerNormalization

// Scale or B broadcast onto the normalized dims, as `inner` floats.
std::vector<float> expand_to(const float* src, std::vector<int64_t> src_dims,
                             const std::vector<int64_t>& norm_dims) {
  while (src_dims.size() > norm_dims.size() && src_dims.front() == 1) src_dims.erase(src_dims.begin());
  const int64_t inner = shape_numel(norm_dims);
  std::vector<float> out(inner);
  const int rank = static_cast<int>(norm_dims.size());
  const int offset = rank - static_cast<int>(src_dims.size());
  std::vector<int64_t> idx(rank, 0);
  for (int64_t i = 0; i < inner; ++i) {
    int64_t off = 0, stride = 1;
    for (int d = rank - 1; d >= offset; --d) {
      const int64_t sd = src_dims[d - offset];
      if (sd != 1) off += idx[d] * stride;
      stride *= sd;
    }
    out[i] = src[off];
    for (int d = rank - 1; d >= 0; --d) {
      if (++idx[d] < norm_dims[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

// Whether `in` broadcasts onto `out` (leading ones beyond out's rank allowed).
bool broadcasts_onto(std::vector<int64_t> in, const std::vector<int64_t>& out) {
  while (in.size() > out.size() && in.front() == 1) in.erase(in.begin());
  if (in.size() > out.size()) return false;
  for (size_t i = 0; i < in.size(); ++i) {
    const int64_t o = out[out.size() - in.size() + i];
    if (in[i] != 1 && in[i] != o) return false;
  }
  return true;
}

// Y = (X - mean) / sqrt(var + eps) * Scale + B over the dims from `axis` on; positions: which of
// (Y, Mean, InvStdDev) each kernel output is.
class LayerNormKernel final : public Kernel {
 public:
  LayerNormKernel(const IsaKernels& isa, std::vector<int64_t> dims, int axis, float eps,
                  std::vector<int> positions)
      : isa_(isa), positions_(std::move(positions)), dims_(std::move(dims)), eps_(eps) {
    norm_dims_.assign(dims_.begin() + axis, dims_.end());
    outer_ = shape_numel(std::vector<int64_t>(dims_.begin(), dims_.begin() + axis));
    inner_ = shape_numel(norm_dims_);
    stat_dims_.assign(dims_.begin(), dims_.begin() + axis);
    stat_dims_.resize(dims_.size(), 1);
  }
  // x, scale and bias are values of sg's graph; scale and bias may be kNoValue (1 and 0).
  Status init(const SubGraph& sg, int x, int scale, int bias) {
    TESSERA_ASSIGN_OR_RETURN(x_, source_of(sg, x));
    if (scale == kNoValue) {
      scale_full_.assign(inner_, 1.0f);
    } else {
      TESSERA_ASSIGN_OR_RETURN(scale_, source_of(sg, scale));
      if (scale_.constant)
        scale_full_ = expand_to(scale_.constant->data<float>(), scale_.dims, norm_dims_);
    }
    has_bias_ = bias != kNoValue;
    if (has_bias_) {
      TESSERA_ASSIGN_OR_RETURN(bias_, source_of(sg, bias));
      if (bias_.constant)
        bias_full_ = expand_to(bias_.constant->data<float>(), bias_.dims, norm_dims_);
    }
    return Status();
  }

  Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs,
             KernelRunContext& ctx) override {
    TESSERA_ASSIGN_OR_RETURN(const float* x, resolve_float(x_, inputs));
    std::vector<float> scale_run, bias_run;
    const float* scale = scale_full_.data();
    const float* bias = has_bias_ ? bias_full_.data() : nullptr;
    if (scale_.slot >= 0) {
      TESSERA_ASSIGN_OR_RETURN(const float* p, resolve_float(scale_, inputs));
      scale_run = expand_to(p, scale_.dims, norm_dims_);
      scale = scale_run.data();
    }
    if (has_bias_ && bias_.slot >= 0) {
      TESSERA_ASSIGN_OR_RETURN(const float* p, resolve_float(bias_, inputs));
      bias_run = expand_to(p, bias_.dims, norm_dims_);
      bias = bias_run.data();
    }
    outputs.resize(positions_.size());
    float* out[3] = {nullptr, nullptr, nullptr};
    for (size_t i = 0; i < positions_.size(); ++i) {
      const int p = positions_[i];
      // Every row and its statistics are written.
      outputs[i] = ctx.alloc.allocate_uninitialized(DType::kFloat32, p == 0 ? dims_ : stat_dims_);
      out[p] = outputs[i].data<float>();
    }
    std::vector<float> y_unused;
    if (!out[0]) {
      y_unused.resize(outer_ * inner_);
      out[0] = y_unused.data();
    }
    const int64_t inner = inner_;
    const float eps = eps_;
    parallel(ctx.pool, outer_, std::max<int64_t>(1, kGrainElements / inner),
             [&](int64_t r0, int64_t r1) {
               for (int64_t r = r0; r < r1; ++r) {
                 isa_.layer_norm_row(x + r * inner, inner, scale, bias, eps, out[0] + r * inner,
                                     out[1] ? out[1] + r : nullptr, out[2] ? out[2] + r : nullptr);
               }
             });
    return Status();
  }

 private:
  const IsaKernels& isa_;
  std::vector<int> positions_;
  std::vector<int64_t> dims_, norm_dims_, stat_dims_;
  int64_t outer_ = 1, inner_ = 1;
  float eps_ = 1e-5f;
  ValueSource x_, scale_, bias_;
  bool has_bias_ = false;
  std::vector<float> scale_full_, bias_full_;
};

Result<int> layer_norm_axis(const Graph& g, const Node& node) {
  const int rank = g.value(node.inputs[0]).type.rank();
  const int64_t a = node.attr_int("axis", -1);
  const int64_t axis = a < 0 ? a + rank : a;
  if (axis < 0 || axis >= rank) return invalid_argument(node.describe() + ": axis out of range");
  return static_cast<int>(axis);
}

}  // namespace

bool is_row_op(const std::string& op) {
  return op == "ReduceSum" || op == "ReduceMean" || op == "ReduceMax" || op == "Softmax" ||
         op == "LayerNormalization";
}

Status check_row_node(const Graph& g, int n) {
  const Node& node = g.node(n);
  if (!node.domain.empty() || !is_row_op(node.op_type))
    return unimplemented(node.op_type + " is not a row op");
  if (node.inputs.empty()) return invalid_argument(node.describe() + ": no input");
  TESSERA_RETURN_IF_ERROR(check_float_value(g, node.inputs[0]));
  for (int v : node.outputs)
    if (v != kNoValue) TESSERA_RETURN_IF_ERROR(check_float_value(g, v));
  if (node.op_type == "Softmax") return plan_softmax(g, node).status();
  if (node.op_type == "LayerNormalization") {
    if (node.inputs.size() < 2) return invalid_argument("LayerNormalization needs Scale");
    TESSERA_ASSIGN_OR_RETURN(int axis, layer_norm_axis(g, node));
    return check_layer_norm(g, node.inputs[0], axis, node.inputs[1],
                            node.inputs.size() > 2 ? node.inputs[2] : kNoValue);
  }
  return plan_reduce(g, node).status();
}

Result<int64_t> softmax_row_length(const Graph& g, int n) {
  const Node& node = g.node(n);
  if (node.op_type != "Softmax") return invalid_argument(node.describe() + " is not a Softmax");
  TESSERA_RETURN_IF_ERROR(check_row_node(g, n));
  TESSERA_ASSIGN_OR_RETURN(Split3 s, plan_softmax(g, node));
  if (s.inner != 1) return unimplemented("a Softmax over an axis with dims after it");
  return s.len;
}

Result<std::unique_ptr<Kernel>> compile_row_kernel(const SubGraph& sg, const IsaKernels& isa) {
  if (sg.size() != 1) return unimplemented("row kernels run single nodes");
  const Graph& g = sg.graph();
  const int n = sg.nodes().first();
  TESSERA_RETURN_IF_ERROR(check_row_node(g, n));
  const Node& node = g.node(n);
  TESSERA_ASSIGN_OR_RETURN(ValueSource x, source_of(sg, node.inputs[0]));
  if (node.op_type == "Softmax") {
    TESSERA_ASSIGN_OR_RETURN(Split3 s, plan_softmax(g, node));
    return std::unique_ptr<Kernel>(new SoftmaxKernel(isa, s, x, x.dims));
  }
  if (node.op_type == "LayerNormalization") {
    TESSERA_ASSIGN_OR_RETURN(int axis, layer_norm_axis(g, node));
    auto k = std::make_unique<LayerNormKernel>(isa, g.value(node.inputs[0]).type.static_dims(),
                                               axis, node.attr_float("epsilon", 1e-5f),
                                               output_positions(sg, node));
    const int bias = node.inputs.size() > 2 ? node.inputs[2] : kNoValue;
    TESSERA_RETURN_IF_ERROR(k->init(sg, node.inputs[0], node.inputs[1], bias));
    return std::unique_ptr<Kernel>(std::move(k));
  }
  TESSERA_ASSIGN_OR_RETURN(ReducePlan plan, plan_reduce(g, node));
  return std::unique_ptr<Kernel>(new ReduceKernel(isa, std::move(plan), x));
}

Status check_layer_norm(const Graph& g, int x, int axis, int scale, int bias) {
  TESSERA_RETURN_IF_ERROR(check_float_value(g, x));
  const std::vector<int64_t> dims = g.value(x).type.static_dims();
  if (axis < 0 || axis >= static_cast<int>(dims.size())) return invalid_argument("axis out of range");
  const std::vector<int64_t> norm(dims.begin() + axis, dims.end());
  for (int v : {scale, bias}) {
    if (v == kNoValue) continue;
    TESSERA_RETURN_IF_ERROR(check_float_value(g, v));
    if (!broadcasts_onto(g.value(v).type.static_dims(), norm))
      return invalid_argument("Scale / B do not broadcast to the normalized dims");
  }
  return Status();
}

Result<std::unique_ptr<Kernel>> compile_layer_norm(const SubGraph& sg, const IsaKernels& isa, int x,
                                                   int axis, float epsilon, int scale, int bias) {
  const Graph& g = sg.graph();
  TESSERA_RETURN_IF_ERROR(check_layer_norm(g, x, axis, scale, bias));
  auto k = std::make_unique<LayerNormKernel>(isa, g.value(x).type.static_dims(), axis, epsilon,
                                             std::vector<int>{0});
  TESSERA_RETURN_IF_ERROR(k->init(sg, x, scale, bias));
  return std::unique_ptr<Kernel>(std::move(k));
}

}  // namespace tessera::native
