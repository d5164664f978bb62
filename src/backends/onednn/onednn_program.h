// Lowering of a SubGraph into a shape-independent program of oneDNN "units": one anchor op
// (a primitive: Conv, MatMul, pooling, binary, ...) with the elementwise and binary ops that
// follow it folded in as post-ops, where the intermediate value is needed nowhere else.
//
// Graph patterns that are one oneDNN function are recognised first: x * Clip(x + 3, 0, 6) / 6
// is hardswish, BatchNormalization is a per-channel multiply and add, Add/Sub/Mul by a scalar
// constant are linear functions. The program does not depend on tensor shapes; the plan
// (onednn_plan.h) creates the primitives once the input dims are known.
#pragma once

#include <string>
#include <vector>

#include "backends/onednn/onednn_common.h"
#include "ir/subgraph.h"

namespace tessera::onednn {

// An input of a unit: a value read at run time, or constant data (an initializer, or data
// computed here such as BatchNormalization's per-channel scale).
struct Operand {
  int value = -1;   // graph value id; -1 for computed constants
  Tensor constant;  // defined for constants
  bool is_constant() const { return constant.defined(); }
};

struct PostOp {
  enum class Kind { kEltwise, kBinary };
  Kind kind = Kind::kEltwise;
  EltwiseOp eltwise;
  algorithm binary_alg = algorithm::binary_add;  // chain value OP operand
  Operand operand;
};

enum class UnitKind {
  kConv,
  kDeconv,
  kMatMul,
  kGemm,
  kPool,
  kEltwise,
  kBinary,
  kSoftmax,
  kLayerNorm,
  kConcat,
  kResize,
  kReduce
};

struct Unit {
  UnitKind kind = UnitKind::kEltwise;
  int node = -1;  // the anchor node: attributes and messages
  std::vector<Operand>
      inputs;         // the anchor's inputs in its own order (omitted ones: value -1, no data)
  EltwiseOp eltwise;  // kEltwise: the anchor function
  algorithm binary_alg = algorithm::binary_add;  // kBinary
  std::vector<PostOp> post_ops;
  int output = -1;     // the graph value the unit produces (after its post-ops)
  int last_node = -1;  // largest node index folded in (units run in this order)
  std::string label;   // "Conv+Mul+Add+HardSwish" for messages
};

struct Program {
  std::vector<Unit> units;  // every unit after the producers of what it reads
};

Result<Program> lower_subgraph(const SubGraph& sg);

}  // namespace tessera::onednn
