// Weight formats of language models: ggml's block-quantized types (the layouts GGUF files
// store, bit for bit), plus the float types, with reference (scalar) quantize / dequantize.
//
// A "row" of n elements is n / block_elements(type) consecutive blocks. Every format here but
// Q4_0C keeps one row of a weight matrix [N, K] (K the reduction dim) contiguous, so a matrix is N
// rows of row_bytes(type, K) bytes each; Q4_0C interleaves 16 rows in the same bytes (see below).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ir/half.h"

namespace tessera::quant {

// ggml's type numbers (as stored in GGUF tensor infos). Only the ones tessera reads are named.
enum class QType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ8_0 = 8,
  kQ4_K = 12,
  kQ6_K = 14,
  kBF16 = 30,
  // tessera's own layouts (numbers from 1000), never in files: Q4_0 and Q8_0 regrouped for
  // AVX-512 (see BlockQ4_0x4, BlockQ8_0x4), Q4_0 and Q8_0 in column panels (PanelQuantsQ4_0,
  // PanelQuantsQ8_0).
  kQ4_0R = 1000,
  kQ8_0R = 1001,
  kQ4_0C = 1002,
  kQ8_0C = 1003,
};

// "f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q6_k", "q4_0r", "q8_0r", "q4_0c", "q8_0c".
const char* qtype_name(QType t);
// By name (as above, case-insensitive), or nullopt.
std::optional<QType> qtype_from_name(const std::string& name);
// By ggml type number, or nullopt for a type tessera does not read (q4_0r, q8_0r have none).
std::optional<QType> qtype_from_ggml(uint32_t ggml_type);

// Elements per block (1 for float types, 32 for Q8_0 / Q4_0, 256 for the K-quants).
int64_t block_elements(QType t);
// Bytes per block.
int64_t block_bytes(QType t);
// Bytes of n elements; n must be a multiple of block_elements(t).
inline int64_t row_bytes(QType t, int64_t n) { return n / block_elements(t) * block_bytes(t); }

// ggml block layouts (little-endian, packed as in ggml-common.h).
constexpr int kQK8_0 = 32;
struct BlockQ8_0 {
  uint16_t d;  // fp16 scale
  int8_t qs[kQK8_0];  // x[i] = d * qs[i]
};
static_assert(sizeof(BlockQ8_0) == 34);

constexpr int kQK4_0 = 32;
struct BlockQ4_0 {
  uint16_t d;               // fp16 scale
  uint8_t qs[kQK4_0 / 2];   // x[i] = d * ((qs[i] & 15) - 8), x[i + 16] = d * ((qs[i] >> 4) - 8)
};
static_assert(sizeof(BlockQ4_0) == 18);

// Four Q4_0 blocks regrouped: their scales together, then their 16 quant bytes each (as in
// BlockQ4_0::qs). The same 72 bytes per 128 values as four BlockQ4_0, so a Q4_0 matrix whose rows
// are multiples of 128 converts in place; one 64-byte load then holds the quants of four blocks
// (the AVX-512 decode kernel's unit).
struct BlockQ4_0x4 {
  uint16_t d[4];
  uint8_t qs[4][kQK4_0 / 2];
};
static_assert(sizeof(BlockQ4_0x4) == 4 * sizeof(BlockQ4_0));
// Converts `n` values (a multiple of 128) of Q4_0 blocks to BlockQ4_0x4 groups; src may equal dst.
void repack_q4_0_to_q4_0r(const void* src, int64_t n, void* dst);

// Four Q8_0 blocks regrouped: their scales together, then the first 16 quants of each block, then
// the last 16 of each, every quant stored as q + 128 (unsigned: the AVX-512 kernel multiplies
// with the weights as the unsigned operand, as for BlockQ4_0x4's nibbles). The same 136 bytes per
// 128 values as four BlockQ8_0, so a Q8_0 matrix whose rows are multiples of 128 converts in place.
struct BlockQ8_0x4 {
  uint16_t d[4];
  uint8_t lo[4][kQK8_0 / 2];  // lo[i][e] = block i's qs[e] + 128
  uint8_t hi[4][kQK8_0 / 2];  // hi[i][e] = block i's qs[16 + e] + 128
};
static_assert(sizeof(BlockQ8_0x4) == 4 * sizeof(BlockQ8_0));
// Converts `n` values (a multiple of 128) of Q8_0 blocks to BlockQ8_0x4 groups; src may equal dst.
void repack_q8_0_to_q8_0r(const void* src, int64_t n, void* dst);
// Block b (of 32 values) of a BlockQ8_0x4 row as a Q8_0 block.
BlockQ8_0 q8_0r_block(const void* row, int64_t b);

// Q4_0C: a matrix of Q4_0 rows (a multiple of 16) stored as panels of 16 rows, in the bytes the
// rows had. Per block index b, a panel holds the 16 rows' quant bytes 4 at a time
// (PanelQuantsQ4_0), so that one 64-byte load puts four bytes of each row in its 32-bit lane (load
// m, lane i: row i's qs[4m..4m+3]), and the 16 rows' fp16 scales. The AVX-512 kernel multiplies
// such a load with four activation bytes broadcast to every lane: one instruction, 16 output
// features, and no per-row shuffles. Where the bytes go (panel_block_offsets):
//  - Panel after panel, each in the bytes its 16 rows had. Decode (one activation row) reads a
//    panel's blocks in order, so each thread streams one contiguous range per chunk of panels.
//  - Rows of more than kPanelSegmentMaxBlocks blocks are cut into segments of kPanelSegmentBlocks
//    (the last one shorter), one after another, each laid out as a matrix of its own (panel after
//    panel over the segment's blocks). Decode runs one segment over all panels, then the next
//    (quant_matmul: one parallel loop each), so a thread still streams one contiguous range while
//    a panel's activations stay in L1: over a whole 5632-value row they did not (7 KiB of them
//    between 50 KiB of weights), and the product streamed at ~0.75 of a plain read against
//    ~0.88 at k <= 3072. (An earlier layout also cut k into 64-block segments but decoded each
//    chunk of panels segment by segment, up to three streams a chunk: 2-9% slower.)
//  - Inside a panel, blocks go in pairs: the quants of blocks 2g and 2g + 1, then their scales (an
//    odd last block stands alone), so that with k a multiple of 64 every quant load is 64-byte
//    aligned (a load that straddles two cache lines slowed the decode by about 10%).
constexpr int kPanelRows = 16;
struct PanelQuantsQ4_0 {
  uint8_t qs[4][kPanelRows][4];  // qs[m][i] = row i's qs[4m..4m+3]
};
// Q8_0C: Q8_0 rows in panels of 16 the same way, quants stored as q + 128 (unsigned, as in
// BlockQ8_0x4): load m, lane i = row i's qs[4m..4m+3] + 128, for m = 0..7.
struct PanelQuantsQ8_0 {
  uint8_t qs[8][kPanelRows][4];
};
using PanelScales = uint16_t[kPanelRows];
static_assert(sizeof(PanelQuantsQ4_0) + sizeof(PanelScales) == kPanelRows * sizeof(BlockQ4_0));
static_assert(sizeof(PanelQuantsQ8_0) + sizeof(PanelScales) == kPanelRows * sizeof(BlockQ8_0));
constexpr int64_t kPanelSegmentMaxBlocks = 96;
constexpr int64_t kPanelSegmentBlocks = 64;
// The blocks of one row per segment (the last segment may hold fewer).
inline int64_t panel_segment_blocks(int64_t blocks) {
  return blocks > kPanelSegmentMaxBlocks ? kPanelSegmentBlocks : blocks;
}
// Where block b of panel `panel` keeps its quants and scales (bytes from the matrix's start), in
// a matrix of `panels` panels of `blocks` blocks per row whose quants take quant_bytes per block;
// and panel_stride, the distance to the same block of the next panel.
struct PanelBlockOffsets {
  int64_t quants, scales, panel_stride;
};
inline PanelBlockOffsets panel_block_offsets(int64_t panel, int64_t panels, int64_t b, int64_t blocks, int64_t quant_bytes) {
  const int64_t block_bytes = quant_bytes + int64_t{sizeof(PanelScales)};
  const bool cut = blocks > kPanelSegmentMaxBlocks;
  const int64_t first = cut ? b / kPanelSegmentBlocks * kPanelSegmentBlocks : 0;  // the segment's first block
  const int64_t segment_blocks = cut && blocks - first > kPanelSegmentBlocks ? kPanelSegmentBlocks : blocks - first;
  const int64_t stride = segment_blocks * block_bytes;
  const int64_t pair = (b - first) / 2, in_pair = (b - first) % 2;
  const int64_t pair_blocks = segment_blocks - 2 * pair >= 2 ? 2 : 1;
  const int64_t start = first * block_bytes * panels + panel * stride + pair * 2 * block_bytes;
  return {start + in_pair * quant_bytes,
          start + pair_blocks * quant_bytes + in_pair * int64_t{sizeof(PanelScales)}, stride};
}
inline bool is_panel_type(QType t) { return t == QType::kQ4_0C || t == QType::kQ8_0C; }
// Converts a Q4_0 (Q8_0) matrix of `rows` rows (a multiple of 16) of k values to Q4_0C (Q8_0C),
// in place.
void repack_q4_0_to_q4_0c(void* matrix, int64_t rows, int64_t k);
void repack_q8_0_to_q8_0c(void* matrix, int64_t rows, int64_t k);
// Block b (of 32 values) of row `row` of a Q4_0C (Q8_0C) matrix of `rows` rows and k columns, as
// a Q4_0 (Q8_0) block.
BlockQ4_0 q4_0c_block(const void* matrix, int64_t rows, int64_t k, int64_t row, int64_t b);
BlockQ8_0 q8_0c_block(const void* matrix, int64_t rows, int64_t k, int64_t row, int64_t b);

// Row `row` (of `cols` values) of a weight matrix of `rows` rows in type t, as floats:
// dequantize_row on the row's bytes, or for Q4_0C / Q8_0C the row gathered from its panel.
void dequantize_weight_row(QType t, const void* matrix, int64_t rows, int64_t row, int64_t cols, float* dst);

constexpr int kQK_K = 256;
struct BlockQ4_K {
  uint16_t d;       // fp16 super-block scale for the 8 sub-block scales
  uint16_t dmin;    // fp16 super-block scale for the 8 sub-block mins
  uint8_t scales[12];  // 8 x (6-bit scale, 6-bit min), packed
  uint8_t qs[kQK_K / 2];  // 4-bit quants
};
static_assert(sizeof(BlockQ4_K) == 144);

struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];      // low 4 bits of the quants
  uint8_t qh[kQK_K / 4];      // high 2 bits
  int8_t scales[kQK_K / 16];  // 8-bit sub-block scales
  uint16_t d;                 // fp16 super-block scale
};
static_assert(sizeof(BlockQ6_K) == 210);

// Reference conversions of one row of n elements (n a multiple of block_elements(t)); not for
// the panel types, whose rows are not contiguous (a checked error).
// quantize_row rounds as ggml's reference quantizers do (Q8_0: d = amax / 127, q = round(x / d);
// Q4_0: d = max / -8 where max is the signed value of largest magnitude).
void quantize_row(QType t, const float* x, int64_t n, void* dst);
void dequantize_row(QType t, const void* src, int64_t n, float* dst);

// The K-quant conversions (quant_kquants.cc): dequantization exactly as ggml's; quantization by a
// simpler rule (per sub-block min/max or largest magnitude), valid blocks with a small error.
void quantize_q4_k(const float* x, int64_t n, BlockQ4_K* y);
void dequantize_q4_k(const BlockQ4_K* x, int64_t n, float* y);
void quantize_q6_k(const float* x, int64_t n, BlockQ6_K* y);
void dequantize_q6_k(const BlockQ6_K* x, int64_t n, float* y);

inline float fp16_to_float(uint16_t bits) { return half_bits_to_float(bits); }
inline uint16_t float_to_fp16(float f) { return float_to_half_bits(f); }

}  // namespace tessera::quant
