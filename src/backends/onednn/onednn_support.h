// What the oneDNN backend runs: per node, ok or the reason it cannot, and the small op
// descriptions (activations, binary algorithms, Resize and Reduce parameters) that both the
// support check and the kernel builder read, so they never disagree.
#pragma once

#include <string>
#include <vector>

#include "backends/onednn/onednn_common.h"

namespace tessera::onednn {

// Whether node n of g can run on oneDNN, or why not.
Status node_support(const Graph& g, int n);

// The oneDNN functions of a unary activation node (Relu, Clip, HardSigmoid, Pow by a constant...),
// in order, or an error when the node is not one this backend maps.
Result<std::vector<EltwiseOp>> activation_ops(const Graph& g, const Node& node);
bool is_activation_op(const std::string& op_type);

// Add, Sub, Mul, Div, Max, Min with two inputs.
bool is_binary_op(const std::string& op_type);
algorithm binary_algorithm(const std::string& op_type);

// Resize (opset 10+) as a oneDNN resampling: the algorithm and where the output size comes from.
struct ResizeSpec {
  algorithm alg = algorithm::resampling_nearest;
  std::vector<double> scales;  // per dim, when given as scales
  Dims sizes;                  // per dim, when given as sizes
};
Result<ResizeSpec> resize_spec(const Graph& g, const Node& node);
// Output dims for input dims `in`; an error where oneDNN's result would differ from ONNX's.
Result<Dims> resize_output_dims(const ResizeSpec& spec, const Dims& in);

// ReduceMean / ReduceSum / ReduceMax / ReduceMin: reduced axes (normalized) and keepdims.
struct ReduceSpec {
  algorithm alg = algorithm::reduction_sum;
  std::vector<bool> reduced;  // per input dim
  bool keepdims = true;
};
Result<ReduceSpec> reduce_spec(const Graph& g, const Node& node, int rank);

}  // namespace tessera::onednn
