// Reference kernels of the tensor family, part 2: ops that move elements to new positions
// (Transpose, Concat, Split, Slice, Expand, Tile, Pad, DepthToSpace, SpaceToDepth).
#include <algorithm>
#include <limits>
#include <optional>

#include "backends/ref/ref_util.h"
#include "ops/op_registry.h"
#include "backends/ref/tensor_kernels.h"

namespace tessera {
namespace {

using ref::ElementCopier;
using ref::normalize_axis;
using ref::read_index_tensor;
using ref::row_major_strides;

Status transpose_kernel(RefKernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  int rank = x.rank();
  std::vector<int64_t> perm = ctx.node().attr_ints("perm");
  if (perm.empty()) {
    for (int i = rank - 1; i >= 0; --i) perm.push_back(i);
  }
  if (static_cast<int>(perm.size()) != rank) {
    return ctx.error("perm has " + std::to_string(perm.size()) + " entries for " + x.describe());
  }
  std::vector<bool> seen(rank, false);
  for (int64_t& p : perm) {
    auto axis = normalize_axis(p, rank);
    if (!axis.ok() || seen[*axis]) return ctx.error("perm is not a permutation");
    p = *axis;
    seen[p] = true;
  }
  std::vector<int64_t> in_strides = row_major_strides(x.dims());
  std::vector<int64_t> out_dims(rank), strides(rank);
  for (int d = 0; d < rank; ++d) {
    out_dims[d] = x.dim(static_cast<int>(perm[d]));
    strides[d] = in_strides[perm[d]];
  }
  Tensor& y = ctx.output(0, x.dtype(), out_dims);
  ref::strided_copy(x, y, 0, strides);
  return Status();
}

Status concat_kernel(RefKernelContext& ctx) {
  if (ctx.num_inputs() < 1 || !ctx.has_input(0)) return ctx.error("needs at least one input");
  const Tensor& first = *ctx.input(0);
  int rank = first.rank();
  if (rank == 0) return ctx.error("cannot concatenate scalars");
  if (!ctx.node().has_attr("axis") && ctx.node().opset >= 4) return ctx.error("missing axis");
  TESSERA_ASSIGN_OR_RETURN(int axis, normalize_axis(ctx.node().attr_int("axis", 1), rank));
  std::vector<int64_t> out_dims = first.dims();
  out_dims[axis] = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return ctx.error("input " + std::to_string(i) + " is missing");
    const Tensor& t = *ctx.input(i);
    if (t.dtype() != first.dtype() || t.rank() != rank) {
      return ctx.error("input " + t.describe() + " does not match " + first.describe());
    }
    for (int d = 0; d < rank; ++d) {
      if (d != axis && t.dim(d) != first.dim(d)) {
        return ctx.error("input " + t.describe() + " does not match " + first.describe() +
                         " outside axis " + std::to_string(axis));
      }
    }
    out_dims[axis] += t.dim(axis);
  }
  Tensor& y = ctx.output(0, first.dtype(), out_dims);
  int64_t outer = ref::product_of_dims(out_dims, 0, axis);
  int64_t inner = ref::product_of_dims(out_dims, axis + 1, out_dims.size());
  int64_t out_chunk = out_dims[axis] * inner;
  int64_t offset = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = *ctx.input(i);
    int64_t chunk = t.dim(axis) * inner;
    ElementCopier copier(t, y);
    for (int64_t o = 0; o < outer; ++o) copier.copy_run(o * out_chunk + offset, o * chunk, chunk);
    offset += chunk;
  }
  return Status();
}

Status split_kernel(RefKernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  if (x.rank() == 0) return ctx.error("cannot split a scalar");
  TESSERA_ASSIGN_OR_RETURN(int axis, normalize_axis(ctx.node().attr_int("axis", 0), x.rank()));
  int64_t dim = x.dim(axis);
  int outputs = ctx.num_outputs();
  std::vector<int64_t> split;
  if (ctx.node().opset < 13 && ctx.node().has_attr("split")) {
    split = ctx.node().attr_ints("split");
  } else if (ctx.has_input(1)) {
    TESSERA_ASSIGN_OR_RETURN(split, read_index_tensor(ctx, *ctx.input(1), "split"));
  }
  if (split.empty()) {
    if (ctx.node().has_attr("num_outputs")) {
      // Opset 18: ceil-sized chunks, the last one smaller.
      int64_t n = ctx.node().attr_int("num_outputs", outputs);
      if (n != outputs || n <= 0) return ctx.error("num_outputs does not match the outputs");
      int64_t chunk = (dim + n - 1) / n;
      for (int64_t i = 0; i < n; ++i)
        split.push_back(std::clamp<int64_t>(dim - i * chunk, 0, chunk));
    } else {
      if (outputs <= 0 || dim % outputs != 0) {
        return ctx.error("dim " + std::to_string(dim) + " does not split into " +
                         std::to_string(outputs) + " equal parts");
      }
      split.assign(outputs, dim / outputs);
    }
  }
  if (static_cast<int>(split.size()) != outputs) {
    return ctx.error("split has " + std::to_string(split.size()) + " entries for " +
                     std::to_string(outputs) + " outputs");
  }
  int64_t total = 0;
  for (int64_t s : split) {
    if (s < 0) return ctx.error("negative split size");
    total += s;
  }
  if (total != dim) {
    return ctx.error("split sizes sum to " + std::to_string(total) + ", not " +
                     std::to_string(dim));
  }
  int64_t outer = ref::product_of_dims(x.dims(), 0, axis);
  int64_t inner = ref::product_of_dims(x.dims(), axis + 1, x.dims().size());
  int64_t in_chunk = dim * inner;
  int64_t offset = 0;
  for (int i = 0; i < outputs; ++i) {
    int64_t chunk = split[i] * inner;
    if (ctx.wants_output(i)) {
      std::vector<int64_t> dims = x.dims();
      dims[axis] = split[i];
      Tensor& y = ctx.output(i, x.dtype(), dims);
      ElementCopier copier(x, y);
      for (int64_t o = 0; o < outer; ++o) copier.copy_run(o * chunk, o * in_chunk + offset, chunk);
    }
    offset += chunk;
  }
  return Status();
}

Status slice_kernel(RefKernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  int rank = x.rank();
  std::vector<int64_t> starts, ends, axes, steps;
  if (ctx.node().opset < 10) {
    starts = ctx.node().attr_ints("starts");
    ends = ctx.node().attr_ints("ends");
    axes = ctx.node().attr_ints("axes");
  } else {
    if (!ctx.has_input(1) || !ctx.has_input(2)) return ctx.error("missing starts or ends");
    TESSERA_ASSIGN_OR_RETURN(starts, read_index_tensor(ctx, *ctx.input(1), "starts"));
    TESSERA_ASSIGN_OR_RETURN(ends, read_index_tensor(ctx, *ctx.input(2), "ends"));
    if (ctx.has_input(3)) {
      TESSERA_ASSIGN_OR_RETURN(axes, read_index_tensor(ctx, *ctx.input(3), "axes"));
    }
    if (ctx.has_input(4)) {
      TESSERA_ASSIGN_OR_RETURN(steps, read_index_tensor(ctx, *ctx.input(4), "steps"));
    }
  }
  if (starts.size() != ends.size()) return ctx.error("starts and ends differ in length");
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size()) {
    return ctx.error("starts, ends, axes and steps differ in length");
  }
  std::vector<int64_t> out_dims = x.dims();
  std::vector<int64_t> in_strides = row_major_strides(x.dims());
  std::vector<int64_t> strides = in_strides;
  std::vector<bool> seen(rank, false);
  int64_t base = 0;
  for (size_t i = 0; i < starts.size(); ++i) {
    auto axis_or = normalize_axis(axes[i], rank);
    if (!axis_or.ok() || rank == 0)
      return ctx.error("axis " + std::to_string(axes[i]) + " out of range");
    int axis = *axis_or;
    if (seen[axis]) return ctx.error("axis " + std::to_string(axes[i]) + " repeated");
    seen[axis] = true;
    int64_t dim = x.dim(axis), step = steps[i];
    if (step == 0) return ctx.error("step is zero");
    int64_t start = starts[i];
    int64_t count = slice_range(dim, start, ends[i], step);
    out_dims[axis] = count;
    if (count > 0) base += start * in_strides[axis];
    strides[axis] = in_strides[axis] * step;
  }
  Tensor& y = ctx.output(0, x.dtype(), out_dims);
  ref::strided_copy(x, y, base, strides);
  return Status();
}

Status expand_kernel(RefKernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  if (!ctx.has_input(1)) return ctx.error("missing shape input");
  TESSERA_ASSIGN_OR_RETURN(auto shape, read_index_tensor(ctx, *ctx.input(1), "shape"));
  auto out = ref::broadcast_shapes({x.dims(), shape});
  if (!out.ok()) return ctx.error(out.status().message());
  TESSERA_RETURN_IF_ERROR(ref::check_output_dims(ctx, *out));
  Tensor& y = ctx.output(0, x.dtype(), *out);
  ref::strided_copy(x, y, 0, ref::broadcast_strides(x.dims(), *out));
  return Status();
}

Status tile_kernel(RefKernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  if (!ctx.has_input(1)) return ctx.error("missing repeats input");
  TESSERA_ASSIGN_OR_RETURN(auto repeats, read_index_tensor(ctx, *ctx.input(1), "repeats"));
  if (static_cast<int>(repeats.size()) != x.rank()) {
    return ctx.error("repeats has " + std::to_string(repeats.size()) + " entries for " +
                     x.describe());
  }
  std::vector<int64_t> out_dims(x.rank());
  for (int d = 0; d < x.rank(); ++d) {
    if (repeats[d] < 0) return ctx.error("negative repeat");
    if (repeats[d] > 0 && x.dim(d) > ref::kMaxElements / repeats[d]) {
      return ctx.error("tiled shape is too large");
    }
    out_dims[d] = x.dim(d) * repeats[d];
  }
  TESSERA_RETURN_IF_ERROR(ref::check_output_dims(ctx, out_dims));
  Tensor& y = ctx.output(0, x.dtype(), out_dims);
  ElementCopier copier(x, y);
  std::vector<int64_t> in_strides = row_major_strides(x.dims());
  ref::for_each_index(out_dims, [&](int64_t i, const std::vector<int64_t>& index) {
    int64_t src = 0;
    for (int d = 0; d < x.rank(); ++d) src += (index[d] % x.dim(d)) * in_strides[d];
    copier.copy(i, src);
  });
  return Status();
}

enum class PadMode { kConstant, kReflect, kEdge, kWrap };

Status pad_kernel(RefKernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  int rank = x.rank();
  const Node& node = ctx.node();
  std::string mode_name = node.attr_string("mode", "constant");
  PadMode mode;
  if (mode_name == "constant") {
    mode = PadMode::kConstant;
  } else if (mode_name == "reflect") {
    mode = PadMode::kReflect;
  } else if (mode_name == "edge") {
    mode = PadMode::kEdge;
  } else if (mode_name == "wrap") {
    mode = PadMode::kWrap;
  } else {
    return ctx.unsupported("pad mode '" + mode_name + "'");
  }
  std::vector<int64_t> pads;
  Tensor value = ref::scalar_of_dtype(x.dtype(), 0.0);
  if (x.dtype() == DType::kString) value = Tensor(DType::kString, {});
  std::vector<int64_t> axes;
  if (node.opset < 11) {
    pads = node.opset < 2 ? node.attr_ints("paddings") : node.attr_ints("pads");
    value = ref::scalar_of_dtype(x.dtype(), node.attr_float("value", 0.0f));
  } else {
    if (!ctx.has_input(1)) return ctx.error("missing pads input");
    TESSERA_ASSIGN_OR_RETURN(pads, read_index_tensor(ctx, *ctx.input(1), "pads"));
    if (ctx.has_input(2)) {
      const Tensor& v = *ctx.input(2);
      if (v.dtype() != x.dtype() || v.numel() > 1) {
        return ctx.error("constant_value must be one element of the input dtype");
      }
      if (v.numel() == 1) value = v;
    }
    if (ctx.has_input(3)) {
      TESSERA_ASSIGN_OR_RETURN(axes, read_index_tensor(ctx, *ctx.input(3), "axes"));
    }
  }
  if (axes.empty()) {
    for (int d = 0; d < rank; ++d) axes.push_back(d);
  }
  if (pads.size() != 2 * axes.size()) {
    return ctx.error("pads has " + std::to_string(pads.size()) + " entries for " +
                     std::to_string(axes.size()) + " axes");
  }
  for (int64_t p : pads) {
    if (p > ref::kMaxElements || p < -ref::kMaxElements) return ctx.error("pad is too large");
  }
  std::vector<int64_t> begin(rank, 0), end(rank, 0);
  size_t n = axes.size();
  for (size_t i = 0; i < n; ++i) {
    auto axis = normalize_axis(axes[i], rank);
    if (!axis.ok() || rank == 0)
      return ctx.error("pad axis " + std::to_string(axes[i]) + " out of range");
    begin[*axis] = pads[i];
    end[*axis] = pads[i + n];
  }
  std::vector<int64_t> out_dims(rank);
  for (int d = 0; d < rank; ++d) {
    out_dims[d] = x.dim(d) + begin[d] + end[d];
    if (out_dims[d] < 0)
      return ctx.error("pads remove more than dim " + std::to_string(d) + " holds");
    bool pads_outside = begin[d] > 0 || end[d] > 0;
    if (mode != PadMode::kConstant && pads_outside && x.dim(d) == 0) {
      return ctx.error("cannot pad an empty dim in mode '" + mode_name + "'");
    }
  }
  TESSERA_RETURN_IF_ERROR(ref::check_output_dims(ctx, out_dims));
  Tensor& y = ctx.output(0, x.dtype(), out_dims);
  ElementCopier copier(x, y);
  ElementCopier value_copier(value, y);
  std::vector<int64_t> in_strides = row_major_strides(x.dims());
  ref::for_each_index(out_dims, [&](int64_t i, const std::vector<int64_t>& index) {
    int64_t src = 0;
    for (int d = 0; d < rank; ++d) {
      int64_t dim = x.dim(d);
      int64_t c = index[d] - begin[d];
      if (c < 0 || c >= dim) {
        switch (mode) {
          case PadMode::kConstant: value_copier.copy(i, 0); return;
          case PadMode::kEdge: c = std::clamp<int64_t>(c, 0, dim - 1); break;
          case PadMode::kWrap: c = ((c % dim) + dim) % dim; break;
          case PadMode::kReflect:
            if (dim == 1) {
              c = 0;
            } else {
              int64_t period = 2 * (dim - 1);
              c = ((c % period) + period) % period;
              if (c >= dim) c = period - c;
            }
            break;
        }
      }
      src += c * in_strides[d];
    }
    copier.copy(i, src);
  });
  return Status();
}

// Copies x viewed as `view_dims` and transposed by `perm` into a tensor of `out_dims`.
Status permuted_copy(RefKernelContext& ctx, const Tensor& x, const std::vector<int64_t>& view_dims,
                     const std::vector<int>& perm, std::vector<int64_t> out_dims) {
  std::vector<int64_t> view_strides = row_major_strides(view_dims);
  std::vector<int64_t> dims(perm.size()), strides(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) {
    dims[d] = view_dims[perm[d]];
    strides[d] = view_strides[perm[d]];
  }
  Tensor& y = ctx.output(0, x.dtype(), dims);
  ref::strided_copy(x, y, 0, strides);
  y = y.reshaped(std::move(out_dims));
  return Status();
}

Status depth_to_space_kernel(RefKernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  if (x.rank() != 4) return ctx.error("input must be 4-D, got " + x.describe());
  int64_t b = ctx.node().attr_int("blocksize", 0);
  if (b <= 0) return ctx.error("blocksize must be positive");
  int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  if (c % b != 0 || (c / b) % b != 0) return ctx.error("channels are not divisible by blocksize^2");
  if (b > ref::kMaxElements / std::max<int64_t>({h, w, 1}))
    return ctx.error("blocksize is too large");
  int64_t oc = c / b / b;
  std::string mode = ctx.node().attr_string("mode", "DCR");
  std::vector<int64_t> out = {n, oc, h * b, w * b};
  if (mode == "DCR") return permuted_copy(ctx, x, {n, b, b, oc, h, w}, {0, 3, 4, 1, 5, 2}, out);
  if (mode == "CRD") return permuted_copy(ctx, x, {n, oc, b, b, h, w}, {0, 1, 4, 2, 5, 3}, out);
  return ctx.error("unknown mode '" + mode + "'");
}

Status space_to_depth_kernel(RefKernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  if (x.rank() != 4) return ctx.error("input must be 4-D, got " + x.describe());
  int64_t b = ctx.node().attr_int("blocksize", 0);
  if (b <= 0) return ctx.error("blocksize must be positive");
  int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  if (h % b != 0 || w % b != 0) return ctx.error("height and width are not divisible by blocksize");
  if (b > ref::kMaxElements / b / std::max<int64_t>(c, 1))
    return ctx.error("blocksize is too large");
  return permuted_copy(ctx, x, {n, c, h / b, b, w / b, b}, {0, 3, 5, 1, 2, 4},
                       {n, c * b * b, h / b, w / b});
}

}  // namespace

namespace ref {

void register_tensor_layout_kernels(RefKernelTable& t) {
  t.add("Transpose", transpose_kernel);
  t.add("Concat", concat_kernel);
  t.add("Split", split_kernel);
  t.add("Slice", slice_kernel);
  t.add("Expand", expand_kernel);
  t.add("Tile", tile_kernel);
  t.add("Pad", pad_kernel);
  t.add("DepthToSpace", depth_to_space_kernel);
  t.add("SpaceToDepth", space_to_depth_kernel);
}

}  // namespace ref
}  // namespace tessera
