// native::quant_matmul against a plain reference (weights dequantized with quant::dequantize_row,
// double-precision dot products), for every weight type and every ISA path this CPU runs, over
// shapes with tails (rows, n and k not multiples of any tile), strides, bias / residual, 1 and 2
// threads and several value distributions. Paths that quantize the activations (Q8_0, Q4_0) are
// held to the rigorous bound of that quantization (sum_i |w_i| * amax(block of x_i) / 254) and,
// tightly, to the scalar path (same integer products); the float paths to 2e-5 * sum |x w|.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/native/quant_matmul.h"

namespace tessera::native {
namespace {

using quant::QType;

std::vector<Isa> isas() {
  std::vector<Isa> v = {Isa::kScalar};
  if (quant_matmul_isa_runs(Isa::kAvx2)) v.push_back(Isa::kAvx2);
  if (quant_matmul_isa_runs(Isa::kAvx512)) v.push_back(Isa::kAvx512);
  return v;
}

enum class Dist { kNormal, kUniform, kOutliers, kZeroBlocks };

void fill(std::mt19937& g, Dist d, float* v, int64_t n) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (int64_t i = 0; i < n; ++i) {
    switch (d) {
      case Dist::kNormal: v[i] = normal(g); break;
      case Dist::kUniform: v[i] = 0.5f + uniform(g); break;  // not centered: offsets matter
      case Dist::kOutliers: v[i] = normal(g) * (g() % 37 == 0 ? 60.0f : 0.3f); break;
      case Dist::kZeroBlocks: v[i] = (i / 32) % 3 == 1 ? 0.0f : uniform(g) * 4.0f; break;
    }
  }
}

struct Weights {
  QType type;
  int64_t n, k;
  std::vector<uint8_t> data;
  std::vector<float> deq;  // dequantized [n, k]
  QuantWeight view() const { return {type, n, k, data.data()}; }
};

Weights make_weights(QType type, int64_t n, int64_t k, Dist dist, uint32_t seed) {
  std::mt19937 g(seed);
  Weights w{type, n, k, {}, {}};
  const int64_t rb = quant::row_bytes(type, k);
  w.data.resize(n * rb);
  w.deq.resize(n * k);
  std::vector<float> row(k);
  // Q4_0C / Q8_0C: Q4_0 / Q8_0 rows, repacked into panels at the end (dequantized from the
  // panels, so a wrong repack fails against the kernels that read them).
  const QType row_type = type == QType::kQ4_0C ? QType::kQ4_0 : type == QType::kQ8_0C ? QType::kQ8_0 : type;
  for (int64_t j = 0; j < n; ++j) {
    fill(g, dist, row.data(), k);
    quant::quantize_row(row_type, row.data(), k, w.data.data() + j * rb);
  }
  if (type == QType::kQ4_0C) quant::repack_q4_0_to_q4_0c(w.data.data(), n, k);
  if (type == QType::kQ8_0C) quant::repack_q8_0_to_q8_0c(w.data.data(), n, k);
  for (int64_t j = 0; j < n; ++j) quant::dequantize_weight_row(type, w.data.data(), n, j, k, w.deq.data() + j * k);
  return w;
}

bool quantizes_activations(QType t) {
  return t == QType::kQ8_0 || t == QType::kQ4_0 || t == QType::kQ4_0R || t == QType::kQ8_0R || quant::is_panel_type(t);
}

struct Reference {
  std::vector<double> y, tol, mag;
};

// y and the tolerance of each output for the weights' dequantized values.
Reference reference(const std::vector<float>& deq, QType type, int64_t n, int64_t k,
                    const float* x, int64_t rows, int64_t ldx, const float* bias,
                    const float* residual, int64_t ld_residual) {
  Reference ref;
  ref.y.resize(rows * n);
  ref.tol.resize(rows * n);
  ref.mag.resize(rows * n);
  const bool q = quantizes_activations(type);
  std::vector<double> half_step(k / 32 + 1);
  for (int64_t t = 0; t < rows; ++t) {
    const float* xr = x + t * ldx;
    if (q) {
      for (int64_t b = 0; b < k / 32; ++b) {
        float amax = 0;
        for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xr[b * 32 + i]));
        half_step[b] = amax / 254.0 * 1.001;
      }
    }
    for (int64_t j = 0; j < n; ++j) {
      const float* wr = deq.data() + j * k;
      double s = 0, mag = 0, qerr = 0;
      for (int64_t i = 0; i < k; ++i) {
        s += static_cast<double>(xr[i]) * wr[i];
        mag += std::fabs(static_cast<double>(xr[i]) * wr[i]);
        if (q) qerr += std::fabs(wr[i]) * half_step[i / 32];
      }
      double extra = 0;
      if (bias) {
        s += bias[j];
        extra += std::fabs(bias[j]);
      }
      if (residual) {
        s += residual[t * ld_residual + j];
        extra += std::fabs(residual[t * ld_residual + j]);
      }
      ref.y[t * n + j] = s;
      ref.mag[t * n + j] = mag + extra;
      ref.tol[t * n + j] = qerr + 2e-5 * (mag + qerr) + 1e-6 * extra + 1e-30;
    }
  }
  return ref;
}

// How many outputs break the tolerance (printing the first few).
int64_t violations(const std::vector<float>& y, int64_t ldy, const Reference& ref, int64_t rows,
                   int64_t n, bool print) {
  int64_t bad = 0;
  for (int64_t t = 0; t < rows; ++t) {
    for (int64_t j = 0; j < n; ++j) {
      const double got = y[t * ldy + j], want = ref.y[t * n + j], tol = ref.tol[t * n + j];
      if (!(std::fabs(got - want) <= tol)) {
        if (print && bad < 5) {
          ADD_FAILURE() << "y[" << t << "," << j << "] = " << got << ", want " << want << " +- "
                        << tol;
        }
        ++bad;
      }
    }
  }
  return bad;
}

class QuantMatmulTest : public testing::TestWithParam<QType> {};

TEST_P(QuantMatmulTest, MatchesReferenceOnEveryIsa) {
  const QType type = GetParam();
  const bool kq = type == QType::kQ4_K || type == QType::kQ6_K;
  std::vector<int64_t> ks = {32, 96, 256, 4096};
  if (kq) ks = {256, 512, 4096};
  if (type == QType::kQ4_0R || type == QType::kQ8_0R) ks = {128, 384, 4096};  // whole groups of four blocks
  // Panel types: a long k with an odd number of blocks (the decode kernel's fallback).
  if (quant::is_panel_type(type)) ks.push_back(32 * 131);
  if (type == QType::kF32 || type == QType::kF16 || type == QType::kBF16) ks.push_back(19);
  ThreadPool pool2(2);
  const Dist dists[] = {Dist::kNormal, Dist::kUniform, Dist::kOutliers, Dist::kZeroBlocks};
  int combo = 0;
  for (int64_t k : ks) {
    // Panel types: whole 16-row panels, an odd number of them too (a single-panel tile at the end).
    const std::vector<int64_t> ns = quant::is_panel_type(type) ? std::vector<int64_t>{16, 48, 64, 272}
                                                           : std::vector<int64_t>{1, 5, 64, 257};
    for (int64_t n : ns) {
      const Dist wdist = dists[(combo + n) % 4];
      const Weights w = make_weights(type, n, k, wdist, static_cast<uint32_t>(1000 + k * 7 + n));
      for (int64_t rows : {1, 3, 7, 64, 129}) {
        ++combo;
        if (k == 4096 && rows * n > 64 * 64 && combo % 2 == 0) continue;  // keep the test short
        const bool padded = combo % 3 == 0;
        const bool with_bias = combo % 2 == 0, with_residual = combo % 4 < 2;
        const int64_t ldx = k + (padded ? 5 : 0), ldy = n + (padded ? 3 : 0);
        const int64_t ldr = n + (combo % 5 == 0 ? 7 : 0);
        std::mt19937 g(static_cast<uint32_t>(combo * 31 + 7));
        std::vector<float> x(rows * ldx), bias(n), residual(rows * ldr);
        fill(g, dists[combo % 4], x.data(), static_cast<int64_t>(x.size()));
        fill(g, Dist::kNormal, bias.data(), n);
        fill(g, Dist::kNormal, residual.data(), static_cast<int64_t>(residual.size()));
        const float* bp = with_bias ? bias.data() : nullptr;
        const float* rp = with_residual ? residual.data() : nullptr;
        const Reference ref = reference(w.deq, type, n, k, x.data(), rows, ldx, bp, rp, ldr);
        std::vector<float> scalar_y;
        for (Isa isa : isas()) {
          SCOPED_TRACE(testing::Message() << quant::qtype_name(type) << " " << isa_name(isa)
                                          << " rows=" << rows << " n=" << n << " k=" << k
                                          << " bias=" << with_bias << " res=" << with_residual);
          std::vector<float> y(rows * ldy, -7.0f);
          ThreadPool* pool = combo % 2 ? &pool2 : nullptr;
          quant_matmul_for_isa(isa, w.view(), x.data(), rows, ldx, y.data(), ldy, bp, rp, ldr,
                               pool);
          EXPECT_EQ(violations(y, ldy, ref, rows, n, true), 0);
          // The padding between rows of y stays untouched.
          for (int64_t t = 0; t < rows; ++t) {
            for (int64_t j = n; j < ldy; ++j) ASSERT_EQ(y[t * ldy + j], -7.0f);
          }
          if (isa == Isa::kScalar) {
            scalar_y = y;
          } else if (quantizes_activations(type)) {
            // Same quantized activations, exact integer products: only the fp32 sums differ.
            for (int64_t t = 0; t < rows; ++t) {
              for (int64_t j = 0; j < n; ++j) {
                const double tol = 2e-5 * ref.mag[t * n + j] + 1e-30;
                ASSERT_NEAR(y[t * ldy + j], scalar_y[t * ldy + j], tol) << t << "," << j;
              }
            }
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(QuantMatmul, QuantMatmulTest,
                         testing::Values(QType::kF32, QType::kF16, QType::kBF16, QType::kQ8_0,
                                         QType::kQ4_0, QType::kQ4_K, QType::kQ6_K, QType::kQ4_0R,
                                         QType::kQ8_0R, QType::kQ4_0C, QType::kQ8_0C),
                         [](const testing::TestParamInfo<QType>& info) {
                           return std::string(quant::qtype_name(info.param));
                         });

// The tolerance can fail: Q4_0 weights with the nibbles of every byte swapped, or Q8_0 weights
// whose scales the kernel would ignore (all set to 1), break it for most outputs.
TEST(QuantMatmulBoundTest, CatchesSwappedNibblesAndMissingScales) {
  const int64_t n = 64, k = 256, rows = 4;
  std::mt19937 g(5);
  std::vector<float> x(rows * k);
  fill(g, Dist::kNormal, x.data(), rows * k);
  for (QType type : {QType::kQ4_0, QType::kQ8_0}) {
    const Weights w = make_weights(type, n, k, Dist::kNormal, 77);
    const Reference ref = reference(w.deq, type, n, k, x.data(), rows, k, nullptr, nullptr, 0);
    Weights broken = w;
    const int64_t bb = quant::block_bytes(type);
    for (int64_t off = 0; off < static_cast<int64_t>(broken.data.size()); off += bb) {
      if (type == QType::kQ4_0) {
        for (int i = 2; i < bb; ++i) {
          uint8_t& v = broken.data[off + i];
          v = static_cast<uint8_t>((v << 4) | (v >> 4));
        }
      } else {
        const uint16_t one = quant::float_to_fp16(1.0f);
        std::memcpy(&broken.data[off], &one, 2);
      }
    }
    for (Isa isa : isas()) {
      std::vector<float> y(rows * n);
      quant_matmul_for_isa(isa, w.view(), x.data(), rows, k, y.data(), n, nullptr, nullptr, 0,
                           nullptr);
      EXPECT_EQ(violations(y, n, ref, rows, n, true), 0) << isa_name(isa);
      quant_matmul_for_isa(isa, broken.view(), x.data(), rows, k, y.data(), n, nullptr, nullptr,
                           0, nullptr);
      EXPECT_GT(violations(y, n, ref, rows, n, false), rows * n * 3 / 4)
          << quant::qtype_name(type) << " " << isa_name(isa);
    }
  }
}

// residual may be y itself (an in-place residual add).
TEST(QuantMatmulMiscTest, InPlaceResidualAndPathName) {
  const int64_t n = 40, k = 128, rows = 9;
  const Weights w = make_weights(QType::kQ4_0, n, k, Dist::kNormal, 3);
  std::mt19937 g(9);
  std::vector<float> x(rows * k), y(rows * n);
  fill(g, Dist::kNormal, x.data(), rows * k);
  fill(g, Dist::kNormal, y.data(), rows * n);
  const Reference ref = reference(w.deq, w.type, n, k, x.data(), rows, k, nullptr, y.data(), n);
  ThreadPool pool(2);
  quant_matmul(w.view(), x.data(), rows, k, y.data(), n, nullptr, y.data(), n, &pool);
  EXPECT_EQ(violations(y, n, ref, rows, n, true), 0);
  const std::string path = quant_matmul_path(QType::kQ4_0);
  EXPECT_TRUE(path == "avx512-vnni" || path == "avx2" || path == "scalar") << path;
  EXPECT_DEATH(quant_matmul(QuantWeight{QType::kQ8_0, 1, 48, w.data.data()}, x.data(), 1, k,
                            y.data(), n, nullptr, nullptr, 0, nullptr),
               "block size");
}

}  // namespace
}  // namespace tessera::native
