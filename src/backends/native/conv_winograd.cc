// Winograd F(2x2, 3x3) (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks"):
// with tiles of 2 x 2 output pixels, each reading a 4 x 4 block d of the padded input (tile
// (r, t) at padded rows 2r .. 2r + 3, columns 2t .. 2t + 3),
//   Y = A^T [ sum over input channels of U (.) V ] A,   U = G g G^T,   V = B^T d B,
// (.) elementwise over the 16 positions xi of a 4 x 4 matrix. So the convolution becomes 16
// matrix products M[xi] = U[xi] (OC x C) * V[xi] (C x tiles), 2.25 times fewer multiplies than
// the direct kernel's 9 per pixel (16 per 4 pixels).
//
// U is computed once, with the folded affine scale, and packed per xi in conv_row's weight layout
// ([oc block][C][1 tap][oc in block]), so that each matrix product is isa.conv_row with one tap:
// "channels" are the input channels (channel_stride: the task's tiles), "pixels" the tiles, the
// accumulators start from zeros. Each task takes a block of tile rows of one image (or part of
// one tile row, for a wide image with many channels), small enough that its V (16 x C x tiles)
// stays in the L2: the input transform reads the image's rows (isa.winograd_input_tile_row,
// simd_winograd.h), the 16 products go into M (16 x OC x tiles), and the output transform with
// the folded shift writes y's rows (isa.winograd_output_tile_row). The caller's elementwise tail
// then runs on the finished block.
//
// Tiles partly past the output (odd OH or OW) are computed from zero padding and only their valid
// pixels stored; any pads work, the padded input being zeros wherever it is not the image.
#include "backends/native/conv_winograd.h"

#include <algorithm>

namespace tessera::native {
namespace {

constexpr int kXi = 16;  // positions of the 4 x 4 transformed tile
// The V buffer of one task at most (floats): 512 KB, half the L2 of the machines measured.
constexpr int64_t kInputBudget = int64_t{128} << 10;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

// U = G g G^T of one 3 x 3 kernel g (row-major), as u[4 * i + j], in double.
void transform_kernel(const float* g, double u[kXi]) {
  static constexpr double kG[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  double gg[4][3];  // G g
  for (int i = 0; i < 4; ++i)
    for (int b = 0; b < 3; ++b) {
      gg[i][b] = 0;
      for (int a = 0; a < 3; ++a) gg[i][b] += kG[i][a] * g[a * 3 + b];
    }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      u[4 * i + j] = 0;
      for (int b = 0; b < 3; ++b) u[4 * i + j] += gg[i][b] * kG[j][b];
    }
}

// The calling thread's buffer of at least `floats` floats (hundreds of KB), kept from run to run
// and grown when needed rather than allocated for each run: a thread runs one task at a time.
float* thread_buffer(int64_t floats) {
  thread_local std::unique_ptr<ScratchBuffer> buffer;
  thread_local int64_t size = 0;
  if (size < floats) {
    buffer.reset();
    buffer = std::make_unique<ScratchBuffer>(floats);
    size = floats;
  }
  return buffer->data();
}

}  // namespace

// Measured against the direct kernel at 2 threads on an AVX-512 Zen 5 (medians of alternating
// runs): Winograd takes 0.5 - 0.8 of its time for 96 -> 24 channels at 6 x 6 to 160 x 160
// (1.80 vs 2.83 ms at 160 x 160; with AVX2, 3.08 vs 5.59 ms), 128 and 256 channels at 7 x 7 and
// 14 x 14, 512 at 8 x 8; 0.85 - 0.95 for 16 -> 16 and 32 -> 8 at 80 x 80. It is about as fast
// for 16 -> 8, 8 -> 64 and 96 -> 4 channels, and slower with fewer input channels (3 -> 16,
// 8 -> 8 and 12 -> 12 at 64 x 64 or 80 x 80: 1.3 - 1.6 times the direct kernel's time) and on
// images of a few tiles (512 channels at 4 x 4, 4 tiles: 1.5 times).
bool winograd_pays(const WinogradShape& s) {
  const int64_t tiles = ceil_div(s.oh, 2) * ceil_div(s.ow, 2);
  return s.c >= 16 && s.oc >= 8 && s.c * s.oc >= 256 && tiles >= 8;
}

WinogradConv::WinogradConv(const IsaKernels& isa, const WinogradShape& s, const float* w,
                           const std::vector<float>& scale, const std::vector<float>& shift)
    : isa_(isa), s_(s), shift_(shift) {
  const int64_t ocb = isa.conv_oc_block;
  tiles_h_ = ceil_div(s.oh, 2);
  tiles_w_ = ceil_div(s.ow, 2);
  blocks_ = ceil_div(s.oc, ocb);
  xi_floats_ = blocks_ * s.c * ocb;
  weights_ = std::make_unique<ScratchBuffer>(kXi * xi_floats_);
  std::fill_n(weights_->data(), kXi * xi_floats_, 0.0f);
  for (int64_t oc = 0; oc < s.oc; ++oc)
    for (int64_t ic = 0; ic < s.c; ++ic) {
      double u[kXi];
      transform_kernel(w + (oc * s.c + ic) * 9, u);
      float* dst = weights_->data() + ((oc / ocb) * s.c + ic) * ocb + oc % ocb;
      for (int xi = 0; xi < kXi; ++xi) dst[xi * xi_floats_] = static_cast<float>(u[xi] * scale[oc]);
    }
  zeros_.assign(ocb, 0.0f);
}

WinogradConv::Blocking WinogradConv::blocking(int threads) const {
  Blocking b{};
  const int64_t per_tile = kXi * s_.c;  // V floats per tile
  b.rows = 1;
  b.cols = tiles_w_;
  if (per_tile * round_up(tiles_w_, 16) > kInputBudget) {  // part of a tile row per task
    b.cols = std::min(tiles_w_, std::max<int64_t>(16, kInputBudget / per_tile / 16 * 16));
  } else {
    b.rows = std::min(tiles_h_, std::max<int64_t>(1, kInputBudget / (per_tile * tiles_w_)));
    while (b.rows > 1 && per_tile * round_up(b.rows * tiles_w_, 16) > kInputBudget) --b.rows;
  }
  b.col_blocks = ceil_div(tiles_w_, b.cols);
  // Fewer tile rows a task until there are 4 tasks a thread, but not under 32 tiles a task once
  // there is one task a thread (narrower, the products run well below the FMA peak).
  const auto tasks = [&](int64_t rows) { return s_.n * ceil_div(tiles_h_, rows) * b.col_blocks; };
  while (b.rows > 1 && tasks(b.rows) < 4 * threads) {
    const int64_t fewer = (b.rows + 1) / 2;
    if (fewer * b.cols < 32 && tasks(b.rows) >= threads) break;
    b.rows = fewer;
  }
  b.row_blocks = ceil_div(tiles_h_, b.rows);
  b.stride = round_up(b.rows * b.cols, 16);
  // One cache line more per xi: 16 slabs a power of two apart would share the L1's sets.
  b.v_xi = s_.c * b.stride + 16;
  b.m_xi = s_.oc * b.stride + 16;
  return b;
}

void WinogradConv::run(const float* x, float* y, ThreadPool* pool, int64_t tail_floats,
                       const BlockDone& done) const {
  const Blocking b = blocking(pool_threads(pool));
  // Each thread's buffer: V, M (+16: see run_task) and the tail's scratch, each 64-byte aligned.
  // Not initialized: what the products and the output transform compute from floats past a
  // task's tiles goes to vector lanes that are never stored.
  const int64_t v_floats = kXi * b.v_xi, m_floats = kXi * b.m_xi + 16;
  parallel(pool, s_.n * b.row_blocks * b.col_blocks, 1, [&](int64_t t0, int64_t t1) {
    float* v = thread_buffer(v_floats + m_floats + round_up(tail_floats, 16));
    float *m = v + v_floats, *scratch = m + m_floats;
    for (int64_t t = t0; t < t1; ++t) done(run_task(x, y, b, t, v, m), scratch);
  });
}

// Task `task`: tile rows [r0, r1) x tiles [c0, c1) of image n. v holds V[xi][channel][tile] and
// m M[xi][oc][tile], tile = (r - r0) * (c1 - c0) + (t - c0), at xi * b.v_xi (b.m_xi) +
// channel * b.stride + tile. The output transform of the last tile row reads m up to 15 floats
// past its tiles (the vector of the row's last tiles).
WinogradBlock WinogradConv::run_task(const float* x, float* y, const Blocking& b, int64_t task,
                                     float* v, float* m) const {
  const WinogradShape& s = s_;
  const int64_t per_image = b.row_blocks * b.col_blocks, n = task / per_image;
  const int64_t r0 = task % per_image / b.col_blocks * b.rows, r1 = std::min(tiles_h_, r0 + b.rows);
  const int64_t c0 = task % b.col_blocks * b.cols, c1 = std::min(tiles_w_, c0 + b.cols);
  const int64_t tw = c1 - c0, tiles = (r1 - r0) * tw;
  // Input transform.
  WinogradInputArgs in{};
  in.in = x + n * s.c * s.h * s.w;
  in.channels = s.c;
  in.plane_stride = s.h * s.w;
  in.height = s.h;
  in.width = s.w;
  in.col0 = 2 * c0 - s.pad_left;
  in.tiles = tw;
  in.channel_stride = b.stride;
  in.xi_stride = b.v_xi;
  for (int64_t r = r0; r < r1; ++r) {
    in.row0 = 2 * r - s.pad_top;
    in.v = v + (r - r0) * tw;
    isa_.winograd_input_tile_row(in);
  }
  // The 16 products, one block of output channels at a time.
  const int64_t ocb = isa_.conv_oc_block, tap = 0;
  ConvRowArgs a{};
  a.channels = s.c;
  a.channel_stride = b.stride;
  a.tap_offsets = &tap;
  a.taps = 1;
  a.bias = zeros_.data();
  a.out_stride = b.stride;
  a.width = tiles;
  for (int xi = 0; xi < kXi; ++xi) {
    a.in = v + xi * b.v_xi;
    for (int64_t blk = 0; blk < blocks_; ++blk) {
      a.weights = weights_->data() + xi * xi_floats_ + blk * s.c * ocb;
      a.oc_count = std::min(ocb, s.oc - blk * ocb);
      a.out = m + xi * b.m_xi + blk * ocb * b.stride;
      isa_.conv_row(a);
    }
  }
  // Output transform and the shift, straight into y.
  const int64_t oh1 = std::min(s.oh, 2 * r1), ow0 = 2 * c0, ow1 = std::min(s.ow, 2 * c1);
  for (int64_t oc = 0; oc < s.oc; ++oc) {
    float* plane = y + (n * s.oc + oc) * s.oh * s.ow;
    for (int64_t r = r0; r < r1; ++r) {
      float* y0 = plane + 2 * r * s.ow + ow0;
      isa_.winograd_output_tile_row(m + oc * b.stride + (r - r0) * tw, b.m_xi, tw, shift_[oc], y0,
                                    2 * r + 1 < s.oh ? y0 + s.ow : nullptr, ow1 - ow0);
    }
  }
  return WinogradBlock{n, 2 * r0, oh1, ow0, ow1};
}

}  // namespace tessera::native
