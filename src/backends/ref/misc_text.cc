// String ops: StringNormalizer (opset 10) and TfIdfVectorizer (opset 9).
#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "backends/ref/misc_kernels.h"
#include "backends/ref/ref_util.h"

namespace tessera {
namespace {

std::string ascii_lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string ascii_upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

Status string_normalizer_kernel(RefKernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  if (!x) return ctx.error("missing input");
  if (x->dtype() != DType::kString) return ctx.error("input must be a string tensor");
  if (x->rank() != 1 && !(x->rank() == 2 && x->dim(0) == 1)) return ctx.error("input must be [C] or [1, C]");
  const Node& n = ctx.node();
  const std::string action = n.attr_string("case_change_action", "NONE");
  if (action != "NONE" && action != "LOWER" && action != "UPPER") {
    return ctx.error("unknown case_change_action '" + action + "'");
  }
  const bool case_sensitive = n.attr_int("is_case_sensitive", 0) != 0;
  std::set<std::string> stopwords;
  if (const Attribute* a = n.attr("stopwords")) {
    for (const std::string& w : a->strings) stopwords.insert(case_sensitive ? w : ascii_lower(w));
  }
  std::vector<std::string> kept;
  for (const std::string& s : x->strings()) {
    if (stopwords.count(case_sensitive ? s : ascii_lower(s))) continue;
    kept.push_back(action == "LOWER" ? ascii_lower(s) : action == "UPPER" ? ascii_upper(s) : s);
  }
  if (kept.empty()) kept.push_back("");  // the output is never empty
  const int64_t count = static_cast<int64_t>(kept.size());
  Tensor& out = ctx.output(0, DType::kString, x->rank() == 1 ? std::vector<int64_t>{count}
                                                             : std::vector<int64_t>{1, count});
  out.strings() = std::move(kept);
  return Status();
}

// Counts the pool's n-grams in each row of `items` (rows x row_size).
template <typename Item>
Status tfidf_count(RefKernelContext& ctx, const std::vector<Item>& items, int64_t rows, int64_t row_size,
                   const std::vector<Item>& pool, std::vector<double>* counts, int64_t num_outputs) {
  const Node& n = ctx.node();
  const int64_t min_gram = n.attr_int("min_gram_length", 0), max_gram = n.attr_int("max_gram_length", 0);
  const int64_t max_skip = n.attr_int("max_skip_count", 0);
  if (min_gram < 1 || max_gram < min_gram) return ctx.error("need 1 <= min_gram_length <= max_gram_length");
  if (max_skip < 0) return ctx.error("max_skip_count must be >= 0");
  const std::vector<int64_t> ngram_counts = n.attr_ints("ngram_counts");
  const std::vector<int64_t> ngram_indexes = n.attr_ints("ngram_indexes");
  // The pool holds the 1-grams from ngram_counts[0], the 2-grams from ngram_counts[1], ...
  std::map<std::vector<Item>, int64_t> slot_of;
  size_t gram_number = 0;
  const int64_t pool_size = static_cast<int64_t>(pool.size());
  for (size_t g = 0; g < ngram_counts.size(); ++g) {
    const int64_t len = static_cast<int64_t>(g) + 1;
    const int64_t begin = ngram_counts[g];
    const int64_t end = g + 1 < ngram_counts.size() ? ngram_counts[g + 1] : pool_size;
    if (begin < 0 || end > pool_size || begin > end || (end - begin) % len != 0) {
      return ctx.error("ngram_counts does not match the pool");
    }
    for (int64_t p = begin; p < end; p += len, ++gram_number) {
      if (gram_number >= ngram_indexes.size()) return ctx.error("too few ngram_indexes");
      slot_of[std::vector<Item>(pool.begin() + p, pool.begin() + p + len)] = ngram_indexes[gram_number];
    }
  }
  counts->assign(rows * num_outputs, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const Item* row = items.data() + r * row_size;
    for (int64_t dist = 1; dist <= max_skip + 1; ++dist) {
      // 1-grams do not depend on the skip distance: count them only once.
      const int64_t first_len = dist > 1 ? std::max<int64_t>(min_gram, 2) : min_gram;
      for (int64_t start = 0; start < row_size; ++start) {
        for (int64_t len = first_len; len <= max_gram; ++len) {
          if (start + (len - 1) * dist >= row_size) break;
          std::vector<Item> gram(len);
          for (int64_t k = 0; k < len; ++k) gram[k] = row[start + k * dist];
          auto it = slot_of.find(gram);
          if (it != slot_of.end()) (*counts)[r * num_outputs + it->second] += 1;
        }
      }
    }
  }
  return Status();
}

Status tfidf_kernel(RefKernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  if (!x) return ctx.error("missing input");
  if (x->rank() != 1 && x->rank() != 2) return ctx.error("input must be [C] or [N, C]");
  const Node& n = ctx.node();
  const std::string mode = n.attr_string("mode", "");
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF") return ctx.error("unknown mode '" + mode + "'");
  const std::vector<int64_t> ngram_indexes = n.attr_ints("ngram_indexes");
  if (ngram_indexes.empty()) return ctx.error("ngram_indexes is empty");
  for (int64_t i : ngram_indexes) {
    if (i < 0 || i > (1 << 24)) return ctx.error("ngram_indexes value out of range");
  }
  const int64_t num_outputs = *std::max_element(ngram_indexes.begin(), ngram_indexes.end()) + 1;
  const int64_t rows = x->rank() == 2 ? x->dim(0) : 1;
  const int64_t row_size = x->rank() == 2 ? x->dim(1) : x->dim(0);
  std::vector<double> counts;
  if (x->dtype() == DType::kString) {
    std::vector<std::string> pool;
    if (const Attribute* a = n.attr("pool_strings")) pool = a->strings;
    TESSERA_RETURN_IF_ERROR(tfidf_count<std::string>(ctx, x->strings(), rows, row_size, pool, &counts, num_outputs));
  } else if (x->dtype() == DType::kInt32 || x->dtype() == DType::kInt64) {
    TESSERA_RETURN_IF_ERROR(tfidf_count<int64_t>(ctx, x->to_int64_vector(), rows, row_size,
                                                 n.attr_ints("pool_int64s"), &counts, num_outputs));
  } else {
    return ctx.error(std::string("unsupported input dtype ") + dtype_name(x->dtype()));
  }
  const std::vector<float> weights = n.attr_floats("weights");
  if (!weights.empty() && static_cast<int64_t>(weights.size()) < num_outputs) {
    return ctx.error("weights has fewer values than outputs");
  }
  Tensor& out = ctx.output(0, DType::kFloat32, x->rank() == 2 ? std::vector<int64_t>{rows, num_outputs}
                                                              : std::vector<int64_t>{num_outputs});
  float* p = out.data<float>();
  for (int64_t i = 0; i < rows * num_outputs; ++i) {
    double w = weights.empty() ? 1.0 : weights[i % num_outputs];
    double c = counts[i];
    if (mode == "TF") p[i] = static_cast<float>(c);
    else if (mode == "IDF") p[i] = static_cast<float>(c > 0 ? w : 0.0);
    else p[i] = static_cast<float>(c * w);
  }
  return Status();
}

}  // namespace

void register_misc_text_kernels(RefKernelTable& t) {
  t.add("StringNormalizer", string_normalizer_kernel);
  t.add("TfIdfVectorizer", tfidf_kernel);
}

}  // namespace tessera
