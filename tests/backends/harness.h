// The differential harness (like llama.cpp's test-backend-ops): for a claimed pattern ("Conv",
// "Conv+Add+Relu"), build a small graph on seeded random data in one of several shapes, so that a
// backend's result can be compared with the reference kernels'.
//
// A pattern is a chain: the first op (the head) makes its own inputs; every later op (a tail)
// takes the previous op's output as input 0. A binary tail takes its other operand from a graph
// input of the same shape, a per-channel constant or a scalar constant, by variant; a Concat tail
// appends a graph input of 1 + variant channels along axis 1.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/status.h"
#include "ir/tensor.h"

namespace tessera::harness {

// Shapes per pattern: every claimed pattern must run in at least kMinVariants of them.
constexpr int kVariants = 4;
constexpr int kMinVariants = 3;

struct Case {
  std::string name;            // "Conv+Relu v1: Conv x[2,8,13,11] w[12,2,3,3] s2 g4"
  Graph graph;                 // finalized, every value typed
  std::vector<Tensor> inputs;  // one per graph input, in order
  double tolerance = 1e-5;     // allowed max|a-b| / max|b| against the reference
};

// Builds variant `variant` (0 <= variant < kVariants) of `pattern`. Unknown ops, or an op that
// cannot be a tail, are errors: a claimed pattern without a harness case is a bug.
Result<Case> build_case(const std::string& pattern, int variant, uint64_t seed);

// max|a-b| / max|b| over finite elements; +inf when shapes or dtypes differ or NaNs do not match.
double relative_error(const Tensor& got, const Tensor& want);

}  // namespace tessera::harness
