#include "backends/onednn/onednn_program.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "backends/onednn/onednn_support.h"

namespace tessera::onednn {
namespace {

// Post-ops per primitive: oneDNN allows 32; more than this many is never worth one kernel.
constexpr size_t kMaxPostOps = 24;

// One step of the lowered graph before fusion: a graph node, or a recognised group of nodes
// that is one oneDNN function.
struct VOp {
  enum class Kind { kAnchor, kActivation, kBinary, kAffine };
  Kind kind = Kind::kAnchor;
  std::vector<int> nodes;          // the graph nodes it covers
  int node = -1;                   // the node whose attributes it uses
  std::vector<EltwiseOp> eltwise;  // kActivation
  int input = -1;                  // kActivation, kAffine
  int a = -1, b = -1;              // kBinary operands
  Tensor scale, shift;             // kAffine: per-channel, shaped [1, C, 1, ...]
  int output = -1;
  std::string name;
};

class Lowering {
 public:
  explicit Lowering(const SubGraph& sg) : sg_(sg), g_(sg.graph()) {
    is_output_.assign(g_.num_values(), false);
    for (int v : sg.outputs()) is_output_[v] = true;
    covered_.assign(g_.num_nodes(), false);
  }

  Result<Program> run() {
    TESSERA_RETURN_IF_ERROR(build_vops());
    readers_.assign(g_.num_values(), {});
    for (size_t i = 0; i < vops_.size(); ++i) {
      for (int v : data_inputs(vops_[i])) {
        auto& r = readers_[v];
        if (std::find(r.begin(), r.end(), static_cast<int>(i)) == r.end())
          r.push_back(static_cast<int>(i));
      }
    }
    unit_of_output_.assign(g_.num_values(), -1);
    for (size_t i = 0; i < vops_.size(); ++i) TESSERA_RETURN_IF_ERROR(place(static_cast<int>(i)));
    std::stable_sort(prog_.units.begin(), prog_.units.end(),
                     [](const Unit& x, const Unit& y) { return x.last_node < y.last_node; });
    return std::move(prog_);
  }

 private:
  // ---- pattern recognition ----

  bool inside(int n) const { return n >= 0 && sg_.nodes().contains(n); }
  // The only consumer of v (inside the subgraph, v not needed outside), or -1.
  int sole_consumer(int v) const {
    const Value& val = g_.value(v);
    if (is_output_[v] || val.consumers.size() != 1 || !inside(val.consumers[0])) return -1;
    return val.consumers[0];
  }
  bool scalar_is(int v, double want, double tol = 0.0) const {
    double c;
    return constant_scalar(g_, v, &c) && std::fabs(c - want) <= tol;
  }
  // The input of a two-input node other than v, or -1 when v is not one of its inputs.
  int other_input(const Node& n, int v) const {
    if (n.inputs.size() != 2) return -1;
    if (n.inputs[0] == v) return n.inputs[1];
    if (n.inputs[1] == v) return n.inputs[0];
    return -1;
  }

  // x * Clip(x + 3, 0, 6) / 6 (Paddle's hardswish), from the Add node.
  bool match_hardswish(int add_node, VOp* out) {
    const Node& add = g_.node(add_node);
    if (add.op_type != "Add" || add.inputs.size() != 2) return false;
    int x = scalar_is(add.inputs[1], 3.0) ? add.inputs[0]
                                          : (scalar_is(add.inputs[0], 3.0) ? add.inputs[1] : -1);
    if (x < 0 || g_.value(x).constant) return false;
    int clip_node = sole_consumer(add.outputs[0]);
    if (clip_node < 0 || covered_[clip_node] || g_.node(clip_node).op_type != "Clip") return false;
    auto clip = activation_ops(g_, g_.node(clip_node));
    if (!clip.ok() || clip->size() != 1 || (*clip)[0].alpha != 0.0f || (*clip)[0].beta != 6.0f)
      return false;
    if (g_.node(clip_node).inputs[0] != add.outputs[0]) return false;
    int mul_node = sole_consumer(g_.node(clip_node).outputs[0]);
    if (mul_node < 0 || covered_[mul_node] || g_.node(mul_node).op_type != "Mul") return false;
    if (other_input(g_.node(mul_node), g_.node(clip_node).outputs[0]) != x) return false;
    int div_node = sole_consumer(g_.node(mul_node).outputs[0]);
    if (div_node < 0 || covered_[div_node]) return false;
    const Node& div = g_.node(div_node);
    const bool by_six = div.op_type == "Div" && div.inputs.size() == 2 &&
                        div.inputs[0] == g_.node(mul_node).outputs[0] &&
                        scalar_is(div.inputs[1], 6.0);
    const bool by_sixth =
        div.op_type == "Mul" && other_input(div, g_.node(mul_node).outputs[0]) >= 0 &&
        scalar_is(other_input(div, g_.node(mul_node).outputs[0]), 1.0 / 6.0, 1e-7);
    if (!by_six && !by_sixth) return false;
    *out = VOp{};
    out->kind = VOp::Kind::kActivation;
    out->nodes = {add_node, clip_node, mul_node, div_node};
    out->node = add_node;
    out->eltwise = {{algorithm::eltwise_hardswish, 0.0f, 0.0f}};
    out->input = x;
    out->output = div.outputs[0];
    out->name = "HardSwish";
    return true;
  }

  // x * Sigmoid(x) or x * Sigmoid(x * 1): swish; from its first node (the Sigmoid or the Mul by 1).
  bool match_swish(int first, VOp* out) {
    std::vector<int> nodes;
    int sig_node = first, x = -1;
    const Node& head = g_.node(first);
    if (head.op_type == "Mul" && head.inputs.size() == 2) {
      x = scalar_is(head.inputs[1], 1.0) ? head.inputs[0]
                                         : (scalar_is(head.inputs[0], 1.0) ? head.inputs[1] : -1);
      sig_node = sole_consumer(head.outputs[0]);
      if (x < 0 || sig_node < 0 || covered_[sig_node] || g_.node(sig_node).op_type != "Sigmoid")
        return false;
      nodes.push_back(first);
    } else if (head.op_type == "Sigmoid") {
      x = head.inputs[0];
    } else {
      return false;
    }
    if (g_.value(x).constant) return false;
    const Node& sig = g_.node(sig_node);
    int mul_node = sole_consumer(sig.outputs[0]);
    if (mul_node < 0 || covered_[mul_node] || g_.node(mul_node).op_type != "Mul") return false;
    if (other_input(g_.node(mul_node), sig.outputs[0]) != x) return false;
    nodes.push_back(sig_node);
    nodes.push_back(mul_node);
    *out = VOp{};
    out->kind = VOp::Kind::kActivation;
    out->nodes = nodes;
    out->node = sig_node;
    out->eltwise = {{algorithm::eltwise_swish, 1.0f, 0.0f}};
    out->input = x;
    out->output = g_.node(mul_node).outputs[0];
    out->name = "Swish";
    return true;
  }

  // BatchNormalization (inference) as y = x * a + b per channel.
  Result<VOp> affine_of_batch_norm(int n) {
    const Node& node = g_.node(n);
    const Tensor& scale = *float_constant(g_, node.inputs[1]);
    const Tensor& bias = *float_constant(g_, node.inputs[2]);
    const Tensor& mean = *float_constant(g_, node.inputs[3]);
    const Tensor& var = *float_constant(g_, node.inputs[4]);
    const int64_t c = scale.numel();
    if (bias.numel() != c || mean.numel() != c || var.numel() != c) {
      return invalid_argument(node.describe() + ": scale, B, mean and var sizes differ");
    }
    const int rank = g_.value(node.inputs[0]).type.rank();
    Dims dims(rank, 1);
    dims[1] = c;
    VOp op;
    op.kind = VOp::Kind::kAffine;
    op.nodes = {n};
    op.node = n;
    op.input = node.inputs[0];
    op.output = node.outputs[0];
    op.scale = Tensor(DType::kFloat32, dims);
    op.shift = Tensor(DType::kFloat32, dims);
    const double eps = node.attr_float("epsilon", 1e-5f);
    for (int64_t i = 0; i < c; ++i) {
      // The reference's arithmetic: a = scale / sqrt(var + eps), b = B - mean * a.
      const double a = static_cast<double>(scale.data<float>()[i]) /
                       std::sqrt(static_cast<double>(var.data<float>()[i]) + eps);
      op.scale.data<float>()[i] = static_cast<float>(a);
      op.shift.data<float>()[i] =
          static_cast<float>(static_cast<double>(bias.data<float>()[i]) -
                             static_cast<double>(mean.data<float>()[i]) * a);
    }
    op.name = "BatchNormalization";
    return op;
  }

  Status build_vops() {
    for (int n : sg_.nodes()) {
      if (covered_[n]) continue;
      const Node& node = g_.node(n);
      TESSERA_RETURN_IF_ERROR(node_support(g_, n));
      VOp op;
      if (match_hardswish(n, &op) || match_swish(n, &op)) {
        // Placed at its last node: everything it reads comes earlier, its output is read later.
        for (int m : op.nodes) covered_[m] = true;
        pending_.push_back(std::move(op));
        continue;
      }
      covered_[n] = true;
      if (node.op_type == "BatchNormalization") {
        TESSERA_ASSIGN_OR_RETURN(op, affine_of_batch_norm(n));
      } else if (is_activation_op(node.op_type)) {
        TESSERA_ASSIGN_OR_RETURN(op.eltwise, activation_ops(g_, node));
        op.kind = VOp::Kind::kActivation;
        op.input = node.inputs[0];
      } else if (is_binary_op(node.op_type)) {
        op.kind = VOp::Kind::kBinary;
        op.a = node.inputs[0];
        op.b = node.inputs[1];
      } else {
        op.kind = VOp::Kind::kAnchor;
      }
      op.nodes = {n};
      op.node = n;
      op.output = node.outputs[0];
      if (op.name.empty()) op.name = node.op_type;
      pending_.push_back(std::move(op));
    }
    std::stable_sort(pending_.begin(), pending_.end(),
                     [](const VOp& x, const VOp& y) { return x.nodes.back() < y.nodes.back(); });
    vops_ = std::move(pending_);
    return Status();
  }

  std::vector<int> data_inputs(const VOp& op) const {
    std::vector<int> v;
    auto add = [&](int x) {
      if (x >= 0 && !g_.value(x).constant) v.push_back(x);
    };
    switch (op.kind) {
      case VOp::Kind::kAnchor:
        for (int x : g_.node(op.node).inputs) add(x);
        break;
      case VOp::Kind::kActivation:
      case VOp::Kind::kAffine: add(op.input); break;
      case VOp::Kind::kBinary:
        add(op.a);
        add(op.b);
        break;
    }
    return v;
  }

  // ---- fusion ----

  Operand operand(int v) const {
    Operand o;
    o.value = v;
    if (v >= 0 && g_.value(v).constant) o.constant = *g_.value(v).constant;
    return o;
  }

  // The unit whose current output is v, when the op `reader` may extend it (v read only there).
  int extendable_unit(int v, int reader) const {
    if (v < 0 || g_.value(v).constant || is_output_[v]) return -1;
    int u = unit_of_output_[v];
    if (u < 0 || readers_[v].size() != 1 || readers_[v][0] != reader) return -1;
    if (prog_.units[u].post_ops.size() + 2 > kMaxPostOps) return -1;
    return u;
  }

  // Whether `other` may be a post-op operand of `chain` without enlarging it (optimistic where
  // dims are unknown: the plan checks again with real dims and splits the chain if not).
  bool fits(int other, int chain) const {
    double c;
    if (constant_scalar(g_, other, &c)) return true;
    const TensorType& o = g_.value(other).type;
    const TensorType& t = g_.value(chain).type;
    if (!o.has_rank() || !t.has_rank() || o.rank() > t.rank()) return false;
    const int off = t.rank() - o.rank();
    for (int i = 0; i < o.rank(); ++i) {
      const Dim& od = (*o.shape)[i];
      const Dim& td = (*t.shape)[off + i];
      if (od.known() && od.value == 1) continue;
      if (td.known() && td.value == 1) return false;  // other is larger here (or unknown)
      if (od.known() && td.known() && od.value != td.value) return false;
    }
    return true;
  }

  // Post-ops computing `chain OP other` (chain_is_lhs) or `other OP chain`; false when oneDNN's
  // post-ops cannot express it.
  bool binary_post_ops(const std::string& op, int other, bool chain_is_lhs,
                       std::vector<PostOp>* out) const {
    const algorithm alg = binary_algorithm(op);
    double c;
    PostOp p;
    if (constant_scalar(g_, other, &c) && g_.value(other).constant->dtype() == DType::kFloat32) {
      const float cf = static_cast<float>(c);
      p.kind = PostOp::Kind::kEltwise;
      if (op == "Add")
        p.eltwise = {algorithm::eltwise_linear, 1.0f, cf};
      else if (op == "Mul")
        p.eltwise = {algorithm::eltwise_linear, cf, 0.0f};
      else if (op == "Sub")
        p.eltwise = chain_is_lhs ? EltwiseOp{algorithm::eltwise_linear, 1.0f, -cf}
                                 : EltwiseOp{algorithm::eltwise_linear, -1.0f, cf};
      else if (op == "Div" && !chain_is_lhs)
        return false;
      else
        p.kind = PostOp::Kind::kBinary;  // Div by, Max, Min: exact against a scalar
      if (p.kind == PostOp::Kind::kBinary) {
        p.binary_alg = alg;
        p.operand = operand(other);
      }
      out->push_back(p);
      return true;
    }
    const bool commutative = op == "Add" || op == "Mul" || op == "Max" || op == "Min";
    if (!chain_is_lhs && !commutative && op != "Sub") return false;
    p.kind = PostOp::Kind::kBinary;
    p.binary_alg = alg;
    p.operand = operand(other);
    out->push_back(p);
    // other - chain = -(chain - other): negation is exact.
    if (!chain_is_lhs && op == "Sub")
      out->push_back(
          PostOp{PostOp::Kind::kEltwise, {algorithm::eltwise_linear, -1.0f, 0.0f}, {}, {}});
    return true;
  }

  void extend(int u, const VOp& op, std::vector<PostOp> post_ops) {
    Unit& unit = prog_.units[u];
    unit_of_output_[unit.output] = -1;
    for (PostOp& p : post_ops) unit.post_ops.push_back(std::move(p));
    unit.output = op.output;
    unit.last_node = std::max(unit.last_node, op.nodes.back());
    unit.label += "+" + op.name;
    unit_of_output_[op.output] = u;
  }

  int new_unit(UnitKind kind, const VOp& op) {
    Unit unit;
    unit.kind = kind;
    unit.node = op.node;
    unit.output = op.output;
    unit.last_node = op.nodes.back();
    unit.label = op.name;
    prog_.units.push_back(std::move(unit));
    int u = static_cast<int>(prog_.units.size()) - 1;
    unit_of_output_[op.output] = u;
    return u;
  }

  static UnitKind anchor_kind(const std::string& op) {
    if (op == "Conv") return UnitKind::kConv;
    if (op == "ConvTranspose") return UnitKind::kDeconv;
    if (op == "MatMul") return UnitKind::kMatMul;
    if (op == "Gemm") return UnitKind::kGemm;
    if (op == "Softmax") return UnitKind::kSoftmax;
    if (op == "LayerNormalization") return UnitKind::kLayerNorm;
    if (op == "Concat") return UnitKind::kConcat;
    if (op == "Resize") return UnitKind::kResize;
    if (op.rfind("Reduce", 0) == 0) return UnitKind::kReduce;
    return UnitKind::kPool;
  }

  Status place(int i) {
    const VOp& op = vops_[i];
    switch (op.kind) {
      case VOp::Kind::kAnchor: {
        int u = new_unit(anchor_kind(g_.node(op.node).op_type), op);
        for (int v : g_.node(op.node).inputs) prog_.units[u].inputs.push_back(operand(v));
        return Status();
      }
      case VOp::Kind::kActivation: {
        std::vector<PostOp> post;
        for (const EltwiseOp& e : op.eltwise)
          post.push_back(PostOp{PostOp::Kind::kEltwise, e, {}, {}});
        if (int u = extendable_unit(op.input, i); u >= 0) {
          extend(u, op, std::move(post));
          return Status();
        }
        int u = new_unit(UnitKind::kEltwise, op);
        prog_.units[u].eltwise = op.eltwise[0];
        prog_.units[u].inputs = {operand(op.input)};
        prog_.units[u].post_ops.assign(post.begin() + 1, post.end());
        return Status();
      }
      case VOp::Kind::kAffine: {
        Operand scale{-1, op.scale}, shift{-1, op.shift};
        PostOp add{PostOp::Kind::kBinary, {}, algorithm::binary_add, shift};
        if (int u = extendable_unit(op.input, i); u >= 0) {
          extend(u, op, {PostOp{PostOp::Kind::kBinary, {}, algorithm::binary_mul, scale}, add});
          return Status();
        }
        int u = new_unit(UnitKind::kBinary, op);
        prog_.units[u].binary_alg = algorithm::binary_mul;
        prog_.units[u].inputs = {operand(op.input), scale};
        prog_.units[u].post_ops = {add};
        return Status();
      }
      case VOp::Kind::kBinary: {
        const std::string& type = g_.node(op.node).op_type;
        std::vector<PostOp> post;
        if (op.a != op.b) {
          if (int u = extendable_unit(op.a, i);
              u >= 0 && fits(op.b, op.a) && binary_post_ops(type, op.b, true, &post)) {
            extend(u, op, std::move(post));
            return Status();
          }
          post.clear();
          if (int u = extendable_unit(op.b, i);
              u >= 0 && fits(op.a, op.b) && binary_post_ops(type, op.a, false, &post)) {
            extend(u, op, std::move(post));
            return Status();
          }
        }
        int u = new_unit(UnitKind::kBinary, op);
        prog_.units[u].binary_alg = binary_algorithm(type);
        prog_.units[u].inputs = {operand(op.a), operand(op.b)};
        return Status();
      }
    }
    return Status();
  }

  const SubGraph& sg_;
  const Graph& g_;
  std::vector<bool> is_output_, covered_;
  std::vector<VOp> pending_, vops_;
  std::vector<std::vector<int>> readers_;  // per value: the vops reading it
  std::vector<int> unit_of_output_;        // per value: the unit whose current output it is
  Program prog_;
};

}  // namespace

Result<Program> lower_subgraph(const SubGraph& sg) { return Lowering(sg).run(); }

}  // namespace tessera::onednn
