// The native kernels of the language-model ops (domain "tessera", semantics in ops/llm_ops.cc).
// Row counts are dynamic (a step's token count): every kernel reads its dims at run time.
// Parallel over rows, output features or (token, head) pairs on the session's pool.
#include "backends/native/llm_kernels.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/native/quant_matmul.h"
#include "backends/quant_formats.h"
#include "backends/ref/llm_kernels.h"

namespace tessera::native {
namespace {

// Where a node input comes from at run time: a kernel input slot or a constant.
struct Operand {
  int slot = -1;
  const Tensor* constant = nullptr;
  const Tensor* get(const std::vector<const Tensor*>& inputs) const {
    return constant ? constant : (slot >= 0 && slot < static_cast<int>(inputs.size()) ? inputs[slot] : nullptr);
  }
};

Result<std::vector<Operand>> operands(const SubGraph& sg, const Node& node) {
  std::vector<Operand> ops;
  for (int v : node.inputs) {
    Operand o;
    if (v == kNoValue) {
      ops.push_back(o);
      continue;
    }
    const Value& val = sg.graph().value(v);
    if (val.constant) {
      o.constant = &*val.constant;
    } else {
      for (size_t i = 0; i < sg.inputs().size(); ++i)
        if (sg.inputs()[i] == v) o.slot = static_cast<int>(i);
      if (o.slot < 0) return internal_error("value '" + val.name + "' is neither an input nor a constant");
    }
    ops.push_back(o);
  }
  return ops;
}

quant::QType qtype_of(const Node& n) { return *quant::qtype_from_name(n.attr_string("qtype", "f32")); }

void for_rows(ThreadPool* pool, int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (pool) pool->parallel_for(n, grain, fn); else fn(0, n);
}

class LlmKernel : public Kernel {
 public:
  LlmKernel(const Node& node, std::vector<Operand> ops, const IsaKernels& isa) : node_(node), ops_(std::move(ops)), isa_(isa) {}

 protected:
  const Tensor& in(const std::vector<const Tensor*>& inputs, int i) const { return *ops_[i].get(inputs); }
  bool has(int i) const { return i < static_cast<int>(ops_.size()) && (ops_[i].slot >= 0 || ops_[i].constant); }
  Status error(const std::string& msg) const { return invalid_argument(node_.describe() + ": " + msg); }
  const Node& node_;
  std::vector<Operand> ops_;
  const IsaKernels& isa_;
};

class EmbeddingKernel final : public LlmKernel {
 public:
  using LlmKernel::LlmKernel;
  Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs, KernelRunContext& ctx) override {
    const Tensor& ids = in(inputs, 0);
    const Tensor& table = in(inputs, 1);
    const quant::QType qt = qtype_of(node_);
    const int64_t dim = node_.attr_int("dim", 0), rows = ids.numel();
    for (int64_t t = 0; t < rows; ++t) {
      const int32_t id = ids.data<int32_t>()[t];
      if (id < 0 || id >= table.dim(0)) return error("token id " + std::to_string(id) + " is outside the vocabulary");
    }
    outputs[0] = ctx.alloc.allocate_uninitialized(DType::kFloat32, {rows, dim});
    float* y = outputs[0].data<float>();
    for_rows(ctx.pool, rows, 8, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) quant::dequantize_weight_row(qt, table.raw_data(), table.dim(0), ids.data<int32_t>()[t], dim, y + t * dim);
    });
    return Status();
  }
};

class RmsNormKernel final : public LlmKernel {
 public:
  using LlmKernel::LlmKernel;
  Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs, KernelRunContext& ctx) override {
    const Tensor& x = in(inputs, 0);
    const float* w = in(inputs, 1).data<float>();
    const float eps = node_.attr_float("epsilon", 1e-5f);
    const int64_t rows = x.dim(0), d = x.dim(1);
    if (in(inputs, 1).numel() != d) return error("weight and row lengths differ");
    outputs[0] = ctx.alloc.allocate_uninitialized(DType::kFloat32, x.dims());
    float* y = outputs[0].data<float>();
    for_rows(ctx.pool, rows, std::max<int64_t>(1, 16384 / d), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) isa_.rms_norm_row(x.data<float>() + r * d, w, d, eps, y + r * d);
    });
    return Status();
  }
};

class QMatMulKernel final : public LlmKernel {
 public:
  using LlmKernel::LlmKernel;
  Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs, KernelRunContext& ctx) override {
    const Tensor& x = in(inputs, 0);
    const Tensor& w = in(inputs, 1);
    const int64_t n = node_.attr_int("n", 0), k = node_.attr_int("k", 0), rows = x.dim(0);
    if (x.dim(1) != k) return error("x has " + std::to_string(x.dim(1)) + " features, expected " + std::to_string(k));
    const float* bias = has(2) ? in(inputs, 2).data<float>() : nullptr;
    const Tensor* residual = has(3) ? &in(inputs, 3) : nullptr;
    if (residual && (residual->dim(0) != rows || residual->dim(1) != n)) return error("residual shape differs from the output's");
    outputs[0] = ctx.alloc.allocate_uninitialized(DType::kFloat32, {rows, n});
    QuantWeight qw{qtype_of(node_), n, k, static_cast<const uint8_t*>(w.raw_data())};
    quant_matmul(qw, x.data<float>(), rows, k, outputs[0].data<float>(), n, bias,
                 residual ? residual->data<float>() : nullptr, n, ctx.pool);
    return Status();
  }
};

class RopeKernel final : public LlmKernel {
 public:
  using LlmKernel::LlmKernel;
  Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs, KernelRunContext& ctx) override {
    const Tensor& x = in(inputs, 0);
    const Tensor& pos = in(inputs, 1);
    const float* inv_freq = in(inputs, 2).data<float>();
    const int64_t hd = node_.attr_int("head_dim", 0), half = hd / 2;
    const int64_t rows = x.dim(0), width = x.dim(1);
    if (pos.numel() != rows) return error("positions has " + std::to_string(pos.numel()) + " entries for " + std::to_string(rows) + " rows");
    outputs[0] = ctx.alloc.allocate_uninitialized(DType::kFloat32, x.dims());
    float* y = outputs[0].data<float>();
    for_rows(ctx.pool, rows, 4, [&](int64_t t0, int64_t t1) {
      std::vector<float> cs(2 * half);
      for (int64_t t = t0; t < t1; ++t) {
        const double p = pos.data<int32_t>()[t];
        for (int64_t i = 0; i < half; ++i) {
          const double a = p * inv_freq[i];
          cs[2 * i] = static_cast<float>(std::cos(a));
          cs[2 * i + 1] = static_cast<float>(std::sin(a));
        }
        for (int64_t h = 0; h < width / hd; ++h) {
          const float* xh = x.data<float>() + t * width + h * hd;
          float* yh = y + t * width + h * hd;
          for (int64_t i = 0; i < half; ++i) {
            const float c = cs[2 * i], s = cs[2 * i + 1], x0 = xh[2 * i], x1 = xh[2 * i + 1];
            yh[2 * i] = x0 * c - x1 * s;
            yh[2 * i + 1] = x0 * s + x1 * c;
          }
        }
      }
    });
    return Status();
  }
};

// Outputs per SiluMul chunk. A decode step's few rows (5632 floats a row for TinyLlama) run on the
// calling thread: split over 2 threads the op took 11-29 us a layer against 3-5 us on one
// (batch_decode_bench --profile, 2 threads), the gate and up halves having just been written by
// both threads' matrix products.
constexpr int64_t kSiluMulGrain = 16384;

class SiluMulKernel final : public LlmKernel {
 public:
  using LlmKernel::LlmKernel;
  Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs, KernelRunContext& ctx) override {
    const Tensor& g = in(inputs, 0);
    if (!has(1)) {  // one input: each row holds gate, then up
      if (g.rank() != 2 || g.dim(1) % 2 != 0) return error("gate_up must be [T, 2F]");
      const int64_t rows = g.dim(0), f = g.dim(1) / 2;
      outputs[0] = ctx.alloc.allocate_uninitialized(DType::kFloat32, {rows, f});
      float* y = outputs[0].data<float>();
      const float* x = g.data<float>();
      // Over the T x F outputs, a chunk split where it crosses rows.
      for_rows(ctx.pool, rows * f, kSiluMulGrain, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1;) {
          const int64_t t = i / f, c = i % f, n = std::min(i1 - i, f - c);
          isa_.silu_mul(x + t * 2 * f + c, x + t * 2 * f + f + c, n, y + i);
          i += n;
        }
      });
      return Status();
    }
    const Tensor& u = in(inputs, 1);
    if (g.dims() != u.dims()) return error("gate and up differ in shape");
    outputs[0] = ctx.alloc.allocate_uninitialized(DType::kFloat32, g.dims());
    float* y = outputs[0].data<float>();
    for_rows(ctx.pool, g.numel(), kSiluMulGrain, [&](int64_t i0, int64_t i1) {
      isa_.silu_mul(g.data<float>() + i0, u.data<float>() + i0, i1 - i0, y + i0);
    });
    return Status();
  }
};

class LayerNormKernel final : public LlmKernel {
 public:
  using LlmKernel::LlmKernel;
  Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs, KernelRunContext& ctx) override {
    const Tensor& x = in(inputs, 0);
    const float* w = in(inputs, 1).data<float>();
    const float* b = in(inputs, 2).data<float>();
    const float eps = node_.attr_float("epsilon", 1e-5f);
    const int64_t rows = x.dim(0), d = x.dim(1);
    if (in(inputs, 1).numel() != d || in(inputs, 2).numel() != d) return error("weight, bias and row lengths differ");
    outputs[0] = ctx.alloc.allocate_uninitialized(DType::kFloat32, x.dims());
    float* y = outputs[0].data<float>();
    for_rows(ctx.pool, rows, std::max<int64_t>(1, 16384 / d), [&](int64_t r0, int64_t r1) {
      float mean, inv;
      for (int64_t r = r0; r < r1; ++r) isa_.layer_norm_row(x.data<float>() + r * d, d, w, b, eps, y + r * d, &mean, &inv);
    });
    return Status();
  }
};

class GeluKernel final : public LlmKernel {
 public:
  using LlmKernel::LlmKernel;
  Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs, KernelRunContext& ctx) override {
    const Tensor& x = in(inputs, 0);
    outputs[0] = ctx.alloc.allocate_uninitialized(DType::kFloat32, x.dims());
    float* y = outputs[0].data<float>();
    for_rows(ctx.pool, x.numel(), 4096, [&](int64_t i0, int64_t i1) { isa_.gelu_tanh(x.data<float>() + i0, i1 - i0, y + i0); });
    return Status();
  }
};

class PagedAttentionKernel final : public LlmKernel {
 public:
  using LlmKernel::LlmKernel;
  Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs, KernelRunContext& ctx) override {
    std::vector<const Tensor*> t(8);
    for (int i = 0; i < 8; ++i) t[i] = &in(inputs, i);
    TESSERA_RETURN_IF_ERROR(check_paged_attention_inputs(node_, t));
    const int64_t hq = node_.attr_int("num_heads", 0), hkv = node_.attr_int("num_kv_heads", 0);
    const int64_t hd = node_.attr_int("head_dim", 0), bs = node_.attr_int("block_size", 0);
    const float scale = node_.attr_float("scale", 1.0f);
    const float* q = t[0]->data<float>();
    const float* k = t[1]->data<float>();
    const float* v = t[2]->data<float>();
    // The caches are state: written in place (their buffers belong to the model's runner).
    float* kc = const_cast<float*>(t[3]->data<float>());
    float* vc = const_cast<float*>(t[4]->data<float>());
    const int32_t* seq = t[5]->data<int32_t>();
    const int32_t* pos = t[6]->data<int32_t>();
    const int32_t* tables = t[7]->data<int32_t>();
    const int64_t width = t[7]->dim(1), rows = t[0]->dim(0);
    auto block_base = [&](int32_t s, int64_t b, int64_t h) {  // first float of (seq s, block b, kv head h)
      return (static_cast<int64_t>(tables[s * width + b]) * hkv + h) * bs * hd;
    };
    // K blocks hold their keys transposed ([hd][bs]), V blocks by rows ([bs][hd]).
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t h = 0; h < hkv; ++h) {
        const int64_t base = block_base(seq[r], pos[r] / bs, h), j = pos[r] % bs;
        const float* kr = k + (r * hkv + h) * hd;
        for (int64_t d = 0; d < hd; ++d) kc[base + d * bs + j] = kr[d];
        std::copy_n(v + (r * hkv + h) * hd, hd, vc + base + j * hd);
      }
    }
    outputs[0] = ctx.alloc.allocate_uninitialized(DType::kFloat32, {rows, hq * hd});
    float* y = outputs[0].data<float>();
    const int64_t group = hq / hkv;
    // One work item per (token, kv head): the group's query heads share every K and V load.
    for_rows(ctx.pool, rows * hkv, 1, [&](int64_t i0, int64_t i1) {
      thread_local std::vector<float> scores;
      thread_local std::vector<const float*> kblocks, vblocks;
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t r = i / hkv, g = i % hkv, len = pos[r] + 1, nblocks = (len + bs - 1) / bs;
        kblocks.resize(nblocks);
        vblocks.resize(nblocks);
        for (int64_t b = 0; b < nblocks; ++b) {
          kblocks[b] = kc + block_base(seq[r], b, g);
          vblocks[b] = vc + block_base(seq[r], b, g);
        }
        scores.resize(group * len);
        const float* qg = q + (r * hq + g * group) * hd;
        isa_.attention_scores(qg, hd, group, hd, kblocks.data(), bs, len, scale, scores.data(), len);
        for (int64_t h = 0; h < group; ++h) isa_.softmax_row(scores.data() + h * len, len, scores.data() + h * len);
        isa_.attention_values(scores.data(), len, group, len, vblocks.data(), bs, hd, y + (r * hq + g * group) * hd, hd);
      }
    });
    return Status();
  }
};

}  // namespace

bool is_llm_op(const Node& n) { return n.domain == "tessera"; }

Status check_llm_node(const Graph& g, int n) {
  const Node& node = g.node(n);
  static const char* const kOps[] = {"Embedding", "RMSNorm", "QMatMul", "RoPE", "SiluMul", "PagedAttention", "LayerNorm", "Gelu"};
  if (std::find_if(std::begin(kOps), std::end(kOps), [&](const char* op) { return node.op_type == op; }) == std::end(kOps)) {
    return unimplemented("native has no kernel for tessera." + node.op_type);
  }
  for (int v : node.inputs) {
    if (v != kNoValue && g.value(v).type.dtype == DType::kUndefined) return unimplemented("untyped input");
  }
  if (node.op_type == "QMatMul" || node.op_type == "Embedding") {
    if (!quant::qtype_from_name(node.attr_string("qtype", "f32"))) return invalid_argument("unknown qtype");
    if (!g.value(node.inputs[1]).constant) return unimplemented("the weight must be a constant");
  }
  return Status();
}

Result<std::unique_ptr<Kernel>> compile_llm_kernel(const SubGraph& sg, const IsaKernels& isa) {
  if (sg.size() != 1) return unimplemented("language-model ops run alone on native");
  const Node& node = sg.graph().node(sg.nodes().first());
  TESSERA_RETURN_IF_ERROR(check_llm_node(sg.graph(), sg.nodes().first()));
  TESSERA_ASSIGN_OR_RETURN(std::vector<Operand> ops, operands(sg, node));
  const std::string& op = node.op_type;
  std::unique_ptr<Kernel> k;
  if (op == "Embedding") k = std::make_unique<EmbeddingKernel>(node, std::move(ops), isa);
  else if (op == "RMSNorm") k = std::make_unique<RmsNormKernel>(node, std::move(ops), isa);
  else if (op == "QMatMul") k = std::make_unique<QMatMulKernel>(node, std::move(ops), isa);
  else if (op == "RoPE") k = std::make_unique<RopeKernel>(node, std::move(ops), isa);
  else if (op == "SiluMul") k = std::make_unique<SiluMulKernel>(node, std::move(ops), isa);
  else if (op == "LayerNorm") k = std::make_unique<LayerNormKernel>(node, std::move(ops), isa);
  else if (op == "Gelu") k = std::make_unique<GeluKernel>(node, std::move(ops), isa);
  else k = std::make_unique<PagedAttentionKernel>(node, std::move(ops), isa);
  return k;
}

}  // namespace tessera::native
