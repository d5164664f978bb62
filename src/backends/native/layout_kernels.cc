// Transpose and Slice: output = input read through per-dim offsets and strides, copied as runs.
#include "backends/native/layout_kernels.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "backends/kernel_io.h"
#include "backends/native/kernel_io.h"
#include "ops/op_registry.h"

namespace tessera::native {

namespace {

// A strided view of the input, in output order: out[i0, i1, ...] = in[base + sum i_d * stride_d]
// (element units). After simplify(), no dim has size 1, and neighbours that are contiguous in
// both tensors are merged.
struct StridedCopy {
  DType dtype = DType::kUndefined;
  size_t esize = 0;
  std::vector<int64_t> in_dims, out_dims;
  int64_t base = 0;
  std::vector<int64_t> size, stride;  // per (merged) output dim

  int64_t numel() const { return shape_numel(out_dims); }

  void simplify() {
    std::vector<int64_t> s, st;
    for (size_t d = 0; d < size.size(); ++d) {
      if (size[d] == 1) continue;
      // Merge into the previous dim when stepping it equals stepping this one size[d] times.
      if (!s.empty() && st.back() == stride[d] * size[d]) {
        s.back() *= size[d];
        st.back() = stride[d];
        continue;
      }
      s.push_back(size[d]);
      st.push_back(stride[d]);
    }
    size = std::move(s);
    stride = std::move(st);
  }
};

std::vector<int64_t> strides_of(const std::vector<int64_t>& dims) {
  std::vector<int64_t> st(dims.size(), 1);
  for (int d = static_cast<int>(dims.size()) - 2; d >= 0; --d) st[d] = st[d + 1] * dims[d + 1];
  return st;
}

// The checks both ops share (static shapes, one fixed-size dtype) and the copy's input side.
Result<StridedCopy> start_copy(const Graph& g, const Node& node) {
  if (node.inputs.empty() || node.inputs[0] == kNoValue || node.outputs.empty() || node.outputs[0] == kNoValue)
    return invalid_argument(node.describe() + ": missing input or output");
  const TensorType& x = g.value(node.inputs[0]).type;
  const TensorType& y = g.value(node.outputs[0]).type;
  if (!x.is_static() || !y.is_static()) return unimplemented("dynamic shape");
  if (x.dtype == DType::kString || dtype_size(x.dtype) == 0 || y.dtype != x.dtype)
    return unimplemented(std::string(node.op_type) + " of dtype " + dtype_name(x.dtype));
  StridedCopy c;
  c.dtype = x.dtype;
  c.esize = dtype_size(c.dtype);
  c.in_dims = x.static_dims();
  return c;
}

Result<StridedCopy> plan_transpose(const Graph& g, const Node& node) {
  TESSERA_ASSIGN_OR_RETURN(StridedCopy c, start_copy(g, node));
  const int rank = static_cast<int>(c.in_dims.size());
  std::vector<int64_t> perm = node.attr_ints("perm");
  if (perm.empty()) {
    perm.resize(rank);
    std::iota(perm.rbegin(), perm.rend(), 0);
  }
  if (static_cast<int>(perm.size()) != rank) return invalid_argument(node.describe() + ": perm length differs from the rank");
  std::vector<bool> seen(rank, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p]) return invalid_argument(node.describe() + ": perm is not a permutation");
    seen[p] = true;
  }
  const std::vector<int64_t> in_strides = strides_of(c.in_dims);
  for (int64_t p : perm) {
    c.out_dims.push_back(c.in_dims[p]);
    c.size.push_back(c.in_dims[p]);
    c.stride.push_back(in_strides[p]);
  }
  if (g.value(node.outputs[0]).type.static_dims() != c.out_dims)
    return invalid_argument(node.describe() + ": output type differs from the transposed input");
  return c;
}

Result<std::vector<int64_t>> constant_ints_of(const Graph& g, const Node& node, int i) {
  if (i >= static_cast<int>(node.inputs.size()) || node.inputs[i] == kNoValue) return std::vector<int64_t>();
  const Value& v = g.value(node.inputs[i]);
  if (!v.constant) return unimplemented("Slice with non-constant starts / ends / axes / steps");
  return v.constant->to_int64_vector();
}

Result<StridedCopy> plan_slice(const Graph& g, const Node& node) {
  TESSERA_ASSIGN_OR_RETURN(StridedCopy c, start_copy(g, node));
  const int rank = static_cast<int>(c.in_dims.size());
  std::vector<int64_t> starts, ends, axes, steps;
  if (node.opset < 10) {
    starts = node.attr_ints("starts");
    ends = node.attr_ints("ends");
    axes = node.attr_ints("axes");
  } else {
    TESSERA_ASSIGN_OR_RETURN(starts, constant_ints_of(g, node, 1));
    TESSERA_ASSIGN_OR_RETURN(ends, constant_ints_of(g, node, 2));
    TESSERA_ASSIGN_OR_RETURN(axes, constant_ints_of(g, node, 3));
    TESSERA_ASSIGN_OR_RETURN(steps, constant_ints_of(g, node, 4));
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (starts.size() != ends.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return invalid_argument(node.describe() + ": starts, ends, axes and steps differ in length");
  std::vector<int64_t> start(rank, 0), step(rank, 1);
  c.out_dims = c.in_dims;
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < starts.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(int axis, normalize_axis(axes[i], rank));
    if (seen[axis]) return invalid_argument(node.describe() + ": an axis repeats");
    seen[axis] = true;
    if (steps[i] == 0) return invalid_argument(node.describe() + ": step is zero");
    int64_t s = starts[i];
    c.out_dims[axis] = slice_range(c.in_dims[axis], s, ends[i], steps[i]);
    start[axis] = s;
    step[axis] = steps[i];
  }
  if (g.value(node.outputs[0]).type.static_dims() != c.out_dims)
    return invalid_argument(node.describe() + ": output type differs from the slice");
  const std::vector<int64_t> in_strides = strides_of(c.in_dims);
  for (int d = 0; d < rank; ++d) {
    if (c.out_dims[d] > 0) c.base += start[d] * in_strides[d];
    c.size.push_back(c.out_dims[d]);
    c.stride.push_back(step[d] * in_strides[d]);
  }
  return c;
}

// Copies output elements [begin, end) (row-major over c.size) from in to out.
template <typename T>
void copy_range(const StridedCopy& c, const T* in, T* out, int64_t begin, int64_t end) {
  const int k = static_cast<int>(c.size.size());
  if (k == 0) {  // a single element
    if (begin < end) out[0] = in[c.base];
    return;
  }
  const int64_t inner = c.size[k - 1], inner_stride = c.stride[k - 1];
  // Odometer over the outer dims, starting at the row of `begin`.
  std::vector<int64_t> idx(k, 0);
  int64_t rem = begin;
  for (int d = k - 1; d >= 0; --d) {
    idx[d] = rem % c.size[d];
    rem /= c.size[d];
  }
  int64_t offset = c.base;
  for (int d = 0; d < k; ++d) offset += idx[d] * c.stride[d];
  int64_t pos = begin;
  while (pos < end) {
    const int64_t run = std::min(inner - idx[k - 1], end - pos);
    const T* src = in + offset;
    T* dst = out + pos;
    if (inner_stride == 1) {
      // Short runs (a head's 15 floats): a loop the compiler vectorizes beats a memcpy call.
      if (run * static_cast<int64_t>(sizeof(T)) >= 256) {
        std::memcpy(dst, src, static_cast<size_t>(run) * sizeof(T));
      } else {
        for (int64_t j = 0; j < run; ++j) dst[j] = src[j];
      }
    } else {
      for (int64_t j = 0; j < run; ++j) dst[j] = src[j * inner_stride];
    }
    pos += run;
    offset += run * inner_stride;
    idx[k - 1] += run;
    // Carry into the outer dims.
    for (int d = k - 1; d > 0 && idx[d] == c.size[d]; --d) {
      offset -= c.size[d] * c.stride[d];
      idx[d] = 0;
      ++idx[d - 1];
      offset += c.stride[d - 1];
    }
  }
}

// A transpose whose innermost output dim is strided in the input while some other output dim q
// is the input's contiguous one: tiles of (dim q) x (innermost) are transposed through registers
// / L1, for each index of the remaining dims.
template <typename T>
void copy_tiled(const StridedCopy& c, int q, const T* in, T* out, int64_t outer_begin, int64_t outer_end) {
  const int k = static_cast<int>(c.size.size());
  const int64_t nq = c.size[q], nl = c.size[k - 1], sl = c.stride[k - 1];
  // Output strides (elements) of dim q and of the other dims.
  std::vector<int64_t> out_stride(k, 1);
  for (int d = k - 2; d >= 0; --d) out_stride[d] = out_stride[d + 1] * c.size[d + 1];
  std::vector<int> rest;  // the dims other than q and the last, outer to inner
  for (int d = 0; d < k - 1; ++d)
    if (d != q) rest.push_back(d);
  constexpr int64_t kTile = 16;
  for (int64_t o = outer_begin; o < outer_end; ++o) {
    int64_t in_off = c.base, out_off = 0, r = o;
    for (int i = static_cast<int>(rest.size()) - 1; i >= 0; --i) {
      const int d = rest[i];
      const int64_t id = r % c.size[d];
      r /= c.size[d];
      in_off += id * c.stride[d];
      out_off += id * out_stride[d];
    }
    const T* src = in + in_off;
    T* dst = out + out_off;
    const int64_t oq = out_stride[q];
    for (int64_t a0 = 0; a0 < nq; a0 += kTile) {
      const int64_t a1 = std::min(nq, a0 + kTile);
      for (int64_t b0 = 0; b0 < nl; b0 += kTile) {
        const int64_t b1 = std::min(nl, b0 + kTile);
        for (int64_t a = a0; a < a1; ++a)
          for (int64_t b = b0; b < b1; ++b) dst[a * oq + b] = src[a + b * sl];
      }
    }
  }
}

class StridedCopyKernel final : public Kernel {
 public:
  StridedCopyKernel(StridedCopy c, ValueSource x) : c_(std::move(c)), x_(std::move(x)) {
    c_.simplify();
    const int k = static_cast<int>(c_.size.size());
    if (k >= 2 && c_.stride[k - 1] != 1) {
      for (int d = 0; d < k - 1; ++d)
        if (c_.stride[d] == 1) tile_dim_ = d;
    }
  }

  Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs,
             KernelRunContext& ctx) override {
    TESSERA_ASSIGN_OR_RETURN(const Tensor* x, resolve_tensor(x_, c_.dtype, inputs));
    outputs.resize(1);
    outputs[0] = ctx.alloc.allocate_uninitialized(c_.dtype, c_.out_dims);  // every element written
    const int64_t n = c_.numel();
    if (n == 0) return Status();
    switch (c_.esize) {
      case 1: return copy<uint8_t>(*x, outputs[0], ctx);
      case 2: return copy<uint16_t>(*x, outputs[0], ctx);
      case 4: return copy<uint32_t>(*x, outputs[0], ctx);
      case 8: return copy<uint64_t>(*x, outputs[0], ctx);
      default: return unimplemented("element size " + std::to_string(c_.esize));
    }
  }

 private:
  template <typename T>
  Status copy(const Tensor& x, Tensor& y, KernelRunContext& ctx) {
    const T* in = static_cast<const T*>(x.raw_data());
    T* out = static_cast<T*>(y.raw_data());
    const int64_t n = c_.numel();
    // Below ~64 KiB the copy takes a few microseconds: waking a worker costs as much.
    constexpr int64_t kParallelBytes = 16 * 1024;
    const bool split = n * static_cast<int64_t>(sizeof(T)) >= kParallelBytes;
    if (tile_dim_ >= 0) {
      const int k = static_cast<int>(c_.size.size());
      const int64_t outer = n / (c_.size[tile_dim_] * c_.size[k - 1]);
      auto body = [&](int64_t b, int64_t e) { copy_tiled(c_, tile_dim_, in, out, b, e); };
      if (split && outer > 1) parallel(ctx.pool, outer, 1, body); else body(0, outer);
      return Status();
    }
    auto body = [&](int64_t b, int64_t e) { copy_range(c_, in, out, b, e); };
    constexpr int64_t kChunk = 2 * 1024;  // elements per task
    if (split) {
      parallel(ctx.pool, (n + kChunk - 1) / kChunk, 1,
               [&](int64_t c0, int64_t c1) { body(c0 * kChunk, std::min(n, c1 * kChunk)); });
    } else {
      body(0, n);
    }
    return Status();
  }

  StridedCopy c_;
  ValueSource x_;
  int tile_dim_ = -1;  // >= 0: copy_tiled over this dim and the innermost
};

Result<StridedCopy> plan_layout(const Graph& g, const Node& node) {
  if (node.op_type == "Transpose") return plan_transpose(g, node);
  if (node.op_type == "Slice") return plan_slice(g, node);
  return unimplemented(node.op_type + " is not a native layout op");
}

}  // namespace

bool is_layout_op(const std::string& op) { return op == "Transpose" || op == "Slice"; }

Status check_layout_node(const Graph& g, int n) { return plan_layout(g, g.node(n)).status(); }

Result<std::unique_ptr<Kernel>> compile_layout_kernel(const SubGraph& sg) {
  if (sg.size() != 1) return unimplemented("layout ops run alone on native");
  const Graph& g = sg.graph();
  const Node& node = g.node(sg.nodes().first());
  TESSERA_ASSIGN_OR_RETURN(StridedCopy c, plan_layout(g, node));
  TESSERA_ASSIGN_OR_RETURN(ValueSource x, source_of(sg, node.inputs[0]));
  return std::unique_ptr<Kernel>(new StridedCopyKernel(std::move(c), std::move(x)));
}

}  // namespace tessera::native
