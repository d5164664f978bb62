// The native kernels for any x86-64 (or other) CPU: the simd templates over one float per
// "vector". Also what tests compare the vector ISAs with.
#include <cmath>
#include <cstdint>

#include "backends/native/isa.h"

namespace tessera::native {
namespace {

struct Scalar {
  static constexpr int W = 1;
  using V = float;
  using M = bool;

  static V zero() { return 0.0f; }
  static V set1(float x) { return x; }
  static V load(const float* p) { return *p; }
  static V load_aligned(const float* p) { return *p; }
  static V load_n(const float* p, int n) { return n > 0 ? *p : 0.0f; }
  static V load_range(const float* p, int begin, int end) {
    return begin <= 0 && end > 0 ? *p : 0.0f;
  }
  static void store(float* p, V v) { *p = v; }
  static void store_n(float* p, V v, int n) {
    if (n > 0) *p = v;
  }
  static void stream(float* p, V v) { *p = v; }
  static void fence() {}

  static V add(V a, V b) { return a + b; }
  static V sub(V a, V b) { return a - b; }
  static V mul(V a, V b) { return a * b; }
  static V div(V a, V b) { return a / b; }
  static V fma(V a, V b, V c) { return a * b + c; }
  static V max(V a, V b) { return a > b ? a : b; }
  static V min(V a, V b) { return a < b ? a : b; }
  static V sqrt(V a) { return std::sqrt(a); }
  static V abs(V a) { return std::fabs(a); }
  static V neg(V a) { return -a; }
  static V round(V a) { return std::nearbyint(a); }
  static V copysign(V mag, V sign) { return std::copysign(mag, sign); }

  static M lt(V a, V b) { return a < b; }
  static M le(V a, V b) { return a <= b; }
  static M eq(V a, V b) { return a == b; }
  static M neq(V a, V b) { return a < b || a > b; }  // ordered: false for NaN
  static M isnan(V a) { return std::isnan(a); }
  static M mand(M a, M b) { return a && b; }
  static M mor(M a, M b) { return a || b; }
  static M mandnot(M a, M b) { return !a && b; }
  static V select(M m, V t, V f) { return m ? t : f; }

  static V ldexp(V y, V n) { return n == n ? std::ldexp(y, static_cast<int>(n)) : y + n; }
  static void frexp(V x, V& m, V& e) {
    int ei = 0;
    m = std::frexp(x, &ei);
    e = static_cast<float>(ei);
  }
  static void zip(V a, V b, V& lo, V& hi) { lo = a, hi = b; }  // a0 b0
  static void unzip(V a, V b, V& even, V& odd) { even = a, odd = b; }
  static float hsum(V a) { return a; }
};

}  // namespace
}  // namespace tessera::native

#include "backends/native/simd_math.h"
// (order matters: the interpreter and row kernels use the math templates)
#include "backends/native/simd_eltwise.h"
#include "backends/native/simd_conv.h"
#include "backends/native/simd_deconv.h"
#include "backends/native/simd_gemm.h"
#include "backends/native/simd_rows.h"
#include "backends/native/simd_llm.h"
#include "backends/native/simd_winograd.h"
#include "backends/native/simd_depthwise.h"
#include "backends/native/simd_table.h"

namespace tessera::native {

const IsaKernels& scalar_kernels() {
  // ConvTranspose: 8 columns x 1 pixel (see deconv_block in simd_deconv.h).
  static const IsaKernels k = simd::with_deconv<Scalar, 8, 8>(
      simd::with_conv<Scalar, 4, 4>(simd::make_kernels<Scalar, 4, 4>(Isa::kScalar)));
  return k;
}

}  // namespace tessera::native
