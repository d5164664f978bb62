#include "llm/naive_forward.h"

#include <cmath>

namespace tessera::llm::testing {

namespace {

using Vec = std::vector<double>;

// y = W x for W [rows][cols] row-major.
Vec matvec(const std::vector<float>& w, const Vec& x, size_t rows) {
  Vec y(rows, 0.0);
  const size_t cols = x.size();
  for (size_t r = 0; r < rows; ++r) {
    double acc = 0;
    for (size_t c = 0; c < cols; ++c) acc += w[r * cols + c] * x[c];
    y[r] = acc;
  }
  return y;
}

Vec rms_norm(const Vec& x, const std::vector<float>& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double s = 1.0 / std::sqrt(ss / x.size() + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * s * w[i];
  return y;
}

// Rotates pairs (2i, 2i+1) of every head by pos * theta^(-2i/hd).
void rope(Vec& x, size_t head_dim, size_t pos, double theta) {
  for (size_t h = 0; h < x.size() / head_dim; ++h) {
    for (size_t i = 0; i < head_dim / 2; ++i) {
      const double a = pos * std::pow(theta, -2.0 * i / head_dim);
      double& x0 = x[h * head_dim + 2 * i];
      double& x1 = x[h * head_dim + 2 * i + 1];
      const double r0 = x0 * std::cos(a) - x1 * std::sin(a);
      const double r1 = x0 * std::sin(a) + x1 * std::cos(a);
      x0 = r0;
      x1 = r1;
    }
  }
}

Vec layer_norm(const Vec& x, const std::vector<float>& w, const std::vector<float>& b, double eps) {
  double mean = 0, var = 0;
  for (double v : x) mean += v;
  mean /= x.size();
  for (double v : x) var += (v - mean) * (v - mean);
  const double inv = 1.0 / std::sqrt(var / x.size() + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = (x[i] - mean) * inv * w[i] + b[i];
  return y;
}

Vec add(Vec a, const std::vector<float>& b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  return a;
}

// Causal softmax attention of position t over keys/values 0..t, heads sharing kv heads in groups.
Vec attend(const std::vector<Vec>& q, const std::vector<Vec>& k, const std::vector<Vec>& v, size_t t, size_t hq,
           size_t hkv, size_t hd) {
  Vec attn(hq * hd, 0.0);
  for (size_t h = 0; h < hq; ++h) {
    const size_t g = h / (hq / hkv);
    std::vector<double> s(t + 1);
    double mx = -1e300;
    for (size_t u = 0; u <= t; ++u) {
      double dot = 0;
      for (size_t i = 0; i < hd; ++i) dot += q[t][h * hd + i] * k[u][g * hd + i];
      s[u] = dot / std::sqrt(static_cast<double>(hd));
      mx = std::max(mx, s[u]);
    }
    double sum = 0;
    for (double& e : s) sum += e = std::exp(e - mx);
    for (size_t u = 0; u <= t; ++u)
      for (size_t i = 0; i < hd; ++i) attn[h * hd + i] += s[u] / sum * v[u][g * hd + i];
  }
  return attn;
}

}  // namespace

std::vector<std::vector<float>> naive_gpt2_logits(const ModelConfig& c, const FloatWeights& w,
                                                  const std::vector<int32_t>& tokens) {
  const size_t n = tokens.size(), d = c.hidden, hd = c.head_dim(), h = c.heads;
  std::vector<Vec> x(n, Vec(d));
  const std::vector<float>& embd = w.at("token_embd.weight");
  const std::vector<float>& pos = w.at("position_embd.weight");
  for (size_t t = 0; t < n; ++t)
    for (size_t i = 0; i < d; ++i) x[t][i] = embd[tokens[t] * d + i] + pos[t * d + i];
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    std::vector<Vec> q(n), k(n), v(n);
    for (size_t t = 0; t < n; ++t) {
      const Vec a = layer_norm(x[t], w.at(p + "attn_norm.weight"), w.at(p + "attn_norm.bias"), c.norm_eps);
      const Vec qkv = add(matvec(w.at(p + "attn_qkv.weight"), a, 3 * d), w.at(p + "attn_qkv.bias"));
      q[t].assign(qkv.begin(), qkv.begin() + d);
      k[t].assign(qkv.begin() + d, qkv.begin() + 2 * d);
      v[t].assign(qkv.begin() + 2 * d, qkv.end());
    }
    for (size_t t = 0; t < n; ++t) {
      const Vec o = add(matvec(w.at(p + "attn_output.weight"), attend(q, k, v, t, h, h, hd), d), w.at(p + "attn_output.bias"));
      for (size_t i = 0; i < d; ++i) x[t][i] += o[i];
      const Vec a = layer_norm(x[t], w.at(p + "ffn_norm.weight"), w.at(p + "ffn_norm.bias"), c.norm_eps);
      Vec up = add(matvec(w.at(p + "ffn_up.weight"), a, c.ffn_hidden), w.at(p + "ffn_up.bias"));
      for (double& u : up) u = 0.5 * u * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (u + 0.044715 * u * u * u)));
      const Vec down = add(matvec(w.at(p + "ffn_down.weight"), up, d), w.at(p + "ffn_down.bias"));
      for (size_t i = 0; i < d; ++i) x[t][i] += down[i];
    }
  }
  const std::vector<float>& head = w.count("output.weight") ? w.at("output.weight") : embd;
  std::vector<std::vector<float>> logits(n);
  for (size_t t = 0; t < n; ++t) {
    const Vec y = matvec(head, layer_norm(x[t], w.at("output_norm.weight"), w.at("output_norm.bias"), c.norm_eps), c.vocab_size);
    logits[t].assign(y.begin(), y.end());
  }
  return logits;
}

std::vector<std::vector<float>> naive_llama_logits(const ModelConfig& c, const FloatWeights& w,
                                                   const std::vector<int32_t>& tokens) {
  const size_t n = tokens.size(), d = c.hidden, hd = c.head_dim(), hq = c.heads, hkv = c.kv_heads;
  std::vector<Vec> x(n, Vec(d));
  const std::vector<float>& embd = w.at("token_embd.weight");
  for (size_t t = 0; t < n; ++t)
    for (size_t i = 0; i < d; ++i) x[t][i] = embd[tokens[t] * d + i];
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    std::vector<Vec> q(n), k(n), v(n);
    for (size_t t = 0; t < n; ++t) {
      const Vec h = rms_norm(x[t], w.at(p + "attn_norm.weight"), c.norm_eps);
      q[t] = matvec(w.at(p + "attn_q.weight"), h, hq * hd);
      k[t] = matvec(w.at(p + "attn_k.weight"), h, hkv * hd);
      v[t] = matvec(w.at(p + "attn_v.weight"), h, hkv * hd);
      rope(q[t], hd, t, c.rope_theta);
      rope(k[t], hd, t, c.rope_theta);
    }
    for (size_t t = 0; t < n; ++t) {
      const Vec attn = attend(q, k, v, t, hq, hkv, hd);
      const Vec o = matvec(w.at(p + "attn_output.weight"), attn, d);
      for (size_t i = 0; i < d; ++i) x[t][i] += o[i];
      const Vec h = rms_norm(x[t], w.at(p + "ffn_norm.weight"), c.norm_eps);
      const Vec gate = matvec(w.at(p + "ffn_gate.weight"), h, c.ffn_hidden);
      const Vec up = matvec(w.at(p + "ffn_up.weight"), h, c.ffn_hidden);
      Vec act(c.ffn_hidden);
      for (size_t i = 0; i < act.size(); ++i) act[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
      const Vec down = matvec(w.at(p + "ffn_down.weight"), act, d);
      for (size_t i = 0; i < d; ++i) x[t][i] += down[i];
    }
  }
  const std::vector<float>& head = w.count("output.weight") ? w.at("output.weight") : embd;
  std::vector<std::vector<float>> logits(n);
  for (size_t t = 0; t < n; ++t) {
    const Vec y = matvec(head, rms_norm(x[t], w.at("output_norm.weight"), c.norm_eps), c.vocab_size);
    logits[t].assign(y.begin(), y.end());
  }
  return logits;
}

}  // namespace tessera::llm::testing
