// RNN, GRU and LSTM (ONNX opsets 7-14): forward, reverse and bidirectional, sequence_lens,
// initial states, LSTM peepholes and input_forget, GRU linear_before_reset, layout, activations
// with alpha/beta, clip. Computed in double, one batch row at a time.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <vector>

#include "backends/ref/misc_kernels.h"
#include "backends/ref/ref_util.h"

namespace tessera {
namespace {

enum class Cell { kRnn, kGru, kLstm };

struct Activation {
  std::string name;  // lower case
  double alpha = 0, beta = 0;

  double apply(double x) const {
    if (name == "sigmoid") return 1.0 / (1.0 + std::exp(-x));
    if (name == "tanh") return std::tanh(x);
    if (name == "relu") return std::max(0.0, x);
    if (name == "affine") return alpha * x + beta;
    if (name == "leakyrelu") return x >= 0 ? x : alpha * x;
    if (name == "thresholdedrelu") return x > alpha ? x : 0.0;
    if (name == "scaledtanh") return alpha * std::tanh(beta * x);
    if (name == "hardsigmoid") return std::clamp(alpha * x + beta, 0.0, 1.0);
    if (name == "elu") return x >= 0 ? x : alpha * (std::exp(x) - 1);
    if (name == "softsign") return x / (1 + std::abs(x));
    if (name == "softplus") return std::log1p(std::exp(x));
    return x;
  }
};

// Default alpha and beta of each activation, and whether it consumes them.
bool activation_defaults(const std::string& name, Activation* a, bool* uses_alpha, bool* uses_beta) {
  *uses_alpha = *uses_beta = false;
  if (name == "sigmoid" || name == "tanh" || name == "relu" || name == "softsign" || name == "softplus") {
    return true;
  }
  if (name == "affine") { a->alpha = 1.0; a->beta = 0.0; *uses_alpha = *uses_beta = true; return true; }
  if (name == "leakyrelu") { a->alpha = 0.01; *uses_alpha = true; return true; }
  if (name == "thresholdedrelu") { a->alpha = 1.0; *uses_alpha = true; return true; }
  if (name == "scaledtanh") { a->alpha = 1.0; a->beta = 1.0; *uses_alpha = *uses_beta = true; return true; }
  if (name == "hardsigmoid") { a->alpha = 0.2; a->beta = 0.5; *uses_alpha = *uses_beta = true; return true; }
  if (name == "elu") { a->alpha = 1.0; *uses_alpha = true; return true; }
  return false;
}

struct RecurrentSpec {
  Cell cell;
  int gates;   // 1, 3 or 4
  int funcs;   // activations per direction
  int64_t hidden;
  int dirs;
  bool reverse_only;
  bool batch_first;
  bool linear_before_reset;
  bool input_forget;
  bool has_clip;
  double clip;
  std::vector<Activation> activations;  // funcs * dirs
};

Status parse_spec(RefKernelContext& ctx, Cell cell, RecurrentSpec* s) {
  const Node& n = ctx.node();
  s->cell = cell;
  s->gates = cell == Cell::kRnn ? 1 : cell == Cell::kGru ? 3 : 4;
  s->funcs = cell == Cell::kRnn ? 1 : cell == Cell::kGru ? 2 : 3;
  std::string direction = n.attr_string("direction", "forward");
  if (direction == "forward" || direction == "reverse") s->dirs = 1;
  else if (direction == "bidirectional") s->dirs = 2;
  else return ctx.error("unknown direction '" + direction + "'");
  s->reverse_only = direction == "reverse";
  s->batch_first = n.attr_int("layout", 0) != 0;
  s->linear_before_reset = n.attr_int("linear_before_reset", 0) != 0;
  s->input_forget = n.attr_int("input_forget", 0) != 0;
  s->has_clip = n.has_attr("clip");
  s->clip = n.attr_float("clip", 0.0f);
  if (s->has_clip && !(s->clip > 0)) return ctx.error("clip must be positive");
  s->hidden = n.attr_int("hidden_size", -1);
  std::vector<std::string> names;
  if (const Attribute* a = n.attr("activations")) names = a->strings;
  if (names.empty()) {
    const char* defaults[3] = {"sigmoid", "tanh", "tanh"};
    for (int d = 0; d < s->dirs; ++d) {
      if (cell == Cell::kRnn) names.push_back("tanh");
      else for (int f = 0; f < s->funcs; ++f) names.push_back(defaults[f]);
    }
  } else if (static_cast<int>(names.size()) == s->funcs && s->dirs == 2) {
    std::vector<std::string> twice = names;
    names.insert(names.end(), twice.begin(), twice.end());
  }
  if (static_cast<int>(names.size()) != s->funcs * s->dirs) {
    return ctx.error("expected " + std::to_string(s->funcs * s->dirs) + " activations, got " +
                     std::to_string(names.size()));
  }
  std::vector<float> alphas = n.attr_floats("activation_alpha");
  std::vector<float> betas = n.attr_floats("activation_beta");
  size_t next_alpha = 0, next_beta = 0;
  for (std::string name : names) {
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    Activation act;
    act.name = name;
    bool uses_alpha, uses_beta;
    if (!activation_defaults(name, &act, &uses_alpha, &uses_beta)) {
      return ctx.unsupported("activation '" + name + "'");
    }
    if (uses_alpha && next_alpha < alphas.size()) act.alpha = alphas[next_alpha++];
    if (uses_beta && next_beta < betas.size()) act.beta = betas[next_beta++];
    s->activations.push_back(act);
  }
  return Status();
}

template <typename T>
Status run_recurrent(RefKernelContext& ctx, RecurrentSpec& s) {
  const Tensor& x = *ctx.input(0);
  const Tensor& w = *ctx.input(1);
  const Tensor& r = *ctx.input(2);
  if (x.rank() != 3 || w.rank() != 3 || r.rank() != 3) return ctx.error("X, W and R must have rank 3");
  if (w.dtype() != x.dtype() || r.dtype() != x.dtype()) return ctx.error("X, W and R dtypes differ");
  const int64_t seq = x.dim(s.batch_first ? 1 : 0);
  const int64_t batch = x.dim(s.batch_first ? 0 : 1);
  const int64_t in_size = x.dim(2);
  if (s.hidden <= 0) s.hidden = r.dim(2);
  const int64_t H = s.hidden, G = s.gates, D = s.dirs;
  if (w.dim(0) != D || w.dim(1) != G * H || w.dim(2) != in_size) {
    return ctx.error("W has shape " + dims_to_string(w.dims()) + ", expected " +
                     dims_to_string(std::vector<int64_t>{D, G * H, in_size}));
  }
  if (r.dim(0) != D || r.dim(1) != G * H || r.dim(2) != H) {
    return ctx.error("R has shape " + dims_to_string(r.dims()) + ", expected " +
                     dims_to_string(std::vector<int64_t>{D, G * H, H}));
  }
  auto to_doubles = [](const Tensor* t) { return t ? t->to_double_vector() : std::vector<double>{}; };
  std::vector<double> xv = x.to_double_vector(), wv = w.to_double_vector(), rv = r.to_double_vector();
  std::vector<double> bv = to_doubles(ctx.input(3));
  if (!bv.empty() && static_cast<int64_t>(bv.size()) != D * 2 * G * H) return ctx.error("B has the wrong size");
  std::vector<int64_t> lens(batch, seq);
  if (const Tensor* sl = ctx.input(4)) {
    if (sl->numel() != batch) return ctx.error("sequence_lens must have batch_size values");
    lens = sl->to_int64_vector();
    for (int64_t l : lens) {
      if (l < 0 || l > seq) return ctx.error("sequence_lens value out of range");
    }
  }
  // States are laid out [dirs][batch][H] internally whatever the layout.
  auto load_state = [&](const Tensor* t, std::vector<double>* out) -> Status {
    out->assign(D * batch * H, 0.0);
    if (!t) return Status();
    if (t->numel() != D * batch * H) return ctx.error("initial state has the wrong size");
    std::vector<double> v = t->to_double_vector();
    for (int64_t d = 0; d < D; ++d)
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t j = 0; j < H; ++j)
          (*out)[(d * batch + b) * H + j] = v[s.batch_first ? (b * D + d) * H + j : (d * batch + b) * H + j];
    return Status();
  };
  std::vector<double> h_state, c_state;
  TESSERA_RETURN_IF_ERROR(load_state(ctx.input(5), &h_state));
  TESSERA_RETURN_IF_ERROR(load_state(s.cell == Cell::kLstm ? ctx.input(6) : nullptr, &c_state));
  std::vector<double> pv = s.cell == Cell::kLstm ? to_doubles(ctx.input(7)) : std::vector<double>{};
  if (!pv.empty() && static_cast<int64_t>(pv.size()) != D * 3 * H) return ctx.error("P has the wrong size");

  std::vector<double> y(seq * D * batch * H, 0.0);  // [seq][dirs][batch][H]
  auto act = [&](int d, int f, double v) {
    if (s.has_clip) v = std::clamp(v, -s.clip, s.clip);
    return s.activations[d * s.funcs + f].apply(v);
  };
  std::vector<double> xw(G * H), hr(G * H), gated(H);
  for (int64_t d = 0; d < D; ++d) {
    const bool reverse = s.reverse_only || d == 1;
    const double* W = wv.data() + d * G * H * in_size;
    const double* R = rv.data() + d * G * H * H;
    const double* Wb = bv.empty() ? nullptr : bv.data() + d * 2 * G * H;
    const double* Rb = bv.empty() ? nullptr : Wb + G * H;
    const double* P = pv.empty() ? nullptr : pv.data() + d * 3 * H;
    for (int64_t b = 0; b < batch; ++b) {
      double* h = h_state.data() + (d * batch + b) * H;
      double* c = c_state.data() + (d * batch + b) * H;
      for (int64_t step = 0; step < lens[b]; ++step) {
        const int64_t t = reverse ? lens[b] - 1 - step : step;
        const double* xt = xv.data() + (s.batch_first ? (b * seq + t) : (t * batch + b)) * in_size;
        for (int64_t g = 0; g < G * H; ++g) {
          double a = Wb ? Wb[g] : 0.0, q = Rb ? Rb[g] : 0.0;
          for (int64_t i = 0; i < in_size; ++i) a += xt[i] * W[g * in_size + i];
          for (int64_t k = 0; k < H; ++k) q += h[k] * R[g * H + k];
          xw[g] = a;
          hr[g] = q;
        }
        if (s.cell == Cell::kRnn) {
          for (int64_t j = 0; j < H; ++j) h[j] = act(d, 0, xw[j] + hr[j]);
        } else if (s.cell == Cell::kGru) {
          // Gates z, r, h.
          std::vector<double> z(H), rg(H);
          for (int64_t j = 0; j < H; ++j) {
            z[j] = act(d, 0, xw[j] + hr[j]);
            rg[j] = act(d, 0, xw[H + j] + hr[H + j]);
          }
          for (int64_t j = 0; j < H; ++j) {
            double pre;
            if (s.linear_before_reset) {
              pre = xw[2 * H + j] + rg[j] * hr[2 * H + j];
            } else {
              double q = Rb ? Rb[2 * H + j] : 0.0;
              for (int64_t k = 0; k < H; ++k) q += rg[k] * h[k] * R[(2 * H + j) * H + k];
              pre = xw[2 * H + j] + q;
            }
            gated[j] = act(d, 1, pre);
          }
          for (int64_t j = 0; j < H; ++j) h[j] = (1 - z[j]) * gated[j] + z[j] * h[j];
        } else {
          // Gates i, o, f, c; peepholes i, o, f.
          for (int64_t j = 0; j < H; ++j) {
            double ig = act(d, 0, xw[j] + hr[j] + (P ? P[j] * c[j] : 0.0));
            double fg = s.input_forget ? 1.0 - ig
                                       : act(d, 0, xw[2 * H + j] + hr[2 * H + j] + (P ? P[2 * H + j] * c[j] : 0.0));
            double cand = act(d, 1, xw[3 * H + j] + hr[3 * H + j]);
            double cn = fg * c[j] + ig * cand;
            double og = act(d, 0, xw[H + j] + hr[H + j] + (P ? P[H + j] * cn : 0.0));
            c[j] = cn;
            gated[j] = og * act(d, 2, cn);
          }
          std::copy(gated.begin(), gated.end(), h);
        }
        std::copy(h, h + H, y.begin() + ((t * D + d) * batch + b) * H);
      }
    }
  }
  auto store = [&](int out, const std::vector<double>& v, std::vector<int64_t> dims, auto index) {
    if (!ctx.wants_output(out)) return;
    Tensor& o = ctx.output(out, x.dtype(), std::move(dims));
    T* p = o.data<T>();
    for (int64_t i = 0; i < o.numel(); ++i) p[i] = static_cast<T>(v[index(i)]);
  };
  // Y: [seq, D, batch, H] or [batch, seq, D, H].
  store(0, y, s.batch_first ? std::vector<int64_t>{batch, seq, D, H} : std::vector<int64_t>{seq, D, batch, H},
        [&](int64_t i) {
          if (!s.batch_first) return i;
          int64_t j = i % H, dd = (i / H) % D, t = (i / (H * D)) % seq, b = i / (H * D * seq);
          return ((t * D + dd) * batch + b) * H + j;
        });
  auto state_index = [&](int64_t i) {
    if (!s.batch_first) return i;
    int64_t j = i % H, dd = (i / H) % D, b = i / (H * D);
    return (dd * batch + b) * H + j;
  };
  std::vector<int64_t> state_dims = s.batch_first ? std::vector<int64_t>{batch, D, H} : std::vector<int64_t>{D, batch, H};
  store(1, h_state, state_dims, state_index);
  if (s.cell == Cell::kLstm) store(2, c_state, state_dims, state_index);
  return Status();
}

Status recurrent_kernel(RefKernelContext& ctx, Cell cell) {
  for (int i = 0; i < 3; ++i) {
    if (!ctx.has_input(i)) return ctx.error("missing input " + std::to_string(i));
  }
  RecurrentSpec spec;
  TESSERA_RETURN_IF_ERROR(parse_spec(ctx, cell, &spec));
  Status st;
  bool ok = ref::visit_float_dtype(ctx.input(0)->dtype(), [&](auto tag) {
    st = run_recurrent<decltype(tag)>(ctx, spec);
  });
  if (!ok) return ctx.unsupported(std::string("dtype ") + dtype_name(ctx.input(0)->dtype()));
  return st;
}

}  // namespace

void register_misc_rnn_kernels(RefKernelTable& t) {
  t.add("RNN", [](RefKernelContext& ctx) { return recurrent_kernel(ctx, Cell::kRnn); });
  t.add("GRU", [](RefKernelContext& ctx) { return recurrent_kernel(ctx, Cell::kGru); });
  t.add("LSTM", [](RefKernelContext& ctx) { return recurrent_kernel(ctx, Cell::kLstm); });
}

}  // namespace tessera
