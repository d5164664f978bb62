#include "onnx/onnx_import.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "onnx/checker.h"
#include "onnx/shape_inference/implementation.h"
#include "onnx/tensor_proto.h"
#include "ops/op_registry.h"

namespace tessera {
namespace {

// Names visible from enclosing graphs, for subgraphs (If/Loop/Scan bodies) that read them.
struct Scope {
  const Scope* parent = nullptr;
  std::set<std::string> names;
  bool has(const std::string& n) const { return names.count(n) || (parent && parent->has(n)); }
};

Result<Graph> build_graph(const onnx::GraphProto& gp, const std::map<std::string, int>& opsets,
                          const std::string& base_dir, const OnnxImportOptions& opts, const Scope* outer);

std::string describe_node(const onnx::NodeProto& n) {
  std::string op = n.domain().empty() ? n.op_type() : n.domain() + "." + n.op_type();
  return n.name().empty() ? op : op + " '" + n.name() + "'";
}

Result<Attribute> attribute_from_proto(const onnx::AttributeProto& a, const std::string& base_dir,
                                       const std::map<std::string, int>& opsets, const OnnxImportOptions& opts,
                                       const Scope& scope) {
  Attribute out;
  switch (a.type()) {
    case onnx::AttributeProto::INT: out = Attribute::of_int(a.i()); break;
    case onnx::AttributeProto::FLOAT: out = Attribute::of_float(a.f()); break;
    case onnx::AttributeProto::STRING: out = Attribute::of_string(a.s()); break;
    case onnx::AttributeProto::INTS: out = Attribute::of_ints({a.ints().begin(), a.ints().end()}); break;
    case onnx::AttributeProto::FLOATS: out = Attribute::of_floats({a.floats().begin(), a.floats().end()}); break;
    case onnx::AttributeProto::STRINGS: out = Attribute::of_strings({a.strings().begin(), a.strings().end()}); break;
    case onnx::AttributeProto::TENSOR: {
      TESSERA_ASSIGN_OR_RETURN(Tensor t, tensor_from_proto(a.t(), base_dir));
      out = Attribute::of_tensor(std::move(t));
      break;
    }
    case onnx::AttributeProto::TENSORS: {
      out.type = Attribute::Type::kTensors;
      for (const auto& tp : a.tensors()) {
        TESSERA_ASSIGN_OR_RETURN(Tensor t, tensor_from_proto(tp, base_dir));
        out.tensors.push_back(std::move(t));
      }
      break;
    }
    case onnx::AttributeProto::GRAPH: {
      auto sub = build_graph(a.g(), opsets, base_dir, opts, &scope);
      if (!sub.ok()) return sub.status().with_context("subgraph '" + a.name() + "'");
      out.type = Attribute::Type::kGraph;
      out.g = std::make_shared<Graph>(std::move(sub).value());
      break;
    }
    case onnx::AttributeProto::GRAPHS:
      return unimplemented("attribute '" + a.name() + "' holds a list of subgraphs");
    case onnx::AttributeProto::SPARSE_TENSOR:
    case onnx::AttributeProto::SPARSE_TENSORS:
      return unimplemented("attribute '" + a.name() + "' holds a sparse tensor");
    case onnx::AttributeProto::TYPE_PROTO: {
      TESSERA_ASSIGN_OR_RETURN(out.type_value, type_from_proto(a.tp()));
      out.type = Attribute::Type::kType;
      break;
    }
    case onnx::AttributeProto::TYPE_PROTOS:
      return unimplemented("attribute '" + a.name() + "' holds a list of types");
    default:
      return invalid_argument("attribute '" + a.name() + "' has no valid type");
  }
  return out;
}

// The value of a Constant node, from whichever attribute it uses.
Result<Tensor> constant_node_value(const Node& n) {
  if (n.attrs.size() != 1) return invalid_argument(n.describe() + ": Constant needs exactly one attribute");
  const auto& [key, a] = *n.attrs.begin();
  if (key == "value" && a.type == Attribute::Type::kTensor) return a.t;
  if (key == "value_float" && a.type == Attribute::Type::kFloat) return Tensor::scalar<float>(a.f);
  if (key == "value_int" && a.type == Attribute::Type::kInt) return Tensor::scalar<int64_t>(a.i);
  if (key == "value_floats" && a.type == Attribute::Type::kFloats)
    return Tensor::from_vector<float>({static_cast<int64_t>(a.floats.size())}, a.floats);
  if (key == "value_ints" && a.type == Attribute::Type::kInts)
    return Tensor::from_vector<int64_t>({static_cast<int64_t>(a.ints.size())}, a.ints);
  if (key == "value_string" && a.type == Attribute::Type::kString) {
    Tensor t(DType::kString, {});
    t.strings()[0] = a.s;
    return t;
  }
  if (key == "value_strings" && a.type == Attribute::Type::kStrings) {
    Tensor t(DType::kString, {static_cast<int64_t>(a.strings.size())});
    t.strings() = a.strings;
    return t;
  }
  return unimplemented(n.describe() + ": Constant attribute '" + key + "'");
}

Status check_opsets(const onnx::ModelProto& m, std::map<std::string, int>& opsets) {
  for (const auto& imp : m.opset_import()) {
    std::string domain = imp.domain() == "ai.onnx" ? "" : imp.domain();
    if (imp.version() < 0 || imp.version() > 1000000) {
      return invalid_argument("opset version " + std::to_string(imp.version()) + " of domain '" + domain +
                              "' is invalid");
    }
    opsets[domain] = static_cast<int>(imp.version());
  }
  if (m.opset_import_size() == 0) opsets[""] = 1;  // IR v1 models: opset 1
  auto it = opsets.find("");
  if (it != opsets.end() && (it->second < kMinOnnxOpset || it->second > kMaxOnnxOpset)) {
    return unimplemented("default-domain opset " + std::to_string(it->second) + " is out of the supported range " +
                         std::to_string(kMinOnnxOpset) + ".." + std::to_string(kMaxOnnxOpset));
  }
  return Status();
}

Result<Graph> build_graph(const onnx::GraphProto& gp, const std::map<std::string, int>& opsets,
                          const std::string& base_dir, const OnnxImportOptions& opts, const Scope* outer) {
  Graph g;
  g.name = gp.name();
  g.opsets = opsets;
  Scope here{outer, {}};

  for (const auto& init : gp.initializer()) {
    if (init.name().empty()) return invalid_argument("an initializer has no name");
    if (g.find_value(init.name())) return invalid_argument("initializer '" + init.name() + "' is defined twice");
    auto t = tensor_from_proto(init, base_dir);
    if (!t.ok()) return t.status().with_context("initializer '" + init.name() + "'");
    g.add_constant(init.name(), std::move(t).value());
    here.names.insert(init.name());
  }
  if (gp.sparse_initializer_size() > 0) return unimplemented("sparse initializers are not supported");
  for (const auto& in : gp.input()) {
    if (g.find_value(in.name())) continue;  // an initializer also listed as an input (IR < 4)
    if (in.name().empty()) return invalid_argument("a graph input has no name");
    auto t = in.has_type() ? type_from_proto(in.type()) : Result<TensorType>(TensorType{});
    if (!t.ok()) return t.status().with_context("graph input '" + in.name() + "'");
    g.add_input(in.name(), *t);
    here.names.insert(in.name());
  }

  // Types known from the model (value_info and, after shape inference, everything inferred).
  std::map<std::string, TensorType> known_types;
  auto note_type = [&](const onnx::ValueInfoProto& vi) -> Status {
    if (!vi.has_type()) return Status();
    auto t = type_from_proto(vi.type());
    if (!t.ok()) return t.status().with_context("value '" + vi.name() + "'");
    known_types[vi.name()] = *t;
    return Status();
  };
  for (const auto& vi : gp.value_info()) TESSERA_RETURN_IF_ERROR(note_type(vi));
  for (const auto& vi : gp.output()) TESSERA_RETURN_IF_ERROR(note_type(vi));

  auto value_for = [&](const std::string& name) -> int {
    if (auto v = g.find_value(name)) return *v;
    auto it = known_types.find(name);
    TensorType type = it == known_types.end() ? TensorType{} : it->second;
    if (outer && outer->has(name)) return g.add_outer_value(name, type);
    return g.add_value(name, type);
  };

  const OpRegistry& registry = OpRegistry::global();
  for (const auto& np : gp.node()) {
    std::string domain = np.domain() == "ai.onnx" ? "" : np.domain();
    if (!opsets.count(domain)) {
      return invalid_argument(describe_node(np) + ": domain '" + domain + "' is not imported by the model");
    }
    if (!domain.empty()) {
      return unimplemented(describe_node(np) + ": ops of domain '" + domain + "' are not supported");
    }
    if (opts.require_known_ops && np.op_type() != "Constant" && !registry.find(domain, np.op_type())) {
      return unimplemented(describe_node(np) + ": unsupported op '" + np.op_type() + "'");
    }
    std::map<std::string, Attribute> attrs;
    for (const auto& ap : np.attribute()) {
      if (!ap.ref_attr_name().empty()) return invalid_argument(describe_node(np) + ": attribute references belong in functions");
      auto a = attribute_from_proto(ap, base_dir, opsets, opts, here);
      if (!a.ok()) return a.status().with_context(describe_node(np));
      attrs[ap.name()] = std::move(a).value();
    }
    // Values of this graph (or further out) that the node's subgraphs read by name.
    std::vector<int> implicit;
    for (const auto& [key, a] : attrs) {
      if (a.type != Attribute::Type::kGraph) continue;
      for (int ov : a.g->outer_values()) {
        int v = value_for(a.g->value(ov).name);
        if (std::find(implicit.begin(), implicit.end(), v) == implicit.end()) implicit.push_back(v);
      }
    }
    std::vector<int> inputs, outputs;
    for (const auto& name : np.input()) inputs.push_back(name.empty() ? kNoValue : value_for(name));
    for (const auto& name : np.output()) {
      if (name.empty()) { outputs.push_back(kNoValue); continue; }
      auto existing = g.find_value(name);
      if (existing && (g.value(*existing).is_graph_input || g.value(*existing).constant)) {
        return invalid_argument(describe_node(np) + ": output '" + name + "' overwrites a graph input or initializer");
      }
      outputs.push_back(value_for(name));
      here.names.insert(name);
    }
    int n = g.add_node(np.op_type(), std::move(inputs), std::move(outputs), std::move(attrs), np.name(), domain);
    g.node(n).implicit_inputs = std::move(implicit);
    if (np.op_type() == "Constant") {
      Node& node = g.node(n);
      if (node.outputs.size() != 1 || node.outputs[0] == kNoValue || !node.inputs.empty())
        return invalid_argument(node.describe() + ": Constant needs no input and one output");
      TESSERA_ASSIGN_OR_RETURN(Tensor t, constant_node_value(node));
      Value& v = g.value(node.outputs[0]);
      v.type = TensorType::of(t.dtype(), t.dims());
      v.constant = std::move(t);
      node.outputs.clear();  // the node is dropped by finalize(): nothing consumes it
    }
  }
  for (const auto& out : gp.output()) {
    auto v = g.find_value(out.name());
    if (!v) return invalid_argument("graph output '" + out.name() + "' is never produced");
    g.mark_output(*v);
  }
  if (g.outputs().empty()) return invalid_argument("the graph has no outputs");
  TESSERA_RETURN_IF_ERROR(g.finalize());
  // Fill what ONNX's inference left open with tessera's own, and check arity of every node.
  for (int n = 0; n < g.num_nodes(); ++n) {
    Status st = registry.infer_node(g, n);
    if (!st.ok() && (opts.require_known_ops || st.code() != StatusCode::kUnimplemented)) return st;
  }
  return g;
}

Result<Graph> import_model(onnx::ModelProto& m, const std::string& base_dir, const OnnxImportOptions& opts) {
  if (!m.has_graph()) return invalid_argument("the model has no graph");
  if (m.functions_size() > 0) return unimplemented("model-local functions are not supported");
  if (opts.run_checker) {
    try {
      onnx::checker::CheckerContext ctx;
      ctx.set_ir_version(static_cast<int>(m.ir_version()));
      std::unordered_map<std::string, int> imports;
      for (const auto& imp : m.opset_import()) imports[imp.domain()] = static_cast<int>(imp.version());
      ctx.set_opset_imports(imports);
      ctx.set_model_dir(base_dir);
      onnx::checker::LexicalScopeContext lex;
      onnx::checker::check_graph(m.graph(), ctx, lex);
    } catch (const std::exception& e) {
      std::string what = e.what();
      if (what.find("No Op registered") != std::string::npos || what.find("No opset import") != std::string::npos) {
        return unimplemented("ONNX checker: " + what);
      }
      return invalid_argument("ONNX checker: " + what);
    }
  }
  if (opts.run_shape_inference) {
    try {
      onnx::ModelProto inferred = m;
      onnx::ShapeInferenceOptions options(false, 0, false);
      onnx::shape_inference::InferShapes(inferred, onnx::OpSchemaRegistry::Instance(), options);
      m.Swap(&inferred);
    } catch (const std::exception&) {
      // ONNX's inference is a help, not a requirement: tessera's own inference fills in.
    }
  }
  std::map<std::string, int> opsets;
  TESSERA_RETURN_IF_ERROR(check_opsets(m, opsets));
  return build_graph(m.graph(), opsets, base_dir, opts, nullptr);
}

std::string folder_of(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

}  // namespace

Result<Graph> import_onnx_bytes(const std::string& bytes, const std::string& base_dir, const OnnxImportOptions& opts) {
  onnx::ModelProto m;
  if (bytes.empty()) return invalid_argument("the model file is empty");
  if (!m.ParseFromString(bytes)) return invalid_argument("not a valid ONNX model (malformed or truncated protobuf)");
  return import_model(m, base_dir, opts);
}

Result<Graph> import_onnx_file(const std::string& path, const OnnxImportOptions& opts) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return not_found("cannot open model file '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  auto g = import_onnx_bytes(ss.str(), folder_of(path), opts);
  if (!g.ok()) return g.status().with_context(path);
  return g;
}

Result<Tensor> read_tensor_proto_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return not_found("cannot open tensor file '" + path + "'");
  onnx::TensorProto p;
  if (!p.ParseFromIstream(&f)) return invalid_argument("'" + path + "' is not a serialized TensorProto");
  auto t = tensor_from_proto(p, folder_of(path));
  if (!t.ok()) return t.status().with_context(path);
  return t;
}

Result<std::string> read_tensor_proto_name(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return not_found("cannot open tensor file '" + path + "'");
  onnx::TensorProto p;
  if (!p.ParseFromIstream(&f)) return invalid_argument("'" + path + "' is not a serialized TensorProto");
  return p.name();
}

}  // namespace tessera
