#include "backends/quant_formats.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <vector>

#include "ir/status.h"

namespace tessera::quant {

namespace {

struct TypeInfo {
  QType type;
  const char* name;
  int64_t block_elements;
  int64_t block_bytes;
};

constexpr TypeInfo kTypes[] = {
    {QType::kF32, "f32", 1, 4},
    {QType::kF16, "f16", 1, 2},
    {QType::kBF16, "bf16", 1, 2},
    {QType::kQ8_0, "q8_0", kQK8_0, sizeof(BlockQ8_0)},
    {QType::kQ4_0, "q4_0", kQK4_0, sizeof(BlockQ4_0)},
    {QType::kQ4_K, "q4_k", kQK_K, sizeof(BlockQ4_K)},
    {QType::kQ6_K, "q6_k", kQK_K, sizeof(BlockQ6_K)},
    {QType::kQ4_0R, "q4_0r", 4 * kQK4_0, sizeof(BlockQ4_0x4)},
    {QType::kQ8_0R, "q8_0r", 4 * kQK8_0, sizeof(BlockQ8_0x4)},
    {QType::kQ4_0C, "q4_0c", kQK4_0, sizeof(BlockQ4_0)},
    {QType::kQ8_0C, "q8_0c", kQK8_0, sizeof(BlockQ8_0)},
};

const TypeInfo& info(QType t) {
  for (const TypeInfo& i : kTypes) {
    if (i.type == t) return i;
  }
  TESSERA_CHECK(false, "unknown QType");
  return kTypes[0];
}

void quantize_q8_0(const float* x, int64_t n, BlockQ8_0* y) {
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    const float* xb = x + b * kQK8_0;
    float amax = 0.0f;
    for (int i = 0; i < kQK8_0; ++i) amax = std::max(amax, std::fabs(xb[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = float_to_fp16(d);
    for (int i = 0; i < kQK8_0; ++i) y[b].qs[i] = static_cast<int8_t>(std::lround(xb[i] * id));
  }
}

void quantize_q4_0(const float* x, int64_t n, BlockQ4_0* y) {
  for (int64_t b = 0; b < n / kQK4_0; ++b) {
    const float* xb = x + b * kQK4_0;
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < kQK4_0; ++i) {
      if (std::fabs(xb[i]) > amax) {
        amax = std::fabs(xb[i]);
        max = xb[i];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = float_to_fp16(d);
    for (int i = 0; i < kQK4_0 / 2; ++i) {
      const int q0 = std::min(15, static_cast<int>(xb[i] * id + 8.5f));
      const int q1 = std::min(15, static_cast<int>(xb[i + kQK4_0 / 2] * id + 8.5f));
      y[b].qs[i] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void dequantize_q8_0(const BlockQ8_0* x, int64_t n, float* y) {
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    const float d = fp16_to_float(x[b].d);
    for (int i = 0; i < kQK8_0; ++i) y[b * kQK8_0 + i] = d * x[b].qs[i];
  }
}

void dequantize_q4_0(const BlockQ4_0* x, int64_t n, float* y) {
  for (int64_t b = 0; b < n / kQK4_0; ++b) {
    const float d = fp16_to_float(x[b].d);
    for (int i = 0; i < kQK4_0 / 2; ++i) {
      y[b * kQK4_0 + i] = d * ((x[b].qs[i] & 15) - 8);
      y[b * kQK4_0 + i + kQK4_0 / 2] = d * ((x[b].qs[i] >> 4) - 8);
    }
  }
}

}  // namespace

void repack_q4_0_to_q4_0r(const void* src, int64_t n, void* dst) {
  TESSERA_CHECK(n % (4 * kQK4_0) == 0, "q4_0r groups hold 128 values");
  const auto* in = static_cast<const BlockQ4_0*>(src);
  auto* out = static_cast<BlockQ4_0x4*>(dst);
  for (int64_t g = 0; g < n / (4 * kQK4_0); ++g) {
    BlockQ4_0x4 group;  // built aside: src and dst may be the same bytes
    for (int i = 0; i < 4; ++i) {
      group.d[i] = in[4 * g + i].d;
      std::memcpy(group.qs[i], in[4 * g + i].qs, sizeof(group.qs[i]));
    }
    std::memcpy(&out[g], &group, sizeof(group));
  }
}

void repack_q8_0_to_q8_0r(const void* src, int64_t n, void* dst) {
  TESSERA_CHECK(n % (4 * kQK8_0) == 0, "q8_0r groups hold 128 values");
  const auto* in = static_cast<const BlockQ8_0*>(src);
  auto* out = static_cast<BlockQ8_0x4*>(dst);
  for (int64_t g = 0; g < n / (4 * kQK8_0); ++g) {
    BlockQ8_0x4 group;  // built aside: src and dst may be the same bytes
    for (int i = 0; i < 4; ++i) {
      const BlockQ8_0& b = in[4 * g + i];
      group.d[i] = b.d;
      for (int e = 0; e < kQK8_0 / 2; ++e) {
        group.lo[i][e] = static_cast<uint8_t>(b.qs[e] + 128);
        group.hi[i][e] = static_cast<uint8_t>(b.qs[kQK8_0 / 2 + e] + 128);
      }
    }
    std::memcpy(&out[g], &group, sizeof(group));
  }
}

BlockQ8_0 q8_0r_block(const void* row, int64_t b) {
  const BlockQ8_0x4& g = static_cast<const BlockQ8_0x4*>(row)[b / 4];
  BlockQ8_0 block;
  block.d = g.d[b % 4];
  for (int e = 0; e < kQK8_0 / 2; ++e) {
    block.qs[e] = static_cast<int8_t>(g.lo[b % 4][e] - 128);
    block.qs[kQK8_0 / 2 + e] = static_cast<int8_t>(g.hi[b % 4][e] - 128);
  }
  return block;
}

namespace {
// Rows of Block (32 values each) to panels of 16: put(block's quants, its scales, i, row i's block)
// fills row i's share of one panel block.
template <class Block, class Quants, class Put>
void repack_to_panels(void* matrix, int64_t rows, int64_t k, Put put) {
  TESSERA_CHECK(rows % kPanelRows == 0 && k % 32 == 0, "panels hold 16 whole rows of 32-blocks");
  const int64_t blocks = k / 32, panels = rows / kPanelRows;
  // A panel takes the bytes its 16 rows had, unless the rows are cut into segments (then its
  // blocks spread over the matrix): rows are read from a copy of the panel, or of the matrix.
  const bool cut = panel_segment_blocks(blocks) < blocks;
  const auto* in = static_cast<const Block*>(matrix);
  std::vector<Block> copy(in, in + (cut ? panels : 1) * kPanelRows * blocks);
  auto* out = static_cast<uint8_t*>(matrix);
  for (int64_t p = 0; p < panels; ++p) {
    if (!cut && p > 0) std::copy(in + p * kPanelRows * blocks, in + (p + 1) * kPanelRows * blocks, copy.begin());
    const Block* panel_rows = copy.data() + (cut ? p * kPanelRows * blocks : 0);
    for (int64_t b = 0; b < blocks; ++b) {
      const PanelBlockOffsets at = panel_block_offsets(p, panels, b, blocks, sizeof(Quants));
      auto& quants = *reinterpret_cast<Quants*>(out + at.quants);
      auto& scales = *reinterpret_cast<PanelScales*>(out + at.scales);
      for (int i = 0; i < kPanelRows; ++i) put(quants, scales, i, panel_rows[i * blocks + b]);
    }
  }
}
}  // namespace

void repack_q4_0_to_q4_0c(void* matrix, int64_t rows, int64_t k) {
  repack_to_panels<BlockQ4_0, PanelQuantsQ4_0>(
      matrix, rows, k, [](PanelQuantsQ4_0& out, PanelScales& d, int i, const BlockQ4_0& in) {
        d[i] = in.d;
        for (int m = 0; m < 4; ++m) std::memcpy(out.qs[m][i], in.qs + 4 * m, 4);
      });
}

void repack_q8_0_to_q8_0c(void* matrix, int64_t rows, int64_t k) {
  repack_to_panels<BlockQ8_0, PanelQuantsQ8_0>(
      matrix, rows, k, [](PanelQuantsQ8_0& out, PanelScales& d, int i, const BlockQ8_0& in) {
        d[i] = in.d;
        for (int e = 0; e < kQK8_0; ++e) out.qs[e / 4][i][e % 4] = static_cast<uint8_t>(in.qs[e] + 128);
      });
}

namespace {
// Block b of `row` in a panel matrix of `rows` x k (Q4_0 and Q8_0 blocks both hold kQK4_0 = kQK8_0
// = 32 values): its quants and scales in the panel that holds the row, and the row's lane in them.
template <class Quants>
const Quants& panel_block(const void* matrix, int64_t rows, int64_t k, int64_t row, int64_t b, uint16_t& d,
                          int64_t& lane) {
  const int64_t blocks = k / kQK4_0;
  lane = row % kPanelRows;
  const auto* base = static_cast<const uint8_t*>(matrix);
  const PanelBlockOffsets at = panel_block_offsets(row / kPanelRows, rows / kPanelRows, b, blocks, sizeof(Quants));
  d = (*reinterpret_cast<const PanelScales*>(base + at.scales))[lane];
  return *reinterpret_cast<const Quants*>(base + at.quants);
}
}  // namespace

BlockQ8_0 q8_0c_block(const void* matrix, int64_t rows, int64_t k, int64_t row, int64_t b) {
  int64_t i = 0;
  BlockQ8_0 block;
  const auto& g = panel_block<PanelQuantsQ8_0>(matrix, rows, k, row, b, block.d, i);
  for (int e = 0; e < kQK8_0; ++e) block.qs[e] = static_cast<int8_t>(g.qs[e / 4][i][e % 4] - 128);
  return block;
}

BlockQ4_0 q4_0c_block(const void* matrix, int64_t rows, int64_t k, int64_t row, int64_t b) {
  int64_t i = 0;
  BlockQ4_0 block;
  const auto& g = panel_block<PanelQuantsQ4_0>(matrix, rows, k, row, b, block.d, i);
  for (int m = 0; m < 4; ++m) std::memcpy(block.qs + 4 * m, g.qs[m][i], 4);
  return block;
}

void dequantize_weight_row(QType t, const void* matrix, int64_t rows, int64_t row, int64_t cols, float* dst) {
  if (t == QType::kQ4_0C) {
    for (int64_t b = 0; b < cols / kQK4_0; ++b) {
      const BlockQ4_0 block = q4_0c_block(matrix, rows, cols, row, b);
      dequantize_q4_0(&block, kQK4_0, dst + b * kQK4_0);
    }
  } else if (t == QType::kQ8_0C) {
    for (int64_t b = 0; b < cols / kQK8_0; ++b) {
      const BlockQ8_0 block = q8_0c_block(matrix, rows, cols, row, b);
      dequantize_q8_0(&block, kQK8_0, dst + b * kQK8_0);
    }
  } else {
    dequantize_row(t, static_cast<const uint8_t*>(matrix) + row * row_bytes(t, cols), cols, dst);
  }
}

const char* qtype_name(QType t) { return info(t).name; }

std::optional<QType> qtype_from_name(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const TypeInfo& i : kTypes) {
    if (lower == i.name) return i.type;
  }
  return std::nullopt;
}

std::optional<QType> qtype_from_ggml(uint32_t ggml_type) {
  for (const TypeInfo& i : kTypes) {
    if (static_cast<uint32_t>(i.type) == ggml_type && static_cast<uint32_t>(i.type) < 1000) return i.type;
  }
  return std::nullopt;
}

int64_t block_elements(QType t) { return info(t).block_elements; }
int64_t block_bytes(QType t) { return info(t).block_bytes; }

void quantize_row(QType t, const float* x, int64_t n, void* dst) {
  TESSERA_CHECK(n % block_elements(t) == 0, "row length is not a multiple of the block size");
  switch (t) {
    case QType::kF32: std::memcpy(dst, x, n * sizeof(float)); return;
    case QType::kF16: {
      auto* y = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) y[i] = float_to_fp16(x[i]);
      return;
    }
    case QType::kBF16: {
      auto* y = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) y[i] = float_to_bfloat16_bits(x[i]);
      return;
    }
    case QType::kQ8_0: quantize_q8_0(x, n, static_cast<BlockQ8_0*>(dst)); return;
    case QType::kQ4_0: quantize_q4_0(x, n, static_cast<BlockQ4_0*>(dst)); return;
    case QType::kQ4_K: quantize_q4_k(x, n, static_cast<BlockQ4_K*>(dst)); return;
    case QType::kQ6_K: quantize_q6_k(x, n, static_cast<BlockQ6_K*>(dst)); return;
    case QType::kQ4_0R:
      quantize_q4_0(x, n, static_cast<BlockQ4_0*>(dst));
      repack_q4_0_to_q4_0r(dst, n, dst);
      return;
    case QType::kQ8_0R:
      quantize_q8_0(x, n, static_cast<BlockQ8_0*>(dst));
      repack_q8_0_to_q8_0r(dst, n, dst);
      return;
    case QType::kQ4_0C: case QType::kQ8_0C: break;
  }
  TESSERA_CHECK(false, "q4_0c / q8_0c rows are not contiguous: quantize to q4_0 / q8_0, then repack");
}

void dequantize_row(QType t, const void* src, int64_t n, float* dst) {
  TESSERA_CHECK(n % block_elements(t) == 0, "row length is not a multiple of the block size");
  switch (t) {
    case QType::kF32: std::memcpy(dst, src, n * sizeof(float)); return;
    case QType::kF16: {
      const auto* x = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_float(x[i]);
      return;
    }
    case QType::kBF16: {
      const auto* x = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bfloat16_bits_to_float(x[i]);
      return;
    }
    case QType::kQ8_0: dequantize_q8_0(static_cast<const BlockQ8_0*>(src), n, dst); return;
    case QType::kQ4_0: dequantize_q4_0(static_cast<const BlockQ4_0*>(src), n, dst); return;
    case QType::kQ4_K: dequantize_q4_k(static_cast<const BlockQ4_K*>(src), n, dst); return;
    case QType::kQ6_K: dequantize_q6_k(static_cast<const BlockQ6_K*>(src), n, dst); return;
    case QType::kQ4_0R: {
      const auto* g = static_cast<const BlockQ4_0x4*>(src);
      for (int64_t b = 0; b < n / kQK4_0; ++b) {
        BlockQ4_0 block;
        block.d = g[b / 4].d[b % 4];
        std::memcpy(block.qs, g[b / 4].qs[b % 4], sizeof(block.qs));
        dequantize_q4_0(&block, kQK4_0, dst + b * kQK4_0);
      }
      return;
    }
    case QType::kQ8_0R:
      for (int64_t b = 0; b < n / kQK8_0; ++b) {
        const BlockQ8_0 block = q8_0r_block(src, b);
        dequantize_q8_0(&block, kQK8_0, dst + b * kQK8_0);
      }
      return;
    case QType::kQ4_0C: case QType::kQ8_0C: break;
  }
  TESSERA_CHECK(false, "q4_0c / q8_0c rows are not contiguous: use dequantize_weight_row");
}

}  // namespace tessera::quant
