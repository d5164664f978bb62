// ConvTranspose and inference BatchNormalization.
//
// With kernel == stride (no padding or dilation) a ConvTranspose writes disjoint KH x KW tiles:
// y[n, oc, h*KH + kh, w*KW + kw] = sum_ic x[n, ic, h, w] * W[ic, oc, kh, kw]. The ISA's
// deconv_row (simd_deconv.h) computes every tile of one input row in registers, straight from
// x's channel rows, and stores each (oc, kh) output row interleaved; tasks of a few input rows
// then run the elementwise tail on their output rows while they are in cache. Other
// ConvTransposes (overlapping, padded or dilated taps) compute C = every tap of every input
// pixel by SGEMM (A(p, ic) = x[n, ic, p], a column-major view of NCHW data; W as a constant
// [IC, OC*KH*KW] B) for a whole image, then add each output pixel's taps plane by plane.
// Per-channel affine nodes right after the ConvTranspose (its bias Add, a BatchNormalization)
// are folded into W and the bias first; with kernel == stride, a Relu or Clip after them becomes
// the row kernel's clamp.
#include "backends/native/deconv_kernels.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <tuple>
#include <utility>

#include "backends/native/conv_common.h"
#include "backends/native/eltwise_compile.h"
#include "backends/native/kernel_io.h"
#include "backends/native/sgemm.h"

namespace tessera::native {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct DeconvShape {
  int64_t n, ic, h, w, oc, kh, kw;
  int64_t sh = 1, sw = 1, dh = 1, dw = 1, pad_top = 0, pad_left = 0, oh_ = 0, ow_ = 0;
  int64_t oh() const { return oh_; }
  int64_t ow() const { return ow_; }
  // Kernel == stride, no padding or dilation: every output pixel comes from one input pixel.
  bool tiles() const { return sh == kh && sw == kw && dh == 1 && dw == 1 && oh_ == h * kh && ow_ == w * kw && pad_top == 0 && pad_left == 0; }
};

Result<DeconvShape> deconv_shape(const Graph& g, const Node& node) {
  if (node.op_type != "ConvTranspose" || !node.domain.empty()) return unimplemented("not a ConvTranspose");
  if (node.inputs.size() < 2) return invalid_argument("ConvTranspose takes X and W");
  TESSERA_RETURN_IF_ERROR(check_float_value(g, node.inputs[0]));
  TESSERA_RETURN_IF_ERROR(check_float_value(g, node.inputs[1]));
  if (!g.value(node.inputs[1]).constant) return unimplemented("ConvTranspose weights that are not constant");
  const std::vector<int64_t> x = g.value(node.inputs[0]).type.static_dims();
  const std::vector<int64_t> w = g.value(node.inputs[1]).type.static_dims();
  if (x.size() != 4 || w.size() != 4) return unimplemented("ConvTranspose that is not 2-D");
  if (node.attr_int("group", 1) != 1) return unimplemented("grouped ConvTranspose");
  if (node.attr_string("auto_pad", "NOTSET") != "NOTSET" || node.has_attr("output_shape"))
    return unimplemented("ConvTranspose with auto_pad or output_shape");
  DeconvShape s{x[0], x[1], x[2], x[3], w[1], w[2], w[3]};
  if (w[0] != s.ic) return invalid_argument("ConvTranspose: W's first dim is not X's channels");
  const std::vector<int64_t> kernel = {s.kh, s.kw};
  if (node.attr_ints("kernel_shape", kernel) != kernel) return invalid_argument("ConvTranspose: kernel_shape is not W's");
  const std::vector<int64_t> strides = node.attr_ints("strides", {1, 1}), dil = node.attr_ints("dilations", {1, 1});
  const std::vector<int64_t> pads = node.attr_ints("pads", {0, 0, 0, 0}), out_pad = node.attr_ints("output_padding", {0, 0});
  if (strides.size() != 2 || dil.size() != 2 || pads.size() != 4 || out_pad.size() != 2)
    return invalid_argument("ConvTranspose: strides, dilations, pads or output_padding of the wrong length");
  if (std::any_of(strides.begin(), strides.end(), [](int64_t v) { return v < 1; }) ||
      std::any_of(dil.begin(), dil.end(), [](int64_t v) { return v < 1; }) ||
      std::any_of(pads.begin(), pads.end(), [](int64_t v) { return v < 0; }))
    return invalid_argument("ConvTranspose: strides and dilations must be positive, pads not negative");
  s.sh = strides[0], s.sw = strides[1], s.dh = dil[0], s.dw = dil[1], s.pad_top = pads[0], s.pad_left = pads[1];
  s.oh_ = (s.h - 1) * s.sh - pads[0] - pads[2] + s.dh * (s.kh - 1) + 1 + out_pad[0];
  s.ow_ = (s.w - 1) * s.sw - pads[1] - pads[3] + s.dw * (s.kw - 1) + 1 + out_pad[1];
  if (s.oh_ < 1 || s.ow_ < 1) return invalid_argument("ConvTranspose: empty output");
  if (node.inputs.size() > 2 && node.inputs[2] != kNoValue) {
    TESSERA_RETURN_IF_ERROR(check_float_value(g, node.inputs[2]));
    if (!per_channel(g, node.inputs[2], s.oc, 2)) return unimplemented("ConvTranspose bias that is not constant");
  }
  if (node.outputs.empty() || node.outputs[0] == kNoValue) return invalid_argument("ConvTranspose has no output");
  TESSERA_RETURN_IF_ERROR(check_float_value(g, node.outputs[0]));
  if (g.value(node.outputs[0]).type.static_dims() != std::vector<int64_t>{s.n, s.oc, s.oh(), s.ow()})
    return unimplemented("ConvTranspose whose output shape is not the one its attributes give");
  return s;
}

// A ConvTranspose group: its shape, the affine nodes and tail around it, and the bounds of a
// Relu or Clip the row kernel applies itself.
struct DeconvPlan {
  DeconvShape shape{};
  AffineTailPlan affine;
  std::optional<std::pair<float, float>> clamp;
};

// A Relu or Clip that alone reads the folded value becomes the clamp (the tail would read and
// write every output element once more for it); the value the kernel computes is then its output.
void fold_clamp(const SubGraph& sg, DeconvPlan& p) {
  const Graph& g = sg.graph();
  AffineTailPlan& a = p.affine;
  const std::vector<int>& outputs = sg.outputs();
  const std::vector<int>& readers = g.value(a.folded_value).consumers;
  const bool exported = std::find(outputs.begin(), outputs.end(), a.folded_value) != outputs.end();
  if (exported || readers.size() != 1) return;
  const auto it = std::find(a.tail.begin(), a.tail.end(), readers[0]);
  if (it == a.tail.end() || g.node(*it).inputs[0] != a.folded_value) return;
  p.clamp = clamp_bounds(g, g.node(*it));
  if (!p.clamp) return;
  a.folded_value = g.node(*it).outputs[0];
  a.tail.erase(it);
}

Result<DeconvPlan> plan_deconv(const SubGraph& sg) {
  const Graph& g = sg.graph();
  TESSERA_ASSIGN_OR_RETURN(const int anchor, find_anchor(sg, "ConvTranspose"));
  DeconvPlan p;
  TESSERA_ASSIGN_OR_RETURN(p.shape, deconv_shape(g, g.node(anchor)));
  const DeconvShape& s = p.shape;
  TESSERA_ASSIGN_OR_RETURN(p.affine, plan_affine_tail(sg, anchor, {s.n, s.oc, s.oh(), s.ow()}));
  if (s.tiles()) fold_clamp(sg, p);
  return p;
}

class DeconvKernel final : public Kernel {
 public:
  DeconvKernel(const IsaKernels& isa, DeconvPlan plan) : isa_(isa), plan_(std::move(plan)) {}

  Status init(const SubGraph& sg) {
    const Graph& g = sg.graph();
    const Node& anchor = g.node(plan_.affine.anchor);
    const DeconvShape& s = plan_.shape;
    TESSERA_ASSIGN_OR_RETURN(x_, source_of(sg, anchor.inputs[0]));
    const int64_t cols = s.oc * s.kh * s.kw, tile = s.kh * s.kw;
    // W[ic][oc][kh][kw] is already B[ic][(oc, kh, kw)]: scale its columns, pack it.
    const float* w = g.value(anchor.inputs[1]).constant->data<float>();
    std::vector<float> scaled(s.ic * cols);
    for (int64_t i = 0; i < s.ic * cols; ++i) scaled[i] = w[i] * plan_.affine.scale[(i % cols) / tile];
    if (s.tiles()) {
      pack_row_kernel(scaled);
    } else {
      const int nr = gemm_panel_width(isa_, cols);
      packed_w_ = std::make_unique<ScratchBuffer>(packed_b_floats(s.ic, cols, nr));
      pack_b(scaled.data(), cols, 1, s.ic, cols, nr, packed_w_->data());
    }
    return tail_.init(sg, plan_.affine);
  }

  Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs, KernelRunContext& ctx) override {
    TESSERA_ASSIGN_OR_RETURN(const float* x, resolve_float(x_, inputs));
    TESSERA_ASSIGN_OR_RETURN(EltwiseTail::Run r, tail_.start(inputs, ctx));
    float* yp = r.y.data<float>();
    if (plan_.shape.tiles()) {
      run_tiles(x, yp, r, ctx);
    } else {
      run_overlapping(x, yp, r, ctx);
    }
    tail_.finish(r, outputs);
    return Status();
  }

  // Kernel == stride: tasks of `rows` input rows (about 192 KiB of input and output, so that
  // the tail finds the output in L2), at least a few per thread.
  void run_tiles(const float* x, float* yp, const EltwiseTail::Run& tail_run, KernelRunContext& ctx) const {
    const DeconvShape& s = plan_.shape;
    const int threads = pool_threads(ctx.pool);
    const int64_t oh = s.oh(), ow = s.ow();
    const int64_t row_bytes = (s.ic * s.w + s.oc * s.kh * ow) * int64_t{sizeof(float)};
    int64_t rows = std::clamp<int64_t>((192 << 10) / row_bytes, 1, s.h);
    while (rows > 1 && s.n * ceil_div(s.h, rows) < 4 * threads) rows = (rows + 1) / 2;
    const int64_t per_image = ceil_div(s.h, rows);
    parallel(ctx.pool, s.n * per_image, 1, [&](int64_t t0, int64_t t1) {
      ScratchBuffer scratch(tail_.scratch_floats());
      DeconvRowArgs a{};
      a.channels = s.ic;
      a.channel_stride = s.h * s.w;
      a.width = s.w;
      a.weights = row_weights_.data();
      a.bias = row_bias_.data();
      a.columns = s.oc * s.kh * s.kw;
      a.column_offsets = column_offsets_.data();
      a.kw = s.kw;
      a.clamp = plan_.clamp.has_value();
      if (a.clamp) std::tie(a.lo, a.hi) = *plan_.clamp;
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t n = t / per_image, h0 = (t % per_image) * rows, h1 = std::min(s.h, h0 + rows);
        for (int64_t h = h0; h < h1; ++h) {
          a.in = x + (n * s.ic * s.h + h) * s.w;
          a.out = yp + n * s.oc * oh * ow + h * s.kh * ow;
          isa_.deconv_row(a);
        }
        for (int64_t oc = 0; oc < s.oc; ++oc) {
          const int64_t begin = (n * s.oc + oc) * oh * ow + h0 * s.kh * ow;
          tail_.apply(isa_, tail_run, begin, begin + (h1 - h0) * s.kh * ow, scratch.data());
        }
      }
    });
  }

  // Overlapping (or padded, dilated) taps: C of every pixel of an image first (each task its own
  // rows of C), then per output plane the bias, the sum of the taps landing on each pixel, and
  // the tail.
  void run_overlapping(const float* x, float* yp, const EltwiseTail::Run& tail_run, KernelRunContext& ctx) const {
    const DeconvShape& s = plan_.shape;
    const int threads = pool_threads(ctx.pool);
    const int64_t cols = s.oc * s.kh * s.kw, oh = s.oh(), ow = s.ow();
    int64_t rows = std::clamp<int64_t>(256 / std::max<int64_t>(1, s.w), 1, s.h);
    while (rows > 1 && ceil_div(s.h, rows) < 4 * threads) rows = (rows + 1) / 2;
    ScratchBuffer c(s.h * s.w * cols);
    for (int64_t n = 0; n < s.n; ++n) {
      parallel(ctx.pool, ceil_div(s.h, rows), 1, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          const int64_t h0 = t * rows, h1 = std::min(s.h, h0 + rows);
          GemmShape gs;
          gs.m = (h1 - h0) * s.w;
          gs.n = cols;
          gs.k = s.ic;
          gs.a_rs = 1;
          gs.a_cs = s.h * s.w;
          gs.ldc = cols;
          gs.b_packed = true;
          sgemm_batched(isa_, gs,
                        {GemmOperands{x + n * s.ic * s.h * s.w + h0 * s.w, packed_w_->data(), c.data() + h0 * s.w * cols}},
                        GemmHooks{}, nullptr);
        }
      });
      parallel(ctx.pool, s.oc, 1, [&](int64_t oc0, int64_t oc1) {
        ScratchBuffer scratch(tail_.scratch_floats());
        for (int64_t oc = oc0; oc < oc1; ++oc) {
          float* plane = yp + (n * s.oc + oc) * oh * ow;
          std::fill(plane, plane + oh * ow, plan_.affine.shift[oc]);
          for (int64_t ih = 0; ih < s.h; ++ih)
            for (int64_t kh = 0; kh < s.kh; ++kh) {
              const int64_t y = ih * s.sh - s.pad_top + kh * s.dh;
              if (y < 0 || y >= oh) continue;
              float* out_row = plane + y * ow;
              for (int64_t iw = 0; iw < s.w; ++iw) {
                const float* taps = c.data() + (ih * s.w + iw) * cols + (oc * s.kh + kh) * s.kw;
                const int64_t x0 = iw * s.sw - s.pad_left;
                for (int64_t kw = 0; kw < s.kw; ++kw) {
                  const int64_t xo = x0 + kw * s.dw;
                  if (xo >= 0 && xo < ow) out_row[xo] += taps[kw];
                }
              }
            }
          const int64_t begin = (n * s.oc + oc) * oh * ow;
          tail_.apply(isa_, tail_run, begin, begin + oh * ow, scratch.data());
        }
      });
    }
  }

 private:
  // The folded weights `scaled` ([IC][columns]) in the row kernel's blocks of
  // deconv_col_block columns ([block][IC][block columns], zero past the last column), the bias
  // per column, and where each column's pixel 0 goes.
  void pack_row_kernel(const std::vector<float>& scaled) {
    const DeconvShape& s = plan_.shape;
    const int64_t cols = s.oc * s.kh * s.kw, tile = s.kh * s.kw, block = isa_.deconv_col_block;
    const int64_t padded = ceil_div(cols, block) * block;
    row_weights_.assign(padded * s.ic, 0.0f);
    row_bias_.assign(padded, 0.0f);
    column_offsets_.resize(cols);
    for (int64_t j = 0; j < cols; ++j) {
      for (int64_t c = 0; c < s.ic; ++c)
        row_weights_[((j / block) * s.ic + c) * block + j % block] = scaled[c * cols + j];
      row_bias_[j] = plan_.affine.shift[j / tile];
      column_offsets_[j] = (j / tile) * s.oh() * s.ow() + (j / s.kw % s.kh) * s.ow() + j % s.kw;
    }
  }

  const IsaKernels& isa_;
  DeconvPlan plan_;
  ValueSource x_;
  std::unique_ptr<ScratchBuffer> packed_w_;            // overlapping taps: SGEMM's B
  std::vector<float> row_weights_, row_bias_;         // kernel == stride: deconv_row's blocks
  std::vector<int64_t> column_offsets_;
  EltwiseTail tail_;
};

class BatchNormKernel final : public Kernel {
 public:
  BatchNormKernel(ValueSource x, std::vector<float> a, std::vector<float> b, std::vector<int64_t> dims)
      : x_(std::move(x)), a_(std::move(a)), b_(std::move(b)), dims_(std::move(dims)) {}

  Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs, KernelRunContext& ctx) override {
    TESSERA_ASSIGN_OR_RETURN(const float* x, resolve_float(x_, inputs));
    Tensor y = ctx.alloc.allocate_uninitialized(DType::kFloat32, dims_);
    float* yp = y.data<float>();
    const int64_t channels = dims_[1];
    int64_t plane = 1;
    for (size_t i = 2; i < dims_.size(); ++i) plane *= dims_[i];
    parallel(ctx.pool, dims_[0] * channels, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, plane)),
             [&](int64_t p0, int64_t p1) {
               for (int64_t p = p0; p < p1; ++p) {
                 const float a = a_[p % channels], b = b_[p % channels];
                 const float* src = x + p * plane;
                 float* dst = yp + p * plane;
                 for (int64_t i = 0; i < plane; ++i) dst[i] = src[i] * a + b;
               }
             });
    outputs.assign(1, y);
    return Status();
  }

 private:
  ValueSource x_;
  std::vector<float> a_, b_;
  std::vector<int64_t> dims_;
};

}  // namespace

bool is_deconv_op(const std::string& op_type) { return op_type == "ConvTranspose"; }

Status check_deconv_node(const Graph& g, int n) { return deconv_shape(g, g.node(n)).status(); }

Status check_deconv_group(const SubGraph& sg) { return plan_deconv(sg).status(); }

Result<std::unique_ptr<Kernel>> compile_deconv_kernel(const SubGraph& sg, const IsaKernels& isa) {
  TESSERA_ASSIGN_OR_RETURN(DeconvPlan plan, plan_deconv(sg));
  auto k = std::make_unique<DeconvKernel>(isa, std::move(plan));
  TESSERA_RETURN_IF_ERROR(k->init(sg));
  return std::unique_ptr<Kernel>(std::move(k));
}

Status check_batch_norm_node(const Graph& g, int n) {
  const Node& node = g.node(n);
  if (node.op_type != "BatchNormalization" || !node.domain.empty()) return unimplemented("not a BatchNormalization");
  if (node.outputs.empty() || node.outputs[0] == kNoValue) return invalid_argument("BatchNormalization has no output");
  TESSERA_RETURN_IF_ERROR(check_float_value(g, node.outputs[0]));
  return batch_norm_affine(g, node).status();
}

Result<std::unique_ptr<Kernel>> compile_batch_norm_kernel(const SubGraph& sg) {
  const Graph& g = sg.graph();
  if (sg.size() != 1) return unimplemented("BatchNormalization runs alone");
  const int n = sg.nodes().first();
  TESSERA_RETURN_IF_ERROR(check_batch_norm_node(g, n));
  const Node& node = g.node(n);
  TESSERA_ASSIGN_OR_RETURN(auto ab, batch_norm_affine(g, node));
  TESSERA_ASSIGN_OR_RETURN(ValueSource x, source_of(sg, node.inputs[0]));
  return std::unique_ptr<Kernel>(std::make_unique<BatchNormKernel>(std::move(x), std::move(ab.first),
                                                                   std::move(ab.second),
                                                                   g.value(node.outputs[0]).type.static_dims()));
}

}  // namespace tessera::native
