// What the native Conv and ConvTranspose kernels share: per-channel affine nodes after the
// convolution folded into its weights and bias (y = conv * scale + shift per output channel),
// and the elementwise tail run on finished blocks of output while they are in cache.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "backends/native/eltwise_compile.h"
#include "backends/native/isa.h"
#include "backends/native/kernel_io.h"

namespace tessera::native {

// The values of constant v as one float per channel of a [N, C, ...] tensor of rank `rank`
// (v broadcasts along every other dim), or nullopt.
std::optional<std::vector<float>> per_channel(const Graph& g, int v, int64_t channels, size_t rank);

// BatchNormalization's y = x * a + b per channel, or the reason it is not that.
Result<std::pair<std::vector<float>, std::vector<float>>> batch_norm_affine(const Graph& g,
                                                                            const Node& node);

// A group around one convolution (the anchor, output [N, OC, OH, OW]): the affine nodes folded
// into it (y = conv without bias * scale + shift, the anchor's bias included in shift), and the
// elementwise tail reading `folded_value`.
struct AffineTailPlan {
  int anchor = -1;
  std::vector<int64_t> out_dims;
  std::vector<float> scale, shift;
  int folded_value = kNoValue;  // the value the folded chain ends in: what the convolution computes
  std::vector<int> tail;
};

// The one node of `op_type` in sg (the group's anchor), or why there is not exactly one.
Result<int> find_anchor(const SubGraph& sg, const std::string& op_type);

// Plans `sg` around `anchor` (its input 2, when present, is a per-channel bias constant). `head`,
// when not -1, is a node of sg feeding the anchor that the kernel computes itself (a scaling Mul);
// every other node the anchor reads must come from outside the group.
Result<AffineTailPlan> plan_affine_tail(const SubGraph& sg, int anchor,
                                        std::vector<int64_t> out_dims, int head = -1);

// The values a group's kernel stores and how its tail runs, fixed at compile time.
class EltwiseTail {
 public:
  // With `channels_last`, the output and the rank-4 values the tail reads (not constants) are
  // [N, H, W, C] in memory, as CompileOptions::layout kChannelsLast passes them.
  Status init(const SubGraph& sg, const AffineTailPlan& plan, bool channels_last = false);
  bool empty() const { return empty_; }
  int64_t scratch_floats() const { return empty_ ? 0 : plan_.program.scratch_floats(); }

  // One run's buffers: y (what the convolution writes) and the tail's outputs.
  struct Run {
    Tensor y;
    std::vector<Tensor> out;
    std::vector<const float*> in_ptr;
    std::vector<float*> out_ptr;
    EltwiseBuffers buffers() const { return EltwiseBuffers{in_ptr.data(), out_ptr.data()}; }
  };
  Result<Run> start(const std::vector<const Tensor*>& inputs, KernelRunContext& ctx) const;
  // The tail over flattened output elements [begin, end) (scratch: scratch_floats()).
  void apply(const IsaKernels& isa, const Run& run, int64_t begin, int64_t end,
             float* scratch) const {
    if (!empty_) isa.eltwise(plan_.program, run.buffers(), begin, end, scratch);
  }
  // The tail over the whole output at once, on the pool's threads.
  void apply_all(const IsaKernels& isa, const Run& run, ThreadPool* pool) const {
    if (!empty_) run_eltwise_parallel(isa, plan_.program, run.buffers(), 0, plan_.program.total, pool);
  }
  // The kernel's outputs, in SubGraph output order.
  void finish(Run& run, std::vector<Tensor>& outputs) const;

 private:
  bool empty_ = true;
  std::vector<int64_t> out_dims_;
  EltwisePlan plan_;
  std::vector<int> stored_;
  std::vector<ValueSource> sources_;
  std::vector<int> out_pos_;  // per kernel output: tail output index, or -1 for y
  bool in_place_ = false;
};

// A 2-D Conv's geometry (auto_pad resolved into pad_top / pad_left).
struct ConvShape {
  int64_t n, c, h, w, oc, kh, kw, group = 1;
  int64_t sh = 1, sw = 1, dh = 1, dw = 1, pad_top = 0, pad_left = 0, oh = 0, ow = 0;
  int64_t ic_per_group() const { return c / group; }
  int64_t oc_per_group() const { return oc / group; }
};
// A Conv node over float32 NCHW with constant weights (and a [M] constant bias), kernels,
// strides and dilations up to 16: its shape, or why the native kernels do not run it.
Result<ConvShape> conv_shape(const Graph& g, const Node& node);
// One input and one output channel per group, horizontal stride 1 or 2: a depthwise convolution
// the native kernels run (depthwise_row row-major, depthwise_cl_row channels-last).
bool depthwise_applies(const ConvShape& s);

// A channels-last convolution group's kernel that also computes any band of its output pixels on
// the calling thread: separable_conv.cc runs a depthwise group's band and then the band of the 1x1
// group that reads it, while it is still in cache.
class PixelBandKernel : public Kernel {
 public:
  // The run's buffers (EltwiseTail::start); tail().finish() hands them out.
  virtual Result<EltwiseTail::Run> start(const std::vector<const Tensor*>& inputs,
                                         KernelRunContext& ctx) const = 0;
  // Output pixels [p0, p1) (row-major over OH x OW) of image `image`, from x (the convolution's
  // input, [N, H, W, C]), tail included; scratch: band_scratch_floats().
  virtual void run_band(const float* x, const EltwiseTail::Run& r, int64_t image, int64_t p0, int64_t p1,
                        float* scratch) const = 0;
  virtual int64_t band_scratch_floats() const = 0;
  virtual const EltwiseTail& tail() const = 0;
};

}  // namespace tessera::native
