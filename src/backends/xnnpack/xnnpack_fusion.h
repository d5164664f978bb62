// FusionPlan: which nodes of a subgraph fold into others before the XNNPACK subgraph is built.
//
// Each fold removes a full pass over a tensor (XNNPACK runs every node as its own pass):
//   - per-channel affine tails of Conv, ConvTranspose, MatMul and Gemm (Mul, Add, Sub, Div by a
//     constant per channel or scalar; BatchNormalization after a convolution) fold into the
//     weights and bias: y * s + t;
//   - per-channel affine heads of an unpadded Conv or of a MatMul (Mul, Add... on its input,
//     read by nothing else) fold into its weights and bias too: W (x * s + t) = (W s) x + W t;
//   - x * Clip(x + 3, 0, 6) / 6 (HardSwish written out, as exporters do) becomes one HardSwish;
//   - Relu and Clip fold into the output range of the op before them.
// A node folds only when the value between it and its producer is read by nothing else and is
// not a subgraph output.
#pragma once

#include <map>
#include <vector>

#include "backends/xnnpack/xnnpack_rules.h"
#include "ir/subgraph.h"

namespace tessera::xnnpack {

// Per output channel: y' = y * scale + shift.
struct Affine {
  std::vector<double> scale, shift;
};

class FusionPlan {
 public:
  explicit FusionPlan(const SubGraph& sg);

  // Node n is emitted as part of another node.
  bool absorbed(int n) const { return absorbed_[n]; }
  // The value node n's first output stands for after folding (itself when nothing folded).
  int final_value(int n) const;
  // The clamp range folded into node n's output.
  Range range(int n) const;
  // The affine tail folded into node n, or nullptr.
  const Affine* affine(int n) const;
  // The affine head folded into node n's input, or nullptr; then node n reads input_value(n).
  const Affine* input_affine(int n) const;
  int input_value(int n) const;
  // When node n is the last node of a written-out HardSwish: the HardSwish's input; else -1.
  int hardswish_input(int n) const;

 private:
  bool single_internal_use(int v) const;
  void plan_hardswish();
  void plan_affine_tails();
  void plan_affine_heads();
  void plan_clamps();
  // The node whose emitted output value v is (through folds), or -1.
  int emitter_of(int v) const;

  const SubGraph& sg_;
  const Graph& g_;
  std::vector<bool> absorbed_;
  std::map<int, int> root_of_;      // absorbed node -> the node it folded into
  std::map<int, int> final_value_;  // node -> the value its output becomes
  std::map<int, Range> range_;
  std::map<int, Affine> affine_;
  std::map<int, Affine> input_affine_;
  std::map<int, int> input_value_;  // node -> the value it reads instead of its input 0
  std::map<int, int> hardswish_;    // last node of the pattern -> its input value
};

}  // namespace tessera::xnnpack
