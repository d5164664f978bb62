// Folds the parts of a graph whose results do not depend on the inputs' data: a Shape of a
// value whose dims are all known, and any node whose inputs are all constants (Cast, Slice,
// Concat, Gather ... over shape vectors). Exporters such as Paddle2ONNX compute Reshape targets
// that way (Shape -> Slice -> Cast -> Concat -> Reshape); once the input shapes are fixed
// (--shape), folding them lets shape inference know every dim downstream, so that backends
// which need static shapes can take those nodes.
#pragma once

#include "ir/graph.h"
#include "ir/status.h"

namespace tessera {

struct ConstantFoldingOptions {
  // A node is folded only when each output has at most this many elements (the folded values
  // are shape vectors and scalars; large constant expressions stay nodes).
  int64_t max_output_elements = 4096;
};

// Folds in place and re-infers every value's type. Returns the number of nodes folded away.
// The graph's outputs are never folded into constants; random and sequence ops never fold.
Result<int> fold_constants(Graph& g, const ConstantFoldingOptions& opts = {});

}  // namespace tessera
