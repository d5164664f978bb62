// A 3x3 Conv (stride 1, dilation 1, one group, float32 NCHW) as Winograd F(2x2, 3x3): each 2 x 2
// block of output pixels (a tile) from a 4 x 4 block of padded input, with 16 multiplies per
// (input channel, output channel) instead of 36. See conv_winograd.cc.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "backends/backend.h"
#include "backends/native/isa.h"
#include "backends/native/kernel_io.h"

namespace tessera::native {

// The shape of such a Conv: N, C, H, W of the input, OC output channels, the top and left pads
// (the bottom and right ones only set OH and OW), the output's OH x OW.
struct WinogradShape {
  int64_t n, c, h, w, oc;
  int64_t pad_top, pad_left, oh, ow;
};

// Whether Winograd beats the direct kernel on this shape: 16 or more input channels, 8 or more
// output channels, and 8 or more tiles (see the measurements at its definition).
bool winograd_pays(const WinogradShape& s);

// A finished block of y: rows [oh0, oh1) and columns [ow0, ow1) of image n, every channel.
struct WinogradBlock {
  int64_t n, oh0, oh1, ow0, ow1;
};

class WinogradConv {
 public:
  // w: the Conv's weights [OC][C][3][3]; y = conv(x, w) * scale[oc] + shift[oc].
  WinogradConv(const IsaKernels& isa, const WinogradShape& s, const float* w,
               const std::vector<float>& scale, const std::vector<float>& shift);

  // Called on each finished block by the thread that computed it, with tail_floats floats of
  // that thread's scratch (for the elementwise tail).
  using BlockDone = std::function<void(const WinogradBlock& block, float* scratch)>;
  // y [N, OC, OH, OW] = the convolution of x [N, C, H, W].
  void run(const float* x, float* y, ThreadPool* pool, int64_t tail_floats,
           const BlockDone& done) const;

 private:
  // How one run splits into tasks: `rows` tile rows x `cols` tiles of one image each.
  struct Blocking {
    int64_t rows, cols, row_blocks, col_blocks;
    int64_t stride;      // floats per (xi, channel) in V and M: rows * cols rounded up to 16
    int64_t v_xi, m_xi;  // floats per xi in V and M
  };
  Blocking blocking(int threads) const;
  // One task's output block; v and m: its buffers (see the .cc).
  WinogradBlock run_task(const float* x, float* y, const Blocking& b, int64_t task, float* v,
                         float* m) const;

  const IsaKernels& isa_;
  WinogradShape s_;
  int64_t tiles_h_, tiles_w_;
  int64_t blocks_;                          // output channel blocks of conv_oc_block
  int64_t xi_floats_;                       // packed weights of one xi: [block][C][conv_oc_block]
  std::unique_ptr<ScratchBuffer> weights_;  // [16][block][C][conv_oc_block], G g G^T * scale
  std::vector<float> shift_, zeros_;
};

}  // namespace tessera::native
