#include "backends/xnnpack/xnnpack_fusion.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "ops/nn_geometry.h"

namespace tessera::xnnpack {
namespace {

std::optional<float> scalar_constant(const Graph& g, int v) {
  const auto& c = g.value(v).constant;
  if (!c || c->dtype() != DType::kFloat32 || c->numel() != 1) return std::nullopt;
  return c->data<float>()[0];
}

// Constant v as one value per channel of an output of dims `out` whose channels are on `axis`:
// a scalar, or a tensor of 1s except the channel dim; nullopt when v is neither.
std::optional<std::vector<double>> channel_values(const Graph& g, int v,
                                                  const std::vector<int64_t>& out, int axis) {
  const auto& c = g.value(v).constant;
  if (!c || c->dtype() != DType::kFloat32) return std::nullopt;
  const int64_t channels = out[axis];
  const float* p = c->data<float>();
  if (c->numel() == 1) return std::vector<double>(static_cast<size_t>(channels), p[0]);
  const std::vector<int64_t>& d = c->dims();
  if (d.size() > out.size()) return std::nullopt;
  for (size_t k = 0; k < d.size(); ++k) {
    const size_t pos = out.size() - d.size() + k;
    if (d[k] != (static_cast<int>(pos) == axis ? channels : 1)) return std::nullopt;
  }
  return std::vector<double>(p, p + channels);
}

bool all_finite(const Affine& a) {
  auto finite = [](double x) { return std::isfinite(x); };
  return std::all_of(a.scale.begin(), a.scale.end(), finite) &&
         std::all_of(a.shift.begin(), a.shift.end(), finite);
}

// a followed by the affine tail node k (whose input from the chain is value v), or nullopt.
std::optional<Affine> compose(const Graph& g, const Node& k, int v, const std::vector<int64_t>& out,
                              int axis, bool is_conv, Affine a) {
  const size_t m = a.scale.size();
  if (k.op_type == "BatchNormalization") {
    if (!is_conv || k.inputs[0] != v || k.attr_int("training_mode", 0) != 0 || k.inputs.size() < 5)
      return std::nullopt;
    std::vector<std::vector<double>> p;
    for (int i = 1; i <= 4; ++i) {
      auto vals = channel_values(g, k.inputs[i], {out[axis]}, 0);
      if (!vals) return std::nullopt;
      p.push_back(*vals);
    }
    const double eps = k.attr_float("epsilon", 1e-5f);
    for (size_t c = 0; c < m; ++c) {
      const double s = p[0][c] / std::sqrt(p[3][c] + eps);
      a.scale[c] *= s;
      a.shift[c] = a.shift[c] * s + (p[1][c] - p[2][c] * s);
    }
    return a;
  }
  const std::string& op = k.op_type;
  if ((op != "Add" && op != "Sub" && op != "Mul" && op != "Div") || k.inputs.size() != 2)
    return std::nullopt;
  if (k.inputs[0] == k.inputs[1]) return std::nullopt;
  const bool first = k.inputs[0] == v;
  auto vals = channel_values(g, k.inputs[first ? 1 : 0], out, axis);
  if (!vals || g.value(k.outputs[0]).type.static_dims() != out) return std::nullopt;
  for (size_t c = 0; c < m; ++c) {
    const double x = (*vals)[c];
    if (op == "Mul") {
      a.scale[c] *= x;
      a.shift[c] *= x;
    } else if (op == "Add") {
      a.shift[c] += x;
    } else if (op == "Sub" && first) {
      a.shift[c] -= x;
    } else if (op == "Sub") {
      a.scale[c] = -a.scale[c];
      a.shift[c] = x - a.shift[c];
    } else if (op == "Div" && first && x != 0) {
      a.scale[c] /= x;
      a.shift[c] /= x;
    } else {
      return std::nullopt;  // c / y is not affine; y / 0 stays as it is
    }
  }
  return a;
}

}  // namespace

FusionPlan::FusionPlan(const SubGraph& sg)
    : sg_(sg), g_(sg.graph()), absorbed_(sg.graph().num_nodes(), false) {
  plan_hardswish();
  plan_affine_tails();
  plan_affine_heads();
  plan_clamps();
}

int FusionPlan::final_value(int n) const {
  auto it = final_value_.find(n);
  return it == final_value_.end() ? g_.node(n).outputs[0] : it->second;
}

Range FusionPlan::range(int n) const {
  auto it = range_.find(n);
  return it == range_.end() ? Range{} : it->second;
}

const Affine* FusionPlan::affine(int n) const {
  auto it = affine_.find(n);
  return it == affine_.end() ? nullptr : &it->second;
}

const Affine* FusionPlan::input_affine(int n) const {
  auto it = input_affine_.find(n);
  return it == input_affine_.end() ? nullptr : &it->second;
}

int FusionPlan::input_value(int n) const {
  auto it = input_value_.find(n);
  return it == input_value_.end() ? g_.node(n).inputs[0] : it->second;
}

int FusionPlan::hardswish_input(int n) const {
  auto it = hardswish_.find(n);
  return it == hardswish_.end() ? -1 : it->second;
}

bool FusionPlan::single_internal_use(int v) const {
  const Value& val = g_.value(v);
  if (val.consumers.size() != 1 || !sg_.nodes().contains(val.consumers[0])) return false;
  return std::find(sg_.outputs().begin(), sg_.outputs().end(), v) == sg_.outputs().end();
}

int FusionPlan::emitter_of(int v) const {
  int p = g_.value(v).producer;
  if (p < 0 || !sg_.nodes().contains(p)) return -1;
  if (absorbed_[p]) p = root_of_.at(p);
  return final_value(p) == v ? p : -1;
}

// Div(Mul(x, Clip(Add(x, 3), 0, 6)), 6), with Mul's operands in either order and the division
// possibly a Mul by 1/6.
void FusionPlan::plan_hardswish() {
  auto producer_in_sg = [&](int v, const char* op) -> int {
    const int p = g_.value(v).producer;
    if (p < 0 || !sg_.nodes().contains(p) || g_.node(p).op_type != op || !single_internal_use(v))
      return -1;
    return p;
  };
  for (int d : sg_.nodes()) {
    const Node& dn = g_.node(d);
    if (dn.inputs.size() != 2) continue;
    int product = -1;
    if (dn.op_type == "Div" && scalar_constant(g_, dn.inputs[1]) == 6.0f) product = dn.inputs[0];
    for (int i = 0; i < 2 && dn.op_type == "Mul"; ++i) {
      if (scalar_constant(g_, dn.inputs[i]) == 1.0f / 6.0f) product = dn.inputs[1 - i];
    }
    if (product < 0) continue;
    const int m = producer_in_sg(product, "Mul");
    if (m < 0) continue;
    const Node& mn = g_.node(m);
    for (int i = 0; i < 2; ++i) {
      const int x = mn.inputs[1 - i];
      const int c = producer_in_sg(mn.inputs[i], "Clip");
      if (c < 0 || g_.value(x).constant) continue;
      auto r = clamp_range(NodeView{g_, g_.node(c)});
      if (!r.ok() || r->min != 0.0f || r->max != 6.0f) continue;
      const int a = producer_in_sg(g_.node(c).inputs[0], "Add");
      if (a < 0) continue;
      const Node& an = g_.node(a);
      const bool x_first = an.inputs[0] == x && scalar_constant(g_, an.inputs[1]) == 3.0f;
      const bool x_second = an.inputs[1] == x && scalar_constant(g_, an.inputs[0]) == 3.0f;
      if (!x_first && !x_second) continue;
      for (int k : {a, c, m}) {
        absorbed_[k] = true;
        root_of_[k] = d;
      }
      hardswish_[d] = x;
      break;
    }
  }
}

void FusionPlan::plan_affine_tails() {
  for (int n : sg_.nodes()) {
    if (absorbed_[n] || hardswish_.count(n)) continue;
    const Node& node = g_.node(n);
    const std::vector<int64_t> out = g_.value(node.outputs[0]).type.static_dims();
    const bool is_conv = node.op_type == "Conv" || node.op_type == "ConvTranspose";
    int axis = -1;
    if (is_conv && out.size() == 4) axis = 1;
    if (node.op_type == "MatMul") axis = static_cast<int>(out.size()) - 1;
    if (node.op_type == "Gemm") {
      // Only when C is absent or a row (the bias): the affine then folds into weights and bias.
      bool row = true;
      if (node.inputs.size() > 2 && node.inputs[2] != kNoValue) {
        const auto& c = g_.value(node.inputs[2]).constant;
        row = c && (c->numel() == 1 || (c->numel() == out[1] && c->dims().back() == out[1]));
      }
      if (row) axis = 1;
    }
    if (axis < 0) continue;
    Affine a{std::vector<double>(static_cast<size_t>(out[axis]), 1.0),
             std::vector<double>(static_cast<size_t>(out[axis]), 0.0)};
    int v = node.outputs[0];
    bool folded = false;
    while (single_internal_use(v)) {
      const int k = g_.value(v).consumers[0];
      if (absorbed_[k] || hardswish_.count(k)) break;
      auto next = compose(g_, g_.node(k), v, out, axis, is_conv, a);
      if (!next || !all_finite(*next)) break;
      a = std::move(*next);
      absorbed_[k] = true;
      root_of_[k] = n;
      v = g_.node(k).outputs[0];
      folded = true;
    }
    if (!folded) continue;
    affine_[n] = std::move(a);
    final_value_[n] = v;
  }
}

// Walks back from a Conv without padding (padding zeros would not go through the affine) or a
// MatMul over affine ops on its input; each one's value must be read by nothing else.
void FusionPlan::plan_affine_heads() {
  for (int n : sg_.nodes()) {
    if (absorbed_[n] || hardswish_.count(n)) continue;
    const Node& node = g_.node(n);
    const std::vector<int64_t> in = g_.value(node.inputs[0]).type.static_dims();
    int axis = -1;
    if (node.op_type == "MatMul") axis = static_cast<int>(in.size()) - 1;
    if (node.op_type == "Conv" && in.size() == 4 && node.inputs.size() > 1) {
      const std::vector<int64_t> w = g_.value(node.inputs[1]).type.static_dims();
      auto geom = nn::forward_window(node, {in[2], in[3]}, {w[2], w[3]}, false);
      auto zero = [](const std::vector<int64_t>& pads) {
        return std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; });
      };
      if (geom.ok() && zero(geom->pads_begin) && zero(geom->pads_end)) axis = 1;
    }
    if (axis < 0) continue;
    const size_t channels = static_cast<size_t>(in[axis]);
    Affine a{std::vector<double>(channels, 1.0),
             std::vector<double>(channels, 0.0)};  // input = a(v)
    int v = node.inputs[0];
    bool folded = false;
    while (single_internal_use(v)) {
      const int p = g_.value(v).producer;
      if (p < 0 || !sg_.nodes().contains(p) || absorbed_[p] || hardswish_.count(p)) break;
      const Node& pn = g_.node(p);
      if (pn.inputs.size() != 2) break;
      const bool first_constant = g_.value(pn.inputs[0]).constant.has_value();
      if (first_constant == g_.value(pn.inputs[1]).constant.has_value()) break;
      const int u = first_constant ? pn.inputs[1] : pn.inputs[0];
      Affine id{std::vector<double>(channels, 1.0), std::vector<double>(channels, 0.0)};
      auto step = compose(g_, pn, u, in, axis, false, id);
      if (!step) break;
      Affine next = a;
      for (size_t c = 0; c < channels; ++c) {  // a(step(u))
        next.shift[c] += a.scale[c] * step->shift[c];
        next.scale[c] *= step->scale[c];
      }
      if (!all_finite(next)) break;
      a = std::move(next);
      absorbed_[p] = true;
      root_of_[p] = n;
      v = u;
      folded = true;
    }
    if (!folded) continue;
    input_affine_[n] = std::move(a);
    input_value_[n] = v;
  }
}

void FusionPlan::plan_clamps() {
  for (int n : sg_.nodes()) {
    const Node& node = g_.node(n);
    if (absorbed_[n] || (node.op_type != "Relu" && node.op_type != "Clip")) continue;
    auto r = clamp_range(NodeView{g_, node});
    if (!r.ok()) continue;
    const int v = node.inputs[0];
    const int p = emitter_of(v);
    if (p < 0 || hardswish_.count(p) || !single_internal_use(v)) continue;
    const OpRule* rule = find_rule(g_.node(p));
    if (!rule || !rule->has_output_range) continue;
    Range cur = range_.count(p) ? range_[p] : Range{};
    if (!range_.count(p) && (g_.node(p).op_type == "Relu" || g_.node(p).op_type == "Clip")) {
      auto own = clamp_range(NodeView{g_, g_.node(p)});
      if (!own.ok()) continue;
      cur = *own;
    }
    const Range next{std::max(cur.min, r->min), std::min(cur.max, r->max)};
    if (!(next.min < next.max)) continue;  // XNNPACK needs a non-empty range
    range_[p] = next;
    absorbed_[n] = true;
    root_of_[n] = p;
    final_value_[p] = node.outputs[0];
  }
}

}  // namespace tessera::xnnpack
