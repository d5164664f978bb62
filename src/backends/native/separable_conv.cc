#include "backends/native/separable_conv.h"

#include <algorithm>
#include <vector>

#include "backends/native/conv_common.h"
#include "backends/native/conv_kernels.h"
#include "backends/native/kernel_io.h"
#include "backends/native/pointwise_conv.h"

namespace tessera::native {
namespace {

// Pixels per band: the 1x1 product's rows, about one GEMM row block (12 micro-kernel rows of 14),
// so that a band's depthwise output (at most 168 x 480 floats here) stays in L2 for the product.
constexpr int64_t kBandPixels = 168;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Bands per image: about kBandPixels each, and a multiple of the threads when there are fewer
// images than threads, so that each thread gets the same number of pixels.
int64_t bands_per_image(int64_t pixels, int64_t images, int threads) {
  int64_t bands = std::max<int64_t>(1, (pixels + kBandPixels / 2) / kBandPixels);
  if (images < threads) bands = ceil_div(bands, threads) * threads;
  return std::min(bands, pixels);
}

struct DepthwisePlan {
  ConvShape shape{};
  AffineTailPlan affine;
};

Result<DepthwisePlan> plan_depthwise(const SubGraph& sg) {
  const Graph& g = sg.graph();
  TESSERA_ASSIGN_OR_RETURN(const int anchor, find_anchor(sg, "Conv"));
  DepthwisePlan p;
  TESSERA_ASSIGN_OR_RETURN(p.shape, conv_shape(g, g.node(anchor)));
  const ConvShape& s = p.shape;
  if (!depthwise_applies(s)) return unimplemented("not a depthwise Conv (one input and one output channel per group)");
  TESSERA_ASSIGN_OR_RETURN(p.affine, plan_affine_tail(sg, anchor, {s.n, s.oc, s.oh, s.ow}));
  return p;
}

class DepthwiseClKernel final : public PixelBandKernel {
 public:
  DepthwiseClKernel(const IsaKernels& isa, DepthwisePlan plan) : isa_(isa), plan_(std::move(plan)) {}

  Status init(const SubGraph& sg) {
    const Graph& g = sg.graph();
    const Node& conv = g.node(plan_.affine.anchor);
    const ConvShape& s = plan_.shape;
    // W [C, 1, KH, KW] times the folded scale, as [KH, KW, C]: a tap's channels are contiguous.
    const float* w = g.value(conv.inputs[1]).constant->data<float>();
    const int64_t taps = s.kh * s.kw;
    weights_.resize(taps * s.c);
    for (int64_t c = 0; c < s.c; ++c)
      for (int64_t t = 0; t < taps; ++t) weights_[t * s.c + c] = w[c * taps + t] * plan_.affine.scale[c];
    bias_ = plan_.affine.shift;
    TESSERA_ASSIGN_OR_RETURN(x_, source_of(sg, conv.inputs[0]));
    if (x_.slot >= 0) x_.dims = channels_last_dims(x_.dims);
    return tail_.init(sg, plan_.affine, /*channels_last=*/true);
  }

  Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs,
             KernelRunContext& ctx) override {
    const ConvShape& s = plan_.shape;
    TESSERA_ASSIGN_OR_RETURN(const float* x, resolve_float(x_, inputs));
    TESSERA_ASSIGN_OR_RETURN(EltwiseTail::Run r, tail_.start(inputs, ctx));
    const int64_t pixels = s.oh * s.ow, bands = bands_per_image(pixels, s.n, pool_threads(ctx.pool));
    parallel(ctx.pool, s.n * bands, 1, [&](int64_t t0, int64_t t1) {
      ScratchBuffer scratch(band_scratch_floats());
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t b = t % bands;
        run_band(x, r, t / bands, b * pixels / bands, (b + 1) * pixels / bands, scratch.data());
      }
    });
    tail_.finish(r, outputs);
    return Status();
  }

  Result<EltwiseTail::Run> start(const std::vector<const Tensor*>& inputs, KernelRunContext& ctx) const override {
    return tail_.start(inputs, ctx);
  }

  void run_band(const float* x, const EltwiseTail::Run& r, int64_t image, int64_t p0, int64_t p1,
                float* scratch) const override {
    const ConvShape& s = plan_.shape;
    DepthwiseClArgs a{};
    a.x = x + image * s.h * s.w * s.c;
    a.h = s.h, a.w = s.w, a.c = s.c;
    a.weights = weights_.data(), a.bias = bias_.data();
    a.kh = s.kh, a.kw = s.kw, a.sh = s.sh, a.sw = s.sw, a.dh = s.dh, a.dw = s.dw;
    a.pad_top = s.pad_top, a.pad_left = s.pad_left;
    float* y = const_cast<float*>(r.y.data<float>()) + image * s.oh * s.ow * s.c;
    for (int64_t p = p0; p < p1;) {
      a.oh = p / s.ow, a.ow0 = p % s.ow, a.ow1 = std::min(s.ow, a.ow0 + (p1 - p));
      a.out = y + p * s.c;
      isa_.depthwise_cl_row(a);
      p += a.ow1 - a.ow0;
    }
    const int64_t base = image * s.oh * s.ow * s.c;
    tail_.apply(isa_, r, base + p0 * s.c, base + p1 * s.c, scratch);
  }

  int64_t band_scratch_floats() const override { return tail_.scratch_floats(); }
  const EltwiseTail& tail() const override { return tail_; }

 private:
  const IsaKernels& isa_;
  DepthwisePlan plan_;
  std::vector<float> weights_;  // [KH][KW][C]
  std::vector<float> bias_;     // [C]
  ValueSource x_;
  EltwiseTail tail_;
};

Result<std::unique_ptr<PixelBandKernel>> compile_depthwise_band(const SubGraph& sg, const IsaKernels& isa) {
  TESSERA_ASSIGN_OR_RETURN(DepthwisePlan plan, plan_depthwise(sg));
  auto k = std::make_unique<DepthwiseClKernel>(isa, std::move(plan));
  TESSERA_RETURN_IF_ERROR(k->init(sg));
  return std::unique_ptr<PixelBandKernel>(std::move(k));
}

// A separable pair split into its groups: `first` the depthwise one, `second` the 1x1 one.
struct SeparableSplit {
  NodeSet first, second;
  int first_conv = -1, second_conv = -1;
};

Result<SeparableSplit> split_separable(const SubGraph& sg) {
  const Graph& g = sg.graph();
  std::vector<int> convs;
  for (int n : sg.nodes())
    if (g.node(n).op_type == "Conv" && g.node(n).domain.empty()) convs.push_back(n);
  if (convs.size() != 2) return unimplemented("a separable pair has two Conv nodes");
  SeparableSplit split{NodeSet(g.num_nodes()), NodeSet(g.num_nodes())};
  for (int c : convs) {
    const Node& conv = g.node(c);
    if (conv.inputs.empty() || conv.inputs[0] == kNoValue) return invalid_argument("Conv without X");
    const int producer = g.value(conv.inputs[0]).producer;
    (producer >= 0 && sg.nodes().contains(producer) ? split.second_conv : split.first_conv) = c;
  }
  if (split.first_conv < 0 || split.second_conv < 0)
    return unimplemented("in a separable pair the second Conv reads what the first group computes");
  // The second group: its Conv and every node of sg after it; the first group: the rest.
  std::vector<int> stack = {split.second_conv};
  split.second.add(split.second_conv);
  while (!stack.empty()) {
    const int n = stack.back();
    stack.pop_back();
    for (int v : g.node(n).outputs) {
      if (v == kNoValue) continue;
      for (int c : g.value(v).consumers)
        if (sg.nodes().contains(c) && !split.second.contains(c)) split.second.add(c), stack.push_back(c);
    }
  }
  for (int n : sg.nodes())
    if (!split.second.contains(n)) split.first.add(n);
  if (!split.first.contains(split.first_conv)) return unimplemented("the depthwise Conv depends on the 1x1 one");
  return split;
}

Status check_parts(const SeparableSplit& split, const SubGraph& first, const SubGraph& second) {
  TESSERA_RETURN_IF_ERROR(plan_depthwise(first).status());
  TESSERA_RETURN_IF_ERROR(check_pointwise_conv_group(second));
  if (conv_has_head(second)) return unimplemented("the 1x1 group of a separable pair opens with a Mul");
  const auto& outs = first.outputs();
  if (std::find(outs.begin(), outs.end(), first.graph().node(split.second_conv).inputs[0]) == outs.end())
    return unimplemented("the 1x1 Conv does not read a value the depthwise group stores");
  return Status();
}

// Where a kernel input of one part comes from: a kernel input of the pair, or an output of the
// first part.
struct PartInput {
  int pair_slot = -1;
  int first_output = -1;
};

class SeparableKernel final : public Kernel {
 public:
  Status init(const SubGraph& sg, const IsaKernels& isa, bool channels_last) {
    channels_last_ = channels_last;
    TESSERA_ASSIGN_OR_RETURN(SeparableSplit split, split_separable(sg));
    const Graph& g = sg.graph();
    const SubGraph first(g, split.first), second(g, split.second);
    TESSERA_RETURN_IF_ERROR(check_parts(split, first, second));
    if (channels_last) {
      TESSERA_ASSIGN_OR_RETURN(first_band_, compile_depthwise_band(first, isa));
      TESSERA_ASSIGN_OR_RETURN(second_band_, compile_pointwise_band(second, isa));
    } else {
      TESSERA_ASSIGN_OR_RETURN(first_kernel_, compile_conv_kernel(first, isa));
      TESSERA_ASSIGN_OR_RETURN(second_kernel_, compile_pointwise_conv(second, isa, false));
    }
    TESSERA_ASSIGN_OR_RETURN(first_inputs_, part_inputs(sg, first, first));
    TESSERA_ASSIGN_OR_RETURN(second_inputs_, part_inputs(sg, second, first));
    // Where each output of the pair comes from: an output of one part.
    for (int v : sg.outputs()) {
      const bool in_first = split.first.contains(g.value(v).producer);
      const std::vector<int>& outs = in_first ? first.outputs() : second.outputs();
      const auto it = std::find(outs.begin(), outs.end(), v);
      TESSERA_CHECK(it != outs.end());
      outputs_.push_back({in_first, static_cast<int>(it - outs.begin())});
    }
    // The second Conv's X as an output of the first part, and the first Conv's X as a kernel input.
    const auto& f_outs = first.outputs();
    x_of_second_ = static_cast<int>(std::find(f_outs.begin(), f_outs.end(), g.node(split.second_conv).inputs[0]) -
                                    f_outs.begin());
    TESSERA_ASSIGN_OR_RETURN(x_of_first_, source_of(sg, g.node(split.first_conv).inputs[0]));
    if (channels_last && x_of_first_.slot >= 0) x_of_first_.dims = channels_last_dims(x_of_first_.dims);
    TESSERA_ASSIGN_OR_RETURN(ConvShape s, conv_shape(g, g.node(split.first_conv)));
    images_ = s.n, pixels_ = s.oh * s.ow;
    return Status();
  }

  Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs,
             KernelRunContext& ctx) override {
    std::vector<Tensor> first_out, second_out;
    std::vector<const Tensor*> first_in = gather(first_inputs_, inputs, first_out);
    if (!channels_last_) {
      TESSERA_RETURN_IF_ERROR(first_kernel_->run(first_in, first_out, ctx));
      TESSERA_RETURN_IF_ERROR(second_kernel_->run(gather(second_inputs_, inputs, first_out), second_out, ctx));
    } else {
      TESSERA_ASSIGN_OR_RETURN(const float* x, resolve_float(x_of_first_, inputs));
      TESSERA_ASSIGN_OR_RETURN(EltwiseTail::Run r1, first_band_->start(first_in, ctx));
      first_band_->tail().finish(r1, first_out);  // the tensors, filled band by band below
      TESSERA_ASSIGN_OR_RETURN(EltwiseTail::Run r2, second_band_->start(gather(second_inputs_, inputs, first_out), ctx));
      const float* t = first_out[x_of_second_].data<float>();
      const int64_t bands = bands_per_image(pixels_, images_, pool_threads(ctx.pool));
      parallel(ctx.pool, images_ * bands, 1, [&](int64_t t0, int64_t t1) {
        ScratchBuffer scratch(std::max(first_band_->band_scratch_floats(), second_band_->band_scratch_floats()));
        for (int64_t task = t0; task < t1; ++task) {
          const int64_t image = task / bands, b = task % bands;
          const int64_t p0 = b * pixels_ / bands, p1 = (b + 1) * pixels_ / bands;
          first_band_->run_band(x, r1, image, p0, p1, scratch.data());
          second_band_->run_band(t, r2, image, p0, p1, scratch.data());
        }
      });
      second_band_->tail().finish(r2, second_out);
    }
    outputs.clear();
    for (const auto& [in_first, index] : outputs_) outputs.push_back(in_first ? first_out[index] : second_out[index]);
    return Status();
  }

 private:
  static Result<std::vector<PartInput>> part_inputs(const SubGraph& pair, const SubGraph& part,
                                                    const SubGraph& first) {
    std::vector<PartInput> out;
    for (int v : part.inputs()) {
      PartInput in;
      const auto& pi = pair.inputs();
      const auto& fo = first.outputs();
      if (auto it = std::find(pi.begin(), pi.end(), v); it != pi.end()) {
        in.pair_slot = static_cast<int>(it - pi.begin());
      } else if (auto jt = std::find(fo.begin(), fo.end(), v); jt != fo.end() && &part != &first) {
        in.first_output = static_cast<int>(jt - fo.begin());
      } else {
        return internal_error("a separable part reads a value that is neither an input nor the first part's");
      }
      out.push_back(in);
    }
    return out;
  }

  static std::vector<const Tensor*> gather(const std::vector<PartInput>& from, const std::vector<const Tensor*>& inputs,
                                           const std::vector<Tensor>& first_out) {
    std::vector<const Tensor*> in;
    for (const PartInput& p : from) in.push_back(p.pair_slot >= 0 ? inputs[p.pair_slot] : &first_out[p.first_output]);
    return in;
  }

  bool channels_last_ = false;
  std::unique_ptr<PixelBandKernel> first_band_, second_band_;  // channels-last
  std::unique_ptr<Kernel> first_kernel_, second_kernel_;       // row-major
  std::vector<PartInput> first_inputs_, second_inputs_;
  std::vector<std::pair<bool, int>> outputs_;  // per pair output: (from the first part, its index)
  int x_of_second_ = -1;
  ValueSource x_of_first_;
  int64_t images_ = 0, pixels_ = 0;
};

}  // namespace

Status check_depthwise_group(const SubGraph& sg) { return plan_depthwise(sg).status(); }

Result<std::unique_ptr<Kernel>> compile_depthwise_channels_last(const SubGraph& sg, const IsaKernels& isa) {
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<PixelBandKernel> k, compile_depthwise_band(sg, isa));
  return std::unique_ptr<Kernel>(std::move(k));
}

Status check_separable_group(const SubGraph& sg) {
  TESSERA_ASSIGN_OR_RETURN(SeparableSplit split, split_separable(sg));
  const SubGraph first(sg.graph(), split.first), second(sg.graph(), split.second);
  return check_parts(split, first, second);
}

Result<std::unique_ptr<Kernel>> compile_separable(const SubGraph& sg, const IsaKernels& isa, bool channels_last) {
  auto k = std::make_unique<SeparableKernel>();  // init checks the pair
  TESSERA_RETURN_IF_ERROR(k->init(sg, isa, channels_last));
  return std::unique_ptr<Kernel>(std::move(k));
}

}  // namespace tessera::native
