// MatMul, Gemm, MatMulInteger, QLinearMatMul: one blocked i-k-j matrix product, parallel over
// row blocks of every (broadcast) batch.
#include <algorithm>
#include <type_traits>

#include "backends/ref/nn_kernels.h"

namespace tessera {
namespace {

using ref::compute_t;

// The numpy matmul layout of two operands: broadcast batch, then (M x K) * (K x N).
struct MatMulLayout {
  int64_t m = 1, k = 1, n = 1;
  std::vector<int64_t> out_dims;
  std::vector<int64_t> a_offsets, b_offsets;  // element offset of each batch's matrix
};

Result<MatMulLayout> matmul_layout(const RefKernelContext& ctx, std::vector<int64_t> a,
                                   std::vector<int64_t> b) {
  if (a.empty() || b.empty()) return ctx.error("MatMul operands must have rank >= 1");
  const bool a_vector = a.size() == 1, b_vector = b.size() == 1;
  if (a_vector) a.insert(a.begin(), 1);
  if (b_vector) b.push_back(1);
  MatMulLayout l;
  l.m = a[a.size() - 2];
  l.k = a.back();
  l.n = b.back();
  if (b[b.size() - 2] != l.k) {
    return ctx.error("inner dims differ: " + dims_to_string(a) + " x " + dims_to_string(b));
  }
  std::vector<int64_t> a_batch(a.begin(), a.end() - 2), b_batch(b.begin(), b.end() - 2);
  auto batch = ref::broadcast_shapes({a_batch, b_batch});
  if (!batch.ok()) return ctx.error("batch dims do not broadcast: " + batch.status().message());
  l.out_dims = *batch;
  if (!a_vector) l.out_dims.push_back(l.m);
  if (!b_vector) l.out_dims.push_back(l.n);
  std::vector<std::vector<int64_t>> strides = {ref::broadcast_strides(a_batch, *batch),
                                               ref::broadcast_strides(b_batch, *batch)};
  ref::for_each_broadcast(*batch, strides, [&](int64_t, const std::vector<int64_t>& off) {
    l.a_offsets.push_back(off[0] * l.m * l.k);
    l.b_offsets.push_back(off[1] * l.k * l.n);
  });
  return l;
}

constexpr int64_t kRowBlock = 8;
constexpr int64_t kColBlock = 512;

// c[rows r0..r1) += a * b for one row-major (M x K) * (K x N) product.
template <typename A>
void matmul_rows(const A* a, const A* b, A* c, int64_t r0, int64_t r1, int64_t k, int64_t n) {
  for (int64_t j0 = 0; j0 < n; j0 += kColBlock) {
    const int64_t j1 = std::min(n, j0 + kColBlock);
    for (int64_t p = 0; p < k; ++p) {
      const A* b_row = b + p * n;
      for (int64_t i = r0; i < r1; ++i) {
        const A a_ip = a[i * k + p];
        A* c_row = c + i * n;
        for (int64_t j = j0; j < j1; ++j) c_row[j] += a_ip * b_row[j];
      }
    }
  }
}

// c (zero-initialized, out_dims) = a x b for every batch of the layout.
template <typename A>
void batched_matmul(const RefKernelContext& ctx, const MatMulLayout& l, const A* a, const A* b,
                    A* c) {
  const int64_t batches = static_cast<int64_t>(l.a_offsets.size());
  const int64_t row_blocks = (l.m + kRowBlock - 1) / kRowBlock;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, kRowBlock * l.k * l.n));
  ctx.parallel_for(batches * row_blocks, grain, [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      const int64_t batch = u / row_blocks, rb = u % row_blocks;
      matmul_rows(a + l.a_offsets[batch], b + l.b_offsets[batch], c + batch * l.m * l.n,
                  rb * kRowBlock, std::min(l.m, (rb + 1) * kRowBlock), l.k, l.n);
    }
  });
}

// Runs f(a, b, c) on compute-type arrays for float tensors, converting 16-bit floats.
template <typename T>
Status float_matmul(RefKernelContext& ctx, const Tensor& a, const Tensor& b) {
  using C = compute_t<T>;
  TESSERA_ASSIGN_OR_RETURN(MatMulLayout l, matmul_layout(ctx, a.dims(), b.dims()));
  Tensor& y = ctx.output(0, a.dtype(), l.out_dims);
  if constexpr (std::is_same_v<T, C>) {
    batched_matmul<C>(ctx, l, a.data<T>(), b.data<T>(), y.data<T>());
  } else {
    std::vector<C> av = ref::to_vector_as<C>(a), bv = ref::to_vector_as<C>(b);
    std::vector<C> cv(static_cast<size_t>(y.numel()), C(0));
    batched_matmul<C>(ctx, l, av.data(), bv.data(), cv.data());
    ref::store_as<T>(cv, y);
  }
  return Status();
}

Status matmul_kernel(RefKernelContext& ctx) {
  const Tensor* a = ctx.input(0);
  const Tensor* b = ctx.input(1);
  if (!a || !b) return ctx.error("expects 2 inputs");
  if (a->dtype() != b->dtype()) return ctx.error("operand dtypes differ");
  Status st;
  bool handled = ref::visit_float_dtype(a->dtype(), [&](auto tag) {
    st = float_matmul<decltype(tag)>(ctx, *a, *b);
  });
  if (handled) return st;
  if (a->dtype() == DType::kInt32 || a->dtype() == DType::kInt64 ||
      a->dtype() == DType::kUint32 || a->dtype() == DType::kUint64) {
    TESSERA_ASSIGN_OR_RETURN(MatMulLayout l, matmul_layout(ctx, a->dims(), b->dims()));
    std::vector<int64_t> av = ref::to_vector_as<int64_t>(*a), bv = ref::to_vector_as<int64_t>(*b);
    std::vector<int64_t> cv(static_cast<size_t>(shape_numel(l.out_dims)), 0);
    batched_matmul<int64_t>(ctx, l, av.data(), bv.data(), cv.data());
    Tensor& y = ctx.output(0, a->dtype(), l.out_dims);
    visit_numeric_dtype(a->dtype(), [&](auto tag) { ref::store_as<decltype(tag)>(cv, y); });
    return Status();
  }
  return ctx.unsupported(std::string("dtype ") + dtype_name(a->dtype()));
}

// Copies a (rows x cols) matrix transposed, or as is.
template <typename C>
std::vector<C> maybe_transposed(std::vector<C> v, int64_t rows, int64_t cols, bool transpose) {
  if (!transpose) return v;
  std::vector<C> t(v.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[c * rows + r] = v[r * cols + c];
  return t;
}

template <typename T>
Status gemm_typed(RefKernelContext& ctx) {
  using C = compute_t<T>;
  const Tensor& a = *ctx.input(0);
  const Tensor& b = *ctx.input(1);
  const Tensor* c = ctx.input(2);
  const Node& node = ctx.node();
  const bool trans_a = node.attr_int("transA", 0) != 0, trans_b = node.attr_int("transB", 0) != 0;
  const C alpha = static_cast<C>(node.attr_float("alpha", 1.0f));
  const C beta = static_cast<C>(node.attr_float("beta", 1.0f));
  if (a.rank() != 2 || b.rank() != 2) return ctx.error("A and B must be 2-D");
  const int64_t m = trans_a ? a.dim(1) : a.dim(0), k = trans_a ? a.dim(0) : a.dim(1);
  const int64_t kb = trans_b ? b.dim(1) : b.dim(0), n = trans_b ? b.dim(0) : b.dim(1);
  if (k != kb) return ctx.error("inner dims differ: " + a.describe() + " x " + b.describe());
  MatMulLayout l;
  l.m = m;
  l.k = k;
  l.n = n;
  l.out_dims = {m, n};
  l.a_offsets = {0};
  l.b_offsets = {0};
  std::vector<C> av = maybe_transposed(ref::to_vector_as<C>(a), a.dim(0), a.dim(1), trans_a);
  std::vector<C> bv = maybe_transposed(ref::to_vector_as<C>(b), b.dim(0), b.dim(1), trans_b);
  std::vector<C> yv(static_cast<size_t>(m * n), C(0));
  batched_matmul<C>(ctx, l, av.data(), bv.data(), yv.data());
  for (C& v : yv) v *= alpha;
  if (c && beta != C(0)) {
    if (c->rank() > 2) return ctx.error("C must have rank <= 2");
    std::vector<int64_t> c_dims = c->dims();
    std::vector<int64_t> out = {m, n};
    auto bc = ref::broadcast_shapes({c_dims, out});
    if (!bc.ok() || *bc != out) {
      return ctx.error("C " + c->describe() + " does not broadcast to " + dims_to_string(out));
    }
    std::vector<C> cv = ref::to_vector_as<C>(*c);
    std::vector<std::vector<int64_t>> strides = {ref::broadcast_strides(c_dims, out)};
    ref::for_each_broadcast(out, strides, [&](int64_t i, const std::vector<int64_t>& off) {
      yv[static_cast<size_t>(i)] += beta * cv[static_cast<size_t>(off[0])];
    });
  }
  Tensor& y = ctx.output(0, a.dtype(), {m, n});
  ref::store_as<T>(yv, y);
  return Status();
}

Status gemm_kernel(RefKernelContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.error("expects inputs A and B");
  DType dt = ctx.input(0)->dtype();
  if (ctx.input(1)->dtype() != dt || (ctx.has_input(2) && ctx.input(2)->dtype() != dt)) {
    return ctx.error("operand dtypes differ");
  }
  Status st;
  if (!ref::visit_float_dtype(dt, [&](auto tag) { st = gemm_typed<decltype(tag)>(ctx); })) {
    return ctx.unsupported(std::string("dtype ") + dtype_name(dt));
  }
  return st;
}

// Integer operand minus its zero point (scalar, or per row of A / per column of B).
Result<std::vector<int32_t>> centered_operand(const RefKernelContext& ctx, const Tensor& x,
                                              const Tensor* zero_point, bool per_row) {
  if (x.dtype() != DType::kInt8 && x.dtype() != DType::kUint8) {
    return ctx.unsupported(std::string("operand dtype ") + dtype_name(x.dtype()));
  }
  std::vector<int32_t> v = ref::to_vector_as<int32_t>(x);
  if (!zero_point) return v;
  if (zero_point->dtype() != x.dtype()) return ctx.error("zero point dtype differs from operand");
  std::vector<int32_t> zp = ref::to_vector_as<int32_t>(*zero_point);
  if (zp.size() == 1) {
    for (int32_t& e : v) e -= zp[0];
    return v;
  }
  const int64_t rows = x.rank() >= 2 ? x.dim(-2) : 1, cols = x.dim(-1);
  const int64_t channels = per_row ? rows : cols;
  if (zero_point->rank() != 1 || static_cast<int64_t>(zp.size()) != channels) {
    return ctx.unsupported("zero point of shape " + dims_to_string(zero_point->dims()));
  }
  for (size_t i = 0; i < v.size(); ++i) {
    const int64_t idx = static_cast<int64_t>(i);
    v[i] -= zp[static_cast<size_t>(per_row ? (idx / cols) % rows : idx % cols)];
  }
  return v;
}

Status matmul_integer_kernel(RefKernelContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.error("expects inputs A and B");
  const Tensor& a = *ctx.input(0);
  const Tensor& b = *ctx.input(1);
  TESSERA_ASSIGN_OR_RETURN(MatMulLayout l, matmul_layout(ctx, a.dims(), b.dims()));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int32_t> av, centered_operand(ctx, a, ctx.input(2), true));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int32_t> bv, centered_operand(ctx, b, ctx.input(3), false));
  Tensor& y = ctx.output(0, DType::kInt32, l.out_dims);
  batched_matmul<int32_t>(ctx, l, av.data(), bv.data(), y.data<int32_t>());
  return Status();
}

// QLinearMatMul: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point.
Status qlinear_matmul_kernel(RefKernelContext& ctx) {
  for (int i = 0; i < 8; ++i) {
    if (!ctx.has_input(i)) return ctx.error("expects 8 inputs");
  }
  const Tensor& a = *ctx.input(0);
  const Tensor& b = *ctx.input(3);
  TESSERA_ASSIGN_OR_RETURN(MatMulLayout l, matmul_layout(ctx, a.dims(), b.dims()));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int32_t> av, centered_operand(ctx, a, ctx.input(2), true));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int32_t> bv, centered_operand(ctx, b, ctx.input(5), false));
  std::vector<int32_t> acc(static_cast<size_t>(shape_numel(l.out_dims)), 0);
  batched_matmul<int32_t>(ctx, l, av.data(), bv.data(), acc.data());
  std::vector<double> a_scale = ref::to_vector_as<double>(*ctx.input(1));
  std::vector<double> b_scale = ref::to_vector_as<double>(*ctx.input(4));
  const Tensor& y_zp = *ctx.input(7);
  if (ctx.input(6)->numel() != 1 || y_zp.numel() != 1) {
    return ctx.unsupported("per-channel y_scale / y_zero_point");
  }
  if ((a_scale.size() != 1 && static_cast<int64_t>(a_scale.size()) != l.m) ||
      (b_scale.size() != 1 && static_cast<int64_t>(b_scale.size()) != l.n)) {
    return ctx.error("a_scale / b_scale must be scalars or per row / per column");
  }
  const double y_scale = ctx.input(6)->as_double(0);
  const double zp = y_zp.as_double(0);
  Status st;
  bool handled = ref::visit_quant_dtype(y_zp.dtype(), [&](auto tag) {
    using Q = decltype(tag);
    Tensor& y = ctx.output(0, y_zp.dtype(), l.out_dims);
    Q* out = y.data<Q>();
    for (size_t i = 0; i < acc.size(); ++i) {
      const int64_t idx = static_cast<int64_t>(i);
      const double sa = a_scale[a_scale.size() == 1 ? 0 : static_cast<size_t>((idx / l.n) % l.m)];
      const double sb = b_scale[b_scale.size() == 1 ? 0 : static_cast<size_t>(idx % l.n)];
      const float scale = static_cast<float>(sa * sb / y_scale);
      out[i] = ref::saturate_round<Q>(static_cast<double>(static_cast<float>(acc[i]) * scale) + zp);
    }
  });
  if (!handled) return ctx.unsupported(std::string("y dtype ") + dtype_name(y_zp.dtype()));
  return st;
}

}  // namespace

void register_nn_matmul_kernels(RefKernelTable& t) {
  t.add("MatMul", matmul_kernel);
  t.add("Gemm", gemm_kernel);
  t.add("MatMulInteger", matmul_integer_kernel);
  t.add("QLinearMatMul", qlinear_matmul_kernel);
}

}  // namespace tessera
