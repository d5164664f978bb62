// The elementwise family of reference kernels: one unary engine and one broadcasting engine that
// every elementwise op goes through, plus compile-time dtype sets for dispatch.
//
// The kernels are split over elementwise_{unary,binary,cast}.cc; register_elementwise_kernels
// (elementwise_kernels.cc) calls the part registration functions declared here.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/ref/ref_kernel.h"
#include "backends/ref/ref_util.h"

namespace tessera::ref {

// ---- dtype sets --------------------------------------------------------------------------------

// Bit sets of dtypes; visit_dtypes<Set> only instantiates its functor for the dtypes in Set.
enum DTypeSet : unsigned {
  kSetF32 = 1u << 0,
  kSetF64 = 1u << 1,
  kSetF16 = 1u << 2,
  kSetBF16 = 1u << 3,
  kSetI8 = 1u << 4,
  kSetI16 = 1u << 5,
  kSetI32 = 1u << 6,
  kSetI64 = 1u << 7,
  kSetU8 = 1u << 8,
  kSetU16 = 1u << 9,
  kSetU32 = 1u << 10,
  kSetU64 = 1u << 11,
  kSetBool = 1u << 12,
  kSetFloat = kSetF32 | kSetF64 | kSetF16 | kSetBF16,
  kSetSigned = kSetI8 | kSetI16 | kSetI32 | kSetI64,
  kSetUnsigned = kSetU8 | kSetU16 | kSetU32 | kSetU64,
  kSetInteger = kSetSigned | kSetUnsigned,
  kSetNumeric = kSetFloat | kSetInteger,
  kSetAll = kSetNumeric | kSetBool,
};

// Calls f(T{}) with the C++ type of `t` if `t` is in Set; returns false (calling nothing) if not.
template <unsigned Set, typename F>
bool visit_dtypes(DType t, F&& f) {
#define TESSERA_VISIT_CASE(ENUM, BIT, TYPE) \
  case DType::ENUM:                         \
    if constexpr ((Set & (BIT)) != 0) {     \
      f(TYPE{});                            \
      return true;                          \
    }                                       \
    return false;
  switch (t) {
    TESSERA_VISIT_CASE(kFloat32, kSetF32, float)
    TESSERA_VISIT_CASE(kFloat64, kSetF64, double)
    TESSERA_VISIT_CASE(kFloat16, kSetF16, Float16)
    TESSERA_VISIT_CASE(kBFloat16, kSetBF16, BFloat16)
    TESSERA_VISIT_CASE(kInt8, kSetI8, int8_t)
    TESSERA_VISIT_CASE(kInt16, kSetI16, int16_t)
    TESSERA_VISIT_CASE(kInt32, kSetI32, int32_t)
    TESSERA_VISIT_CASE(kInt64, kSetI64, int64_t)
    TESSERA_VISIT_CASE(kUint8, kSetU8, uint8_t)
    TESSERA_VISIT_CASE(kUint16, kSetU16, uint16_t)
    TESSERA_VISIT_CASE(kUint32, kSetU32, uint32_t)
    TESSERA_VISIT_CASE(kUint64, kSetU64, uint64_t)
    TESSERA_VISIT_CASE(kBool, kSetBool, bool)
    default: return false;
  }
#undef TESSERA_VISIT_CASE
}

template <typename T>
inline constexpr bool is_half_v = std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;

// Storage type -> compute type (Float16/BFloat16 compute in float).
template <typename T>
compute_t<T> to_compute(T v) {
  if constexpr (is_half_v<T>) {
    return static_cast<float>(v);
  } else {
    return v;
  }
}

// Compute value -> storage type T. Float -> integer conversion saturates and maps NaN to 0
// (a plain static_cast is undefined behaviour out of range).
template <typename T, typename C>
T from_compute(C v) {
  if constexpr (is_half_v<T>) {
    return T(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != C(0);
  } else if constexpr (std::is_integral_v<T> && std::is_floating_point_v<C>) {
    if (v != v) return T(0);
    if (v >= static_cast<C>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    if (v <= static_cast<C>(std::numeric_limits<T>::lowest()))
      return std::numeric_limits<T>::lowest();
    return static_cast<T>(v);
  } else {
    return static_cast<T>(v);
  }
}

// Any element type -> storage type To (the conversion of Cast).
template <typename To, typename From>
To convert_element(From v) {
  return from_compute<To>(to_compute(v));
}

// ---- the unary engine --------------------------------------------------------------------------

// out[i] = f(in[i]) over every element, in parallel chunks. `out` must have in's element count.
template <typename In, typename Out, typename F>
void map_elements(const RefKernelContext& ctx, const Tensor& in, Tensor& out, F&& f) {
  const In* src = in.data<In>();
  Out* dst = out.data<Out>();
  ctx.parallel_for(in.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) dst[i] = f(src[i]);
  });
}

// Output 0 = f(input 0) elementwise for the input dtypes in Set. f receives and returns the
// compute type (float for Float16/BFloat16); the output dtype equals the input dtype.
template <unsigned Set, typename F>
Status unary_kernel(RefKernelContext& ctx, F&& f) {
  const Tensor* x = ctx.input(0);
  if (!x) return ctx.error("missing input 0");
  bool ok = visit_dtypes<Set>(x->dtype(), [&](auto tag) {
    using T = decltype(tag);
    Tensor& y = ctx.output(0, x->dtype(), x->dims());
    map_elements<T, T>(ctx, *x, y, [&](T v) { return from_compute<T>(f(to_compute(v))); });
  });
  if (!ok) return ctx.unsupported(std::string("input dtype ") + dtype_name(x->dtype()));
  return Status();
}

// Output 0 = pred(input 0) as bool for the input dtypes in Set (IsNaN, IsInf).
template <unsigned Set, typename F>
Status unary_predicate_kernel(RefKernelContext& ctx, F&& pred) {
  const Tensor* x = ctx.input(0);
  if (!x) return ctx.error("missing input 0");
  bool ok = visit_dtypes<Set>(x->dtype(), [&](auto tag) {
    using T = decltype(tag);
    Tensor& y = ctx.output(0, DType::kBool, x->dims());
    map_elements<T, bool>(ctx, *x, y, [&](T v) -> bool { return pred(to_compute(v)); });
  });
  if (!ok) return ctx.unsupported(std::string("input dtype ") + dtype_name(x->dtype()));
  return Status();
}

// ---- the broadcasting engine -------------------------------------------------------------------

// Numpy broadcasting of N input shapes, with dims coalesced: adjacent output dims that every input
// walks contiguously merge into one, so equal shapes become one flat loop.
struct BroadcastPlan {
  std::vector<int64_t> out_dims;                   // the broadcast shape (uncoalesced)
  std::vector<int64_t> loop_dims;                  // coalesced dims, at least one
  std::vector<std::vector<int64_t>> loop_strides;  // per input, per loop dim; 0 where broadcast
  int64_t numel = 0;
};

// Fails (InvalidArgument) when the shapes do not broadcast.
Result<BroadcastPlan> plan_broadcast(const std::vector<std::vector<int64_t>>& shapes);

// Calls fn(out_index, offsets) for every output element in row-major order, where offsets[k] is the
// element offset into input k. Runs in parallel chunks; fn must only write output element
// out_index.
template <typename F>
void run_broadcast(const RefKernelContext& ctx, const BroadcastPlan& plan, F&& fn) {
  if (plan.numel == 0) return;
  const int rank = static_cast<int>(plan.loop_dims.size());
  const size_t nin = plan.loop_strides.size();
  const int64_t inner = plan.loop_dims[rank - 1];
  ctx.parallel_for(plan.numel, 1 << 14, [&](int64_t begin, int64_t end) {
    // Decompose `begin` into a multi-index over the loop dims and the matching input offsets.
    std::vector<int64_t> idx(rank, 0), off(nin, 0), inner_stride(nin, 0);
    int64_t rest = begin;
    for (int d = rank - 1; d >= 0; --d) {
      idx[d] = rest % plan.loop_dims[d];
      rest /= plan.loop_dims[d];
      for (size_t k = 0; k < nin; ++k) off[k] += idx[d] * plan.loop_strides[k][d];
    }
    for (size_t k = 0; k < nin; ++k) inner_stride[k] = plan.loop_strides[k][rank - 1];
    int64_t i = begin;
    while (i < end) {
      // Walk the innermost dim up to its end or the chunk's end.
      int64_t run = std::min(inner - idx[rank - 1], end - i);
      for (int64_t r = 0; r < run; ++r, ++i) {
        fn(i, off.data());
        for (size_t k = 0; k < nin; ++k) off[k] += inner_stride[k];
      }
      idx[rank - 1] += run;
      // Carry into the outer dims.
      for (int d = rank - 1; d > 0 && idx[d] == plan.loop_dims[d]; --d) {
        for (size_t k = 0; k < nin; ++k) off[k] -= plan.loop_strides[k][d] * plan.loop_dims[d];
        idx[d] = 0;
        ++idx[d - 1];
        for (size_t k = 0; k < nin; ++k) off[k] += plan.loop_strides[k][d - 1];
      }
    }
  });
}

// out = f(a, b) with numpy broadcasting into output 0 of dtype Out. f gets the compute types of A
// and B and returns a value converted with from_compute<Out>. Errors name the node.
template <typename A, typename B, typename Out, typename F>
Status broadcast_binary(RefKernelContext& ctx, const Tensor& a, const Tensor& b,
                        const std::vector<int64_t>& b_dims, F&& f) {
  auto plan = plan_broadcast({a.dims(), b_dims});
  if (!plan.ok()) return ctx.error(plan.status().message());
  Tensor& out = ctx.output(0, DTypeOf<Out>::value, plan->out_dims);
  const A* pa = a.data<A>();
  const B* pb = b.data<B>();
  Out* po = out.data<Out>();
  run_broadcast(ctx, *plan, [&](int64_t i, const int64_t* off) {
    po[i] = from_compute<Out>(f(to_compute(pa[off[0]]), to_compute(pb[off[1]])));
  });
  return Status();
}

// ---- integer arithmetic without undefined behaviour
// -----------------------------------------------

// Two's-complement wrapping add/sub/mul for integers (plain ops for floats).
template <typename C>
C wrapping_add(C a, C b) {
  if constexpr (std::is_integral_v<C> && !std::is_same_v<C, bool>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}
template <typename C>
C wrapping_sub(C a, C b) {
  if constexpr (std::is_integral_v<C> && !std::is_same_v<C, bool>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
  } else {
    return a - b;
  }
}
template <typename C>
C wrapping_mul(C a, C b) {
  if constexpr (std::is_integral_v<C> && !std::is_same_v<C, bool>) {
    using U = std::make_unsigned_t<C>;
    // Promote to at least unsigned int so that uint16*uint16 does not overflow a signed int.
    using W = std::common_type_t<U, unsigned>;
    return static_cast<C>(
        static_cast<U>(static_cast<W>(static_cast<U>(a)) * static_cast<W>(static_cast<U>(b))));
  } else {
    return a * b;
  }
}

// Python-style modulo (the result takes the divisor's sign) and C-style fmod (the dividend's
// sign). For integers, b must be non-zero; INT_MIN % -1 is 0.
template <typename C>
C mod_floor(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    C r = std::fmod(a, b);
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
  } else if constexpr (std::is_signed_v<C>) {
    if (b == -1) return 0;
    C r = static_cast<C>(a % b);
    if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<C>(r + b);
    return r;
  } else {
    return static_cast<C>(a % b);
  }
}
template <typename C>
C mod_trunc(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    return std::fmod(a, b);
  } else if constexpr (std::is_signed_v<C>) {
    if (b == -1) return 0;
    return static_cast<C>(a % b);
  } else {
    return static_cast<C>(a % b);
  }
}

// Parts of register_elementwise_kernels.
void register_elementwise_unary_kernels(RefKernelTable& t);
void register_elementwise_binary_kernels(RefKernelTable& t);
void register_elementwise_cast_kernels(RefKernelTable& t);

}  // namespace tessera::ref
