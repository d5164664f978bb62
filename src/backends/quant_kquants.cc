// ggml's K-quants, Q4_K and Q6_K: the block layouts bit for bit, dequantized exactly as ggml's
// reference code does. Quantization is simpler than ggml's (no iterative search for the best
// scale): Q4_K takes each sub-block's min / max, Q6_K maps each sub-block's signed value of largest
// magnitude to -32. Both produce valid blocks any ggml reader decodes the same way.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/quant_formats.h"
#include "ir/status.h"

namespace tessera::quant {

namespace {

constexpr int kQ4KSubBlocks = kQK_K / 32;  // 8 sub-blocks of 32, each a 6-bit scale and min
constexpr int kQ6KSubBlocks = kQK_K / 16;  // 16 sub-blocks of 16, each an int8 scale

// Sub-block j's 6-bit scale and min in Q4_K's 12 packed bytes: sub-blocks 0..3 keep theirs in the
// low 6 bits of bytes j (scale) and j + 4 (min); sub-blocks 4..7 keep their low 4 bits in the
// nibbles of byte j + 4 and their high 2 bits in the top bits of bytes j - 4 (scale) and j (min).
void q4_k_scale_min(int j, const uint8_t* q, int* scale, int* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

void pack_q4_k_scales(const uint8_t scale[kQ4KSubBlocks], const uint8_t min[kQ4KSubBlocks],
                      uint8_t out[12]) {
  std::memset(out, 0, 12);
  for (int j = 0; j < kQ4KSubBlocks; ++j) {
    if (j < 4) {
      out[j] |= scale[j];
      out[j + 4] |= min[j];
    } else {
      out[j + 4] = static_cast<uint8_t>((scale[j] & 0xF) | ((min[j] & 0xF) << 4));
      out[j - 4] |= static_cast<uint8_t>((scale[j] >> 4) << 6);
      out[j] |= static_cast<uint8_t>((min[j] >> 4) << 6);
    }
  }
}

int clamp_round(float v, int lo, int hi) {
  if (!(v == v)) return lo;  // NaN: the lowest code rather than UB in the conversion
  const float r = std::nearbyint(std::clamp(v, static_cast<float>(lo), static_cast<float>(hi)));
  return static_cast<int>(r);
}

}  // namespace

void quantize_q4_k(const float* x, int64_t n, BlockQ4_K* y) {
  TESSERA_CHECK(n % kQK_K == 0, "Q4_K row length is not a multiple of 256");
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float* xb = x + b * kQK_K;
    // Per sub-block: x ~ scale * q - neg_min, q in 0..15, with neg_min >= 0 (ggml keeps min <= 0).
    float scale[kQ4KSubBlocks], neg_min[kQ4KSubBlocks];
    float max_scale = 0.0f, max_neg_min = 0.0f;
    for (int j = 0; j < kQ4KSubBlocks; ++j) {
      float lo = xb[j * 32], hi = xb[j * 32];
      for (int i = 1; i < 32; ++i) {
        lo = std::min(lo, xb[j * 32 + i]);
        hi = std::max(hi, xb[j * 32 + i]);
      }
      lo = std::min(lo, 0.0f);
      scale[j] = (hi - lo) / 15.0f;
      neg_min[j] = -lo;
      max_scale = std::max(max_scale, scale[j]);
      max_neg_min = std::max(max_neg_min, neg_min[j]);
    }
    const float d = fp16_to_float(float_to_fp16(max_scale / 63.0f));
    const float dmin = fp16_to_float(float_to_fp16(max_neg_min / 63.0f));
    uint8_t ls[kQ4KSubBlocks], lm[kQ4KSubBlocks];
    for (int j = 0; j < kQ4KSubBlocks; ++j) {
      // The scale rounds up, so q = 15 still reaches the sub-block's max: the error stays within
      // half a step plus half of dmin instead of clamping values off the top.
      ls[j] = static_cast<uint8_t>(
          d > 0.0f ? std::min(63, clamp_round(std::ceil(scale[j] / d), 0, 63)) : 0);
      lm[j] = static_cast<uint8_t>(dmin > 0.0f ? clamp_round(neg_min[j] / dmin, 0, 63) : 0);
    }
    y[b].d = float_to_fp16(d);
    y[b].dmin = float_to_fp16(dmin);
    pack_q4_k_scales(ls, lm, y[b].scales);
    uint8_t q[kQK_K];
    for (int j = 0; j < kQ4KSubBlocks; ++j) {
      const float step = d * ls[j];
      const float offset = dmin * lm[j];
      for (int i = 0; i < 32; ++i) {
        q[j * 32 + i] = static_cast<uint8_t>(
            step > 0.0f ? clamp_round((xb[j * 32 + i] + offset) / step, 0, 15) : 0);
      }
    }
    // Each 32 bytes of qs hold two sub-blocks: the low nibbles one, the high nibbles the next.
    for (int j = 0; j < kQK_K; j += 64) {
      for (int l = 0; l < 32; ++l) {
        y[b].qs[j / 2 + l] = static_cast<uint8_t>(q[j + l] | (q[j + l + 32] << 4));
      }
    }
  }
}

void dequantize_q4_k(const BlockQ4_K* x, int64_t n, float* y) {
  TESSERA_CHECK(n % kQK_K == 0, "Q4_K row length is not a multiple of 256");
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float d = fp16_to_float(x[b].d);
    const float dmin = fp16_to_float(x[b].dmin);
    const uint8_t* q = x[b].qs;
    float* out = y + b * kQK_K;
    for (int j = 0; j < kQK_K; j += 64) {
      int sc, m;
      q4_k_scale_min(j / 32, x[b].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      q4_k_scale_min(j / 32 + 1, x[b].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) out[j + l] = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) out[j + 32 + l] = d2 * (q[l] >> 4) - m2;
      q += 32;
    }
  }
}

void quantize_q6_k(const float* x, int64_t n, BlockQ6_K* y) {
  TESSERA_CHECK(n % kQK_K == 0, "Q6_K row length is not a multiple of 256");
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float* xb = x + b * kQK_K;
    // Per sub-block of 16: scale = max / -32, where max is the signed value of largest magnitude,
    // so q = x / scale lies in -32..32 (32 clamped to 31).
    float scale[kQ6KSubBlocks];
    float max_scale = 0.0f, max_abs_scale = 0.0f;
    for (int j = 0; j < kQ6KSubBlocks; ++j) {
      float amax = 0.0f, max = 0.0f;
      for (int i = 0; i < 16; ++i) {
        const float v = xb[j * 16 + i];
        if (std::fabs(v) > amax) {
          amax = std::fabs(v);
          max = v;
        }
      }
      scale[j] = max / -32.0f;
      if (std::fabs(scale[j]) > max_abs_scale) {
        max_abs_scale = std::fabs(scale[j]);
        max_scale = scale[j];
      }
    }
    // The int8 sub-block scales: the largest maps to -128.
    const float d = fp16_to_float(float_to_fp16(max_scale / -128.0f));
    y[b].d = float_to_fp16(d);
    uint8_t q[kQK_K];
    for (int j = 0; j < kQ6KSubBlocks; ++j) {
      const int s = d != 0.0f ? clamp_round(scale[j] / d, -128, 127) : 0;
      y[b].scales[j] = static_cast<int8_t>(s);
      const float step = d * s;
      for (int i = 0; i < 16; ++i) {
        const int v = step != 0.0f ? clamp_round(xb[j * 16 + i] / step, -32, 31) : 0;
        q[j * 16 + i] = static_cast<uint8_t>(v + 32);
      }
    }
    // Each 128 values: ql holds the low nibbles of values l and l + 64 (l < 32) in one byte and of
    // l + 32 and l + 96 in another; qh holds the 2 high bits of l, l + 32, l + 64, l + 96.
    for (int j = 0; j < kQK_K; j += 128) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t q1 = q[j + l], q2 = q[j + l + 32], q3 = q[j + l + 64], q4 = q[j + l + 96];
        y[b].ql[j / 2 + l] = static_cast<uint8_t>((q1 & 0xF) | ((q3 & 0xF) << 4));
        y[b].ql[j / 2 + l + 32] = static_cast<uint8_t>((q2 & 0xF) | ((q4 & 0xF) << 4));
        y[b].qh[j / 4 + l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) |
                                                  ((q4 >> 4) << 6));
      }
    }
  }
}

void dequantize_q6_k(const BlockQ6_K* x, int64_t n, float* y) {
  TESSERA_CHECK(n % kQK_K == 0, "Q6_K row length is not a multiple of 256");
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float d = fp16_to_float(x[b].d);
    const uint8_t* ql = x[b].ql;
    const uint8_t* qh = x[b].qh;
    const int8_t* sc = x[b].scales;
    float* out = y + b * kQK_K;
    for (int j = 0; j < kQK_K; j += 128) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        out[j + l] = d * sc[is + 0] * q1;
        out[j + l + 32] = d * sc[is + 2] * q2;
        out[j + l + 64] = d * sc[is + 4] * q3;
        out[j + l + 96] = d * sc[is + 6] * q4;
      }
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
}

}  // namespace tessera::quant
