// Export of a graph or a subgraph to a standalone ONNX model.
#include <set>

#include "onnx/onnx_import.h"
#include "onnx/tensor_proto.h"

namespace tessera {
namespace {

Status attribute_to_proto(const std::string& name, const Attribute& a, onnx::AttributeProto* p) {
  p->set_name(name);
  switch (a.type) {
    case Attribute::Type::kInt: p->set_type(onnx::AttributeProto::INT); p->set_i(a.i); break;
    case Attribute::Type::kFloat: p->set_type(onnx::AttributeProto::FLOAT); p->set_f(a.f); break;
    case Attribute::Type::kString: p->set_type(onnx::AttributeProto::STRING); p->set_s(a.s); break;
    case Attribute::Type::kInts:
      p->set_type(onnx::AttributeProto::INTS);
      for (int64_t v : a.ints) p->add_ints(v);
      break;
    case Attribute::Type::kFloats:
      p->set_type(onnx::AttributeProto::FLOATS);
      for (float v : a.floats) p->add_floats(v);
      break;
    case Attribute::Type::kStrings:
      p->set_type(onnx::AttributeProto::STRINGS);
      for (const auto& v : a.strings) p->add_strings(v);
      break;
    case Attribute::Type::kTensor:
      p->set_type(onnx::AttributeProto::TENSOR);
      tensor_to_proto(a.t, "", p->mutable_t());
      break;
    case Attribute::Type::kTensors:
      p->set_type(onnx::AttributeProto::TENSORS);
      for (const auto& t : a.tensors) tensor_to_proto(t, "", p->add_tensors());
      break;
    default:
      return unimplemented("exporting attribute '" + name + "' of type " + attribute_type_name(a.type));
  }
  return Status();
}

void add_value_info(const Value& v, onnx::ValueInfoProto* p) {
  p->set_name(v.name);
  type_to_proto(v.type, p->mutable_type());
}

}  // namespace

Result<std::string> export_onnx_subgraph(const Graph& g, const std::vector<int>& nodes) {
  std::set<int> inside(nodes.begin(), nodes.end());
  for (int n : inside)
    if (n < 0 || n >= g.num_nodes()) return invalid_argument("node index " + std::to_string(n) + " out of range");

  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("tessera");
  for (const auto& [domain, version] : g.opsets) {
    auto* imp = m.add_opset_import();
    imp->set_domain(domain);
    imp->set_version(version);
  }
  if (g.opsets.empty()) {
    auto* imp = m.add_opset_import();
    imp->set_version(kMaxOnnxOpset);
  }
  onnx::GraphProto* gp = m.mutable_graph();
  gp->set_name(g.name.empty() ? "tessera_subgraph" : g.name);

  std::set<int> produced, declared_inputs;
  for (int n : inside)
    for (int v : g.node(n).outputs)
      if (v != kNoValue) produced.insert(v);

  for (int n : inside) {  // std::set iterates in post-DFS order: a valid topological order
    const Node& node = g.node(n);
    auto* np = gp->add_node();
    np->set_op_type(node.op_type);
    np->set_domain(node.domain);
    np->set_name(node.name);
    for (int v : node.inputs) {
      np->add_input(v == kNoValue ? "" : g.value(v).name);
      if (v == kNoValue || produced.count(v) || declared_inputs.count(v)) continue;
      declared_inputs.insert(v);
      const Value& val = g.value(v);
      if (val.constant) tensor_to_proto(*val.constant, val.name, gp->add_initializer());
      else add_value_info(val, gp->add_input());
    }
    for (int v : node.outputs) np->add_output(v == kNoValue ? "" : g.value(v).name);
    for (const auto& [key, a] : node.attrs) TESSERA_RETURN_IF_ERROR(attribute_to_proto(key, a, np->add_attribute()).with_context(node.describe()));
  }
  for (int v : produced) {
    const Value& val = g.value(v);
    bool used_outside = val.is_graph_output;
    for (int c : val.consumers) used_outside |= inside.count(c) == 0;
    if (used_outside) add_value_info(val, gp->add_output());
    else if (val.type.dtype != DType::kUndefined) add_value_info(val, gp->add_value_info());
  }
  std::string bytes;
  if (!m.SerializeToString(&bytes)) return internal_error("serializing the ONNX model failed");
  return bytes;
}

Result<std::string> export_onnx(const Graph& g) {
  std::vector<int> all(g.num_nodes());
  for (int i = 0; i < g.num_nodes(); ++i) all[i] = i;
  return export_onnx_subgraph(g, all);
}

}  // namespace tessera
