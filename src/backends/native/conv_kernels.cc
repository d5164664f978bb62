// Conv as a direct convolution: per task (image, group, block of output rows), the input rows
// the block reads are copied for every input channel of the group into a per-thread buffer,
// zero-padded left, right, above and below and split by stride phase (pixel x of phase f holds
// padded column x * stride + f), so that the taps of consecutive output pixels are consecutive
// floats. conv_row (simd_conv.h) then computes each output row for a block of output channels
// in registers, from weights packed [group][oc block][ic][kh][kw][oc in block] with the folded
// affine scale, starting from the folded shift. The elementwise tail runs on the block's rows.
// 3x3 convolutions with stride 1, one group and enough channels run as Winograd F(2x2, 3x3)
// instead (conv_winograd.cc), with the same folding and tail; depthwise ones (one input and one
// output channel per group, horizontal stride 1 or 2) one channel's rows at a time through
// depthwise_row (simd_depthwise.h).
#include "backends/native/conv_kernels.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <tuple>

#include "backends/native/conv_common.h"
#include "backends/native/conv_winograd.h"
#include "backends/native/kernel_io.h"

namespace tessera::native {
namespace {

// Direct convolutions whose output is at most this large run their elementwise tail over the whole
// output after the convolution instead of per task (see ConvKernel::run). Measured on rec's
// backbone (outputs up to 920 KB, tails of 8-9 ops): its 1x1 convolutions took 15-18% less time
// (0.70 -> 0.58 ms each), the native whole-model run 10.7 -> 10.2 ms; det (2 threads) no slower.
constexpr int64_t kTailAfterBytes = int64_t{2} << 20;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

bool winograd_applies(const ConvShape& s) {
  return s.kh == 3 && s.kw == 3 && s.sh == 1 && s.sw == 1 && s.dh == 1 && s.dw == 1 &&
         s.group == 1;
}

WinogradShape winograd_shape(const ConvShape& s) {
  return WinogradShape{s.n, s.c, s.h, s.w, s.oc, s.pad_top, s.pad_left, s.oh, s.ow};
}

// Whether this Conv runs as Winograd under `algorithm`, or why it cannot.
Result<bool> choose_winograd(const ConvShape& s, ConvAlgorithm algorithm) {
  switch (algorithm) {
    case ConvAlgorithm::kDirect: return false;
    case ConvAlgorithm::kWinograd:
      if (!winograd_applies(s))
        return invalid_argument(
            "Conv: Winograd needs a 3x3 kernel, stride 1, dilation 1 and one group");
      return true;
    case ConvAlgorithm::kAuto: break;
  }
  return winograd_applies(s) && winograd_pays(winograd_shape(s));
}

struct ConvPlan {
  ConvShape shape{};
  AffineTailPlan affine;
  bool winograd = false;
  bool depthwise = false;
};

Result<ConvPlan> plan_conv(const SubGraph& sg, ConvAlgorithm algorithm = ConvAlgorithm::kAuto) {
  const Graph& g = sg.graph();
  TESSERA_ASSIGN_OR_RETURN(const int anchor, find_anchor(sg, "Conv"));
  ConvPlan p;
  TESSERA_ASSIGN_OR_RETURN(p.shape, conv_shape(g, g.node(anchor)));
  const ConvShape& s = p.shape;
  TESSERA_ASSIGN_OR_RETURN(p.winograd, choose_winograd(s, algorithm));
  p.depthwise = depthwise_applies(s);
  TESSERA_ASSIGN_OR_RETURN(p.affine, plan_affine_tail(sg, anchor, {s.n, s.oc, s.oh, s.ow}));
  return p;
}

// Floats of one input row (all its stride phases) in the row buffer: output pixels rounded up
// to 16 (the widest vector loads) plus the taps' reach, per phase.
int64_t phase_floats(const ConvShape& s) {
  return round_up(s.ow, 16) + (s.kw - 1) * s.dw / s.sw + 1;
}

class ConvKernel final : public Kernel {
 public:
  ConvKernel(const IsaKernels& isa, ConvPlan plan) : isa_(isa), plan_(std::move(plan)) {}

  Status init(const SubGraph& sg) {
    const Graph& g = sg.graph();
    const Node& anchor = g.node(plan_.affine.anchor);
    const ConvShape& s = plan_.shape;
    TESSERA_ASSIGN_OR_RETURN(x_, source_of(sg, anchor.inputs[0]));
    if (plan_.winograd) {
      winograd_ = std::make_unique<WinogradConv>(
          isa_, winograd_shape(s), g.value(anchor.inputs[1]).constant->data<float>(),
          plan_.affine.scale, plan_.affine.shift);
      return tail_.init(sg, plan_.affine);
    }
    if (plan_.depthwise) {
      const float* w = g.value(anchor.inputs[1]).constant->data<float>();
      const int64_t taps = s.kh * s.kw;
      depthwise_weights_.resize(s.c * taps);
      for (int64_t c = 0; c < s.c; ++c)
        for (int64_t i = 0; i < taps; ++i)
          depthwise_weights_[c * taps + i] = w[c * taps + i] * plan_.affine.scale[c];
      bias_ = plan_.affine.shift;
      row_floats_ = round_up((s.ow - 1) * s.sw + 1, kDepthwiseBlock) + (s.kw - 1) * s.dw;
      return tail_.init(sg, plan_.affine);
    }
    if (fully_connected()) {
      // W[oc][ic] * scale[oc] transposed to [ic][oc]: per input channel, one pass over the outputs.
      const float* w = g.value(anchor.inputs[1]).constant->data<float>();
      fc_weights_.resize(s.c * s.oc);
      for (int64_t oc = 0; oc < s.oc; ++oc)
        for (int64_t ic = 0; ic < s.c; ++ic) fc_weights_[ic * s.oc + oc] = w[oc * s.c + ic] * plan_.affine.scale[oc];
      bias_ = plan_.affine.shift;
      return tail_.init(sg, plan_.affine);
    }
    const int64_t ocb = isa_.conv_oc_block, icg = s.ic_per_group(), ocg = s.oc_per_group(),
                  taps = s.kh * s.kw;
    blocks_ = ceil_div(ocg, ocb);
    // W[oc][ic][kh][kw] * scale[oc] into [group][block][ic][kh][kw][oc in block], zeros past oc.
    const float* w = g.value(anchor.inputs[1]).constant->data<float>();
    const int64_t block_floats = icg * taps * ocb;
    packed_w_ = std::make_unique<ScratchBuffer>(s.group * blocks_ * block_floats);
    bias_.assign(s.group * blocks_ * ocb, 0.0f);
    std::fill_n(packed_w_->data(), s.group * blocks_ * block_floats, 0.0f);
    for (int64_t oc = 0; oc < s.oc; ++oc) {
      const int64_t grp = oc / ocg, o = oc % ocg, blk = grp * blocks_ + o / ocb;
      float* dst = packed_w_->data() + blk * block_floats + o % ocb;
      for (int64_t i = 0; i < icg * taps; ++i)
        dst[i * ocb] = w[oc * icg * taps + i] * plan_.affine.scale[oc];
      bias_[blk * ocb + o % ocb] = plan_.affine.shift[oc];
    }
    // Narrow rows at stride 1: the rows of a block as one row of rows * (padded width) pixels
    // (the few between two rows are computed and dropped), so the vectors stay full.
    flat_ = s.sh == 1 && s.sw == 1 && s.ow < 64;
    phase_ = flat_ ? s.ow + (s.kw - 1) * s.dw : phase_floats(s);
    row_floats_ = s.sw * phase_;
    for (int64_t kh = 0; kh < s.kh; ++kh)
      for (int64_t kw = 0; kw < s.kw; ++kw)
        tap_offsets_.push_back(kh * s.dh * row_floats_ + (kw * s.dw % s.sw) * phase_ +
                               kw * s.dw / s.sw);
    return tail_.init(sg, plan_.affine);
  }

  Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs,
             KernelRunContext& ctx) override {
    TESSERA_ASSIGN_OR_RETURN(const float* x, resolve_float(x_, inputs));
    TESSERA_ASSIGN_OR_RETURN(EltwiseTail::Run r, tail_.start(inputs, ctx));
    const ConvShape& s = plan_.shape;
    if (winograd_) {
      winograd_->run(x, r.y.data<float>(), ctx.pool, tail_.scratch_floats(),
                     [&](const WinogradBlock& b, float* scratch) { run_tail(r, b, scratch); });
      tail_.finish(r, outputs);
      return Status();
    }
    if (plan_.depthwise) {
      run_depthwise(x, r, ctx.pool);
      tail_.finish(r, outputs);
      return Status();
    }
    if (fully_connected()) {
      float* y = r.y.data<float>();
      for (int64_t n = 0; n < s.n; ++n) {
        float* out = y + n * s.oc;
        std::copy(bias_.begin(), bias_.end(), out);
        for (int64_t ic = 0; ic < s.c; ++ic) {
          const float v = x[n * s.c + ic];
          const float* w = fc_weights_.data() + ic * s.oc;
          for (int64_t oc = 0; oc < s.oc; ++oc) out[oc] += v * w[oc];
        }
      }
      tail_.apply_all(isa_, r, nullptr);
      tail_.finish(r, outputs);
      return Status();
    }
    const int threads = pool_threads(ctx.pool);
    // Blocks of output rows: a row buffer of at most ~512 KB (the L2), at least 4 tasks a thread.
    int64_t rows = std::min<int64_t>(s.oh, 8);
    const auto buffer_floats = [&](int64_t rs) {
      return s.ic_per_group() * input_rows(rs) * row_floats_;
    };
    while (rows > 1 && buffer_floats(rows) > (int64_t{128} << 10)) --rows;
    while (rows > 1 && s.n * s.group * ceil_div(s.oh, rows) < 4 * threads) rows = (rows + 1) / 2;
    const int64_t per_plane = ceil_div(s.oh, rows);
    float* y = r.y.data<float>();
    // An output that fits the caches gets its tail in one pass after the convolution: per task it
    // would be one call per output channel over a few rows, whose setup costs more than the rows.
    const bool tail_after = s.n * s.oc * s.oh * s.ow * int64_t{sizeof(float)} <= kTailAfterBytes;
    parallel(ctx.pool, s.n * s.group * per_plane, 1, [&](int64_t t0, int64_t t1) {
      // (slack past the rows: the last vectors of a flat row read a little beyond them)
      const int64_t slack = 32 + s.kw * s.dw;
      ScratchBuffer buffer(buffer_floats(rows) + slack);
      std::fill_n(buffer.data() + buffer_floats(rows), slack, 0.0f);
      ScratchBuffer flat_out(flat_ ? isa_.conv_oc_block * flat_stride(rows) : 0);
      ScratchBuffer scratch(tail_after ? 0 : tail_.scratch_floats());
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t n = t / (s.group * per_plane), grp = t / per_plane % s.group;
        const int64_t oh0 = t % per_plane * rows, oh1 = std::min(s.oh, oh0 + rows);
        run_rows(x, y, n, grp, oh0, oh1, buffer.data(), flat_out.data(), flat_stride(rows));
        if (tail_after) continue;
        for (int64_t o = 0; o < s.oc_per_group(); ++o) {
          const int64_t begin = ((n * s.oc + grp * s.oc_per_group() + o) * s.oh + oh0) * s.ow;
          tail_.apply(isa_, r, begin, begin + (oh1 - oh0) * s.ow, scratch.data());
        }
      }
    });
    if (tail_after) tail_.apply_all(isa_, r, ctx.pool);
    tail_.finish(r, outputs);
    return Status();
  }

 private:
  // The tail on one finished Winograd block: per channel, its rows as one range when they are
  // whole, else one range per row.
  void run_tail(const EltwiseTail::Run& r, const WinogradBlock& b, float* scratch) const {
    if (tail_.empty()) return;
    const ConvShape& s = plan_.shape;
    for (int64_t oc = 0; oc < s.oc; ++oc) {
      const int64_t plane = (b.n * s.oc + oc) * s.oh * s.ow;
      if (b.ow0 == 0 && b.ow1 == s.ow) {
        tail_.apply(isa_, r, plane + b.oh0 * s.ow, plane + b.oh1 * s.ow, scratch);
        continue;
      }
      for (int64_t oh = b.oh0; oh < b.oh1; ++oh)
        tail_.apply(isa_, r, plane + oh * s.ow + b.ow0, plane + oh * s.ow + b.ow1, scratch);
    }
  }

  // Depthwise: tasks of one channel's output rows; their input rows zero-padded into a buffer
  // of at most 256 KB, each output row by depthwise_row, then the tail on the finished rows.
  void run_depthwise(const float* x, EltwiseTail::Run& run, ThreadPool* pool) const {
    const ConvShape& s = plan_.shape;
    const int threads = pool_threads(pool);
    int64_t rows = s.oh;
    while (rows > 1 && input_rows(rows) * row_floats_ > (int64_t{64} << 10)) rows = (rows + 1) / 2;
    while (rows > 1 && s.n * s.c * ceil_div(s.oh, rows) < 4 * threads) rows = (rows + 1) / 2;
    const int64_t per_plane = ceil_div(s.oh, rows);
    float* y = run.y.data<float>();
    parallel(pool, s.n * s.c * per_plane, 1, [&](int64_t t0, int64_t t1) {
      ScratchBuffer buffer(input_rows(rows) * row_floats_);
      ScratchBuffer scratch(tail_.scratch_floats());
      std::vector<const float*> taps(s.kh);
      DepthwiseRowArgs a{};
      a.rows = taps.data();
      a.kh = s.kh, a.kw = s.kw, a.dilation = s.dw, a.stride = s.sw, a.width = s.ow;
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t n = t / (s.c * per_plane), c = t / per_plane % s.c;
        const int64_t oh0 = t % per_plane * rows, oh1 = std::min(s.oh, oh0 + rows);
        const int64_t ih0 = oh0 * s.sh - s.pad_top, in_rows = input_rows(oh1 - oh0);
        const float* plane = x + (n * s.c + c) * s.h * s.w;
        for (int64_t i = 0; i < in_rows; ++i)
          if (ih0 + i >= 0 && ih0 + i < s.h)
            fill_padded_row(plane + (ih0 + i) * s.w, buffer.data() + i * row_floats_, row_floats_);
        a.weights = depthwise_weights_.data() + c * s.kh * s.kw;
        a.bias = bias_[c];
        const int64_t out_plane = (n * s.c + c) * s.oh * s.ow;
        for (int64_t oh = oh0; oh < oh1; ++oh) {
          for (int64_t k = 0; k < s.kh; ++k) {  // null: a row above or below the image
            const int64_t i = (oh - oh0) * s.sh + k * s.dh;
            taps[k] = ih0 + i >= 0 && ih0 + i < s.h ? buffer.data() + i * row_floats_ : nullptr;
          }
          a.out = y + out_plane + oh * s.ow;
          isa_.depthwise_row(a);
        }
        tail_.apply(isa_, run, out_plane + oh0 * s.ow, out_plane + oh1 * s.ow, scratch.data());
      }
    });
  }

  // A 1x1 convolution of one-pixel images (a squeeze-excite block's FC layers): the direct
  // kernel's vectors run along output pixels, so here it is a matrix-vector product per image.
  bool fully_connected() const {
    const ConvShape& s = plan_.shape;
    return s.h == 1 && s.w == 1 && s.kh == 1 && s.kw == 1 && s.oh == 1 && s.ow == 1 && s.group == 1 &&
           s.pad_top == 0 && s.pad_left == 0;
  }

  // One image row into dst (`floats` floats): padded column x holds src[x - pad_left].
  void fill_padded_row(const float* src, float* dst, int64_t floats) const {
    const ConvShape& s = plan_.shape;
    const int64_t left = std::min(s.pad_left, floats);
    const int64_t copy = std::clamp<int64_t>(floats - left, 0, s.w);
    std::fill_n(dst, left, 0.0f);
    std::memcpy(dst + left, src, copy * sizeof(float));
    std::fill(dst + left + copy, dst + floats, 0.0f);
  }

  // Input rows that output rows [oh0, oh0 + rows) read.
  int64_t input_rows(int64_t rows) const {
    const ConvShape& s = plan_.shape;
    return (rows - 1) * s.sh + (s.kh - 1) * s.dh + 1;
  }

  // Output rows [oh0, oh1) of image n, group grp: the row buffer, then each block of channels.
  // Floats per channel of the flat output of a block of `rows` rows.
  int64_t flat_stride(int64_t rows) const { return round_up(rows * row_floats_, 16); }

  // Output rows [oh0, oh1) of image n, group grp: the row buffer, then each block of channels
  // (flat: into flat_out, channel stride flat_floats, then the real pixels to y).
  void run_rows(const float* x, float* y, int64_t n, int64_t grp, int64_t oh0, int64_t oh1,
                float* buffer, float* flat_out, int64_t flat_floats) const {
    const ConvShape& s = plan_.shape;
    const int64_t icg = s.ic_per_group(), ocg = s.oc_per_group(), ocb = isa_.conv_oc_block;
    const int64_t in_rows = input_rows(oh1 - oh0), channel_floats = in_rows * row_floats_;
    const float* image = x + (n * s.c + grp * icg) * s.h * s.w;
    for (int64_t c = 0; c < icg; ++c)
      for (int64_t r = 0; r < in_rows; ++r)
        fill_row(image + c * s.h * s.w, oh0 * s.sh - s.pad_top + r,
                 buffer + c * channel_floats + r * row_floats_);
    ConvRowArgs a{};
    a.channels = icg;
    a.channel_stride = channel_floats;
    a.tap_offsets = tap_offsets_.data();
    a.taps = static_cast<int64_t>(tap_offsets_.size());
    a.out_stride = s.oh * s.ow;
    a.width = s.ow;
    for (int64_t b = 0; b < blocks_; ++b) {
      const int64_t blk = grp * blocks_ + b;
      a.weights = packed_w_->data() + blk * icg * a.taps * ocb;
      a.bias = bias_.data() + blk * ocb;
      a.oc_count = std::min(ocb, ocg - b * ocb);
      float* out = y + ((n * s.oc + grp * ocg + b * ocb) * s.oh + oh0) * s.ow;
      if (flat_) {
        a.in = buffer;
        a.out = flat_out;
        a.out_stride = flat_floats;
        a.width = (oh1 - oh0) * row_floats_;
        isa_.conv_row(a);
        for (int64_t o = 0; o < a.oc_count; ++o)
          for (int64_t r = 0; r < oh1 - oh0; ++r)
            std::memcpy(out + o * s.oh * s.ow + r * s.ow,
                        flat_out + o * flat_floats + r * row_floats_, s.ow * sizeof(float));
        continue;
      }
      for (int64_t oh = oh0; oh < oh1; ++oh) {
        a.in = buffer + (oh - oh0) * s.sh * row_floats_;
        a.out = y + ((n * s.oc + grp * ocg + b * ocb) * s.oh + oh) * s.ow;
        isa_.conv_row(a);
      }
    }
  }

  // Input row ih of one channel plane (zeros outside the image) into dst, split by phase.
  void fill_row(const float* plane, int64_t ih, float* dst) const {
    const ConvShape& s = plan_.shape;
    if (ih < 0 || ih >= s.h) {
      std::fill_n(dst, row_floats_, 0.0f);
      return;
    }
    const float* src = plane + ih * s.w;
    if (s.sw == 1) {
      fill_padded_row(src, dst, phase_);
      return;
    }
    for (int64_t f = 0; f < s.sw; ++f)
      for (int64_t i = 0; i < phase_; ++i) {
        const int64_t col = i * s.sw + f - s.pad_left;
        dst[f * phase_ + i] = col >= 0 && col < s.w ? src[col] : 0.0f;
      }
  }

  const IsaKernels& isa_;
  ConvPlan plan_;
  ValueSource x_;
  int64_t blocks_ = 0;  // channel blocks per group
  std::unique_ptr<ScratchBuffer> packed_w_;
  std::vector<float> fc_weights_;  // fully_connected(): [ic][oc]
  std::vector<float> bias_;  // [group][block][oc in block]; depthwise and fully_connected(): [oc]
  bool flat_ = false;
  int64_t phase_ = 0, row_floats_ = 0;
  std::vector<int64_t> tap_offsets_;
  std::vector<float> depthwise_weights_;  // [C][KH][KW] times the folded scale, when depthwise
  std::unique_ptr<WinogradConv> winograd_;  // instead of all the above, when planned
  EltwiseTail tail_;
};

}  // namespace

bool is_conv_op(const std::string& op_type) { return op_type == "Conv"; }

Status check_conv_node(const Graph& g, int n) { return conv_shape(g, g.node(n)).status(); }

Status check_conv_group(const SubGraph& sg) { return plan_conv(sg).status(); }

Result<bool> conv_uses_winograd(const Graph& g, int n) {
  TESSERA_ASSIGN_OR_RETURN(const ConvShape s, conv_shape(g, g.node(n)));
  return choose_winograd(s, ConvAlgorithm::kAuto);
}

Result<std::unique_ptr<Kernel>> compile_conv_kernel(const SubGraph& sg, const IsaKernels& isa,
                                                    ConvAlgorithm algorithm) {
  TESSERA_ASSIGN_OR_RETURN(ConvPlan plan, plan_conv(sg, algorithm));
  auto k = std::make_unique<ConvKernel>(isa, std::move(plan));
  TESSERA_RETURN_IF_ERROR(k->init(sg));
  return std::unique_ptr<Kernel>(std::move(k));
}

}  // namespace tessera::native
