// Arithmetic work of a graph's compute-heavy nodes, for reading a measured time against this
// machine's peak: Conv, ConvTranspose, MatMul and Gemm, each multiply-add counted as two
// floating-point operations. Other ops (elementwise, pooling, normalization) are not counted:
// they are bound by memory, not by the FMA units, and are small in the models we run.
#pragma once

#include <vector>

#include "ir/graph.h"

namespace tessera {

// Two per multiply-add of a Conv / ConvTranspose / MatMul / Gemm node; 0 for other ops and for
// nodes whose operand or output shapes are not all static.
double node_flops(const Graph& g, const Node& node);

// The sum over the given node indices.
double nodes_flops(const Graph& g, const std::vector<int>& nodes);
// The sum over every node of g.
double graph_flops(const Graph& g);

}  // namespace tessera
