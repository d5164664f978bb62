// The op registry: per op, its schema (arity, opset range), shape inference and kind.
//
// Ops are data: other layers (backends, the partitioner) look ops up here and attach their own
// tables (kernels, costs) keyed by op name, without editing the op.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/status.h"

namespace tessera {

// How an op composes with neighbours (TVM's TOpPattern): partition rules fuse by kind.
enum class OpKind {
  kElementwise,            // out[i] = f(in[i]), same shape
  kBroadcast,              // elementwise with numpy broadcasting
  kInjective,              // each output element reads one input element (reshape, transpose...)
  kReduction,              // reduces over axes
  kOutElementwiseFusable,  // conv / matmul: an elementwise op may fuse into its output
  kOpaque,                 // anything else
};
const char* op_kind_name(OpKind kind);

// What shape inference sees: the node, its input types and the data of constant inputs.
struct InferContext {
  const Node& node;
  std::vector<TensorType> inputs;        // dtype kUndefined for omitted optional inputs
  std::vector<const Tensor*> constants;  // data of constant inputs, else nullptr
  std::vector<TensorType> outputs;       // to fill; sized to node.outputs.size()

  int num_inputs() const { return static_cast<int>(inputs.size()); }
  bool has_input(int i) const { return i < num_inputs() && inputs[i].dtype != DType::kUndefined; }
};
using InferFn = std::function<Status(InferContext&)>;

struct OpSchema {
  std::string domain;  // "" for the default ONNX domain
  std::string name;
  OpKind kind = OpKind::kOpaque;
  int min_inputs = 0, max_inputs = 1 << 20;
  int min_outputs = 1, max_outputs = 1;
  InferFn infer;  // may be empty: output types then come from the model (ONNX shape inference)

  // Builder-style setters, so a registration reads as one line.
  OpSchema& set_kind(OpKind k) { kind = k; return *this; }
  OpSchema& set_inputs(int lo, int hi) { min_inputs = lo; max_inputs = hi; return *this; }
  OpSchema& set_outputs(int lo, int hi) { min_outputs = lo; max_outputs = hi; return *this; }
  OpSchema& set_infer(InferFn fn) { infer = std::move(fn); return *this; }
};

class OpRegistry {
 public:
  // The registry with every op tessera knows, filled on first use.
  static const OpRegistry& global();

  OpSchema& add(std::string name, OpKind kind, std::string domain = "");
  const OpSchema* find(const std::string& domain, const std::string& name) const;
  std::vector<const OpSchema*> all() const;

  // Checks arity and runs shape inference for node `n` of `g`, filling the types of its outputs
  // where the op's inference knows them (unknown results never overwrite known types).
  Status infer_node(Graph& g, int n) const;

 private:
  std::map<std::pair<std::string, std::string>, OpSchema> ops_;
};

// Runs OpRegistry::infer_node over every node in order.
Status infer_graph_types(Graph& g);

// Maps a possibly negative axis into [0, rank); an error when out of range.
Result<int> normalize_axis(int64_t axis, int rank);

// ONNX Slice on one dim: clamps start (updated in place) for `step` and returns the element
// count. start/end may be negative (from the end) or out of range; step must not be 0.
int64_t slice_range(int64_t dim, int64_t& start, int64_t end, int64_t step);

// Shape-inference building blocks for schemas.
Status infer_same_as_input0(InferContext& ctx);
Status infer_broadcast(InferContext& ctx);  // numpy broadcasting of all inputs; dtype of input 0
Status infer_broadcast_bool(InferContext& ctx);  // same, but the output is bool

// Registration functions, one per op family file (ops/*.cc). Called by OpRegistry::global().
void register_elementwise_ops(OpRegistry& r);
void register_tensor_ops(OpRegistry& r);
void register_nn_ops(OpRegistry& r);
void register_reduction_ops(OpRegistry& r);
void register_misc_ops(OpRegistry& r);
void register_control_flow_ops(OpRegistry& r);
void register_sequence_ops(OpRegistry& r);
void register_llm_ops(OpRegistry& r);  // domain "tessera": language-model ops (llm_ops.cc)

}  // namespace tessera
