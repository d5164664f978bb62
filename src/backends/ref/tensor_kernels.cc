// Reference kernels of the tensor family, part 1: shared helpers and the ops that only change a
// tensor's shape or make a tensor from a shape (Reshape, Flatten, Squeeze, Unsqueeze, Shape,
// Size, ConstantOfShape, Range, EyeLike, Trilu).
#include "backends/ref/tensor_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/ref/ref_util.h"

namespace tessera {
namespace ref {

Result<std::vector<int64_t>> read_index_tensor(const RefKernelContext& ctx, const Tensor& t,
                                               const std::string& what) {
  if (!dtype_is_integer(t.dtype())) {
    return ctx.error(what + " must be an integer tensor, got " + t.describe());
  }
  return t.to_int64_vector();
}

Result<int64_t> wrap_index(const RefKernelContext& ctx, int64_t index, int64_t dim) {
  if (index < -dim || index >= dim) {
    return ctx.error("index " + std::to_string(index) + " out of range for dimension of size " +
                     std::to_string(dim));
  }
  return index < 0 ? index + dim : index;
}

int64_t product_of_dims(const std::vector<int64_t>& dims, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end && i < dims.size(); ++i) p *= dims[i];
  return p;
}

Status check_output_dims(const RefKernelContext& ctx, const std::vector<int64_t>& dims) {
  int64_t total = 1;
  for (int64_t d : dims) {
    if (d < 0) return ctx.error("negative dimension in shape " + dims_to_string(dims));
    if (d != 0 && total > kMaxElements / d) {
      return ctx.error("shape " + dims_to_string(dims) + " is too large");
    }
    total *= d;
  }
  return Status();
}

void strided_copy(const Tensor& src, Tensor& dst, int64_t src_base,
                  const std::vector<int64_t>& src_strides) {
  ElementCopier copier(src, dst);
  for_each_broadcast(dst.dims(), {src_strides},
                     [&](int64_t i, const std::vector<int64_t>& offsets) {
                       copier.copy(i, src_base + offsets[0]);
                     });
}

Tensor scalar_of_dtype(DType dtype, double value) {
  Tensor t(dtype, {});
  visit_numeric_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      t.data<bool>()[0] = value != 0;
    } else {
      t.data<T>()[0] = static_cast<T>(value);
    }
  });
  return t;
}

}  // namespace ref

namespace {

using ref::ElementCopier;
using ref::normalize_axis;
using ref::read_index_tensor;

// The Reshape target: 0 copies the input dim (unless allowzero), -1 takes the remaining size.
Result<std::vector<int64_t>> reshape_target(const RefKernelContext& ctx,
                                            const std::vector<int64_t>& in,
                                            std::vector<int64_t> shape, bool allowzero) {
  int infer_at = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer_at >= 0) return ctx.error("shape has more than one -1");
      infer_at = static_cast<int>(i);
      continue;
    }
    if (shape[i] == 0 && !allowzero) {
      if (i >= in.size())
        return ctx.error("shape copies dim " + std::to_string(i) + " of a rank " +
                         std::to_string(in.size()) + " input");
      shape[i] = in[i];
    }
    if (shape[i] < 0) return ctx.error("invalid dim " + std::to_string(shape[i]) + " in shape");
    if (shape[i] > 0 && known > ref::kMaxElements / shape[i])
      return ctx.error("shape is too large");
    known *= shape[i];
  }
  int64_t numel = shape_numel(in);
  if (infer_at >= 0) {
    if (known == 0 || numel % known != 0) {
      return ctx.error("cannot reshape " + dims_to_string(in) + " to " + dims_to_string(shape));
    }
    shape[infer_at] = numel / known;
  } else if (known != numel) {
    return ctx.error("cannot reshape " + dims_to_string(in) + " to " + dims_to_string(shape));
  }
  return shape;
}

Status reshape_kernel(RefKernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  std::vector<int64_t> shape;
  if (ctx.node().opset < 5) {
    shape = ctx.node().attr_ints("shape");
  } else {
    if (!ctx.has_input(1)) return ctx.error("missing shape input");
    TESSERA_ASSIGN_OR_RETURN(shape, read_index_tensor(ctx, *ctx.input(1), "shape"));
  }
  bool allowzero = ctx.node().attr_int("allowzero", 0) != 0;
  TESSERA_ASSIGN_OR_RETURN(auto dims, reshape_target(ctx, x.dims(), std::move(shape), allowzero));
  ctx.set_output(0, x.reshaped(std::move(dims)));
  return Status();
}

Status flatten_kernel(RefKernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  int64_t axis = ctx.node().attr_int("axis", 1);
  if (axis < -x.rank() || axis > x.rank()) {
    return ctx.error("axis " + std::to_string(axis) + " out of range for rank " +
                     std::to_string(x.rank()));
  }
  if (axis < 0) axis += x.rank();
  int64_t outer = ref::product_of_dims(x.dims(), 0, static_cast<size_t>(axis));
  int64_t inner = ref::product_of_dims(x.dims(), static_cast<size_t>(axis), x.dims().size());
  ctx.set_output(0, x.reshaped({outer, inner}));
  return Status();
}

// Axes from the attribute (before opset 13) or from input 1 (opset 13 on); nullopt if absent.
Result<std::optional<std::vector<int64_t>>> axes_attr_or_input(const RefKernelContext& ctx) {
  if (ctx.node().opset < 13) {
    if (!ctx.node().has_attr("axes")) return std::optional<std::vector<int64_t>>();
    return std::optional<std::vector<int64_t>>(ctx.node().attr_ints("axes"));
  }
  if (!ctx.has_input(1)) return std::optional<std::vector<int64_t>>();
  TESSERA_ASSIGN_OR_RETURN(auto axes, read_index_tensor(ctx, *ctx.input(1), "axes"));
  return std::optional<std::vector<int64_t>>(std::move(axes));
}

Status squeeze_kernel(RefKernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  TESSERA_ASSIGN_OR_RETURN(auto axes, axes_attr_or_input(ctx));
  std::vector<bool> drop(x.dims().size(), false);
  if (!axes) {
    for (int i = 0; i < x.rank(); ++i) drop[i] = x.dim(i) == 1;
  } else {
    for (int64_t a : *axes) {
      auto axis = normalize_axis(a, x.rank());
      if (!axis.ok() || x.rank() == 0)
        return ctx.error("squeeze axis " + std::to_string(a) + " out of range for " + x.describe());
      if (x.dim(*axis) != 1) {
        return ctx.error("cannot squeeze dim " + std::to_string(*axis) + " of " + x.describe());
      }
      drop[*axis] = true;
    }
  }
  std::vector<int64_t> dims;
  for (int i = 0; i < x.rank(); ++i) {
    if (!drop[i]) dims.push_back(x.dim(i));
  }
  ctx.set_output(0, x.reshaped(std::move(dims)));
  return Status();
}

Status unsqueeze_kernel(RefKernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  TESSERA_ASSIGN_OR_RETURN(auto axes, axes_attr_or_input(ctx));
  if (!axes) return ctx.error("missing axes");
  int out_rank = x.rank() + static_cast<int>(axes->size());
  std::vector<bool> inserted(out_rank, false);
  for (int64_t a : *axes) {
    auto axis = normalize_axis(a, out_rank);
    if (!axis.ok()) return ctx.error(axis.status().message());
    if (inserted[*axis]) return ctx.error("axis " + std::to_string(a) + " repeated");
    inserted[*axis] = true;
  }
  std::vector<int64_t> dims;
  int next_in = 0;
  for (int i = 0; i < out_rank; ++i) dims.push_back(inserted[i] ? 1 : x.dim(next_in++));
  ctx.set_output(0, x.reshaped(std::move(dims)));
  return Status();
}

Status shape_kernel(RefKernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  int64_t rank = x.rank();
  int64_t start = ctx.node().attr_int("start", 0);
  int64_t end = ctx.node().attr_int("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  int64_t count = std::max<int64_t>(end - start, 0);
  Tensor& y = ctx.output(0, DType::kInt64, {count});
  for (int64_t i = 0; i < count; ++i) y.data<int64_t>()[i] = x.dims()[start + i];
  return Status();
}

Status size_kernel(RefKernelContext& ctx) {
  Tensor& y = ctx.output(0, DType::kInt64, {});
  y.data<int64_t>()[0] = ctx.input(0)->numel();
  return Status();
}

Status constant_of_shape_kernel(RefKernelContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(auto dims, read_index_tensor(ctx, *ctx.input(0), "shape"));
  TESSERA_RETURN_IF_ERROR(ref::check_output_dims(ctx, dims));
  Tensor value = Tensor::scalar<float>(0.0f);
  if (const Attribute* a = ctx.node().attr("value")) {
    if (a->type != Attribute::Type::kTensor || a->t.numel() != 1) {
      return ctx.error("value must be a one-element tensor");
    }
    value = a->t;
  }
  Tensor& y = ctx.output(0, value.dtype(), dims);
  ElementCopier copier(value, y);
  for (int64_t i = 0; i < y.numel(); ++i) copier.copy(i, 0);
  return Status();
}

Status range_kernel(RefKernelContext& ctx) {
  const Tensor& start = *ctx.input(0);
  const Tensor& limit = *ctx.input(1);
  const Tensor& delta = *ctx.input(2);
  if (start.numel() != 1 || limit.numel() != 1 || delta.numel() != 1) {
    return ctx.error("start, limit and delta must be scalars");
  }
  DType dt = start.dtype();
  if (limit.dtype() != dt || delta.dtype() != dt) {
    return ctx.error("start, limit and delta must have one dtype");
  }
  if (dt == DType::kString || dt == DType::kBool) {
    return ctx.error("unsupported dtype " + std::string(dtype_name(dt)));
  }
  Status status;
  visit_numeric_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    using C = ref::compute_t<T>;
    C s = static_cast<C>(start.data<T>()[0]);
    C l = static_cast<C>(limit.data<T>()[0]);
    C d = static_cast<C>(delta.data<T>()[0]);
    if (d == C(0)) {
      status = ctx.error("delta is zero");
      return;
    }
    double count_d =
        std::ceil((static_cast<double>(l) - static_cast<double>(s)) / static_cast<double>(d));
    if (!(count_d < static_cast<double>(ref::kMaxElements))) {
      status = ctx.error("range is too large");
      return;
    }
    int64_t count = std::max<int64_t>(static_cast<int64_t>(count_d), 0);
    Tensor& y = ctx.output(0, dt, {count});
    T* out = y.data<T>();
    // ONNX defines element i as start + i * delta (computed in T for integers).
    for (int64_t i = 0; i < count; ++i) out[i] = static_cast<T>(s + static_cast<C>(i) * d);
  });
  return status;
}

Result<DType> dtype_from_onnx_number(const RefKernelContext& ctx, int64_t number) {
  DType dt = dtype_from_onnx_code(number);
  if (dt == DType::kUndefined) return ctx.unsupported("dtype " + std::to_string(number));
  return dt;
}

Status eye_like_kernel(RefKernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  if (x.rank() != 2) return ctx.error("input must be 2-D, got " + x.describe());
  DType dt = x.dtype();
  if (ctx.node().has_attr("dtype")) {
    TESSERA_ASSIGN_OR_RETURN(dt, dtype_from_onnx_number(ctx, ctx.node().attr_int("dtype", 1)));
  }
  if (dt == DType::kString) return ctx.error("EyeLike cannot make a string tensor");
  int64_t k = ctx.node().attr_int("k", 0);
  Tensor& y = ctx.output(0, dt, x.dims());
  Tensor one = ref::scalar_of_dtype(dt, 1.0);
  ElementCopier copier(one, y);
  int64_t rows = x.dim(0), cols = x.dim(1);
  if (k >= cols || k <= -rows) return Status();  // the diagonal misses the matrix
  for (int64_t r = 0; r < rows; ++r) {
    int64_t c = r + k;
    if (c >= 0 && c < cols) copier.copy(r * cols + c, 0);
  }
  return Status();
}

Status trilu_kernel(RefKernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  if (x.rank() < 2) return ctx.error("input must have rank >= 2, got " + x.describe());
  int64_t k = 0;
  if (ctx.has_input(1)) {
    TESSERA_ASSIGN_OR_RETURN(auto kv, read_index_tensor(ctx, *ctx.input(1), "k"));
    if (kv.size() != 1) return ctx.error("k must be a scalar");
    k = kv[0];
  }
  bool upper = ctx.node().attr_int("upper", 1) != 0;
  Tensor& y = ctx.output(0, x.dtype(), x.dims());
  ElementCopier copier(x, y);
  int64_t rows = x.dim(-2), cols = x.dim(-1);
  int64_t matrices = ref::product_of_dims(x.dims(), 0, x.dims().size() - 2);
  for (int64_t m = 0; m < matrices; ++m) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        bool keep = upper ? (c - r >= k) : (c - r <= k);
        int64_t i = (m * rows + r) * cols + c;
        if (keep) copier.copy(i, i);
      }
    }
  }
  return Status();
}

}  // namespace

namespace ref {

void register_tensor_shape_kernels(RefKernelTable& t) {
  t.add("Reshape", reshape_kernel);
  t.add("Flatten", flatten_kernel);
  t.add("Squeeze", squeeze_kernel);
  t.add("Unsqueeze", unsqueeze_kernel);
  t.add("Shape", shape_kernel);
  t.add("Size", size_kernel);
  t.add("ConstantOfShape", constant_of_shape_kernel);
  t.add("Range", range_kernel);
  t.add("EyeLike", eye_like_kernel);
  t.add("Trilu", trilu_kernel);
}

}  // namespace ref

void register_tensor_kernels(RefKernelTable& t) {
  ref::register_tensor_shape_kernels(t);
  ref::register_tensor_layout_kernels(t);
  ref::register_tensor_index_kernels(t);
}

}  // namespace tessera
