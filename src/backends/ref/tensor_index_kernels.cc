// Reference kernels of the tensor family, part 3: ops driven by index or mask data (Gather,
// GatherElements, GatherND, Scatter, ScatterElements, ScatterND, OneHot, Compress, NonZero,
// ReverseSequence, Unique).
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <utility>

#include "backends/ref/ref_util.h"
#include "backends/ref/tensor_kernels.h"

namespace tessera {
namespace {

using ref::ElementCopier;
using ref::normalize_axis;
using ref::read_index_tensor;
using ref::row_major_strides;
using ref::wrap_index;

// Reads an index tensor and wraps every index into [0, dim).
Result<std::vector<int64_t>> read_wrapped_indices(const RefKernelContext& ctx, const Tensor& t,
                                                  int64_t dim) {
  TESSERA_ASSIGN_OR_RETURN(auto indices, read_index_tensor(ctx, t, "indices"));
  for (int64_t& i : indices) {
    TESSERA_ASSIGN_OR_RETURN(i, wrap_index(ctx, i, dim));
  }
  return indices;
}

Status gather_kernel(RefKernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  const Tensor& ind = *ctx.input(1);
  if (x.rank() == 0) return ctx.error("cannot gather from a scalar");
  TESSERA_ASSIGN_OR_RETURN(int axis, normalize_axis(ctx.node().attr_int("axis", 0), x.rank()));
  int64_t dim = x.dim(axis);
  TESSERA_ASSIGN_OR_RETURN(auto indices, read_wrapped_indices(ctx, ind, dim));
  std::vector<int64_t> out_dims(x.dims().begin(), x.dims().begin() + axis);
  out_dims.insert(out_dims.end(), ind.dims().begin(), ind.dims().end());
  out_dims.insert(out_dims.end(), x.dims().begin() + axis + 1, x.dims().end());
  Tensor& y = ctx.output(0, x.dtype(), out_dims);
  ElementCopier copier(x, y);
  int64_t outer = ref::product_of_dims(x.dims(), 0, axis);
  int64_t inner = ref::product_of_dims(x.dims(), axis + 1, x.dims().size());
  int64_t n = static_cast<int64_t>(indices.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < n; ++j) {
      copier.copy_run((o * n + j) * inner, (o * dim + indices[j]) * inner, inner);
    }
  }
  return Status();
}

// For GatherElements / ScatterElements: the flat offsets into `data` addressed by every element
// of `indices` along `axis` (indices must have data's rank and fit inside it off the axis).
Result<std::vector<int64_t>> element_offsets(const RefKernelContext& ctx, const Tensor& data,
                                             const Tensor& indices_tensor, int axis) {
  if (indices_tensor.rank() != data.rank()) {
    return ctx.error("indices " + indices_tensor.describe() + " and data " + data.describe() +
                     " differ in rank");
  }
  for (int d = 0; d < data.rank(); ++d) {
    if (d != axis && indices_tensor.dim(d) > data.dim(d)) {
      return ctx.error("indices " + indices_tensor.describe() + " do not fit data " +
                       data.describe());
    }
  }
  TESSERA_ASSIGN_OR_RETURN(auto indices, read_wrapped_indices(ctx, indices_tensor, data.dim(axis)));
  std::vector<int64_t> strides = row_major_strides(data.dims());
  std::vector<int64_t> offsets(indices.size());
  ref::for_each_index(indices_tensor.dims(), [&](int64_t i, const std::vector<int64_t>& index) {
    int64_t off = 0;
    for (int d = 0; d < data.rank(); ++d) off += (d == axis ? indices[i] : index[d]) * strides[d];
    offsets[i] = off;
  });
  return offsets;
}

Status gather_elements_kernel(RefKernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  const Tensor& ind = *ctx.input(1);
  if (x.rank() == 0) return ctx.error("cannot gather from a scalar");
  TESSERA_ASSIGN_OR_RETURN(int axis, normalize_axis(ctx.node().attr_int("axis", 0), x.rank()));
  TESSERA_ASSIGN_OR_RETURN(auto offsets, element_offsets(ctx, x, ind, axis));
  Tensor& y = ctx.output(0, x.dtype(), ind.dims());
  ElementCopier copier(x, y);
  for (size_t i = 0; i < offsets.size(); ++i) copier.copy(static_cast<int64_t>(i), offsets[i]);
  return Status();
}

// The index tuples of GatherND / ScatterND resolved to flat element offsets into `data`
// (one offset per tuple, each addressing a slice of slice_size elements).
struct NdTargets {
  std::vector<int64_t> offsets;
  int64_t slice_size = 1;
};

Result<NdTargets> nd_targets(const RefKernelContext& ctx, const Tensor& data, const Tensor& ind,
                             int64_t batch_dims) {
  int r = data.rank(), q = ind.rank();
  if (q < 1) return ctx.error("indices must have rank >= 1");
  if (batch_dims < 0 || batch_dims >= std::min(r, q)) return ctx.error("invalid batch_dims");
  int64_t k = ind.dim(-1);
  if (k < 0 || k > r - batch_dims) {
    return ctx.error("index tuples of length " + std::to_string(k) + " for data " +
                     data.describe());
  }
  for (int64_t b = 0; b < batch_dims; ++b) {
    if (ind.dim(static_cast<int>(b)) != data.dim(static_cast<int>(b))) {
      return ctx.error("batch dims of indices and data differ");
    }
  }
  TESSERA_ASSIGN_OR_RETURN(auto indices, read_index_tensor(ctx, ind, "indices"));
  std::vector<int64_t> strides = row_major_strides(data.dims());
  NdTargets t;
  t.slice_size = ref::product_of_dims(data.dims(), static_cast<size_t>(batch_dims + k), r);
  int64_t batches = ref::product_of_dims(data.dims(), 0, static_cast<size_t>(batch_dims));
  int64_t batch_stride = batch_dims > 0 ? strides[batch_dims - 1] : 0;
  int64_t tuples = ref::product_of_dims(ind.dims(), 0, static_cast<size_t>(q - 1));
  int64_t per_batch = batches == 0 ? 0 : tuples / batches;
  t.offsets.resize(static_cast<size_t>(tuples));
  for (int64_t j = 0; j < tuples; ++j) {
    int64_t off = (per_batch == 0 ? 0 : j / per_batch) * batch_stride;
    for (int64_t e = 0; e < k; ++e) {
      int axis = static_cast<int>(batch_dims + e);
      TESSERA_ASSIGN_OR_RETURN(int64_t i, wrap_index(ctx, indices[j * k + e], data.dim(axis)));
      off += i * strides[axis];
    }
    t.offsets[j] = off;
  }
  return t;
}

Status gather_nd_kernel(RefKernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  const Tensor& ind = *ctx.input(1);
  int64_t batch_dims = ctx.node().attr_int("batch_dims", 0);
  TESSERA_ASSIGN_OR_RETURN(auto targets, nd_targets(ctx, x, ind, batch_dims));
  std::vector<int64_t> out_dims(ind.dims().begin(), ind.dims().end() - 1);
  out_dims.insert(out_dims.end(), x.dims().begin() + batch_dims + ind.dim(-1), x.dims().end());
  Tensor& y = ctx.output(0, x.dtype(), out_dims);
  ElementCopier copier(x, y);
  for (size_t j = 0; j < targets.offsets.size(); ++j) {
    copier.copy_run(static_cast<int64_t>(j) * targets.slice_size, targets.offsets[j],
                    targets.slice_size);
  }
  return Status();
}

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

Result<Reduction> parse_reduction(const RefKernelContext& ctx) {
  std::string name = ctx.node().attr_string("reduction", "none");
  if (name == "none") return Reduction::kNone;
  if (name == "add") return Reduction::kAdd;
  if (name == "mul") return Reduction::kMul;
  if (name == "max") return Reduction::kMax;
  if (name == "min") return Reduction::kMin;
  return ctx.error("unknown reduction '" + name + "'");
}

// y[dst] = reduce(y[dst], updates[src]) for every (dst, src) pair, in order.
Status scatter_apply(const RefKernelContext& ctx, Tensor& y, const Tensor& updates,
                     const std::vector<std::pair<int64_t, int64_t>>& pairs, Reduction reduction) {
  if (updates.dtype() != y.dtype()) return ctx.error("updates dtype differs from data dtype");
  if (reduction == Reduction::kNone) {
    ElementCopier copier(updates, y);
    for (const auto& [dst, src] : pairs) copier.copy(dst, src);
    return Status();
  }
  bool ok = visit_numeric_dtype(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = ref::compute_t<T>;
    T* out = y.data<T>();
    const T* in = updates.data<T>();
    for (const auto& [dst, src] : pairs) {
      C a = static_cast<C>(out[dst]), b = static_cast<C>(in[src]);
      C r = a;
      switch (reduction) {
        case Reduction::kAdd: r = static_cast<C>(a + b); break;
        case Reduction::kMul: r = static_cast<C>(a * b); break;
        case Reduction::kMax: r = std::max(a, b); break;
        case Reduction::kMin: r = std::min(a, b); break;
        case Reduction::kNone: break;
      }
      out[dst] = static_cast<T>(r);
    }
  });
  if (!ok) return ctx.error("reduction on " + y.describe() + " is not supported");
  return Status();
}

Status scatter_elements_kernel(RefKernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  const Tensor& ind = *ctx.input(1);
  const Tensor& updates = *ctx.input(2);
  if (x.rank() == 0) return ctx.error("cannot scatter into a scalar");
  if (updates.dims() != ind.dims()) return ctx.error("updates and indices differ in shape");
  TESSERA_ASSIGN_OR_RETURN(int axis, normalize_axis(ctx.node().attr_int("axis", 0), x.rank()));
  TESSERA_ASSIGN_OR_RETURN(Reduction reduction, parse_reduction(ctx));
  TESSERA_ASSIGN_OR_RETURN(auto offsets, element_offsets(ctx, x, ind, axis));
  std::vector<std::pair<int64_t, int64_t>> pairs(offsets.size());
  for (size_t i = 0; i < offsets.size(); ++i) pairs[i] = {offsets[i], static_cast<int64_t>(i)};
  Tensor& y = ctx.output(0, x.dtype(), x.dims());
  ElementCopier(x, y).copy_run(0, 0, x.numel());
  return scatter_apply(ctx, y, updates, pairs, reduction);
}

Status scatter_nd_kernel(RefKernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  const Tensor& ind = *ctx.input(1);
  const Tensor& updates = *ctx.input(2);
  if (x.rank() == 0) return ctx.error("cannot scatter into a scalar");
  TESSERA_ASSIGN_OR_RETURN(Reduction reduction, parse_reduction(ctx));
  TESSERA_ASSIGN_OR_RETURN(auto targets, nd_targets(ctx, x, ind, 0));
  std::vector<int64_t> want(ind.dims().begin(), ind.dims().end() - 1);
  want.insert(want.end(), x.dims().begin() + ind.dim(-1), x.dims().end());
  if (updates.dims() != want) {
    return ctx.error("updates " + updates.describe() + " should have shape " +
                     dims_to_string(want));
  }
  std::vector<std::pair<int64_t, int64_t>> pairs;
  pairs.reserve(targets.offsets.size() * targets.slice_size);
  for (size_t j = 0; j < targets.offsets.size(); ++j) {
    for (int64_t e = 0; e < targets.slice_size; ++e) {
      pairs.emplace_back(targets.offsets[j] + e, static_cast<int64_t>(j) * targets.slice_size + e);
    }
  }
  Tensor& y = ctx.output(0, x.dtype(), x.dims());
  ElementCopier(x, y).copy_run(0, 0, x.numel());
  return scatter_apply(ctx, y, updates, pairs, reduction);
}

Status one_hot_kernel(RefKernelContext& ctx) {
  const Tensor& ind = *ctx.input(0);
  const Tensor& depth_t = *ctx.input(1);
  const Tensor& values = *ctx.input(2);
  if (ind.dtype() == DType::kString || depth_t.dtype() == DType::kString) {
    return ctx.error("indices and depth must be numeric");
  }
  if (depth_t.numel() != 1) return ctx.error("depth must have one element");
  if (values.numel() != 2) return ctx.error("values must have two elements [off, on]");
  double depth_d = depth_t.as_double(0);
  if (!(depth_d >= 1 && depth_d < static_cast<double>(ref::kMaxElements))) {
    return ctx.error("depth must be positive");
  }
  int64_t depth = static_cast<int64_t>(depth_d);
  int out_rank = ind.rank() + 1;
  TESSERA_ASSIGN_OR_RETURN(int axis, normalize_axis(ctx.node().attr_int("axis", -1), out_rank));
  std::vector<int64_t> out_dims = ind.dims();
  out_dims.insert(out_dims.begin() + axis, depth);
  TESSERA_RETURN_IF_ERROR(ref::check_output_dims(ctx, out_dims));
  Tensor& y = ctx.output(0, values.dtype(), out_dims);
  ElementCopier copier(values, y);
  for (int64_t i = 0; i < y.numel(); ++i) copier.copy(i, 0);
  int64_t outer = ref::product_of_dims(ind.dims(), 0, axis);
  int64_t inner = ref::product_of_dims(ind.dims(), axis, ind.dims().size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      int64_t v = 0;
      if (dtype_is_float(ind.dtype())) {
        // Non-integral indices truncate; out-of-range ones (NaN included) select nothing.
        double d = ind.as_double(o * inner + i);
        if (!(d > static_cast<double>(-depth - 1) && d < static_cast<double>(depth))) continue;
        v = static_cast<int64_t>(d);
      } else {
        v = ind.as_int64(o * inner + i);
      }
      if (v < 0) v += depth;
      if (v >= 0 && v < depth) copier.copy((o * depth + v) * inner + i, 1);
    }
  }
  return Status();
}

// Whether element i of t is "true": non-zero for numbers, non-empty for strings.
std::vector<bool> truth_values(const Tensor& t) {
  std::vector<bool> truth(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::kString) {
    for (int64_t i = 0; i < t.numel(); ++i) truth[i] = !t.strings()[i].empty();
    return truth;
  }
  visit_numeric_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = ref::compute_t<T>;
    const T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) truth[i] = static_cast<C>(p[i]) != C(0);
  });
  return truth;
}

Status compress_kernel(RefKernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  const Tensor& cond_t = *ctx.input(1);
  if (cond_t.rank() != 1) return ctx.error("condition must be 1-D");
  if (cond_t.dtype() == DType::kString) return ctx.error("condition must be bool");
  std::vector<bool> cond = truth_values(cond_t);
  bool flat = !ctx.node().has_attr("axis");
  std::vector<int64_t> dims = flat ? std::vector<int64_t>{x.numel()} : x.dims();
  int axis = 0;
  if (!flat) {
    if (x.rank() == 0) return ctx.error("axis given for a scalar input");
    TESSERA_ASSIGN_OR_RETURN(axis, normalize_axis(ctx.node().attr_int("axis", 0), x.rank()));
  }
  int64_t dim = dims[axis];
  std::vector<int64_t> selected;
  for (size_t i = 0; i < cond.size(); ++i) {
    if (!cond[i]) continue;
    if (static_cast<int64_t>(i) >= dim) return ctx.error("condition selects beyond the axis");
    selected.push_back(static_cast<int64_t>(i));
  }
  std::vector<int64_t> out_dims = dims;
  out_dims[axis] = static_cast<int64_t>(selected.size());
  Tensor& y = ctx.output(0, x.dtype(), out_dims);
  ElementCopier copier(x, y);
  int64_t outer = ref::product_of_dims(dims, 0, axis);
  int64_t inner = ref::product_of_dims(dims, axis + 1, dims.size());
  int64_t count = static_cast<int64_t>(selected.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < count; ++j) {
      copier.copy_run((o * count + j) * inner, (o * dim + selected[j]) * inner, inner);
    }
  }
  return Status();
}

Status non_zero_kernel(RefKernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  std::vector<bool> truth = truth_values(x);
  // A scalar counts as a 1-D tensor of one element (as numpy does).
  std::vector<int64_t> dims = x.rank() == 0 ? std::vector<int64_t>{1} : x.dims();
  int64_t count = std::count(truth.begin(), truth.end(), true);
  int rank = static_cast<int>(dims.size());
  Tensor& y = ctx.output(0, DType::kInt64, {rank, count});
  int64_t* out = y.data<int64_t>();
  int64_t k = 0;
  ref::for_each_index(dims, [&](int64_t i, const std::vector<int64_t>& index) {
    if (!truth[i]) return;
    for (int d = 0; d < rank; ++d) out[d * count + k] = index[d];
    ++k;
  });
  return Status();
}

Status reverse_sequence_kernel(RefKernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  const Tensor& lens_t = *ctx.input(1);
  if (x.rank() < 2) return ctx.error("input must have rank >= 2");
  int64_t batch_axis = ctx.node().attr_int("batch_axis", 1);
  int64_t time_axis = ctx.node().attr_int("time_axis", 0);
  if (!((batch_axis == 0 && time_axis == 1) || (batch_axis == 1 && time_axis == 0))) {
    return ctx.error("batch_axis and time_axis must be 0 and 1");
  }
  TESSERA_ASSIGN_OR_RETURN(auto lens, read_index_tensor(ctx, lens_t, "sequence_lens"));
  int64_t batch = x.dim(static_cast<int>(batch_axis)), time = x.dim(static_cast<int>(time_axis));
  if (static_cast<int64_t>(lens.size()) != batch) return ctx.error("sequence_lens length != batch");
  std::vector<int64_t> strides = row_major_strides(x.dims());
  int64_t batch_stride = strides[batch_axis], time_stride = strides[time_axis];
  int64_t inner = strides[1];
  Tensor& y = ctx.output(0, x.dtype(), x.dims());
  ElementCopier copier(x, y);
  copier.copy_run(0, 0, x.numel());
  for (int64_t b = 0; b < batch; ++b) {
    int64_t len = lens[b];
    if (len < 0 || len > time)
      return ctx.error("sequence length " + std::to_string(len) + " out of range");
    for (int64_t t = 0; t < len; ++t) {
      copier.copy_run(b * batch_stride + t * time_stride,
                      b * batch_stride + (len - 1 - t) * time_stride, inner);
    }
  }
  return Status();
}

// Three-way comparison of flat elements a and b of t.
std::function<int(int64_t, int64_t)> element_compare(const Tensor& t) {
  if (t.dtype() == DType::kString) {
    const auto* s = &t.strings();
    return
        [s](int64_t a, int64_t b) { return (*s)[a] < (*s)[b] ? -1 : ((*s)[b] < (*s)[a] ? 1 : 0); };
  }
  std::function<int(int64_t, int64_t)> cmp;
  visit_numeric_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = ref::compute_t<T>;
    const T* p = t.data<T>();
    cmp = [p](int64_t a, int64_t b) {
      C va = static_cast<C>(p[a]), vb = static_cast<C>(p[b]);
      if constexpr (std::is_floating_point_v<C>) {
        // A total order: NaNs equal each other and sort after every number.
        bool na = std::isnan(va), nb = std::isnan(vb);
        if (na || nb) return na == nb ? 0 : (na ? 1 : -1);
      }
      return va < vb ? -1 : (vb < va ? 1 : 0);
    };
  });
  return cmp;
}

Status unique_kernel(RefKernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  bool sorted = ctx.node().attr_int("sorted", 1) != 0;
  bool has_axis = ctx.node().has_attr("axis");
  std::vector<int64_t> dims = has_axis ? x.dims() : std::vector<int64_t>{x.numel()};
  int axis = 0;
  if (has_axis) {
    if (x.rank() == 0) return ctx.error("axis given for a scalar input");
    TESSERA_ASSIGN_OR_RETURN(axis, normalize_axis(ctx.node().attr_int("axis", 0), x.rank()));
  }
  // Slice i is every element whose coordinate along `axis` is i.
  int64_t n = dims[axis];
  int64_t outer = ref::product_of_dims(dims, 0, axis);
  int64_t inner = ref::product_of_dims(dims, axis + 1, dims.size());
  auto cmp = element_compare(x);
  if (!cmp) return ctx.error("unsupported dtype " + x.describe());
  auto compare_slices = [&](int64_t a, int64_t b) {
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t k = 0; k < inner; ++k) {
        int c = cmp((o * n + a) * inner + k, (o * n + b) * inner + k);
        if (c != 0) return c;
      }
    }
    return 0;
  };
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return compare_slices(a, b) < 0; });
  // Groups of equal slices in sorted order; stable sorting puts the first occurrence first.
  std::vector<int64_t> first;  // per group: first occurrence
  std::vector<int64_t> group_of(static_cast<size_t>(n));
  std::vector<int64_t> counts;
  for (size_t i = 0; i < order.size(); ++i) {
    if (i == 0 || compare_slices(order[i - 1], order[i]) != 0) {
      first.push_back(order[i]);
      counts.push_back(0);
    }
    group_of[order[i]] = static_cast<int64_t>(first.size()) - 1;
    ++counts.back();
  }
  int64_t groups = static_cast<int64_t>(first.size());
  // Output position of each group: sorted order, or order of first occurrence.
  std::vector<int64_t> rank_of(static_cast<size_t>(groups));
  std::iota(rank_of.begin(), rank_of.end(), 0);
  if (!sorted) {
    std::vector<int64_t> by_first(static_cast<size_t>(groups));
    std::iota(by_first.begin(), by_first.end(), 0);
    std::sort(by_first.begin(), by_first.end(),
              [&](int64_t a, int64_t b) { return first[a] < first[b]; });
    for (int64_t p = 0; p < groups; ++p) rank_of[by_first[p]] = p;
  }
  std::vector<int64_t> out_dims = dims;
  out_dims[axis] = groups;
  Tensor& y = ctx.output(0, x.dtype(), out_dims);
  ElementCopier copier(x, y);
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t o = 0; o < outer; ++o) {
      copier.copy_run((o * groups + rank_of[g]) * inner, (o * n + first[g]) * inner, inner);
    }
  }
  if (ctx.wants_output(1)) {
    int64_t* out = ctx.output(1, DType::kInt64, {groups}).data<int64_t>();
    for (int64_t g = 0; g < groups; ++g) out[rank_of[g]] = first[g];
  }
  if (ctx.wants_output(2)) {
    int64_t* out = ctx.output(2, DType::kInt64, {n}).data<int64_t>();
    for (int64_t i = 0; i < n; ++i) out[i] = rank_of[group_of[i]];
  }
  if (ctx.wants_output(3)) {
    int64_t* out = ctx.output(3, DType::kInt64, {groups}).data<int64_t>();
    for (int64_t g = 0; g < groups; ++g) out[rank_of[g]] = counts[g];
  }
  return Status();
}

}  // namespace

namespace ref {

void register_tensor_index_kernels(RefKernelTable& t) {
  t.add("Gather", gather_kernel);
  t.add("GatherElements", gather_elements_kernel);
  t.add("GatherND", gather_nd_kernel);
  t.add("Scatter", scatter_elements_kernel);
  t.add("ScatterElements", scatter_elements_kernel);
  t.add("ScatterND", scatter_nd_kernel);
  t.add("OneHot", one_hot_kernel);
  t.add("Compress", compress_kernel);
  t.add("NonZero", non_zero_kernel);
  t.add("ReverseSequence", reverse_sequence_kernel);
  t.add("Unique", unique_kernel);
}

}  // namespace ref
}  // namespace tessera
