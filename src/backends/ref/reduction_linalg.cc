// Reference kernels: Einsum (a generic loop over all index combinations) and Det (LU with
// partial pivoting in double).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "backends/ref/reduction_kernels.h"

namespace tessera::ref {
namespace {

// ---------------------------------------------------------------------------------------------
// Einsum

// Labels: 'A'..'Z' -> 0..25, 'a'..'z' -> 26..51 (so id order is ASCII order), and the broadcast
// dims covered by "..." -> kEllipsisBase + j, j counted over the widest ellipsis.
constexpr int kEllipsisBase = 52;

int label_id(char c) {
  return std::isupper(static_cast<unsigned char>(c)) ? c - 'A' : c - 'a' + 26;
}

// One term of the equation: letter ids in order, and where "..." sits (-1 if absent).
struct EinsumTerm {
  std::vector<int> letters;
  int ellipsis_at = -1;  // position in `letters` before which the ellipsis dims go
};

Result<EinsumTerm> parse_einsum_term(const std::string& text) {
  EinsumTerm term;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '.') {
      if (term.ellipsis_at >= 0 || text.compare(i, 3, "...") != 0) {
        return invalid_argument("bad ellipsis in einsum term '" + text + "'");
      }
      term.ellipsis_at = static_cast<int>(term.letters.size());
      i += 2;
    } else if (std::isalpha(static_cast<unsigned char>(c))) {
      term.letters.push_back(label_id(c));
    } else {
      return invalid_argument(std::string("bad character '") + c + "' in einsum term '" + text +
                              "'");
    }
  }
  return term;
}

// The labels of each dim of a term, given how many dims its ellipsis covers and the widest one.
std::vector<int> term_labels(const EinsumTerm& term, int ellipsis_dims, int ellipsis_rank) {
  std::vector<int> labels;
  for (int i = 0; i <= static_cast<int>(term.letters.size()); ++i) {
    if (i == term.ellipsis_at) {
      for (int j = 0; j < ellipsis_dims; ++j) {
        labels.push_back(kEllipsisBase + ellipsis_rank - ellipsis_dims + j);
      }
    }
    if (i < static_cast<int>(term.letters.size())) labels.push_back(term.letters[i]);
  }
  return labels;
}

template <typename T>
void einsum_loop(const std::vector<const Tensor*>& inputs,
                 const std::vector<std::vector<int64_t>>& strides,  // [input][label slot]
                 const std::vector<int64_t>& sizes,                 // per label slot
                 int num_out_slots, T* y) {
  using Acc = std::conditional_t<kIsFloatElement<T>, double, uint64_t>;  // ints wrap
  const size_t n_in = inputs.size();
  const int n_slots = static_cast<int>(sizes.size());
  std::vector<const T*> x(n_in);
  for (size_t k = 0; k < n_in; ++k) x[k] = inputs[k]->data<T>();
  int64_t out_count = 1, sum_count = 1;
  for (int s = 0; s < n_slots; ++s) (s < num_out_slots ? out_count : sum_count) *= sizes[s];
  if (out_count == 0) return;
  std::vector<int64_t> index(n_slots, 0);
  std::vector<int64_t> offset(n_in, 0);
  // Advances the odometer over slots [lo, hi); returns false when it wraps around.
  auto advance = [&](int lo, int hi) {
    for (int s = hi - 1; s >= lo; --s) {
      ++index[s];
      for (size_t k = 0; k < n_in; ++k) offset[k] += strides[k][s];
      if (index[s] < sizes[s]) return true;
      for (size_t k = 0; k < n_in; ++k) offset[k] -= strides[k][s] * sizes[s];
      index[s] = 0;
    }
    return false;
  };
  for (int64_t o = 0; o < out_count; ++o) {
    Acc acc = 0;
    if (sum_count > 0) {
      do {
        Acc product = 1;
        for (size_t k = 0; k < n_in; ++k) product *= static_cast<Acc>(x[k][offset[k]]);
        acc += product;
      } while (advance(num_out_slots, n_slots));
    }
    if constexpr (kIsFloatElement<T>) {
      y[o] = element_from_double<T>(acc);
    } else {
      y[o] = static_cast<T>(acc);
    }
    advance(0, num_out_slots);
  }
}

Status run_einsum(RefKernelContext& ctx) {
  std::string equation;
  for (char c : ctx.node().attr_string("equation", "")) {
    if (!std::isspace(static_cast<unsigned char>(c))) equation.push_back(c);
  }
  if (equation.empty()) return ctx.error("attribute equation missing");
  const size_t arrow = equation.find("->");
  const std::string lhs = equation.substr(0, arrow);
  std::vector<EinsumTerm> terms;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    Result<EinsumTerm> term = parse_einsum_term(lhs.substr(start, comma - start));
    if (!term.ok()) return term.status().with_context(ctx.node().describe());
    terms.push_back(*term);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  const int n_in = ctx.num_inputs();
  if (static_cast<int>(terms.size()) != n_in) {
    return ctx.error("equation has " + std::to_string(terms.size()) + " terms for " +
                     std::to_string(n_in) + " inputs");
  }
  std::vector<const Tensor*> inputs;
  for (int k = 0; k < n_in; ++k) {
    if (!ctx.input(k)) return ctx.error("input " + std::to_string(k) + " missing");
    inputs.push_back(ctx.input(k));
    if (inputs[k]->dtype() != inputs[0]->dtype()) return ctx.error("inputs differ in dtype");
  }
  // Ellipsis widths, then every dim's label.
  std::vector<int> ellipsis_dims(n_in, 0);
  int ellipsis_rank = 0;
  for (int k = 0; k < n_in; ++k) {
    const int letters = static_cast<int>(terms[k].letters.size());
    const int rank = inputs[k]->rank();
    if (terms[k].ellipsis_at >= 0 ? rank < letters : rank != letters) {
      return ctx.error("term " + std::to_string(k) + " does not match input rank " +
                       std::to_string(rank));
    }
    if (terms[k].ellipsis_at >= 0) ellipsis_dims[k] = rank - letters;
    ellipsis_rank = std::max(ellipsis_rank, ellipsis_dims[k]);
  }
  constexpr int kMaxEllipsisRank = 64;
  constexpr int kMaxLabels = kEllipsisBase + kMaxEllipsisRank;
  if (ellipsis_rank > kMaxEllipsisRank) return ctx.error("ellipsis covers too many dims");
  std::vector<int64_t> label_size(kMaxLabels, -1);
  std::vector<int> label_uses(kMaxLabels, 0);
  std::vector<std::vector<int>> labels(n_in);
  for (int k = 0; k < n_in; ++k) {
    labels[k] = term_labels(terms[k], ellipsis_dims[k], ellipsis_rank);
    for (int d = 0; d < inputs[k]->rank(); ++d) {
      const int l = labels[k][d];
      const int64_t size = inputs[k]->dims()[d];
      ++label_uses[l];
      // Size-1 dims broadcast against the label's other sizes.
      if (label_size[l] < 0 || label_size[l] == 1) {
        label_size[l] = size;
      } else if (size != 1 && size != label_size[l]) {
        return ctx.error("label sizes disagree: " + std::to_string(label_size[l]) + " vs " +
                         std::to_string(size));
      }
    }
  }
  // Output labels: explicit, or (implicit) the ellipsis then letters used once, in ASCII order.
  std::vector<int> out_labels;
  if (arrow != std::string::npos) {
    Result<EinsumTerm> out_term = parse_einsum_term(equation.substr(arrow + 2));
    if (!out_term.ok()) return out_term.status().with_context(ctx.node().describe());
    // An output without "..." sums the broadcast dims away.
    out_labels =
        term_labels(*out_term, out_term->ellipsis_at >= 0 ? ellipsis_rank : 0, ellipsis_rank);
  } else {
    for (int j = 0; j < ellipsis_rank; ++j) out_labels.push_back(kEllipsisBase + j);
    for (int l = 0; l < kEllipsisBase; ++l) {
      if (label_uses[l] == 1) out_labels.push_back(l);
    }
  }
  std::vector<bool> in_output(kMaxLabels, false);
  for (int l : out_labels) {
    if (label_uses[l] == 0) return ctx.error("output label does not appear in the inputs");
    if (in_output[l]) return ctx.error("output label repeated");
    in_output[l] = true;
  }
  // Slots: output labels in output order, then the summed labels.
  std::vector<int> slots = out_labels;
  for (int l = 0; l < kMaxLabels; ++l) {
    if (label_uses[l] > 0 && !in_output[l]) slots.push_back(l);
  }
  std::vector<int64_t> sizes;
  std::vector<int> slot_of(kMaxLabels, -1);
  for (size_t s = 0; s < slots.size(); ++s) {
    slot_of[slots[s]] = static_cast<int>(s);
    sizes.push_back(label_size[slots[s]]);
  }
  // Per input, per slot: the sum of the strides of its dims with that label (repeated labels
  // walk a diagonal); 0 where the label is absent or the dim broadcasts.
  std::vector<std::vector<int64_t>> strides(n_in, std::vector<int64_t>(slots.size(), 0));
  for (int k = 0; k < n_in; ++k) {
    const std::vector<int64_t> dim_strides = row_major_strides(inputs[k]->dims());
    for (int d = 0; d < inputs[k]->rank(); ++d) {
      const int l = labels[k][d];
      if (inputs[k]->dims()[d] == 1 && label_size[l] != 1) continue;
      strides[k][slot_of[l]] += dim_strides[d];
    }
  }
  std::vector<int64_t> out_dims(sizes.begin(), sizes.begin() + out_labels.size());
  const DType dtype = inputs[0]->dtype();
  if (dtype == DType::kBool || dtype == DType::kString) {
    return ctx.unsupported(std::string("dtype ") + dtype_name(dtype));
  }
  Tensor& out = ctx.output(0, dtype, out_dims);
  bool known = visit_numeric_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      einsum_loop<T>(inputs, strides, sizes, static_cast<int>(out_labels.size()), out.data<T>());
    }
  });
  if (!known) return ctx.unsupported(std::string("dtype ") + dtype_name(dtype));
  return Status();
}

// ---------------------------------------------------------------------------------------------
// Det

// Determinant of the row-major n x n matrix `a` (overwritten), by LU with partial pivoting.
double lu_determinant(std::vector<double>& a, int64_t n) {
  double det = 1;
  for (int64_t c = 0; c < n; ++c) {
    int64_t pivot = c;
    for (int64_t r = c + 1; r < n; ++r) {
      if (std::fabs(a[r * n + c]) > std::fabs(a[pivot * n + c])) pivot = r;
    }
    if (a[pivot * n + c] == 0) return 0;
    if (pivot != c) {
      for (int64_t j = 0; j < n; ++j) std::swap(a[c * n + j], a[pivot * n + j]);
      det = -det;
    }
    const double p = a[c * n + c];
    det *= p;
    for (int64_t r = c + 1; r < n; ++r) {
      const double f = a[r * n + c] / p;
      if (f == 0) continue;
      for (int64_t j = c + 1; j < n; ++j) a[r * n + j] -= f * a[c * n + j];
    }
  }
  return det;
}

Status run_det(RefKernelContext& ctx) {
  const Tensor* in = ctx.input(0);
  if (!in) return ctx.error("missing input");
  const int rank = in->rank();
  if (rank < 2 || in->dim(-1) != in->dim(-2)) {
    return ctx.error("input must be [..., M, M], got " + dims_to_string(in->dims()));
  }
  if (!dtype_is_float(in->dtype())) {
    return ctx.unsupported(std::string("dtype ") + dtype_name(in->dtype()));
  }
  const int64_t n = in->dim(-1);
  std::vector<int64_t> out_dims(in->dims().begin(), in->dims().end() - 2);
  Tensor& out = ctx.output(0, in->dtype(), out_dims);
  const std::vector<double> x = in->to_double_vector();
  const int64_t batch = out.numel();
  visit_float_dtype(in->dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* y = out.data<T>();
    std::vector<double> a(n * n);
    for (int64_t b = 0; b < batch; ++b) {
      std::copy(x.begin() + b * n * n, x.begin() + (b + 1) * n * n, a.begin());
      y[b] = element_from_double<T>(lu_determinant(a, n));
    }
  });
  return Status();
}

}  // namespace

void register_reduction_linalg_kernels(RefKernelTable& t) {
  t.add("Einsum", run_einsum);
  t.add("Det", run_det);
}

}  // namespace tessera::ref
