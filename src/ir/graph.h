// The graph IR: values (edges, with static types and optional constant data) and nodes (ops).
//
// After finalize(), nodes are in post-DFS order from the graph outputs: every node comes after all
// nodes that feed it, so `i < j` means node j cannot feed node i. Node and value indices are stable
// until the graph is edited and finalized again.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/attribute.h"
#include "ir/shape.h"
#include "ir/status.h"
#include "ir/tensor.h"

namespace tessera {

inline constexpr int kNoValue = -1;  // an omitted optional input

struct Value {
  std::string name;
  TensorType type;
  int producer = -1;         // node index, -1 for graph inputs and initializers
  int producer_output = 0;   // which output of the producer
  std::vector<int> consumers;  // node indices (a node appears once per use)
  std::optional<Tensor> constant;  // initializer data
  bool is_graph_input = false;
  bool is_graph_output = false;
  bool is_outer_scope = false;  // in a subgraph: a value of an enclosing graph, bound by name
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;  // "" is the default ONNX domain
  int opset = 0;       // the model's opset version for this node's domain
  std::vector<int> inputs;   // value ids, kNoValue for omitted optional inputs
  std::vector<int> outputs;  // value ids, kNoValue for omitted optional outputs
  // Values of this graph that the node's subgraph attributes (If/Loop/Scan bodies) read by name.
  std::vector<int> implicit_inputs;
  std::map<std::string, Attribute> attrs;

  bool has_attr(const std::string& key) const { return attrs.count(key) != 0; }
  const Attribute* attr(const std::string& key) const;
  int64_t attr_int(const std::string& key, int64_t fallback) const;
  float attr_float(const std::string& key, float fallback) const;
  std::string attr_string(const std::string& key, const std::string& fallback) const;
  std::vector<int64_t> attr_ints(const std::string& key, std::vector<int64_t> fallback = {}) const;
  std::vector<float> attr_floats(const std::string& key, std::vector<float> fallback = {}) const;
  // "Conv 'conv1'" for error messages.
  std::string describe() const;
};

class Graph {
 public:
  std::string name;
  std::map<std::string, int> opsets;  // domain -> version

  // Builders. add_value fails (internal check) on duplicate names: callers check names first.
  int add_value(std::string name, TensorType type = {});
  int add_input(std::string name, TensorType type);
  int add_constant(std::string name, Tensor data);
  // In a subgraph: a value read from an enclosing graph by name.
  int add_outer_value(std::string name, TensorType type = {});
  int add_node(std::string op_type, std::vector<int> inputs, std::vector<int> outputs,
               std::map<std::string, Attribute> attrs = {}, std::string name = {},
               std::string domain = {});
  void mark_output(int value);

  // Recomputes producers/consumers, orders nodes in post-DFS order from the outputs and drops
  // nodes that no output depends on. Fails on a cycle, on a value produced twice, or on a node
  // input that is neither produced, a graph input, nor a constant.
  Status finalize();

  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  int num_values() const { return static_cast<int>(values_.size()); }
  const Node& node(int i) const { return nodes_[i]; }
  Node& node(int i) { return nodes_[i]; }
  const Value& value(int i) const { return values_[i]; }
  Value& value(int i) { return values_[i]; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<Value>& values() const { return values_; }
  const std::vector<int>& inputs() const { return inputs_; }    // graph inputs (not constants)
  const std::vector<int>& outputs() const { return outputs_; }
  const std::vector<int>& outer_values() const { return outer_values_; }
  std::optional<int> find_value(const std::string& name) const;

  // Number of constant elements (parameters).
  int64_t parameter_count() const;

 private:
  std::vector<Node> nodes_;
  std::vector<Value> values_;
  std::vector<int> inputs_;
  std::vector<int> outputs_;
  std::vector<int> outer_values_;
  std::map<std::string, int> value_by_name_;
};

}  // namespace tessera
