#include "serve/builtin_model.h"

#include "llm/model_writer.h"

namespace tessera::serve {

llm::ModelConfig builtin_model_config() {
  llm::ModelConfig c;
  c.arch = llm::Architecture::kLlama;
  c.name = "tessera-builtin";
  c.vocab_size = llm::builtin_llama_vocab(0).tokens.size();  // no unused tokens: all of it is text
  c.context_length = 2048;
  c.hidden = 256;
  c.ffn_hidden = 704;
  c.layers = 4;
  c.heads = 8;
  c.kv_heads = 2;
  return c;
}

Result<std::unique_ptr<llm::LanguageModel>> load_builtin_model(const llm::ModelOptions& opts, uint64_t seed) {
  const llm::ModelConfig c = builtin_model_config();
  const llm::TokenizerVocab vocab = llm::builtin_llama_vocab(0);
  llm::WeightMap weights;
  for (const llm::RandomTensor& t : llm::model_tensor_list(c, quant::QType::kQ8_0)) {
    TESSERA_ASSIGN_OR_RETURN(llm::ModelWeight w, llm::make_weight(t.type, t.dims, [&](void* dst) {
                               llm::fill_random_tensor(t, seed, static_cast<uint8_t*>(dst));
                               return Status();
                             }));
    weights.emplace(t.name, std::move(w));
  }
  return llm::LanguageModel::create(c, std::move(weights), &vocab, opts);
}

}  // namespace tessera::serve
