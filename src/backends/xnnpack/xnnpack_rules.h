// The XNNPACK backend's op table: per ONNX op, whether a node can run on XNNPACK (check), what it
// needs of the subgraph's layout, and how it becomes XNNPACK subgraph nodes (emit). One table
// drives supports(), accepts() and the subgraph builder.
//
// Layout: a compiled subgraph is either NHWC (it holds an op that only runs on NHWC tensors, such
// as Conv) or plain. In an NHWC subgraph every 4-D value is stored NHWC inside (NCHW outside: the
// kernel transposes at its boundary); values of any other rank keep their order.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/status.h"

namespace tessera::xnnpack {

class Emitter;

// The interval an op clamps its output to.
struct Range {
  float min = -std::numeric_limits<float>::infinity();
  float max = std::numeric_limits<float>::infinity();
};

// Position in NHWC order of NCHW axis a (N 0 -> 0, C 1 -> 3, H 2 -> 1, W 3 -> 2).
int nhwc_axis(int nchw_axis);
// Whether a 4-D tensor's NHWC data equals its NCHW data (C == 1 or H * W == 1), so that a
// reshape can cross between an NHWC value and a plain one.
bool nhwc_is_plain(const std::vector<int64_t>& nchw);

// A node of the graph as the checks see it. Types of the node's values are static when the
// checks run (supports() verifies that first).
struct NodeView {
  const Graph& g;
  const Node& node;

  int num_inputs() const { return static_cast<int>(node.inputs.size()); }
  bool has_input(int i) const { return i < num_inputs() && node.inputs[i] != kNoValue; }
  const Value& input(int i) const { return g.value(node.inputs[i]); }
  // The data of input i when it is an initializer, else nullptr.
  const Tensor* constant(int i) const;
  std::vector<int64_t> input_dims(int i) const { return input(i).type.static_dims(); }
  int input_rank(int i) const { return input(i).type.rank(); }
  std::vector<int64_t> output_dims(int o = 0) const {
    return g.value(node.outputs[o]).type.static_dims();
  }
  int output_rank(int o = 0) const { return g.value(node.outputs[o]).type.rank(); }
  // "Conv 'name': <why>" as an unimplemented Status.
  Status reject(const std::string& why) const;
};

struct OpRule {
  std::string op_type;
  // Whether the node only runs on NHWC tensors (makes its subgraph an NHWC one).
  bool (*needs_nhwc)(const Node& n) = nullptr;
  // Whether the node can run on XNNPACK (float32 data and static shapes are checked before).
  Status (*check)(const NodeView& n) = nullptr;
  // Whether the node can run in a subgraph of the given layout; nullptr: in either.
  Status (*check_layout)(const NodeView& n, bool nhwc) = nullptr;
  // Adds the node to the XNNPACK subgraph.
  Status (*emit)(Emitter& e, const Node& n) = nullptr;
  // Whether the emitted op clamps its output (a following Relu or Clip then fuses into it).
  bool has_output_range = false;
};

// The rule for node n (default ONNX domain only), or nullptr.
const OpRule* find_rule(const Node& n);
// Every op the table knows, for reports.
std::vector<std::string> rule_ops();

// The families of the table, one file each.
void add_nn_rules(std::vector<OpRule>& rules);  // Conv, ConvTranspose, MatMul, Gemm, pools, BN
void add_elementwise_rules(std::vector<OpRule>& rules);  // unary and binary elementwise ops
void add_tensor_rules(std::vector<OpRule>& rules);       // Concat, Resize, Softmax, reshapes

// Shared by the checks: a constant operand of float32 type, or an error naming input i.
Status require_float_constant(const NodeView& n, int i, const char* what);
// Numpy broadcast of two shapes, or an error.
Result<std::vector<int64_t>> broadcast_dims(const std::vector<int64_t>& a,
                                            const std::vector<int64_t>& b);
// The clamp of a Relu or Clip node (Clip bounds must be constant), or an error.
Result<Range> clamp_range(const NodeView& n);
inline bool never_nhwc(const Node&) { return false; }
inline bool always_nhwc(const Node&) { return true; }

}  // namespace tessera::xnnpack
