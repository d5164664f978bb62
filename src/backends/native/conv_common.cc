#include "backends/native/conv_common.h"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace tessera::native {

std::optional<std::vector<float>> per_channel(const Graph& g, int v, int64_t channels,
                                              size_t rank) {
  if (v == kNoValue || !g.value(v).constant) return std::nullopt;
  const Tensor& t = *g.value(v).constant;
  if (t.is_container() || t.dtype() == DType::kString || t.numel() < 1) return std::nullopt;
  const std::vector<int64_t>& d = t.dims();
  if (d.size() > rank) return std::nullopt;
  const size_t offset = rank - d.size();
  for (size_t i = 0; i < d.size(); ++i) {
    const bool channel_axis = offset + i == 1;
    if (d[i] != 1 && (!channel_axis || d[i] != channels)) return std::nullopt;
  }
  std::vector<float> out(channels);
  for (int64_t c = 0; c < channels; ++c)
    out[c] = static_cast<float>(t.as_double(t.numel() == 1 ? 0 : c));
  return out;
}

Result<std::pair<std::vector<float>, std::vector<float>>> batch_norm_affine(const Graph& g,
                                                                            const Node& node) {
  if (node.inputs.size() != 5) return invalid_argument("BatchNormalization takes 5 inputs");
  for (size_t o = 1; o < node.outputs.size(); ++o)
    if (node.outputs[o] != kNoValue)
      return unimplemented("BatchNormalization's running statistics");
  if (node.attr_int("training_mode", 0) != 0)
    return unimplemented("BatchNormalization in training mode");
  if (node.attr_int("spatial", 1) != 1) return unimplemented("BatchNormalization with spatial=0");
  TESSERA_RETURN_IF_ERROR(check_float_value(g, node.inputs[0]));
  const std::vector<int64_t> x = g.value(node.inputs[0]).type.static_dims();
  if (x.size() < 2) return unimplemented("BatchNormalization of rank < 2");
  std::vector<std::vector<float>> p;
  for (size_t i = 1; i < 5; ++i) {
    const int v = node.inputs[i];
    if (v == kNoValue || !g.value(v).constant ||
        g.value(v).constant->dims() != std::vector<int64_t>{x[1]})
      return unimplemented("BatchNormalization with parameters that are not constants of [C]");
    p.push_back(*per_channel(g, v, x[1], 2));
  }
  const float eps = node.attr_float("epsilon", 1e-5f);
  std::vector<float> a(x[1]), b(x[1]);
  for (int64_t c = 0; c < x[1]; ++c) {
    a[c] = static_cast<float>(p[0][c] / std::sqrt(static_cast<double>(p[3][c]) + eps));
    b[c] = p[1][c] - p[2][c] * a[c];
  }
  return std::make_pair(std::move(a), std::move(b));
}

namespace {

// Folds node c (reading `cur`) into the affine map when it is one; false otherwise.
bool fold_affine(const Graph& g, const Node& c, int cur, AffineTailPlan& p) {
  const size_t rank = p.out_dims.size();
  const int64_t channels = p.out_dims[1];
  if (c.outputs.empty() || c.outputs[0] == kNoValue ||
      g.value(c.outputs[0]).type.static_dims() != p.out_dims || !c.domain.empty())
    return false;
  if (c.op_type == "BatchNormalization") {
    if (c.inputs.empty() || c.inputs[0] != cur) return false;
    auto ab = batch_norm_affine(g, c);
    if (!ab.ok()) return false;
    for (int64_t k = 0; k < channels; ++k) {
      p.scale[k] *= ab->first[k];
      p.shift[k] = p.shift[k] * ab->first[k] + ab->second[k];
    }
    return true;
  }
  const bool commutes = c.op_type == "Add" || c.op_type == "Mul";
  if ((!commutes && c.op_type != "Sub" && c.op_type != "Div") || c.inputs.size() != 2) return false;
  if (c.inputs[0] != cur && !(commutes && c.inputs[1] == cur)) return false;
  const int other = c.inputs[0] == cur ? c.inputs[1] : c.inputs[0];
  if (other == cur) return false;
  std::optional<std::vector<float>> k = per_channel(g, other, channels, rank);
  if (!k) return false;
  for (int64_t i = 0; i < channels; ++i) {
    const float v = (*k)[i];
    if (c.op_type == "Add") p.shift[i] += v;
    if (c.op_type == "Sub") p.shift[i] -= v;
    if (c.op_type == "Mul") p.scale[i] *= v, p.shift[i] *= v;
    if (c.op_type == "Div") p.scale[i] /= v, p.shift[i] /= v;
  }
  return true;
}

}  // namespace

Result<int> find_anchor(const SubGraph& sg, const std::string& op_type) {
  const Graph& g = sg.graph();
  int anchor = -1;
  for (int n : sg.nodes()) {
    if (g.node(n).op_type != op_type || !g.node(n).domain.empty()) continue;
    if (anchor >= 0) return unimplemented("a group holds one " + op_type);
    anchor = n;
  }
  if (anchor < 0) return unimplemented("no " + op_type + " in the group");
  return anchor;
}

Result<AffineTailPlan> plan_affine_tail(const SubGraph& sg, int anchor_node,
                                        std::vector<int64_t> out_dims, int head) {
  const Graph& g = sg.graph();
  AffineTailPlan p;
  p.anchor = anchor_node;
  p.out_dims = std::move(out_dims);
  const Node& anchor = g.node(p.anchor);
  // The anchor reads the group's inputs: nodes before it in a group (a Mul feeding the Conv) have
  // no kernel here to run them.
  for (int v : anchor.inputs) {
    if (v != kNoValue && g.value(v).producer != head && sg.nodes().contains(g.value(v).producer))
      return unimplemented(g.node(p.anchor).op_type + " must come first in its group (" +
                           g.node(g.value(v).producer).op_type + " feeds it)");
  }
  const int64_t channels = p.out_dims[1];
  p.scale.assign(channels, 1.0f);
  p.shift.assign(channels, 0.0f);
  if (anchor.inputs.size() > 2 && anchor.inputs[2] != kNoValue)
    p.shift = *per_channel(g, anchor.inputs[2], channels, 2);
  auto is_output = [&](int v) {
    return std::find(sg.outputs().begin(), sg.outputs().end(), v) != sg.outputs().end();
  };
  std::vector<int> folded;
  // (Every value before `cur` has one consumer, the next folded node: the tail cannot read it.)
  int cur = anchor.outputs[0];
  while (!is_output(cur) && g.value(cur).consumers.size() == 1) {
    const int c = g.value(cur).consumers[0];
    if (!sg.nodes().contains(c) || !fold_affine(g, g.node(c), cur, p)) break;
    folded.push_back(c);
    cur = g.node(c).outputs[0];
  }
  p.folded_value = cur;
  const std::vector<int64_t> tail_dims = g.value(cur).type.static_dims();
  for (int n : sg.nodes()) {
    if (n == p.anchor || n == head || std::find(folded.begin(), folded.end(), n) != folded.end()) continue;
    const Node& node = g.node(n);
    if (!is_eltwise_op(node.op_type))
      return unimplemented(node.op_type + " after a " + anchor.op_type);
    TESSERA_RETURN_IF_ERROR(check_eltwise_node(g, n));
    if (g.value(node.outputs[0]).type.static_dims() != tail_dims)
      return unimplemented("an elementwise tail must keep the " + anchor.op_type + "'s shape");
    p.tail.push_back(n);
  }
  for (int v : sg.outputs()) {
    const int producer = g.value(v).producer;
    if (v != cur && std::find(p.tail.begin(), p.tail.end(), producer) == p.tail.end())
      return unimplemented("an intermediate of the folded chain leaves the group");
  }
  return p;
}

Status EltwiseTail::init(const SubGraph& sg, const AffineTailPlan& plan, bool channels_last) {
  const Graph& g = sg.graph();
  channels_last = channels_last && plan.out_dims.size() == 4;
  out_dims_ = channels_last ? channels_last_dims(plan.out_dims) : plan.out_dims;
  empty_ = plan.tail.empty();
  const int y = plan.folded_value;
  for (int v : sg.outputs())
    if (v != y) stored_.push_back(v);
  if (!empty_) {
    auto is_tensor = [&](int v) { return !g.value(v).constant; };
    TESSERA_ASSIGN_OR_RETURN(plan_, compile_eltwise(g, plan.tail, stored_, plan.out_dims,
                                                    channels_last ? std::function<bool(int)>(is_tensor)
                                                                  : nullptr));
    for (int v : plan_.input_values) {
      if (v == y) {
        sources_.push_back(ValueSource{});  // slot -1, no constant: y itself
        continue;
      }
      TESSERA_ASSIGN_OR_RETURN(ValueSource src, source_of(sg, v));
      if (channels_last && src.slot >= 0 && src.dims.size() == 4) src.dims = channels_last_dims(src.dims);
      sources_.push_back(std::move(src));
    }
  }
  for (int v : sg.outputs()) {
    int pos = -1;
    for (size_t o = 0; o < stored_.size(); ++o)
      if (stored_[o] == v) pos = static_cast<int>(o);
    out_pos_.push_back(pos);
  }
  // One stored tail value and y not wanted: the tail writes over y in place.
  in_place_ = stored_.size() == 1 &&
              std::find(sg.outputs().begin(), sg.outputs().end(), y) == sg.outputs().end();
  return Status();
}

Result<EltwiseTail::Run> EltwiseTail::start(const std::vector<const Tensor*>& inputs,
                                            KernelRunContext& ctx) const {
  Run r;
  r.y = ctx.alloc.allocate_uninitialized(DType::kFloat32, out_dims_);
  float* yp = r.y.data<float>();
  r.out.resize(stored_.size());
  r.in_ptr.resize(sources_.size());
  r.out_ptr.resize(stored_.size());
  for (size_t k = 0; k < sources_.size(); ++k) {
    const ValueSource& src = sources_[k];
    if (src.slot < 0 && !src.constant) {
      r.in_ptr[k] = yp;
    } else {
      TESSERA_ASSIGN_OR_RETURN(r.in_ptr[k], resolve_float(src, inputs));
    }
  }
  for (size_t o = 0; o < stored_.size(); ++o) {
    r.out[o] = in_place_ ? r.y : ctx.alloc.allocate_uninitialized(DType::kFloat32, out_dims_);
    r.out_ptr[o] = r.out[o].data<float>();
  }
  return r;
}

void EltwiseTail::finish(Run& run, std::vector<Tensor>& outputs) const {
  outputs.resize(out_pos_.size());
  for (size_t i = 0; i < out_pos_.size(); ++i)
    outputs[i] = out_pos_[i] < 0 ? run.y : run.out[out_pos_[i]];
}

namespace {
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Begin and end pads of one spatial axis for auto_pad SAME_UPPER / SAME_LOWER.
std::pair<int64_t, int64_t> same_pads(int64_t in, int64_t k, int64_t stride, int64_t dilation,
                                      bool upper) {
  const int64_t out = ceil_div(in, stride);
  const int64_t total = std::max<int64_t>(0, (out - 1) * stride + (k - 1) * dilation + 1 - in);
  const int64_t small = total / 2;
  return upper ? std::make_pair(small, total - small) : std::make_pair(total - small, small);
}

}  // namespace

bool depthwise_applies(const ConvShape& s) {
  return s.group > 1 && s.group == s.c && s.group == s.oc && s.sw <= 2;
}

Result<ConvShape> conv_shape(const Graph& g, const Node& node) {
  if (node.op_type != "Conv" || !node.domain.empty()) return unimplemented("not a Conv");
  if (node.inputs.size() < 2) return invalid_argument("Conv takes X and W");
  TESSERA_RETURN_IF_ERROR(check_float_value(g, node.inputs[0]));
  TESSERA_RETURN_IF_ERROR(check_float_value(g, node.inputs[1]));
  if (!g.value(node.inputs[1]).constant) return unimplemented("Conv weights that are not constant");
  const std::vector<int64_t> x = g.value(node.inputs[0]).type.static_dims();
  const std::vector<int64_t> w = g.value(node.inputs[1]).type.static_dims();
  if (x.size() != 4 || w.size() != 4) return unimplemented("Conv that is not 2-D");
  ConvShape s{x[0], x[1], x[2], x[3], w[0], w[2], w[3]};
  s.group = node.attr_int("group", 1);
  if (s.group < 1 || s.c % s.group != 0 || s.oc % s.group != 0 || w[1] * s.group != s.c)
    return invalid_argument(
        "Conv: group does not divide the channels, or W's second dim is not C / group");
  const std::vector<int64_t> kernel = {s.kh, s.kw};
  if (node.attr_ints("kernel_shape", kernel) != kernel)
    return invalid_argument("Conv: kernel_shape is not W's");
  const std::vector<int64_t> strides = node.attr_ints("strides", {1, 1}),
                             dil = node.attr_ints("dilations", {1, 1});
  std::vector<int64_t> pads = node.attr_ints("pads", {0, 0, 0, 0});
  if (strides.size() != 2 || dil.size() != 2 || pads.size() != 4)
    return invalid_argument("Conv: strides, dilations or pads of the wrong length");
  if (std::any_of(strides.begin(), strides.end(), [](int64_t v) { return v < 1; }) ||
      std::any_of(dil.begin(), dil.end(), [](int64_t v) { return v < 1; }) ||
      std::any_of(pads.begin(), pads.end(), [](int64_t v) { return v < 0; }))
    return invalid_argument("Conv: strides and dilations must be positive, pads not negative");
  s.sh = strides[0], s.sw = strides[1], s.dh = dil[0], s.dw = dil[1];
  if (s.ic_per_group() == 1 && s.group > 1 && !depthwise_applies(s))
    return unimplemented(
        "Conv with one input channel per group but a channel multiplier or a horizontal stride "
        "over 2: the direct kernel's channel blocks would be mostly empty");
  if (s.kh > 16 || s.kw > 16 || s.sh > 16 || s.sw > 16 || s.dh > 16 || s.dw > 16)
    return unimplemented("Conv with kernel, stride or dilation over 16");
  const std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  if (auto_pad == "VALID") {
    pads = {0, 0, 0, 0};
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    const bool upper = auto_pad == "SAME_UPPER";
    std::tie(pads[0], pads[2]) = same_pads(s.h, s.kh, s.sh, s.dh, upper);
    std::tie(pads[1], pads[3]) = same_pads(s.w, s.kw, s.sw, s.dw, upper);
  } else if (auto_pad != "NOTSET") {
    return invalid_argument("Conv: unknown auto_pad " + auto_pad);
  }
  s.pad_top = pads[0], s.pad_left = pads[1];
  s.oh = (s.h + pads[0] + pads[2] - s.dh * (s.kh - 1) - 1) / s.sh + 1;
  s.ow = (s.w + pads[1] + pads[3] - s.dw * (s.kw - 1) - 1) / s.sw + 1;
  if (s.h + pads[0] + pads[2] < s.dh * (s.kh - 1) + 1 ||
      s.w + pads[1] + pads[3] < s.dw * (s.kw - 1) + 1)
    return invalid_argument("Conv: empty output");
  if (node.inputs.size() > 2 && node.inputs[2] != kNoValue) {
    TESSERA_RETURN_IF_ERROR(check_float_value(g, node.inputs[2]));
    if (!g.value(node.inputs[2]).constant ||
        g.value(node.inputs[2]).constant->dims() != std::vector<int64_t>{s.oc})
      return unimplemented("Conv bias that is not a constant of [M]");
  }
  if (node.outputs.empty() || node.outputs[0] == kNoValue)
    return invalid_argument("Conv has no output");
  TESSERA_RETURN_IF_ERROR(check_float_value(g, node.outputs[0]));
  if (g.value(node.outputs[0]).type.static_dims() != std::vector<int64_t>{s.n, s.oc, s.oh, s.ow})
    return unimplemented("Conv whose output shape is not the one its attributes give");
  return s;
}

}  // namespace tessera::native
