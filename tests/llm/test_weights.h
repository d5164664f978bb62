// Seeded random model weights for the language-model tests: the tensors gguf-create writes
// (model_tensor_list + fill_random_tensor), in memory, with their dequantized float copies.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>

#include "llm/model_writer.h"
#include "llm/naive_forward.h"

namespace tessera::llm::testing {

struct TestWeights {
  WeightMap weights;
  FloatWeights floats;  // dequantized, row-major [rows][cols]
};

inline TestWeights make_weights(const ModelConfig& c, quant::QType type, uint64_t seed) {
  TestWeights tw;
  for (const RandomTensor& t : model_tensor_list(c, type)) {
    auto w = make_weight(t.type, t.dims, [&](void* dst) {
      fill_random_tensor(t, seed, static_cast<uint8_t*>(dst));
      return Status();
    });
    EXPECT_TRUE(w.ok()) << w.status().to_string();
    if (!w.ok()) continue;
    const int64_t cols = t.dims[0], rows = t.dims.size() > 1 ? t.dims[1] : 1;
    std::vector<float>& f = tw.floats[t.name];
    f.resize(cols * rows);
    if (t.dims.size() == 1) {
      std::copy_n(w->data.data<float>(), cols, f.data());
    } else {
      const auto* bytes = static_cast<const uint8_t*>(w->data.raw_data());
      for (int64_t r = 0; r < rows; ++r)
        quant::dequantize_row(t.type, bytes + r * quant::row_bytes(t.type, cols), cols, f.data() + r * cols);
    }
    tw.weights.emplace(t.name, std::move(*w));
  }
  return tw;
}

}  // namespace tessera::llm::testing
