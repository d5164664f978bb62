// Schemas of the tensor family: shape manipulation, layout and indexing ops, with shape
// inference for the ones transformers and CNNs use (static where constant inputs allow it).
#include <algorithm>
#include <cmath>
#include <optional>

#include "ops/op_registry.h"

namespace tessera {
namespace {

using Dims = std::vector<Dim>;

// The value of constant input i as int64s (integer dtypes only), or nullopt.
std::optional<std::vector<int64_t>> constant_ints(const InferContext& ctx, int i) {
  if (i >= ctx.num_inputs() || !ctx.constants[i]) return std::nullopt;
  const Tensor& t = *ctx.constants[i];
  if (!dtype_is_integer(t.dtype())) return std::nullopt;
  return t.to_int64_vector();
}

// Product of dims[begin, end) when all are known, else an unknown dim.
Dim dims_product(const Dims& dims, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) {
    if (!dims[i].known()) return Dim();
    p *= dims[i].value;
  }
  return Dim(p);
}

void set_output(InferContext& ctx, int i, DType dtype, std::optional<Dims> shape) {
  if (i >= static_cast<int>(ctx.outputs.size())) return;
  ctx.outputs[i].dtype = dtype;
  ctx.outputs[i].shape = std::move(shape);
}

DType input_dtype(const InferContext& ctx, int i) {
  return i < ctx.num_inputs() ? ctx.inputs[i].dtype : DType::kUndefined;
}

Status infer_reshape(InferContext& ctx) {
  const TensorType& in = ctx.inputs[0];
  std::optional<std::vector<int64_t>> shape;
  if (ctx.node.opset < 5) {
    shape = ctx.node.attr_ints("shape");
  } else {
    shape = constant_ints(ctx, 1);
  }
  if (!shape) {
    std::optional<Dims> dims;
    if (ctx.has_input(1) && ctx.inputs[1].is_static() && ctx.inputs[1].rank() == 1) {
      dims = Dims(static_cast<size_t>(ctx.inputs[1].static_dims()[0]), Dim());
    }
    set_output(ctx, 0, in.dtype, dims);
    return Status();
  }
  bool allowzero = ctx.node.attr_int("allowzero", 0) != 0;
  Dims out;
  int infer_at = -1;
  for (size_t i = 0; i < shape->size(); ++i) {
    int64_t s = (*shape)[i];
    if (s == -1) {
      if (infer_at >= 0) return invalid_argument("shape has more than one -1");
      infer_at = static_cast<int>(i);
      out.push_back(Dim());
    } else if (s == 0 && !allowzero) {
      if (in.has_rank() && static_cast<int>(i) >= in.rank()) {
        return invalid_argument("shape copies a dim the input does not have");
      }
      out.push_back(in.has_rank() ? (*in.shape)[i] : Dim());
    } else if (s < 0) {
      return invalid_argument("invalid dim " + std::to_string(s) + " in shape");
    } else {
      out.push_back(Dim(s));
    }
  }
  if (infer_at >= 0 && in.is_static()) {
    int64_t known = 1;
    bool all_known = true;
    for (size_t i = 0; i < out.size(); ++i) {
      if (static_cast<int>(i) == infer_at) continue;
      if (!out[i].known())
        all_known = false;
      else
        known *= out[i].value;
    }
    int64_t numel = shape_numel(in.static_dims());
    if (all_known) {
      if (known == 0 || numel % known != 0) return invalid_argument("cannot infer the -1 dim");
      out[infer_at] = Dim(numel / known);
    }
  }
  set_output(ctx, 0, in.dtype, out);
  return Status();
}

Status infer_flatten(InferContext& ctx) {
  const TensorType& in = ctx.inputs[0];
  if (!in.has_rank()) {
    set_output(ctx, 0, in.dtype, Dims{Dim(), Dim()});
    return Status();
  }
  int rank = in.rank();
  int64_t axis = ctx.node.attr_int("axis", 1);
  if (axis < -rank || axis > rank) return invalid_argument("axis out of range");
  if (axis < 0) axis += rank;
  const Dims& d = *in.shape;
  set_output(ctx, 0, in.dtype, Dims{dims_product(d, 0, axis), dims_product(d, axis, d.size())});
  return Status();
}

// Axes from the attribute (before opset 13) or constant input 1; nullopt if unknown or absent.
std::optional<std::vector<int64_t>> infer_axes(const InferContext& ctx, bool* absent) {
  if (ctx.node.opset < 13) {
    *absent = !ctx.node.has_attr("axes");
    if (*absent) return std::nullopt;
    return ctx.node.attr_ints("axes");
  }
  *absent = !ctx.has_input(1);
  return constant_ints(ctx, 1);
}

Status infer_squeeze(InferContext& ctx) {
  const TensorType& in = ctx.inputs[0];
  bool absent = false;
  auto axes = infer_axes(ctx, &absent);
  if (!in.has_rank() || (!axes && !absent)) {
    set_output(ctx, 0, in.dtype, std::nullopt);
    return Status();
  }
  const Dims& d = *in.shape;
  std::vector<bool> drop(d.size(), false);
  if (absent) {
    for (size_t i = 0; i < d.size(); ++i) {
      if (!d[i].known()) {
        set_output(ctx, 0, in.dtype, std::nullopt);
        return Status();
      }
      drop[i] = d[i].value == 1;
    }
  } else {
    for (int64_t a : *axes) {
      TESSERA_ASSIGN_OR_RETURN(int axis, normalize_axis(a, in.rank()));
      if (d[axis].known() && d[axis].value != 1) {
        return invalid_argument("cannot squeeze dim " + std::to_string(axis) + " of size " +
                                std::to_string(d[axis].value));
      }
      drop[axis] = true;
    }
  }
  Dims out;
  for (size_t i = 0; i < d.size(); ++i) {
    if (!drop[i]) out.push_back(d[i]);
  }
  set_output(ctx, 0, in.dtype, out);
  return Status();
}

Status infer_unsqueeze(InferContext& ctx) {
  const TensorType& in = ctx.inputs[0];
  bool absent = false;
  auto axes = infer_axes(ctx, &absent);
  if (!in.has_rank() || !axes) {
    set_output(ctx, 0, in.dtype, std::nullopt);
    return Status();
  }
  int out_rank = in.rank() + static_cast<int>(axes->size());
  std::vector<bool> inserted(out_rank, false);
  for (int64_t a : *axes) {
    TESSERA_ASSIGN_OR_RETURN(int axis, normalize_axis(a, out_rank));
    if (inserted[axis]) return invalid_argument("axis repeated");
    inserted[axis] = true;
  }
  Dims out;
  size_t next = 0;
  for (int i = 0; i < out_rank; ++i) out.push_back(inserted[i] ? Dim(1) : (*in.shape)[next++]);
  set_output(ctx, 0, in.dtype, out);
  return Status();
}

Status infer_transpose(InferContext& ctx) {
  const TensorType& in = ctx.inputs[0];
  if (!in.has_rank()) {
    set_output(ctx, 0, in.dtype, std::nullopt);
    return Status();
  }
  int rank = in.rank();
  std::vector<int64_t> perm = ctx.node.attr_ints("perm");
  if (perm.empty()) {
    for (int i = rank - 1; i >= 0; --i) perm.push_back(i);
  }
  if (static_cast<int>(perm.size()) != rank) return invalid_argument("perm length != rank");
  Dims out;
  std::vector<bool> seen(rank, false);
  for (int64_t p : perm) {
    TESSERA_ASSIGN_OR_RETURN(int axis, normalize_axis(p, rank));
    if (seen[axis]) return invalid_argument("perm is not a permutation");
    seen[axis] = true;
    out.push_back((*in.shape)[axis]);
  }
  set_output(ctx, 0, in.dtype, out);
  return Status();
}

Status infer_concat(InferContext& ctx) {
  DType dtype = input_dtype(ctx, 0);
  int rank = -1;
  for (const auto& t : ctx.inputs) {
    if (t.has_rank()) rank = t.rank();
  }
  if (rank <= 0) {
    set_output(ctx, 0, dtype, std::nullopt);
    return Status();
  }
  TESSERA_ASSIGN_OR_RETURN(int axis, normalize_axis(ctx.node.attr_int("axis", 1), rank));
  Dims out(rank, Dim());
  int64_t axis_sum = 0;
  bool axis_known = true;
  for (const auto& t : ctx.inputs) {
    if (!t.has_rank()) {
      axis_known = false;
      continue;
    }
    if (t.rank() != rank) return invalid_argument("inputs differ in rank");
    for (int d = 0; d < rank; ++d) {
      const Dim& dim = (*t.shape)[d];
      if (d == axis) {
        if (dim.known())
          axis_sum += dim.value;
        else
          axis_known = false;
      } else if (dim.known()) {
        if (out[d].known() && out[d].value != dim.value) {
          return invalid_argument("inputs differ in dim " + std::to_string(d));
        }
        out[d] = dim;
      } else if (!out[d].known() && out[d].symbol.empty()) {
        out[d] = dim;
      }
    }
  }
  out[axis] = axis_known ? Dim(axis_sum) : Dim();
  set_output(ctx, 0, dtype, out);
  return Status();
}

Status infer_split(InferContext& ctx) {
  const TensorType& in = ctx.inputs[0];
  int outputs = static_cast<int>(ctx.outputs.size());
  if (!in.has_rank()) {
    for (int i = 0; i < outputs; ++i) set_output(ctx, i, in.dtype, std::nullopt);
    return Status();
  }
  TESSERA_ASSIGN_OR_RETURN(int axis, normalize_axis(ctx.node.attr_int("axis", 0), in.rank()));
  const Dim& dim = (*in.shape)[axis];
  std::optional<std::vector<int64_t>> split;
  if (ctx.node.opset < 13 && ctx.node.has_attr("split")) {
    split = ctx.node.attr_ints("split");
  } else if (ctx.has_input(1)) {
    split = constant_ints(ctx, 1);
  } else if (dim.known()) {
    int64_t n = ctx.node.attr_int("num_outputs", outputs);
    if (n == outputs && n > 0) {
      int64_t chunk = (dim.value + n - 1) / n;
      split = std::vector<int64_t>();
      for (int64_t i = 0; i < n; ++i) {
        split->push_back(std::clamp<int64_t>(dim.value - i * chunk, 0, chunk));
      }
    }
  }
  if (split && static_cast<int>(split->size()) != outputs) {
    return invalid_argument("split has " + std::to_string(split->size()) + " entries for " +
                            std::to_string(outputs) + " outputs");
  }
  for (int i = 0; i < outputs; ++i) {
    Dims out = *in.shape;
    out[axis] = split ? Dim((*split)[i]) : Dim();
    set_output(ctx, i, in.dtype, out);
  }
  return Status();
}

Status infer_slice(InferContext& ctx) {
  const TensorType& in = ctx.inputs[0];
  if (!in.has_rank()) {
    set_output(ctx, 0, in.dtype, std::nullopt);
    return Status();
  }
  int rank = in.rank();
  std::optional<std::vector<int64_t>> starts, ends, axes, steps;
  if (ctx.node.opset < 10) {
    starts = ctx.node.attr_ints("starts");
    ends = ctx.node.attr_ints("ends");
    axes = ctx.node.attr_ints("axes");
    steps = std::vector<int64_t>();
  } else {
    starts = constant_ints(ctx, 1);
    ends = constant_ints(ctx, 2);
    axes = ctx.has_input(3) ? constant_ints(ctx, 3) : std::vector<int64_t>();
    steps = ctx.has_input(4) ? constant_ints(ctx, 4) : std::vector<int64_t>();
  }
  if (!starts || !ends || !axes || !steps || starts->size() != ends->size()) {
    set_output(ctx, 0, in.dtype, Dims(rank, Dim()));
    return Status();
  }
  if (axes->empty()) {
    for (size_t i = 0; i < starts->size(); ++i) axes->push_back(static_cast<int64_t>(i));
  }
  if (steps->empty()) steps->assign(starts->size(), 1);
  if (axes->size() != starts->size() || steps->size() != starts->size()) {
    return invalid_argument("starts, ends, axes and steps differ in length");
  }
  Dims out = *in.shape;
  for (size_t i = 0; i < starts->size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(int axis, normalize_axis((*axes)[i], rank));
    int64_t step = (*steps)[i];
    if (step == 0) return invalid_argument("step is zero");
    if (!out[axis].known()) {
      out[axis] = Dim();
      continue;
    }
    int64_t start = (*starts)[i];
    out[axis] = Dim(slice_range(out[axis].value, start, (*ends)[i], step));
  }
  set_output(ctx, 0, in.dtype, out);
  return Status();
}

Status infer_gather(InferContext& ctx) {
  const TensorType& data = ctx.inputs[0];
  const TensorType& ind = ctx.inputs[1];
  if (!data.has_rank() || !ind.has_rank()) {
    set_output(ctx, 0, data.dtype, std::nullopt);
    return Status();
  }
  TESSERA_ASSIGN_OR_RETURN(int axis, normalize_axis(ctx.node.attr_int("axis", 0), data.rank()));
  const Dims& d = *data.shape;
  Dims out(d.begin(), d.begin() + axis);
  out.insert(out.end(), ind.shape->begin(), ind.shape->end());
  out.insert(out.end(), d.begin() + axis + 1, d.end());
  set_output(ctx, 0, data.dtype, out);
  return Status();
}

Status infer_gather_elements(InferContext& ctx) {
  set_output(ctx, 0, ctx.inputs[0].dtype, ctx.inputs[1].shape);
  return Status();
}

Status infer_gather_nd(InferContext& ctx) {
  const TensorType& data = ctx.inputs[0];
  const TensorType& ind = ctx.inputs[1];
  int64_t batch_dims = ctx.node.attr_int("batch_dims", 0);
  if (!data.has_rank() || !ind.has_rank() || ind.rank() < 1 || !ind.shape->back().known() ||
      batch_dims < 0 || batch_dims + ind.shape->back().value > data.rank()) {
    set_output(ctx, 0, data.dtype, std::nullopt);
    return Status();
  }
  Dims out(ind.shape->begin(), ind.shape->end() - 1);
  out.insert(out.end(), data.shape->begin() + batch_dims + ind.shape->back().value,
             data.shape->end());
  set_output(ctx, 0, data.dtype, out);
  return Status();
}

Status infer_expand(InferContext& ctx) {
  const TensorType& in = ctx.inputs[0];
  auto shape = constant_ints(ctx, 1);
  if (!shape || !in.has_rank()) {
    set_output(ctx, 0, in.dtype, std::nullopt);
    return Status();
  }
  size_t rank = std::max(shape->size(), static_cast<size_t>(in.rank()));
  Dims out(rank, Dim(1));
  for (size_t i = 0; i < rank; ++i) {
    Dim a = i + in.rank() >= rank ? (*in.shape)[i + in.rank() - rank] : Dim(1);
    int64_t s = i + shape->size() >= rank ? (*shape)[i + shape->size() - rank] : 1;
    if (s == 1) {
      out[i] = a;
    } else if (!a.known() || a.value == 1 || a.value == s) {
      out[i] = Dim(s);
    } else {
      return invalid_argument("cannot expand dim " + std::to_string(a.value) + " to " +
                              std::to_string(s));
    }
  }
  set_output(ctx, 0, in.dtype, out);
  return Status();
}

Status infer_tile(InferContext& ctx) {
  const TensorType& in = ctx.inputs[0];
  auto repeats = constant_ints(ctx, 1);
  if (!in.has_rank()) {
    set_output(ctx, 0, in.dtype, std::nullopt);
    return Status();
  }
  if (!repeats) {
    set_output(ctx, 0, in.dtype, Dims(in.rank(), Dim()));
    return Status();
  }
  if (static_cast<int>(repeats->size()) != in.rank())
    return invalid_argument("repeats length != rank");
  Dims out = *in.shape;
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t r = (*repeats)[i];
    if (r < 0) return invalid_argument("negative repeat");
    if (r == 1) continue;
    out[i] = out[i].known() ? Dim(out[i].value * r) : (r == 0 ? Dim(0) : Dim());
  }
  set_output(ctx, 0, in.dtype, out);
  return Status();
}

Status infer_shape(InferContext& ctx) {
  const TensorType& in = ctx.inputs[0];
  if (!in.has_rank()) {
    set_output(ctx, 0, DType::kInt64, Dims{Dim()});
    return Status();
  }
  int64_t rank = in.rank();
  int64_t start = ctx.node.attr_int("start", 0), end = ctx.node.attr_int("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  set_output(ctx, 0, DType::kInt64, Dims{Dim(std::max<int64_t>(end - start, 0))});
  return Status();
}

Status infer_size(InferContext& ctx) {
  set_output(ctx, 0, DType::kInt64, Dims{});
  return Status();
}

Status infer_constant_of_shape(InferContext& ctx) {
  DType dtype = DType::kFloat32;
  if (const Attribute* a = ctx.node.attr("value"); a && a->type == Attribute::Type::kTensor) {
    dtype = a->t.dtype();
  }
  auto shape = constant_ints(ctx, 0);
  if (shape) {
    Dims out;
    for (int64_t s : *shape) {
      if (s < 0) return invalid_argument("negative dim in shape");
      out.push_back(Dim(s));
    }
    set_output(ctx, 0, dtype, out);
  } else if (ctx.inputs[0].is_static() && ctx.inputs[0].rank() == 1) {
    set_output(ctx, 0, dtype, Dims(static_cast<size_t>(ctx.inputs[0].static_dims()[0]), Dim()));
  } else {
    set_output(ctx, 0, dtype, std::nullopt);
  }
  return Status();
}

Status infer_range(InferContext& ctx) {
  DType dtype = input_dtype(ctx, 0);
  Dim count;
  if (ctx.constants[0] && ctx.constants[1] && ctx.constants[2] && dtype != DType::kString &&
      dtype != DType::kBool && ctx.constants[0]->numel() == 1 && ctx.constants[1]->numel() == 1 &&
      ctx.constants[2]->numel() == 1 && ctx.constants[0]->dtype() == ctx.constants[1]->dtype() &&
      ctx.constants[0]->dtype() == ctx.constants[2]->dtype()) {
    double start = ctx.constants[0]->as_double(0), limit = ctx.constants[1]->as_double(0);
    double delta = ctx.constants[2]->as_double(0);
    if (delta == 0) return invalid_argument("delta is zero");
    double n = std::ceil((limit - start) / delta);
    if (n < 1e15) count = Dim(std::max<int64_t>(static_cast<int64_t>(n), 0));
  }
  set_output(ctx, 0, dtype, Dims{count});
  return Status();
}

Status infer_pad(InferContext& ctx) {
  const TensorType& in = ctx.inputs[0];
  if (!in.has_rank()) {
    set_output(ctx, 0, in.dtype, std::nullopt);
    return Status();
  }
  int rank = in.rank();
  std::optional<std::vector<int64_t>> pads;
  if (ctx.node.opset < 11) {
    pads = ctx.node.attr_ints(ctx.node.opset < 2 ? "paddings" : "pads");
  } else if (!ctx.has_input(3)) {
    pads = constant_ints(ctx, 1);
  }
  if (!pads || static_cast<int>(pads->size()) != 2 * rank) {
    set_output(ctx, 0, in.dtype, Dims(rank, Dim()));
    return Status();
  }
  Dims out = *in.shape;
  for (int d = 0; d < rank; ++d) {
    int64_t add = (*pads)[d] + (*pads)[d + rank];
    if (add == 0) continue;
    out[d] = out[d].known() ? Dim(out[d].value + add) : Dim();
  }
  set_output(ctx, 0, in.dtype, out);
  return Status();
}

// DepthToSpace (to_space) or SpaceToDepth on NCHW.
Status infer_depth_space(InferContext& ctx, bool to_space) {
  const TensorType& in = ctx.inputs[0];
  int64_t b = ctx.node.attr_int("blocksize", 0);
  if (!in.has_rank() || in.rank() != 4 || b <= 0) {
    set_output(ctx, 0, in.dtype, std::nullopt);
    return Status();
  }
  Dims out = *in.shape;
  auto scale = [](const Dim& d, int64_t mul, int64_t div) {
    return d.known() && (d.value * mul) % div == 0 ? Dim(d.value * mul / div) : Dim();
  };
  if (to_space) {
    out[1] = scale(out[1], 1, b * b);
    out[2] = scale(out[2], b, 1);
    out[3] = scale(out[3], b, 1);
  } else {
    out[1] = scale(out[1], b * b, 1);
    out[2] = scale(out[2], 1, b);
    out[3] = scale(out[3], 1, b);
  }
  set_output(ctx, 0, in.dtype, out);
  return Status();
}

Status infer_non_zero(InferContext& ctx) {
  const TensorType& in = ctx.inputs[0];
  Dim rank = in.has_rank() ? Dim(std::max(in.rank(), 1)) : Dim();
  set_output(ctx, 0, DType::kInt64, Dims{rank, Dim()});
  return Status();
}

Status infer_one_hot(InferContext& ctx) {
  const TensorType& ind = ctx.inputs[0];
  DType dtype = input_dtype(ctx, 2);
  if (!ind.has_rank()) {
    set_output(ctx, 0, dtype, std::nullopt);
    return Status();
  }
  TESSERA_ASSIGN_OR_RETURN(int axis, normalize_axis(ctx.node.attr_int("axis", -1), ind.rank() + 1));
  Dim depth;
  if (ctx.constants[1] && ctx.constants[1]->numel() == 1 &&
      ctx.constants[1]->dtype() != DType::kString) {
    double v = ctx.constants[1]->as_double(0);
    if (v >= 1 && v < 1e15) depth = Dim(static_cast<int64_t>(v));
  }
  Dims out = *ind.shape;
  out.insert(out.begin() + axis, depth);
  set_output(ctx, 0, dtype, out);
  return Status();
}

Status infer_compress(InferContext& ctx) {
  const TensorType& in = ctx.inputs[0];
  if (!ctx.node.has_attr("axis")) {
    set_output(ctx, 0, in.dtype, Dims{Dim()});
  } else if (in.has_rank() && in.rank() > 0) {
    TESSERA_ASSIGN_OR_RETURN(int axis, normalize_axis(ctx.node.attr_int("axis", 0), in.rank()));
    Dims out = *in.shape;
    out[axis] = Dim();
    set_output(ctx, 0, in.dtype, out);
  } else {
    set_output(ctx, 0, in.dtype, std::nullopt);
  }
  return Status();
}

Status infer_unique(InferContext& ctx) {
  const TensorType& in = ctx.inputs[0];
  if (ctx.node.has_attr("axis") && in.has_rank() && in.rank() > 0) {
    TESSERA_ASSIGN_OR_RETURN(int axis, normalize_axis(ctx.node.attr_int("axis", 0), in.rank()));
    Dims out = *in.shape;
    out[axis] = Dim();
    set_output(ctx, 0, in.dtype, out);
    set_output(ctx, 2, DType::kInt64, Dims{(*in.shape)[axis]});
  } else {
    set_output(ctx, 0, in.dtype,
               ctx.node.has_attr("axis") ? std::nullopt : std::optional(Dims{Dim()}));
    set_output(ctx, 2, DType::kInt64, Dims{Dim()});
  }
  set_output(ctx, 1, DType::kInt64, Dims{Dim()});
  set_output(ctx, 3, DType::kInt64, Dims{Dim()});
  return Status();
}

Status infer_eye_like(InferContext& ctx) {
  // With a dtype attribute the output dtype comes from the model.
  DType dtype = ctx.node.has_attr("dtype") ? DType::kUndefined : ctx.inputs[0].dtype;
  set_output(ctx, 0, dtype, ctx.inputs[0].shape);
  return Status();
}

}  // namespace

void register_tensor_ops(OpRegistry& r) {
  const OpKind inj = OpKind::kInjective, opq = OpKind::kOpaque;
  r.add("Reshape", inj).set_inputs(1, 2).set_infer(infer_reshape);
  r.add("Flatten", inj).set_inputs(1, 1).set_infer(infer_flatten);
  r.add("Squeeze", inj).set_inputs(1, 2).set_infer(infer_squeeze);
  r.add("Unsqueeze", inj).set_inputs(1, 2).set_infer(infer_unsqueeze);
  r.add("Transpose", inj).set_inputs(1, 1).set_infer(infer_transpose);
  r.add("Concat", inj).set_inputs(1, 1 << 20).set_infer(infer_concat);
  r.add("Split", inj).set_inputs(1, 2).set_outputs(1, 1 << 20).set_infer(infer_split);
  r.add("Slice", inj).set_inputs(1, 5).set_infer(infer_slice);
  r.add("Gather", inj).set_inputs(2, 2).set_infer(infer_gather);
  r.add("Expand", inj).set_inputs(2, 2).set_infer(infer_expand);
  r.add("Tile", inj).set_inputs(2, 2).set_infer(infer_tile);
  r.add("Pad", inj).set_inputs(1, 4).set_infer(infer_pad);
  r.add("DepthToSpace", inj).set_inputs(1, 1).set_infer([](InferContext& ctx) {
    return infer_depth_space(ctx, true);
  });
  r.add("SpaceToDepth", inj).set_inputs(1, 1).set_infer([](InferContext& ctx) {
    return infer_depth_space(ctx, false);
  });

  r.add("GatherElements", opq).set_inputs(2, 2).set_infer(infer_gather_elements);
  r.add("GatherND", opq).set_inputs(2, 2).set_infer(infer_gather_nd);
  r.add("Scatter", opq).set_inputs(3, 3).set_infer(infer_same_as_input0);
  r.add("ScatterElements", opq).set_inputs(3, 3).set_infer(infer_same_as_input0);
  r.add("ScatterND", opq).set_inputs(3, 3).set_infer(infer_same_as_input0);
  r.add("Shape", opq).set_inputs(1, 1).set_infer(infer_shape);
  r.add("Size", opq).set_inputs(1, 1).set_infer(infer_size);
  r.add("ConstantOfShape", opq).set_inputs(1, 1).set_infer(infer_constant_of_shape);
  r.add("Range", opq).set_inputs(3, 3).set_infer(infer_range);
  r.add("EyeLike", opq).set_inputs(1, 1).set_infer(infer_eye_like);
  r.add("Trilu", opq).set_inputs(1, 2).set_infer(infer_same_as_input0);
  r.add("OneHot", opq).set_inputs(3, 3).set_infer(infer_one_hot);
  r.add("Compress", opq).set_inputs(2, 2).set_infer(infer_compress);
  r.add("NonZero", opq).set_inputs(1, 1).set_infer(infer_non_zero);
  r.add("ReverseSequence", opq).set_inputs(2, 2).set_infer(infer_same_as_input0);
  r.add("Unique", opq).set_inputs(1, 1).set_outputs(1, 4).set_infer(infer_unique);
}

}  // namespace tessera
