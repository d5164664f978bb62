// Checks shared by the reference and native kernels of the language-model ops (ops/llm_ops.cc).
#pragma once

#include <vector>

#include "ir/graph.h"
#include "ir/status.h"
#include "ir/tensor.h"

namespace tessera {

// PagedAttention's run-time inputs (in node order): one row per token in q, k, v, token_seq and
// positions; every sequence index has a block table; every block a token reads or writes (its
// position and the ones before it) is a block of the caches.
Status check_paged_attention_inputs(const Node& n, const std::vector<const Tensor*>& in);

}  // namespace tessera
