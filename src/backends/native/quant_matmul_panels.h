// The ISA-independent drivers of quant_matmul's register tiles: panels of weight rows run against
// every activation tile, optionally converted first (K-quants dequantized to f32, Q4_0 / Q4_0R
// unpacked to Q8_0) into a thread-local buffer. Each ISA file instantiates them with its own tile
// tables and its Isa as the first parameter, so no two ISAs share an instantiation (each is
// compiled under its own target pragma).
#pragma once

#include <algorithm>
#include <vector>

#include "backends/native/isa.h"
#include "backends/native/quant_matmul_internal.h"

namespace tessera::native::qmm {

using TileFn = void (*)(const Problem& p, const uint8_t* w0, int64_t t0, int64_t j0);
constexpr int64_t kPanel = 64;  // weight rows per panel
// How far ahead a tile that streams its weights in order (decode) prefetches them (bytes).
constexpr int64_t kSequentialAhead = 4096;
// How far ahead decode tiles touch each 4 KiB page of the weights (bytes; 8-24 KiB measured alike):
// see column_decode in quant_matmul_avx512.cc.
constexpr int64_t kPageAhead = 12 * 1024;
constexpr int64_t kPageBytes = 4096;
// For a decode loop that reads `step` bytes from `at` per iteration: touches the first line of a
// page kPageAhead bytes on, once per page (the iteration whose reads that far on start a page).
inline void touch_page_ahead(const uint8_t* at, int64_t step) {
  const uint8_t* ahead = at + kPageAhead;
  if (static_cast<int64_t>(reinterpret_cast<uintptr_t>(ahead) % kPageBytes) < step) __builtin_prefetch(ahead, 0, 3);
}
// Bytes of one block's quants in a panel (Q4_0C / Q8_0C).
template <quant::QType T>
constexpr int64_t kPanelQuantBytes =
    T == quant::QType::kQ4_0C ? sizeof(quant::PanelQuantsQ4_0) : sizeof(quant::PanelQuantsQ8_0);

// Output features [jp, je) whose weight row jp is at wp, over all activation rows.
template <Isa I, int R, int J>
void run_panel(const Problem& p, const TileFn (&fns)[R][J], const uint8_t* wp, int64_t jp, int64_t je) {
  for (int64_t t = 0; t < p.rows; t += R) {
    const int64_t rn = std::min<int64_t>(R, p.rows - t);
    for (int64_t j = jp; j < je; j += J) {
      const int64_t jn = std::min<int64_t>(J, je - j);
      fns[rn - 1][jn - 1](p, wp + (j - jp) * p.w_row_bytes, t, j);
    }
  }
}

template <Isa I, int R, int J>
void run_tiles(const Problem& p, const TileFn (&fns)[R][J], int64_t j0, int64_t j1) {
  // One activation row (decode): single-row tiles, weight rows one after another, so that the
  // thread reads one sequential stream, which the hardware prefetchers follow at full bandwidth
  // (J rows at once are J short streams: 20-40% slower here).
  if (p.rows == 1) {
    for (int64_t j = j0; j < j1; ++j) fns[0][0](p, p.w + j * p.w_row_bytes, 0, j);
    return;
  }
  for (int64_t jp = j0; jp < j1; jp += kPanel) {
    run_panel<I>(p, fns, p.w + jp * p.w_row_bytes, jp, std::min(j1, jp + kPanel));
  }
}

// K-quants (or any type): each panel dequantized to fp32 (reference code), then the F32 tiles.
template <Isa I, int R, int J>
void run_dequantized(const Problem& p, const TileFn (&f32_tiles)[R][J], int64_t j0, int64_t j1) {
  thread_local std::vector<float> panel;
  panel.resize(kPanel * p.k);
  Problem q = p;
  q.type = quant::QType::kF32;
  q.w_row_bytes = p.k * int64_t{sizeof(float)};
  for (int64_t jp = j0; jp < j1; jp += kPanel) {
    const int64_t je = std::min(j1, jp + kPanel);
    for (int64_t j = jp; j < je; ++j) {
      quant::dequantize_row(p.type, p.w + j * p.w_row_bytes, p.k, panel.data() + (j - jp) * p.k);
    }
    run_panel<I>(q, f32_tiles, reinterpret_cast<const uint8_t*>(panel.data()), jp, je);
  }
}

// Q4_0 / Q4_0R / Q8_0R: each panel unpacked to Q8_0 rows (the same values and scales), then the
// Q8_0 tiles, whose inner loop unpacks no nibbles per row tile.
template <Isa I, int R, int J>
void run_unpacked_to_q8_0(const Problem& p, const TileFn (&q8_tiles)[R][J], int64_t j0, int64_t j1) {
  Problem q = p;
  q.type = quant::QType::kQ8_0;
  q.w_row_bytes = p.k / quant::kQK4_0 * int64_t{sizeof(quant::BlockQ8_0)};
  thread_local std::vector<uint8_t> panel;
  panel.resize(static_cast<size_t>(kPanel * q.w_row_bytes));
  for (int64_t jp = j0; jp < j1; jp += kPanel) {
    const int64_t je = std::min(j1, jp + kPanel);
    unpack_rows_to_q8_0(p, jp, je, panel.data());
    run_panel<I>(q, q8_tiles, panel.data(), jp, je);
  }
}

// Q4_0C / Q8_0C (whole 16-row panels): output features [j0, j1). Decode (one row) walks the
// panels one after another, each over the blocks [g_begin, g_end) (g_end <= 0: all of k), in the
// order they are stored in (see quant::panel_block_offsets; quant_matmul runs a row cut into
// segments one segment at a time); several rows run tiles of up to P panels x R rows over all of
// k, all rows against one group of panels before the next, so it stays in L2.
// tiles[r - 1][q - 1] covers r rows x q panels (the TileFn's weight pointer is unused: the panel
// layout places every block).
template <Isa I, int R, int P>
void run_column_tiles(const Problem& p, const TileFn (&tiles)[R][P], int64_t j0, int64_t j1) {
  constexpr int64_t kRows = quant::kPanelRows;
  if (p.rows == 1) {
    const int64_t blocks = p.k / quant::kQK4_0;
    const int64_t quant_bytes = p.type == quant::QType::kQ4_0C ? int64_t{sizeof(quant::PanelQuantsQ4_0)}
                                                                : int64_t{sizeof(quant::PanelQuantsQ8_0)};
    // The panels over the blocks [q.g_begin, q.g_end) of one segment: one stream, whose first
    // kPageAhead bytes are touched here (the decode tile touches the pages that far ahead of it).
    auto decode = [&](const Problem& q) {
      const uint8_t* start = q.w + quant::panel_block_offsets(j0 / kRows, q.n / kRows, q.g_begin, blocks, quant_bytes).quants;
      for (int64_t ahead = 0; ahead < kPageAhead; ahead += kPageBytes) __builtin_prefetch(start + ahead, 0, 3);
      for (int64_t j = j0; j < j1; j += kRows) tiles[0][0](q, nullptr, 0, j);
    };
    if (p.g_end > 0) return decode(p);
    // All of k: segment after segment (decode tiles walk one segment's blocks with one pointer).
    return for_each_panel_segment(p, decode);
  }
  for (int64_t j = j0; j < j1;) {
    const int64_t panels = std::min<int64_t>(P, (j1 - j) / kRows);
    for (int64_t t = 0; t < p.rows; t += R) {
      const int64_t rn = std::min<int64_t>(R, p.rows - t);
      tiles[rn - 1][panels - 1](p, nullptr, t, j);
    }
    j += panels * kRows;
  }
}

}  // namespace tessera::native::qmm
