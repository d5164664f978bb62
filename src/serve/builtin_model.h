// The model `tessera serve` runs when given none: a small LLaMA-shaped model with seeded random
// weights and the built-in byte vocabulary, made in memory in well under a second, so a new user
// can try the API at once (its text is gibberish: the weights are random).
#pragma once

#include <memory>

#include "llm/language_model.h"

namespace tessera::serve {

// 4 layers, hidden 256, FFN 704, 8 heads / 2 KV heads, context 2048, Q8_0 matrices, the built-in
// byte vocabulary (450 tokens).
llm::ModelConfig builtin_model_config();
// The model, named "tessera-builtin" (config().name).
Result<std::unique_ptr<llm::LanguageModel>> load_builtin_model(const llm::ModelOptions& opts, uint64_t seed = 0);

}  // namespace tessera::serve
