// LayerNormalization spelled out in elementwise and reduction nodes, as exporters without the
// LayerNormalization op (opset < 17: PaddlePaddle's, older PyTorch's) write it:
//
//   mean = ReduceMean(x)            over the trailing axes, keepdims
//   d    = Sub(x, mean)
//   var  = ReduceMean(Pow(d, 2))    the same axes
//   y    = Div(d, Sqrt(Add(var, eps)))
//   y    = Add(Mul(y, scale), bias)  optional, either operand order; scale and bias constants
//
// The native backend runs the whole group as its LayerNormalization kernel: one pass over each
// row instead of six kernels and five intermediate tensors. (ONNX Runtime fuses the same form.)
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "backends/backend.h"
#include "ir/pattern.h"

namespace tessera::native {

struct DecomposedLayerNorm {
  int x = kNoValue;       // the normalized value
  int output = kNoValue;  // the group's only output
  int axis = 0;           // the first normalized axis (the rest follow it)
  float epsilon = 0;
  int scale = kNoValue, bias = kNoValue;  // constants, or kNoValue
};

// The nodes of sg are exactly one such LayerNormalization with float32 static shapes, nothing but
// its output used outside: its parts, or why not.
Result<DecomposedLayerNorm> match_decomposed_layer_norm(const SubGraph& sg);

// A pattern whose matches (rooted at the last node) hold the candidates: the forms above, checked
// in full by match_decomposed_layer_norm.
Pattern decomposed_layer_norm_pattern();

}  // namespace tessera::native
