#include "backends/quant_formats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace tessera::quant {
namespace {

// Seeded rows of several distributions; "scaled" varies the magnitude from block to block.
enum class Dist { kGaussian, kUniform, kPositive, kScaled };

std::vector<float> random_row(Dist dist, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::uniform_real_distribution<float> positive(1.0f, 3.0f);
  std::uniform_real_distribution<float> log_scale(-4.0f, 4.0f);
  std::vector<float> x(n);
  float scale = 1.0f;
  for (int64_t i = 0; i < n; ++i) {
    switch (dist) {
      case Dist::kGaussian: x[i] = normal(rng); break;
      case Dist::kUniform: x[i] = uniform(rng); break;
      case Dist::kPositive: x[i] = positive(rng); break;
      case Dist::kScaled:
        if (i % 32 == 0) scale = std::exp(log_scale(rng));
        x[i] = scale * normal(rng);
        break;
    }
  }
  return x;
}

std::vector<float> round_trip(QType t, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(row_bytes(t, n));
  quantize_row(t, x.data(), n, q.data());
  std::vector<float> y(n);
  dequantize_row(t, q.data(), n, y.data());
  return y;
}

float amax_of(const float* x, int n) {
  float m = 0.0f;
  for (int i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}

double relative_rmse(const std::vector<float>& x, const std::vector<float>& y) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    err += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    ref += double(x[i]) * x[i];
  }
  return std::sqrt(err / ref);
}

constexpr Dist kDists[] = {Dist::kGaussian, Dist::kUniform, Dist::kPositive, Dist::kScaled};
constexpr int64_t kLengths[] = {256, 768, 4096};
// fp16 scales carry a relative error of up to 2^-11.
constexpr float kHalfEps = 1.0f / 2048.0f;

TEST(QuantFormatsTest, NamesAndGgmlNumbers) {
  EXPECT_EQ(qtype_from_name("Q4_K"), QType::kQ4_K);
  EXPECT_EQ(qtype_from_name("q6_k"), QType::kQ6_K);
  EXPECT_EQ(qtype_from_name("BF16"), QType::kBF16);
  EXPECT_EQ(qtype_from_name("f32"), QType::kF32);
  EXPECT_EQ(qtype_from_name("q4_1"), std::nullopt);
  EXPECT_EQ(qtype_from_name(""), std::nullopt);
  EXPECT_EQ(qtype_from_ggml(0), QType::kF32);
  EXPECT_EQ(qtype_from_ggml(1), QType::kF16);
  EXPECT_EQ(qtype_from_ggml(2), QType::kQ4_0);
  EXPECT_EQ(qtype_from_ggml(8), QType::kQ8_0);
  EXPECT_EQ(qtype_from_ggml(12), QType::kQ4_K);
  EXPECT_EQ(qtype_from_ggml(14), QType::kQ6_K);
  EXPECT_EQ(qtype_from_ggml(30), QType::kBF16);
  EXPECT_EQ(qtype_from_ggml(3), std::nullopt);   // Q4_1
  EXPECT_EQ(qtype_from_ggml(13), std::nullopt);  // Q5_K
  EXPECT_EQ(qtype_from_ggml(0xFFFFFFFF), std::nullopt);
  for (QType t : {QType::kF32, QType::kF16, QType::kBF16, QType::kQ8_0, QType::kQ4_0, QType::kQ4_K,
                  QType::kQ6_K}) {
    EXPECT_EQ(qtype_from_name(qtype_name(t)), t);
  }
}

TEST(QuantFormatsTest, RowBytes) {
  EXPECT_EQ(row_bytes(QType::kF32, 10), 40);
  EXPECT_EQ(row_bytes(QType::kF16, 10), 20);
  EXPECT_EQ(row_bytes(QType::kBF16, 10), 20);
  EXPECT_EQ(row_bytes(QType::kQ8_0, 64), 68);
  EXPECT_EQ(row_bytes(QType::kQ4_0, 64), 36);
  EXPECT_EQ(row_bytes(QType::kQ4_K, 512), 288);
  EXPECT_EQ(row_bytes(QType::kQ6_K, 768), 630);
  EXPECT_EQ(block_elements(QType::kQ4_K), 256);
  EXPECT_EQ(block_bytes(QType::kQ6_K), 210);
}

TEST(QuantFormatsTest, FloatTypesRoundTrip) {
  for (int64_t n : kLengths) {
    const std::vector<float> x = random_row(Dist::kScaled, n, 7 + n);
    EXPECT_EQ(round_trip(QType::kF32, x), x);
    const std::vector<float> h = round_trip(QType::kF16, x);
    const std::vector<float> b = round_trip(QType::kBF16, x);
    for (int64_t i = 0; i < n; ++i) {
      // Round to nearest: half an ulp, 2^-11 for f16 (normal range), 2^-8 for bf16.
      EXPECT_LE(std::fabs(h[i] - x[i]), std::fabs(x[i]) * kHalfEps + 6e-8f) << i;
      EXPECT_LE(std::fabs(b[i] - x[i]), std::fabs(x[i]) / 256.0f) << i;
    }
  }
}

TEST(QuantFormatsTest, Q8_0RoundTripWithinHalfStep) {
  for (Dist dist : kDists) {
    for (int64_t n : kLengths) {
      const std::vector<float> x = random_row(dist, n, 100 + n);
      const std::vector<float> y = round_trip(QType::kQ8_0, x);
      for (int64_t b = 0; b < n / 32; ++b) {
        const float d = amax_of(&x[b * 32], 32) / 127.0f;
        for (int i = 0; i < 32; ++i) {
          // Half a step, plus the fp16 rounding of d times |q| <= 127.
          EXPECT_LE(std::fabs(y[b * 32 + i] - x[b * 32 + i]), d * (0.5f + 127 * kHalfEps) + 1e-9f);
        }
      }
      EXPECT_LT(relative_rmse(x, y), 0.01);
    }
  }
}

TEST(QuantFormatsTest, Q4_0RoundTripWithinHalfStep) {
  for (Dist dist : kDists) {
    for (int64_t n : kLengths) {
      const std::vector<float> x = random_row(dist, n, 200 + n);
      const std::vector<float> y = round_trip(QType::kQ4_0, x);
      for (int64_t b = 0; b < n / 32; ++b) {
        const float d = amax_of(&x[b * 32], 32) / 8.0f;
        for (int i = 0; i < 32; ++i) {
          // q = 16 (the far end opposite the largest value) clamps to 15: a whole step there.
          const float xi = x[b * 32 + i];
          const float max_err = std::fabs(xi) > 7.5f * d ? d : 0.5f * d;
          EXPECT_LE(std::fabs(y[b * 32 + i] - xi), max_err + 8 * d * kHalfEps + 1e-9f);
        }
      }
      EXPECT_LT(relative_rmse(x, y), dist == Dist::kPositive ? 0.1 : 0.2);
    }
  }
}

TEST(QuantFormatsTest, Q4_KRoundTrip) {
  for (Dist dist : kDists) {
    for (int64_t n : kLengths) {
      const std::vector<float> x = random_row(dist, n, 300 + n);
      const std::vector<float> y = round_trip(QType::kQ4_K, x);
      for (int64_t b = 0; b < n / 256; ++b) {
        const float* xb = &x[b * 256];
        // The sub-block's step is its range / 15 (the range reaches down to 0 at least), rounded
        // up to a multiple of d = max step / 63; its min is off by up to dmin / 2.
        float lo[8], hi[8], max_step = 0, max_neg_min = 0;
        for (int j = 0; j < 8; ++j) {
          lo[j] = std::min(0.0f, *std::min_element(xb + j * 32, xb + j * 32 + 32));
          hi[j] = *std::max_element(xb + j * 32, xb + j * 32 + 32);
          max_step = std::max(max_step, (hi[j] - lo[j]) / 15);
          max_neg_min = std::max(max_neg_min, -lo[j]);
        }
        const float d = max_step / 63 * (1 + 2 * kHalfEps);
        const float dmin = max_neg_min / 63 * (1 + 2 * kHalfEps);
        for (int j = 0; j < 8; ++j) {
          const float step = (hi[j] - lo[j]) / 15 + d;
          const float bound = 0.5f * step + 0.5f * dmin + 0.01f * max_step + 1e-6f;
          for (int i = 0; i < 32; ++i) {
            const int64_t k = b * 256 + j * 32 + i;
            EXPECT_LE(std::fabs(y[k] - x[k]), bound) << "element " << k;
          }
        }
      }
      EXPECT_LT(relative_rmse(x, y), 0.12);
    }
  }
}

TEST(QuantFormatsTest, Q6_KRoundTrip) {
  for (Dist dist : kDists) {
    for (int64_t n : kLengths) {
      const std::vector<float> x = random_row(dist, n, 400 + n);
      const std::vector<float> y = round_trip(QType::kQ6_K, x);
      for (int64_t b = 0; b < n / 256; ++b) {
        const float block_amax = amax_of(&x[b * 256], 256);
        for (int j = 0; j < 16; ++j) {
          // Half a step of amax / 32, a whole step where +32 clamps to 31, and the rounding of
          // the int8 scale (d = block amax / 4096) times |q| <= 32.
          const float bound = amax_of(&x[b * 256 + j * 16], 16) / 32 + block_amax / 200 + 1e-9f;
          for (int i = 0; i < 16; ++i) {
            const int64_t k = b * 256 + j * 16 + i;
            EXPECT_LE(std::fabs(y[k] - x[k]), bound) << "element " << k;
          }
        }
      }
      EXPECT_LT(relative_rmse(x, y), 0.04);
    }
  }
}

TEST(QuantFormatsTest, ZeroRowsStayZero) {
  for (QType t : {QType::kQ8_0, QType::kQ4_0, QType::kQ4_K, QType::kQ6_K}) {
    const std::vector<float> x(512, 0.0f);
    EXPECT_EQ(round_trip(t, x), x) << qtype_name(t);
  }
}

// Hand-built blocks: the expected values follow from the byte layout alone.

TEST(QuantFormatsTest, Q8_0KnownBlock) {
  alignas(16) uint8_t block[34];
  block[0] = 0x00;  // d = fp16 0x3400 = 0.25
  block[1] = 0x34;
  for (int i = 0; i < 32; ++i)
    block[2 + i] = static_cast<uint8_t>(i * 8);  // int8: i*8 - 256*(i>=16)
  float y[32];
  dequantize_row(QType::kQ8_0, block, 32, y);
  for (int i = 0; i < 32; ++i) {
    const int q = i < 16 ? i * 8 : i * 8 - 256;
    EXPECT_EQ(y[i], 0.25f * q) << i;
  }
  EXPECT_EQ(y[1], 2.0f);
  EXPECT_EQ(y[16], -32.0f);
  EXPECT_EQ(y[31], -2.0f);
}

TEST(QuantFormatsTest, Q4_0KnownBlock) {
  alignas(16) uint8_t block[18];
  block[0] = 0x00;  // d = fp16 0x3800 = 0.5
  block[1] = 0x38;
  for (int i = 0; i < 16; ++i) block[2 + i] = static_cast<uint8_t>((i << 4) | (15 - i));
  float y[32];
  dequantize_row(QType::kQ4_0, block, 32, y);
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(y[i], 0.5f * (7 - i)) << i;       // low nibble 15 - i, minus 8
    EXPECT_EQ(y[i + 16], 0.5f * (i - 8)) << i;  // high nibble i, minus 8
  }
  EXPECT_EQ(y[0], 3.5f);
  EXPECT_EQ(y[16], -4.0f);
}

TEST(QuantFormatsTest, Q4_KKnownBlock) {
  alignas(16) uint8_t block[144] = {};
  block[0] = 0x00;  // d = 1.0
  block[1] = 0x3C;
  block[2] = 0x00;  // dmin = 0.5
  block[3] = 0x38;
  uint8_t* scales = block + 4;
  // Sub-blocks 0..3: scale = low 6 bits of bytes 0..3, min = low 6 bits of bytes 4..7.
  scales[0] = 0x41;  // scale 1; top bits 01 become bits 4..5 of sub-block 4's scale
  scales[1] = 2;
  scales[2] = 3;
  scales[3] = 4;
  scales[4] = 0x85;  // min 5; top bits 10 become bits 4..5 of sub-block 4's min
  scales[5] = 6;
  scales[6] = 7;
  scales[7] = 8;
  scales[8] = 0x21;  // sub-block 4: scale low nibble 1, min low nibble 2
  // Sub-blocks 5..7: all zero. So (scale, min) = (1,5) (2,6) (3,7) (4,8) (17,34) (0,0)x3.
  const int sc[8] = {1, 2, 3, 4, 17, 0, 0, 0};
  const int mn[8] = {5, 6, 7, 8, 34, 0, 0, 0};
  uint8_t* qs = block + 16;
  for (int l = 0; l < 128; ++l) qs[l] = static_cast<uint8_t>((l & 15) | (((l + 1) & 15) << 4));
  float y[256];
  dequantize_row(QType::kQ4_K, block, 256, y);
  for (int e = 0; e < 256; ++e) {
    // Each 64 values use 32 bytes: the first 32 values the low nibbles, the next 32 the high.
    const int pair = e / 64, w = e % 64;
    const uint8_t byte = qs[pair * 32 + w % 32];
    const int q = w < 32 ? (byte & 15) : (byte >> 4);
    EXPECT_EQ(y[e], 1.0f * sc[e / 32] * q - 0.5f * mn[e / 32]) << e;
  }
  EXPECT_EQ(y[0], -2.5f);    // q 0: -0.5 * 5
  EXPECT_EQ(y[32], -1.0f);   // q 1 (high nibble of byte 0): 2 * 1 - 0.5 * 6
  EXPECT_EQ(y[133], 68.0f);  // sub-block 4, q 5: 17 * 5 - 0.5 * 34
  EXPECT_EQ(y[200], 0.0f);   // sub-block 6: scale and min 0
}

TEST(QuantFormatsTest, Q6_KKnownBlock) {
  alignas(16) uint8_t block[210];
  uint8_t* ql = block;
  uint8_t* qh = block + 128;
  auto* scales = reinterpret_cast<int8_t*>(block + 192);
  for (int i = 0; i < 128; ++i) ql[i] = static_cast<uint8_t>(i * 7 + 3);
  for (int i = 0; i < 64; ++i) qh[i] = static_cast<uint8_t>(i * 37 + 11);
  for (int i = 0; i < 16; ++i) scales[i] = static_cast<int8_t>(i - 8);
  block[208] = 0x00;  // d = 0.5
  block[209] = 0x38;
  float y[256];
  dequantize_row(QType::kQ6_K, block, 256, y);
  for (int e = 0; e < 256; ++e) {
    // Each half of 128 values: 64 bytes of ql, 32 of qh, 8 scales. Quarter k of the half takes
    // its low 4 bits from ql[l] (k = 0, 2: low / high nibble) or ql[l + 32] (k = 1, 3), its high
    // 2 bits from bits 2k..2k+1 of qh[l], and scale 2k + l / 16.
    const int half = e / 128, k = (e % 128) / 32, l = e % 32;
    const uint8_t lo_byte = ql[half * 64 + l + (k % 2) * 32];
    const int lo = k < 2 ? (lo_byte & 15) : (lo_byte >> 4);
    const int hi = (qh[half * 32 + l] >> (2 * k)) & 3;
    const int q = (lo | (hi << 4)) - 32;
    EXPECT_EQ(y[e], 0.5f * scales[half * 8 + 2 * k + l / 16] * q) << e;
  }
  // e = 0: ql[0] = 3, qh[0] = 11 -> high bits 3: q = 51 - 32 = 19, scale -8.
  EXPECT_EQ(y[0], 0.5f * -8 * 19);
}

}  // namespace
}  // namespace tessera::quant

namespace tessera::quant {
namespace {

// q4_0r regroups Q4_0 blocks in fours, bytes for bytes: the same values, in place or not.
TEST(QuantFormatsRegrouped, Q4_0RHoldsTheSameValuesAsQ4_0) {
  EXPECT_EQ(row_bytes(QType::kQ4_0R, 256), row_bytes(QType::kQ4_0, 256));
  EXPECT_EQ(std::string(qtype_name(QType::kQ4_0R)), "q4_0r");
  EXPECT_FALSE(qtype_from_ggml(static_cast<uint32_t>(QType::kQ4_0R)).has_value());
  for (int64_t n : {128, 384, 2048}) {
    std::vector<float> x(n), a(n), b(n), c(n);
    for (int64_t i = 0; i < n; ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * (1.0f + static_cast<float>(i % 7));
    std::vector<uint8_t> q4(row_bytes(QType::kQ4_0, n)), r(q4.size()), direct(q4.size());
    quantize_row(QType::kQ4_0, x.data(), n, q4.data());
    repack_q4_0_to_q4_0r(q4.data(), n, r.data());
    quantize_row(QType::kQ4_0R, x.data(), n, direct.data());
    EXPECT_EQ(r, direct);
    EXPECT_NE(r, q4);  // really regrouped
    dequantize_row(QType::kQ4_0, q4.data(), n, a.data());
    dequantize_row(QType::kQ4_0R, r.data(), n, b.data());
    EXPECT_EQ(a, b);
    repack_q4_0_to_q4_0r(q4.data(), n, q4.data());  // in place
    EXPECT_EQ(q4, r);
    dequantize_row(QType::kQ4_0R, q4.data(), n, c.data());
    EXPECT_EQ(a, c);
  }
}

// q4_0c / q8_0c: 16-row panels in the same bytes as the Q4_0 / Q8_0 rows; every row reads back
// (block by block and dequantized) as it was, and the bytes sit where the kernel loads them (load
// m, lane i = row i's quant bytes 4m..4m+3; q8_0c's as q + 128).
TEST(QuantFormatsRegrouped, PanelTypesHoldTheSameRowsAsTheirRowTypes) {
  for (QType panel_type : {QType::kQ4_0C, QType::kQ8_0C}) {
    const bool q4 = panel_type == QType::kQ4_0C;
    const QType row_type = q4 ? QType::kQ4_0 : QType::kQ8_0;
    SCOPED_TRACE(qtype_name(panel_type));
    EXPECT_TRUE(is_panel_type(panel_type));
    EXPECT_FALSE(is_panel_type(row_type));
    EXPECT_EQ(row_bytes(panel_type, 256), row_bytes(row_type, 256));
    EXPECT_EQ(std::string(qtype_name(panel_type)), q4 ? "q4_0c" : "q8_0c");
    EXPECT_FALSE(qtype_from_ggml(static_cast<uint32_t>(panel_type)).has_value());
    for (auto [rows, k] : {std::pair<int64_t, int64_t>{16, 32}, {48, 96}, {32, 2048}, {32, 2144}, {32, 5632}, {32, 32 * 193}}) {
      const int64_t rb = row_bytes(row_type, k), bb = rb / (k / 32), blocks = k / 32;
      std::vector<float> x(k), want(rows * k), got(k);
      std::vector<uint8_t> plain(rows * rb);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t i = 0; i < k; ++i) x[i] = std::sin(0.37f * static_cast<float>(i + 11 * r)) * (1.0f + static_cast<float>((i + r) % 7));
        quantize_row(row_type, x.data(), k, plain.data() + r * rb);
        dequantize_row(row_type, plain.data() + r * rb, k, want.data() + r * k);
      }
      std::vector<uint8_t> c = plain;
      if (q4) repack_q4_0_to_q4_0c(c.data(), rows, k);
      if (!q4) repack_q8_0_to_q8_0c(c.data(), rows, k);
      EXPECT_NE(c, plain);  // really repacked
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t b = 0; b < blocks; ++b) {
          const uint8_t* orig = plain.data() + r * rb + b * bb;
          if (q4) {
            const BlockQ4_0 back = q4_0c_block(c.data(), rows, k, r, b);
            ASSERT_EQ(0, std::memcmp(&back, orig, sizeof(back))) << r << "," << b;
          } else {
            const BlockQ8_0 back = q8_0c_block(c.data(), rows, k, r, b);
            ASSERT_EQ(0, std::memcmp(&back, orig, sizeof(back))) << r << "," << b;
          }
        }
        dequantize_weight_row(panel_type, c.data(), rows, r, k, got.data());
        EXPECT_EQ(std::vector<float>(want.begin() + r * k, want.begin() + (r + 1) * k), got) << r;
        // Row-contiguous types read through the same call.
        dequantize_weight_row(row_type, plain.data(), rows, r, k, got.data());
        EXPECT_EQ(std::vector<float>(want.begin() + r * k, want.begin() + (r + 1) * k), got) << r;
      }
      // Where the bytes sit, written out by hand (offsets from the matrix's start): panel after
      // panel, each in its 16 rows' bytes; in a panel, blocks in pairs, the pair's quants (QS bytes
      // per block) and then its scales (32 bytes per block), an odd last block alone.
      const int64_t qs_bytes = q4 ? 256 : 512, bb16 = qs_bytes + 32;
      auto expect_at = [&](int64_t row, int64_t b, int64_t quants, int64_t scales) {
        SCOPED_TRACE("row " + std::to_string(row) + ", block " + std::to_string(b));
        const uint8_t* orig = plain.data() + row * rb + b * bb;
        const int lane = static_cast<int>(row % 16);
        EXPECT_EQ(0, std::memcmp(c.data() + scales + 2 * lane, orig, 2));
        // Load 2, the row's lane: its quant bytes 8..11 (q8_0c: as q + 128).
        const uint8_t* got4 = c.data() + quants + 2 * 64 + 4 * lane;
        for (int e = 0; e < 4; ++e) {
          EXPECT_EQ(got4[e], q4 ? orig[2 + 8 + e] : static_cast<uint8_t>(orig[2 + 8 + e] + 128));
        }
      };
      const int64_t panel_bytes = 16 * rb;
      const bool cut = blocks > kPanelSegmentMaxBlocks;
      if (rows >= 32 && blocks >= 2 && !cut) expect_at(21, 1, panel_bytes + qs_bytes, panel_bytes + 2 * qs_bytes + 32);
      if (blocks >= 3 && !cut) {
        const int64_t last = (rows / 16 - 1) * panel_bytes;
        expect_at(rows - 1, 2, last + 2 * bb16, last + 2 * bb16 + (blocks >= 4 ? 2 : 1) * qs_bytes);
      }
      if (blocks == 67) {  // k = 2144, 32 rows: 33 pairs and an odd last block per panel
        ASSERT_EQ(rows, 32);
        expect_at(3, 64, 64 * bb16, 64 * bb16 + 2 * qs_bytes);                                // panel 0, pair 32
        expect_at(21, 65, panel_bytes + 64 * bb16 + qs_bytes, panel_bytes + 64 * bb16 + 2 * qs_bytes + 32);
        expect_at(31, 66, panel_bytes + 66 * bb16, panel_bytes + 66 * bb16 + qs_bytes);       // panel 1, odd last
      }
      // Rows cut into segments of 64 blocks, each segment a panel matrix of its own (two panels).
      if (blocks == 176) {  // k = 5632: segments of 64, 64 and 48 blocks
        ASSERT_EQ(rows, 32);
        expect_at(21, 1, 64 * bb16 + qs_bytes, 64 * bb16 + 2 * qs_bytes + 32);     // segment 0, panel 1
        expect_at(21, 90, 218 * bb16, 218 * bb16 + 2 * qs_bytes);                   // segment 1 at 128 blocks, panel 1 at 64 more, pair 13
        expect_at(3, 130, 258 * bb16, 258 * bb16 + 2 * qs_bytes);                   // segment 2 at 256 blocks, panel 0, pair 1
        expect_at(31, 175, (256 + 48 + 46) * bb16 + qs_bytes, (256 + 48 + 46) * bb16 + 2 * qs_bytes + 32);
      }
      if (blocks == 193) {  // segments of 64, 64, 64 and a single block
        ASSERT_EQ(rows, 32);
        expect_at(31, 192, 385 * bb16, 385 * bb16 + qs_bytes);
      }
      // With k a multiple of 64 every block's quants start on a 64-byte line.
      if (k % 64 == 0) {
        for (int64_t panel = 0; panel < rows / 16; ++panel) {
          for (int64_t b = 0; b < blocks; ++b) {
            EXPECT_EQ(0, panel_block_offsets(panel, rows / 16, b, blocks, qs_bytes).quants % 64) << panel << "," << b;
          }
        }
      }
    }
  }
}

// q8_0r: the same values as Q8_0, bytes for bytes, in place or not; quants stored as q + 128, the
// first halves of the four blocks before the second halves.
TEST(QuantFormatsRegrouped, Q8_0RHoldsTheSameValuesAsQ8_0) {
  EXPECT_EQ(row_bytes(QType::kQ8_0R, 256), row_bytes(QType::kQ8_0, 256));
  EXPECT_EQ(std::string(qtype_name(QType::kQ8_0R)), "q8_0r");
  EXPECT_FALSE(qtype_from_ggml(static_cast<uint32_t>(QType::kQ8_0R)).has_value());
  for (int64_t n : {128, 384, 2048}) {
    std::vector<float> x(n), a(n), b(n), c(n);
    for (int64_t i = 0; i < n; ++i) x[i] = std::cos(0.29f * static_cast<float>(i)) * (1.0f + static_cast<float>(i % 5));
    std::vector<uint8_t> q8(row_bytes(QType::kQ8_0, n)), r(q8.size()), direct(q8.size());
    quantize_row(QType::kQ8_0, x.data(), n, q8.data());
    repack_q8_0_to_q8_0r(q8.data(), n, r.data());
    quantize_row(QType::kQ8_0R, x.data(), n, direct.data());
    EXPECT_EQ(r, direct);
    const auto* blocks = reinterpret_cast<const BlockQ8_0*>(q8.data());
    const auto* groups = reinterpret_cast<const BlockQ8_0x4*>(r.data());
    EXPECT_EQ(groups[0].d[2], blocks[2].d);
    EXPECT_EQ(groups[0].lo[1][3], static_cast<uint8_t>(blocks[1].qs[3] + 128));
    EXPECT_EQ(groups[0].hi[3][15], static_cast<uint8_t>(blocks[3].qs[31] + 128));
    for (int64_t blk = 0; blk < n / 32; ++blk) {
      const BlockQ8_0 back = q8_0r_block(r.data(), blk);
      EXPECT_EQ(0, std::memcmp(&back, &blocks[blk], sizeof(back))) << blk;
    }
    dequantize_row(QType::kQ8_0, q8.data(), n, a.data());
    dequantize_row(QType::kQ8_0R, r.data(), n, b.data());
    EXPECT_EQ(a, b);
    repack_q8_0_to_q8_0r(q8.data(), n, q8.data());  // in place
    EXPECT_EQ(q8, r);
    dequantize_row(QType::kQ8_0R, q8.data(), n, c.data());
    EXPECT_EQ(a, c);
  }
}

}  // namespace
}  // namespace tessera::quant
