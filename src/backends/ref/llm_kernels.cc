// Reference kernels of the language-model ops (schemas and semantics: ops/llm_ops.cc). Plain
// loops with double accumulation: the oracle the native kernels are tested against.
#include <cmath>
#include <vector>

#include "backends/quant_formats.h"
#include "backends/ref/llm_kernels.h"
#include "backends/ref/ref_kernel.h"

namespace tessera {
namespace {

quant::QType qtype_of(const Node& n) {
  auto t = quant::qtype_from_name(n.attr_string("qtype", "f32"));
  TESSERA_CHECK(t.has_value(), "qtype checked by shape inference");
  return *t;
}

// Row r of a weight (float[rows, cols] or uint8[rows, row bytes]) as floats.
void weight_row(const Tensor& w, quant::QType qt, int64_t r, int64_t cols, float* dst) {
  quant::dequantize_weight_row(qt, w.raw_data(), w.dim(0), r, cols, dst);
}

Status embedding(RefKernelContext& ctx) {
  const Tensor& ids = *ctx.input(0);
  const Tensor& table = *ctx.input(1);
  const quant::QType qt = qtype_of(ctx.node());
  const int64_t dim = ctx.node().attr_int("dim", 0);
  const int64_t vocab = table.dim(0);
  Tensor& y = ctx.output(0, DType::kFloat32, {ids.numel(), dim});
  for (int64_t t = 0; t < ids.numel(); ++t) {
    const int32_t id = ids.data<int32_t>()[t];
    if (id < 0 || id >= vocab) return ctx.error("token id " + std::to_string(id) + " is outside the vocabulary of " + std::to_string(vocab));
    weight_row(table, qt, id, dim, y.data<float>() + t * dim);
  }
  return Status();
}

Status rms_norm(RefKernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  const float* w = ctx.input(1)->data<float>();
  const double eps = ctx.node().attr_float("epsilon", 1e-5f);
  const int64_t rows = x.dim(0), d = x.dim(1);
  Tensor& y = ctx.output(0, DType::kFloat32, x.dims());
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.data<float>() + r * d;
    double ss = 0;
    for (int64_t i = 0; i < d; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const double scale = 1.0 / std::sqrt(ss / d + eps);
    for (int64_t i = 0; i < d; ++i) y.data<float>()[r * d + i] = static_cast<float>(xr[i] * scale * w[i]);
  }
  return Status();
}

Status qmatmul(RefKernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  const Tensor& w = *ctx.input(1);
  const Tensor* bias = ctx.input(2);
  const Tensor* residual = ctx.input(3);
  const quant::QType qt = qtype_of(ctx.node());
  const int64_t n = ctx.node().attr_int("n", 0), k = ctx.node().attr_int("k", 0);
  const int64_t rows = x.dim(0);
  if (residual && (residual->dim(0) != rows || residual->dim(1) != n)) return ctx.error("residual shape differs from the output's");
  Tensor& y = ctx.output(0, DType::kFloat32, {rows, n});
  ctx.parallel_for(n, 16, [&](int64_t j0, int64_t j1) {
    std::vector<float> row(k);
    for (int64_t j = j0; j < j1; ++j) {
      weight_row(w, qt, j, k, row.data());
      for (int64_t t = 0; t < rows; ++t) {
        const float* xt = x.data<float>() + t * k;
        double acc = bias ? bias->data<float>()[j] : 0.0;
        for (int64_t i = 0; i < k; ++i) acc += static_cast<double>(xt[i]) * row[i];
        if (residual) acc += residual->data<float>()[t * n + j];
        y.data<float>()[t * n + j] = static_cast<float>(acc);
      }
    }
  });
  return Status();
}

Status rope(RefKernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  const Tensor& pos = *ctx.input(1);
  const float* inv_freq = ctx.input(2)->data<float>();
  const int64_t hd = ctx.node().attr_int("head_dim", 0);
  const int64_t rows = x.dim(0), width = x.dim(1);
  if (pos.numel() != rows) return ctx.error("positions has " + std::to_string(pos.numel()) + " entries for " + std::to_string(rows) + " rows");
  Tensor& y = ctx.output(0, DType::kFloat32, x.dims());
  for (int64_t t = 0; t < rows; ++t) {
    const double p = pos.data<int32_t>()[t];
    for (int64_t h = 0; h < width / hd; ++h) {
      const float* xh = x.data<float>() + t * width + h * hd;
      float* yh = y.data<float>() + t * width + h * hd;
      for (int64_t i = 0; i < hd / 2; ++i) {
        const double a = p * inv_freq[i];
        const double c = std::cos(a), s = std::sin(a);
        yh[2 * i] = static_cast<float>(xh[2 * i] * c - xh[2 * i + 1] * s);
        yh[2 * i + 1] = static_cast<float>(xh[2 * i] * s + xh[2 * i + 1] * c);
      }
    }
  }
  return Status();
}

Status silu_mul(RefKernelContext& ctx) {
  const Tensor& g = *ctx.input(0);
  // Two inputs: gate and up of the same shape. One: each row holds gate, then up.
  const bool joined = ctx.num_inputs() == 1 || !ctx.input(1);
  if (!joined && g.dims() != ctx.input(1)->dims()) return ctx.error("gate and up differ in shape");
  if (g.rank() != 2 || (joined && g.dim(1) % 2 != 0)) return ctx.error("gate_up must be [T, 2F]");
  const int64_t rows = g.dim(0), f = joined ? g.dim(1) / 2 : g.dim(1);
  Tensor& y = ctx.output(0, DType::kFloat32, {rows, f});
  for (int64_t t = 0; t < rows; ++t) {
    const float* gate = g.data<float>() + t * (joined ? 2 * f : f);
    const float* up = joined ? gate + f : ctx.input(1)->data<float>() + t * f;
    for (int64_t i = 0; i < f; ++i) {
      const double a = gate[i];
      y.data<float>()[t * f + i] = static_cast<float>(a / (1.0 + std::exp(-a)) * up[i]);
    }
  }
  return Status();
}

Status layer_norm(RefKernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  const float* w = ctx.input(1)->data<float>();
  const float* b = ctx.input(2)->data<float>();
  const double eps = ctx.node().attr_float("epsilon", 1e-5f);
  const int64_t rows = x.dim(0), d = x.dim(1);
  Tensor& y = ctx.output(0, DType::kFloat32, x.dims());
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.data<float>() + r * d;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < d; ++i) mean += xr[i];
    mean /= d;
    for (int64_t i = 0; i < d; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    const double inv = 1.0 / std::sqrt(var / d + eps);
    for (int64_t i = 0; i < d; ++i) y.data<float>()[r * d + i] = static_cast<float>((xr[i] - mean) * inv * w[i] + b[i]);
  }
  return Status();
}

Status gelu(RefKernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  Tensor& y = ctx.output(0, DType::kFloat32, x.dims());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = x.data<float>()[i];
    y.data<float>()[i] = static_cast<float>(0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v))));
  }
  return Status();
}

}  // namespace

Status check_paged_attention_inputs(const Node& n, const std::vector<const Tensor*>& in) {
  auto error = [&](const std::string& msg) { return invalid_argument(n.describe() + ": " + msg); };
  const int64_t bs = n.attr_int("block_size", 0);
  const Tensor& seq = *in[5];
  const Tensor& pos = *in[6];
  const Tensor& tables = *in[7];
  const int64_t rows = in[0]->dim(0), num_blocks = in[3]->dim(0);
  if (in[1]->dim(0) != rows || in[2]->dim(0) != rows || seq.numel() != rows || pos.numel() != rows) {
    return error("q, k, v, token_seq and positions must have one row per token");
  }
  for (int64_t t = 0; t < rows; ++t) {
    const int32_t s = seq.data<int32_t>()[t], p = pos.data<int32_t>()[t];
    if (s < 0 || s >= tables.dim(0)) return error("token_seq " + std::to_string(s) + " has no block table");
    if (p < 0 || p / bs >= tables.dim(1)) return error("position " + std::to_string(p) + " is beyond its block table");
    for (int64_t b = 0; b <= p / bs; ++b) {
      const int32_t blk = tables.data<int32_t>()[s * tables.dim(1) + b];
      if (blk < 0 || blk >= num_blocks) return error("block table entry " + std::to_string(blk) + " is not a cache block");
    }
  }
  return Status();
}

namespace {

Status paged_attention(RefKernelContext& ctx) {
  TESSERA_RETURN_IF_ERROR(check_paged_attention_inputs(
      ctx.node(), {ctx.input(0), ctx.input(1), ctx.input(2), ctx.input(3), ctx.input(4), ctx.input(5), ctx.input(6), ctx.input(7)}));
  const Node& n = ctx.node();
  const int64_t hq = n.attr_int("num_heads", 0), hkv = n.attr_int("num_kv_heads", 0);
  const int64_t hd = n.attr_int("head_dim", 0), bs = n.attr_int("block_size", 0);
  const double scale = n.attr_float("scale", 1.0f);
  const Tensor& q = *ctx.input(0);
  const Tensor& k = *ctx.input(1);
  const Tensor& v = *ctx.input(2);
  // The caches are state: this op writes them in place (their buffers are the runner's).
  float* kc = const_cast<float*>(ctx.input(3)->data<float>());
  float* vc = const_cast<float*>(ctx.input(4)->data<float>());
  const int32_t* seq = ctx.input(5)->data<int32_t>();
  const int32_t* pos = ctx.input(6)->data<int32_t>();
  const Tensor& tables = *ctx.input(7);
  const int64_t rows = q.dim(0), width = tables.dim(1);
  // Float offsets of element i of (seq s, position p, kv head h): K blocks hold their keys
  // transposed ([hd][bs]), V blocks by rows ([bs][hd]).
  auto block = [&](int32_t s, int32_t p, int64_t h) {
    return (static_cast<int64_t>(tables.data<int32_t>()[s * width + p / bs]) * hkv + h) * bs * hd;
  };
  auto k_slot = [&](int32_t s, int32_t p, int64_t h, int64_t i) { return block(s, p, h) + i * bs + p % bs; };
  auto v_slot = [&](int32_t s, int32_t p, int64_t h, int64_t i) { return block(s, p, h) + (p % bs) * hd + i; };
  for (int64_t t = 0; t < rows; ++t) {
    for (int64_t h = 0; h < hkv; ++h) {
      for (int64_t i = 0; i < hd; ++i) {
        kc[k_slot(seq[t], pos[t], h, i)] = k.data<float>()[t * hkv * hd + h * hd + i];
        vc[v_slot(seq[t], pos[t], h, i)] = v.data<float>()[t * hkv * hd + h * hd + i];
      }
    }
  }
  Tensor& y = ctx.output(0, DType::kFloat32, {rows, hq * hd});
  std::vector<double> scores, out(hd);
  for (int64_t t = 0; t < rows; ++t) {
    const int32_t len = pos[t] + 1;
    scores.assign(len, 0.0);
    for (int64_t h = 0; h < hq; ++h) {
      const int64_t g = h / (hq / hkv);
      const float* qh = q.data<float>() + t * hq * hd + h * hd;
      double mx = -INFINITY;
      for (int32_t p = 0; p < len; ++p) {
        double dot = 0;
        for (int64_t i = 0; i < hd; ++i) dot += static_cast<double>(qh[i]) * kc[k_slot(seq[t], p, g, i)];
        scores[p] = dot * scale;
        mx = std::max(mx, scores[p]);
      }
      double sum = 0;
      for (int32_t p = 0; p < len; ++p) sum += scores[p] = std::exp(scores[p] - mx);
      std::fill(out.begin(), out.end(), 0.0);
      for (int32_t p = 0; p < len; ++p) {
        for (int64_t i = 0; i < hd; ++i) out[i] += scores[p] / sum * vc[v_slot(seq[t], p, g, i)];
      }
      for (int64_t i = 0; i < hd; ++i) y.data<float>()[t * hq * hd + h * hd + i] = static_cast<float>(out[i]);
    }
  }
  return Status();
}

}  // namespace

void register_llm_kernels(RefKernelTable& t) {
  t.add("tessera.Embedding", embedding);
  t.add("tessera.RMSNorm", rms_norm);
  t.add("tessera.QMatMul", qmatmul);
  t.add("tessera.RoPE", rope);
  t.add("tessera.SiluMul", silu_mul);
  t.add("tessera.PagedAttention", paged_attention);
  t.add("tessera.LayerNorm", layer_norm);
  t.add("tessera.Gelu", gelu);
}

}  // namespace tessera
