// 1x1 convolutions as GEMMs (see pointwise_conv.h). Per image b, with W' the weights times the
// folded affine scale (per output channel) and, when the group opens with x * s, times s (per
// input channel, packed again each run):
//   channels-last: Y_b [HW, OC] = X_b [HW, C] * W'^T [C, OC]   (B = W'^T, packed; X_b read in place)
//   row-major:     Y_b [OC, HW] = W' [OC, C] * X_b [C, HW]      (A = W'; sgemm packs X_b)
// Each block of Y starts from the folded shift and gets the elementwise tail once it is complete.
#include "backends/native/pointwise_conv.h"

#include <algorithm>

#include "backends/native/conv_common.h"
#include "backends/native/kernel_io.h"
#include "backends/native/sgemm.h"

namespace tessera::native {
namespace {

// The scaling Mul feeding sg's Conv: its node, the scaled tensor x and the scale s.
struct ScaleHead {
  int node = -1;
  int x = kNoValue, s = kNoValue;
};

struct PointwisePlan {
  int64_t n = 0, c = 0, oc = 0, hw = 0;
  AffineTailPlan affine;
  ScaleHead head;
  int64_t s_batch_stride = 0, s_channel_stride = 0;  // s[b, ci] = s[b * batch + ci * channel]
};

// Why value s does not scale x [N, C, H, W] per channel (per image too): it must broadcast to
// [N, C, 1, 1].
Status check_channel_scale(const Graph& g, int s, const std::vector<int64_t>& x) {
  TESSERA_RETURN_IF_ERROR(check_float_value(g, s));
  const std::vector<int64_t> d = g.value(s).type.static_dims();
  if (d.size() > 4) return unimplemented("a scale of rank over 4");
  const std::vector<int64_t> full = [&] {
    std::vector<int64_t> v(4 - d.size(), 1);
    v.insert(v.end(), d.begin(), d.end());
    return v;
  }();
  if (full[2] != 1 || full[3] != 1 || (full[1] != 1 && full[1] != x[1]) || (full[0] != 1 && full[0] != x[0]))
    return unimplemented("the Mul before the Conv does not scale whole channels");
  return Status();
}

Result<PointwisePlan> plan_pointwise(const SubGraph& sg) {
  const Graph& g = sg.graph();
  TESSERA_ASSIGN_OR_RETURN(int anchor, find_anchor(sg, "Conv"));
  const Node& conv = g.node(anchor);
  if (conv.inputs.size() < 2) return invalid_argument("Conv takes X and W");
  TESSERA_RETURN_IF_ERROR(check_float_value(g, conv.inputs[0]));
  TESSERA_RETURN_IF_ERROR(check_float_value(g, conv.inputs[1]));
  if (conv.outputs.empty() || conv.outputs[0] == kNoValue) return invalid_argument("Conv has no output");
  TESSERA_RETURN_IF_ERROR(check_float_value(g, conv.outputs[0]));
  const std::vector<int64_t> x = g.value(conv.inputs[0]).type.static_dims();
  const Value& w = g.value(conv.inputs[1]);
  if (!w.constant) return unimplemented("Conv weights that are not constant");
  const std::vector<int64_t> wd = w.type.static_dims();
  if (x.size() != 4 || wd.size() != 4 || wd[1] != x[1] || wd[2] != 1 || wd[3] != 1)
    return unimplemented("not a 1x1 convolution over all input channels of an NCHW tensor");
  auto all_are = [](const std::vector<int64_t>& v, int64_t k) {
    return std::all_of(v.begin(), v.end(), [k](int64_t e) { return e == k; });
  };
  if (conv.attr_int("group", 1) != 1 || !all_are(conv.attr_ints("strides", {1, 1}), 1) ||
      !all_are(conv.attr_ints("dilations", {1, 1}), 1) || !all_are(conv.attr_ints("pads", {0, 0, 0, 0}), 0) ||
      conv.attr_ints("kernel_shape", {1, 1}) != std::vector<int64_t>{1, 1})
    return unimplemented("a 1x1 Conv with groups, strides, dilations or pads");
  if (conv.inputs.size() > 2 && conv.inputs[2] != kNoValue &&
      (!g.value(conv.inputs[2]).constant || g.value(conv.inputs[2]).constant->dims() != std::vector<int64_t>{wd[0]}))
    return unimplemented("Conv bias that is not a constant of [M]");
  PointwisePlan p;
  p.n = x[0], p.c = x[1], p.oc = wd[0], p.hw = x[2] * x[3];
  const std::vector<int64_t> out = {p.n, p.oc, x[2], x[3]};
  if (g.value(conv.outputs[0]).type.static_dims() != out)
    return unimplemented("Conv whose output shape is not the one its attributes give");
  const int producer = g.value(conv.inputs[0]).producer;
  if (producer >= 0 && sg.nodes().contains(producer)) {
    const Node& mul = g.node(producer);
    if (mul.op_type != "Mul" || !mul.domain.empty() || mul.inputs.size() != 2)
      return unimplemented(mul.op_type + " feeding a Conv in one group");
    if (g.value(conv.inputs[0]).consumers.size() != 1)
      return unimplemented("the scaled tensor has other uses");
    for (int v : mul.inputs)
      if (v != kNoValue && g.value(v).producer >= 0 && sg.nodes().contains(g.value(v).producer))
        return unimplemented("the scaling Mul reads a value of its own group");
    // x is the operand of the Conv input's shape, s the other.
    const bool x_first = g.value(mul.inputs[0]).type.static_dims() == x;
    p.head = {producer, mul.inputs[x_first ? 0 : 1], mul.inputs[x_first ? 1 : 0]};
    if (g.value(p.head.x).type.static_dims() != x) return unimplemented("the Mul before the Conv broadcasts x");
    TESSERA_RETURN_IF_ERROR(check_channel_scale(g, p.head.s, x));
    const std::vector<int64_t> sd = g.value(p.head.s).type.static_dims();
    const int64_t channels = sd.size() >= 3 ? sd[sd.size() - 3] : 1;
    const int64_t batches = sd.size() >= 4 ? sd[0] : 1;
    p.s_channel_stride = channels == 1 ? 0 : 1;
    p.s_batch_stride = batches == 1 ? 0 : channels;
  }
  TESSERA_ASSIGN_OR_RETURN(p.affine, plan_affine_tail(sg, anchor, out, p.head.node));
  return p;
}

class PointwiseConvKernel final : public PixelBandKernel {
 public:
  PointwiseConvKernel(const IsaKernels& isa, PointwisePlan plan, bool channels_last)
      : isa_(isa), plan_(std::move(plan)), channels_last_(channels_last) {}

  Status init(const SubGraph& sg) {
    const Graph& g = sg.graph();
    const Node& conv = g.node(plan_.affine.anchor);
    const Tensor& w = *g.value(conv.inputs[1]).constant;
    const int64_t c = plan_.c, oc = plan_.oc;
    // W' (the weights times the folded scale of their output channel) as the product reads it:
    // [C, OC] channels-last (B), [OC, C] row-major (A).
    weights_.assign(static_cast<size_t>(oc * c), 0.0f);
    for (int64_t o = 0; o < oc; ++o)
      for (int64_t i = 0; i < c; ++i)
        weights_[channels_last_ ? i * oc + o : o * c + i] =
            static_cast<float>(w.as_double(o * c + i)) * plan_.affine.scale[o];
    const int xv = plan_.head.node >= 0 ? plan_.head.x : conv.inputs[0];
    TESSERA_ASSIGN_OR_RETURN(x_, source_of(sg, xv));
    if (plan_.head.node >= 0) {
      TESSERA_ASSIGN_OR_RETURN(s_, source_of(sg, plan_.head.s));
    } else if (channels_last_) {  // a constant B: packed once
      const int nr = gemm_panel_width(isa_, oc);
      packed_ = std::make_unique<ScratchBuffer>(packed_b_floats(c, oc, nr));
      pack_b(weights_.data(), oc, 1, c, oc, nr, packed_->data());
    }
    if (channels_last_) {
      if (x_.slot >= 0) x_.dims = channels_last_dims(x_.dims);
      if (s_.slot >= 0 && s_.dims.size() == 4) s_.dims = channels_last_dims(s_.dims);
    }
    return tail_.init(sg, plan_.affine, channels_last_);
  }

  Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs,
             KernelRunContext& ctx) override {
    const int64_t c = plan_.c, oc = plan_.oc, hw = plan_.hw;
    TESSERA_ASSIGN_OR_RETURN(const float* x, resolve_float(x_, inputs));
    const float* s = nullptr;
    if (plan_.head.node >= 0) {
      TESSERA_ASSIGN_OR_RETURN(s, resolve_float(s_, inputs));
    }
    TESSERA_ASSIGN_OR_RETURN(EltwiseTail::Run r, tail_.start(inputs, ctx));
    float* y = r.y.data<float>();
    // One product per image; with a scale that differs per image, weights per image too.
    const int64_t weight_sets = s && plan_.s_batch_stride ? plan_.n : 1;
    std::vector<ScratchBuffer> scaled;
    if (s) {
      for (int64_t b = 0; b < weight_sets; ++b) {
        const float* sb = s + b * plan_.s_batch_stride;
        if (channels_last_) {  // B = (W' diag(s))^T in panels of nr columns ([i][nr] each)
          const int nr = gemm_panel_width(isa_, oc);
          scaled.emplace_back(packed_b_floats(c, oc, nr));
          float* panel = scaled.back().data();
          for (int64_t o0 = 0; o0 < oc; o0 += nr, panel += c * nr) {
            const int64_t cols = std::min<int64_t>(nr, oc - o0);
            for (int64_t i = 0; i < c; ++i) {
              const float si = sb[i * plan_.s_channel_stride];
              float* row = panel + i * nr;
              for (int64_t j = 0; j < cols; ++j) row[j] = weights_[i * oc + o0 + j] * si;
              std::fill(row + cols, row + nr, 0.0f);
            }
          }
        } else {  // A = W' diag(s)
          scaled.emplace_back(c * oc);
          float* a = scaled.back().data();
          for (int64_t o = 0; o < oc; ++o)
            for (int64_t i = 0; i < c; ++i) a[o * c + i] = weights_[o * c + i] * sb[i * plan_.s_channel_stride];
        }
      }
    }
    auto weights_of = [&](int64_t b) -> const float* {
      if (s) return scaled[weight_sets == 1 ? 0 : b].data();
      return channels_last_ ? packed_->data() : weights_.data();
    };
    GemmShape shape;
    std::vector<GemmOperands> problems;
    if (channels_last_) {
      shape = channels_last_shape(hw);
      for (int64_t b = 0; b < plan_.n; ++b) problems.push_back({x + b * hw * c, weights_of(b), y + b * hw * oc});
    } else {
      shape.m = oc, shape.k = c, shape.n = hw;
      shape.a_rs = c, shape.b_rs = hw;
      shape.ldc = shape.n;
      for (int64_t b = 0; b < plan_.n; ++b) problems.push_back({weights_of(b), x + b * c * hw, y + b * oc * hw});
    }
    const GemmHooks hooks = hooks_for(r, y, shape.m, 0);
    sgemm_batched(isa_, shape, problems, hooks, ctx.pool);
    tail_.finish(r, outputs);
    return Status();
  }

  // The band interface (channels-last, no scaling head: separable_conv.cc).
  Result<EltwiseTail::Run> start(const std::vector<const Tensor*>& inputs, KernelRunContext& ctx) const override {
    return tail_.start(inputs, ctx);
  }
  void run_band(const float* x, const EltwiseTail::Run& r, int64_t image, int64_t p0, int64_t p1,
                float*) const override {
    TESSERA_CHECK(channels_last_ && packed_ && p0 < p1 && p1 <= plan_.hw);
    const int64_t row0 = image * plan_.hw + p0;
    float* y = const_cast<float*>(r.y.data<float>());
    const GemmOperands problem{x + row0 * plan_.c, packed_->data(), y + row0 * plan_.oc};
    sgemm_batched(isa_, channels_last_shape(p1 - p0), {problem}, hooks_for(r, y, 0, row0), nullptr);
  }
  int64_t band_scratch_floats() const override { return 0; }
  const EltwiseTail& tail() const override { return tail_; }

 private:
  // The channels-last product of `rows` pixels: X [rows, C] read in place times the packed W'^T.
  GemmShape channels_last_shape(int64_t rows) const {
    GemmShape shape;
    shape.m = rows, shape.k = plan_.c, shape.n = plan_.oc;
    shape.a_rs = plan_.c, shape.b_packed = true, shape.a_in_place = true;
    shape.ldc = shape.n;
    return shape;
  }

  // Blocks of C start from the folded shift (in the micro-kernel's accumulators) and get the tail
  // when complete. Row i of problem `batch` is row batch * rows_per_batch + row0 + i of y (ldc
  // floats each): a pixel channels-last, an output channel row-major.
  GemmHooks hooks_for(const EltwiseTail::Run& r, float* y, int64_t rows_per_batch, int64_t row0) const {
    const int64_t ldc = channels_last_ ? plan_.oc : plan_.hw;
    GemmHooks hooks;
    // The shift's channel is C's column channels-last, else its row.
    (channels_last_ ? hooks.column_bias : hooks.row_bias) = plan_.affine.shift.data();
    if (!tail_.empty()) {
      const EltwiseTail* tail = &tail_;
      const IsaKernels* isa = &isa_;
      const EltwiseTail::Run* run = &r;
      hooks.scratch_floats = tail_.scratch_floats();
      hooks.finish = [=](int64_t batch, int64_t m0, int64_t m1, int64_t n0, int64_t n1, float* scratch) {
        const int64_t base = (batch * rows_per_batch + row0) * ldc;
        if (n0 == 0 && n1 == ldc) {
          tail->apply(*isa, *run, base + m0 * ldc, base + m1 * ldc, scratch);
          return;
        }
        for (int64_t i = m0; i < m1; ++i) tail->apply(*isa, *run, base + i * ldc + n0, base + i * ldc + n1, scratch);
      };
    }
    return hooks;
  }

  const IsaKernels& isa_;
  PointwisePlan plan_;
  bool channels_last_;
  std::vector<float> weights_;             // W': [C, OC] channels-last, else [OC, C]
  std::unique_ptr<ScratchBuffer> packed_;  // W' packed as B (channels-last, no scale)
  ValueSource x_, s_;
  EltwiseTail tail_;
};

}  // namespace

bool conv_has_head(const SubGraph& sg) {
  const Graph& g = sg.graph();
  for (int n : sg.nodes()) {
    const Node& node = g.node(n);
    if (node.op_type != "Conv" || !node.domain.empty() || node.inputs.empty() || node.inputs[0] == kNoValue) continue;
    const int producer = g.value(node.inputs[0]).producer;
    if (producer >= 0 && sg.nodes().contains(producer)) return true;
  }
  return false;
}

Status check_pointwise_conv_group(const SubGraph& sg) { return plan_pointwise(sg).status(); }

Result<std::unique_ptr<Kernel>> compile_pointwise_conv(const SubGraph& sg, const IsaKernels& isa,
                                                       bool channels_last) {
  TESSERA_ASSIGN_OR_RETURN(PointwisePlan plan, plan_pointwise(sg));
  auto k = std::make_unique<PointwiseConvKernel>(isa, std::move(plan), channels_last);
  TESSERA_RETURN_IF_ERROR(k->init(sg));
  return std::unique_ptr<Kernel>(std::move(k));
}

Result<std::unique_ptr<PixelBandKernel>> compile_pointwise_band(const SubGraph& sg, const IsaKernels& isa) {
  TESSERA_ASSIGN_OR_RETURN(PointwisePlan plan, plan_pointwise(sg));
  if (plan.head.node >= 0) return unimplemented("a 1x1 convolution band with a scaling Mul");
  auto k = std::make_unique<PointwiseConvKernel>(isa, std::move(plan), /*channels_last=*/true);
  TESSERA_RETURN_IF_ERROR(k->init(sg));
  return std::unique_ptr<PixelBandKernel>(std::move(k));
}

Pattern scaled_pointwise_conv_pattern() {
  Pattern scaled = op("Mul", {wildcard(), wildcard()});
  Pattern conv = op("Conv", {scaled, constant()}) | op("Conv", {scaled, constant(), constant()});
  Pattern bn = op("BatchNormalization", {conv, constant(), constant(), constant(), constant()});
  return op("Add", {bn, wildcard()}) | op("Add", {wildcard(), bn}) | bn | conv;
}

}  // namespace tessera::native
