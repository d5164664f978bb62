#include "ops/op_registry.h"

#include <algorithm>

namespace tessera {

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::kElementwise: return "elementwise";
    case OpKind::kBroadcast: return "broadcast";
    case OpKind::kInjective: return "injective";
    case OpKind::kReduction: return "reduction";
    case OpKind::kOutElementwiseFusable: return "out-elementwise-fusable";
    case OpKind::kOpaque: return "opaque";
  }
  return "unknown";
}

const OpRegistry& OpRegistry::global() {
  static const OpRegistry* registry = [] {
    auto* r = new OpRegistry();
    register_elementwise_ops(*r);
    register_tensor_ops(*r);
    register_nn_ops(*r);
    register_reduction_ops(*r);
    register_misc_ops(*r);
    register_control_flow_ops(*r);
    register_sequence_ops(*r);
    register_llm_ops(*r);
    return r;
  }();
  return *registry;
}

OpSchema& OpRegistry::add(std::string name, OpKind kind, std::string domain) {
  auto key = std::make_pair(domain, name);
  TESSERA_CHECK(ops_.count(key) == 0, "op registered twice");
  OpSchema& s = ops_[key];
  s.domain = std::move(domain);
  s.name = std::move(name);
  s.kind = kind;
  return s;
}

const OpSchema* OpRegistry::find(const std::string& domain, const std::string& name) const {
  const std::string& d = domain == "ai.onnx" ? std::string() : domain;
  auto it = ops_.find(std::make_pair(d, name));
  return it == ops_.end() ? nullptr : &it->second;
}

std::vector<const OpSchema*> OpRegistry::all() const {
  std::vector<const OpSchema*> v;
  for (const auto& [key, s] : ops_) v.push_back(&s);
  return v;
}

Status OpRegistry::infer_node(Graph& g, int n) const {
  Node& node = g.node(n);
  const OpSchema* schema = find(node.domain, node.op_type);
  if (!schema) return unimplemented(node.describe() + ": unsupported op");
  int nin = static_cast<int>(node.inputs.size());
  int nout = static_cast<int>(node.outputs.size());
  if (nin < schema->min_inputs || nin > schema->max_inputs) {
    return invalid_argument(node.describe() + ": has " + std::to_string(nin) + " inputs, expected " +
                            std::to_string(schema->min_inputs) + ".." +
                            std::to_string(schema->max_inputs));
  }
  if (nout < schema->min_outputs || nout > schema->max_outputs) {
    return invalid_argument(node.describe() + ": has " + std::to_string(nout) +
                            " outputs, expected " + std::to_string(schema->min_outputs) + ".." +
                            std::to_string(schema->max_outputs));
  }
  if (!schema->infer) return Status();
  InferContext ctx{node, {}, {}, {}};
  for (int v : node.inputs) {
    ctx.inputs.push_back(v == kNoValue ? TensorType{} : g.value(v).type);
    ctx.constants.push_back(v != kNoValue && g.value(v).constant ? &*g.value(v).constant : nullptr);
  }
  ctx.outputs.resize(node.outputs.size());
  TESSERA_RETURN_IF_ERROR(schema->infer(ctx).with_context(node.describe()));
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    int v = node.outputs[o];
    if (v == kNoValue) continue;
    TensorType& have = g.value(v).type;
    const TensorType& got = ctx.outputs[o];
    if (got.dtype != DType::kUndefined) have.dtype = got.dtype;
    if (got.shape && (!have.shape || got.is_static() || !have.is_static())) have.shape = got.shape;
  }
  return Status();
}

Status infer_graph_types(Graph& g) {
  const OpRegistry& r = OpRegistry::global();
  for (int n = 0; n < g.num_nodes(); ++n) TESSERA_RETURN_IF_ERROR(r.infer_node(g, n));
  return Status();
}

Result<int> normalize_axis(int64_t axis, int rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) {
    return invalid_argument("axis " + std::to_string(axis) + " out of range for rank " + std::to_string(rank));
  }
  return static_cast<int>(a);
}

int64_t slice_range(int64_t dim, int64_t& start, int64_t end, int64_t step) {
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    return end > start ? 1 + (end - start - 1) / step : 0;
  }
  if (dim <= 0) return 0;
  start = std::clamp<int64_t>(start, 0, dim - 1);
  end = std::clamp<int64_t>(end, -1, dim - 1);
  // step <= -dim (including INT64_MIN, which cannot be negated) takes one element.
  if (start <= end) return 0;
  return step <= -dim ? 1 : 1 + (start - end - 1) / (-step);
}

Status infer_same_as_input0(InferContext& ctx) {
  if (ctx.num_inputs() < 1) return invalid_argument("expected an input");
  for (auto& out : ctx.outputs) out = ctx.inputs[0];
  return Status();
}

namespace {
// Broadcasts dims of all present inputs; unknown rank makes the result unknown.
Result<std::optional<std::vector<Dim>>> broadcast_dims(const InferContext& ctx) {
  size_t rank = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    if (!ctx.inputs[i].shape) return std::optional<std::vector<Dim>>();
    rank = std::max(rank, ctx.inputs[i].shape->size());
  }
  std::vector<Dim> out(rank, Dim(1));
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    const auto& s = *ctx.inputs[i].shape;
    size_t off = rank - s.size();
    for (size_t k = 0; k < s.size(); ++k) {
      Dim& o = out[off + k];
      const Dim& d = s[k];
      if (d.known() && d.value == 1) continue;
      if (o.known() && o.value == 1) {
        o = d;
      } else if (d.known() && o.known() && d.value != o.value) {
        return invalid_argument("shapes cannot broadcast: dim " + std::to_string(o.value) +
                                " vs " + std::to_string(d.value));
      } else if (!o.known() && d.known()) {
        o = d;
      }
    }
  }
  return std::optional<std::vector<Dim>>(std::move(out));
}
}  // namespace

Status infer_broadcast(InferContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(auto dims, broadcast_dims(ctx));
  for (auto& out : ctx.outputs) {
    out.dtype = ctx.inputs.empty() ? DType::kUndefined : ctx.inputs[0].dtype;
    out.shape = dims;
  }
  return Status();
}

Status infer_broadcast_bool(InferContext& ctx) {
  TESSERA_RETURN_IF_ERROR(infer_broadcast(ctx));
  for (auto& out : ctx.outputs) out.dtype = DType::kBool;
  return Status();
}

}  // namespace tessera
