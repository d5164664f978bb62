#include "ir/graph.h"

#include <algorithm>

namespace tessera {

bool TensorType::is_static() const {
  if (!shape) return false;
  return std::all_of(shape->begin(), shape->end(), [](const Dim& d) { return d.known(); });
}

std::vector<int64_t> TensorType::static_dims() const {
  TESSERA_CHECK(is_static(), "static_dims on a non-static type");
  std::vector<int64_t> dims;
  for (const Dim& d : *shape) dims.push_back(d.value);
  return dims;
}

TensorType TensorType::of(DType dtype, const std::vector<int64_t>& dims) {
  TensorType t;
  t.dtype = dtype;
  t.shape = std::vector<Dim>(dims.begin(), dims.end());
  return t;
}

std::string TensorType::to_string() const {
  std::string s = dtype_name(dtype);
  if (!shape) return s + "[?...]";
  s += "[";
  for (size_t i = 0; i < shape->size(); ++i) {
    if (i) s += "x";
    s += (*shape)[i].to_string();
  }
  return s + "]";
}

const char* attribute_type_name(Attribute::Type t) {
  switch (t) {
    case Attribute::Type::kUndefined: return "undefined";
    case Attribute::Type::kInt: return "int";
    case Attribute::Type::kFloat: return "float";
    case Attribute::Type::kString: return "string";
    case Attribute::Type::kTensor: return "tensor";
    case Attribute::Type::kGraph: return "graph";
    case Attribute::Type::kInts: return "ints";
    case Attribute::Type::kFloats: return "floats";
    case Attribute::Type::kStrings: return "strings";
    case Attribute::Type::kTensors: return "tensors";
    case Attribute::Type::kGraphs: return "graphs";
    case Attribute::Type::kType: return "type";
  }
  return "unknown";
}

const Attribute* Node::attr(const std::string& key) const {
  auto it = attrs.find(key);
  return it == attrs.end() ? nullptr : &it->second;
}

int64_t Node::attr_int(const std::string& key, int64_t fallback) const {
  const Attribute* a = attr(key);
  return a && a->type == Attribute::Type::kInt ? a->i : fallback;
}

float Node::attr_float(const std::string& key, float fallback) const {
  const Attribute* a = attr(key);
  if (!a) return fallback;
  if (a->type == Attribute::Type::kFloat) return a->f;
  if (a->type == Attribute::Type::kInt) return static_cast<float>(a->i);
  return fallback;
}

std::string Node::attr_string(const std::string& key, const std::string& fallback) const {
  const Attribute* a = attr(key);
  return a && a->type == Attribute::Type::kString ? a->s : fallback;
}

std::vector<int64_t> Node::attr_ints(const std::string& key, std::vector<int64_t> fallback) const {
  const Attribute* a = attr(key);
  return a && a->type == Attribute::Type::kInts ? a->ints : fallback;
}

std::vector<float> Node::attr_floats(const std::string& key, std::vector<float> fallback) const {
  const Attribute* a = attr(key);
  return a && a->type == Attribute::Type::kFloats ? a->floats : fallback;
}

std::string Node::describe() const {
  std::string op = domain.empty() ? op_type : domain + "." + op_type;
  return name.empty() ? op : op + " '" + name + "'";
}

int Graph::add_value(std::string value_name, TensorType type) {
  TESSERA_CHECK(value_by_name_.count(value_name) == 0, "duplicate value name");
  int id = static_cast<int>(values_.size());
  Value v;
  v.name = std::move(value_name);
  v.type = std::move(type);
  value_by_name_[v.name] = id;
  values_.push_back(std::move(v));
  return id;
}

int Graph::add_input(std::string value_name, TensorType type) {
  int id = add_value(std::move(value_name), std::move(type));
  values_[id].is_graph_input = true;
  inputs_.push_back(id);
  return id;
}

int Graph::add_constant(std::string value_name, Tensor data) {
  int id = add_value(std::move(value_name), TensorType::of(data.dtype(), data.dims()));
  values_[id].constant = std::move(data);
  return id;
}

int Graph::add_outer_value(std::string value_name, TensorType type) {
  int id = add_value(std::move(value_name), std::move(type));
  values_[id].is_outer_scope = true;
  outer_values_.push_back(id);
  return id;
}

int Graph::add_node(std::string op_type, std::vector<int> node_inputs, std::vector<int> node_outputs,
                    std::map<std::string, Attribute> attrs, std::string node_name,
                    std::string domain) {
  Node n;
  n.op_type = std::move(op_type);
  n.inputs = std::move(node_inputs);
  n.outputs = std::move(node_outputs);
  n.attrs = std::move(attrs);
  n.name = std::move(node_name);
  n.domain = std::move(domain);
  auto it = opsets.find(n.domain);
  n.opset = it == opsets.end() ? 0 : it->second;
  nodes_.push_back(std::move(n));
  return static_cast<int>(nodes_.size()) - 1;
}

void Graph::mark_output(int value) {
  values_[value].is_graph_output = true;
  outputs_.push_back(value);
}

std::optional<int> Graph::find_value(const std::string& value_name) const {
  auto it = value_by_name_.find(value_name);
  if (it == value_by_name_.end()) return std::nullopt;
  return it->second;
}

int64_t Graph::parameter_count() const {
  int64_t n = 0;
  for (const Value& v : values_)
    if (v.constant) n += v.constant->numel();
  return n;
}

Status Graph::finalize() {
  // Who produces each value.
  std::vector<int> producer(values_.size(), -1);
  std::vector<int> producer_output(values_.size(), 0);
  for (int n = 0; n < num_nodes(); ++n) {
    const Node& node = nodes_[n];
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      int v = node.outputs[o];
      if (v == kNoValue) continue;
      if (producer[v] != -1 || values_[v].is_graph_input || values_[v].is_outer_scope || values_[v].constant) {
        return invalid_argument("value '" + values_[v].name + "' is produced twice (again by " +
                                node.describe() + ")");
      }
      producer[v] = n;
      producer_output[v] = static_cast<int>(o);
    }
  }
  auto all_inputs = [](const Node& node) {
    std::vector<int> in = node.inputs;
    in.insert(in.end(), node.implicit_inputs.begin(), node.implicit_inputs.end());
    return in;
  };
  for (const Node& node : nodes_) {
    for (int v : all_inputs(node)) {
      if (v == kNoValue) continue;
      if (producer[v] == -1 && !values_[v].is_graph_input && !values_[v].is_outer_scope && !values_[v].constant) {
        return invalid_argument(node.describe() + ": input '" + values_[v].name +
                                "' is not produced by any node, nor a graph input or initializer");
      }
    }
  }
  for (int v : outputs_) {
    if (producer[v] == -1 && !values_[v].is_graph_input && !values_[v].is_outer_scope && !values_[v].constant) {
      return invalid_argument("graph output '" + values_[v].name + "' is never produced");
    }
  }

  // Iterative post-order DFS from the outputs; state 1 = on the stack, 2 = done.
  std::vector<uint8_t> state(nodes_.size(), 0);
  std::vector<int> order;
  for (int out : outputs_) {
    int root = producer[out];
    if (root < 0 || state[root] == 2) continue;
    std::vector<std::pair<int, size_t>> stack{{root, 0}};
    state[root] = 1;
    while (!stack.empty()) {
      auto& [n, next] = stack.back();
      const Node& node = nodes_[n];
      if (next < node.inputs.size() + node.implicit_inputs.size()) {
        size_t k = next++;
        int v = k < node.inputs.size() ? node.inputs[k] : node.implicit_inputs[k - node.inputs.size()];
        if (v == kNoValue) continue;
        int p = producer[v];
        if (p < 0) continue;
        if (state[p] == 1) {
          return invalid_argument("graph has a cycle through " + nodes_[p].describe() +
                                  " (value '" + values_[v].name + "')");
        }
        if (state[p] == 0) {
          state[p] = 1;
          stack.push_back({p, 0});
        }
      } else {
        state[n] = 2;
        order.push_back(n);
        stack.pop_back();
      }
    }
  }

  std::vector<Node> ordered;
  ordered.reserve(order.size());
  for (int n : order) ordered.push_back(std::move(nodes_[n]));
  nodes_ = std::move(ordered);

  for (Value& v : values_) {
    v.producer = -1;
    v.producer_output = 0;
    v.consumers.clear();
  }
  for (int n = 0; n < num_nodes(); ++n) {
    for (size_t o = 0; o < nodes_[n].outputs.size(); ++o) {
      int v = nodes_[n].outputs[o];
      if (v == kNoValue) continue;
      values_[v].producer = n;
      values_[v].producer_output = static_cast<int>(o);
    }
    for (int v : all_inputs(nodes_[n]))
      if (v != kNoValue) values_[v].consumers.push_back(n);
  }
  return Status();
}

}  // namespace tessera
