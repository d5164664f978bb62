// MatMul (numpy batching and broadcasting) and Gemm (transA/transB, alpha, beta, C) on sgemm,
// optionally followed by an elementwise tail (bias Add, activation, ...) that runs on each block
// of C as soon as it is complete, while it is still in cache, and optionally a closing Softmax
// over rows, in place, once the product is done.
#include "backends/native/gemm_kernels.h"

#include <algorithm>
#include <map>

#include "backends/native/eltwise_compile.h"
#include "backends/native/row_kernels.h"
#include "backends/native/sgemm.h"

namespace tessera::native {
namespace {

// Everything about one MatMul / Gemm node the kernel needs.
struct GemmPlan {
  GemmShape shape;
  MatMulLayout layout;
  bool fold = false;  // batches of A stacked into m (B shared): one bigger product
  std::vector<int64_t> out_dims;
  float beta = 0;
  int bias = kNoValue;  // Gemm's C
  int64_t bias_rows = 1, bias_cols = 1;
};

Result<GemmPlan> plan_gemm(const Graph& g, const Node& node) {
  GemmPlan p;
  for (size_t i = 0; i < 2; ++i) {
    if (node.inputs.size() <= i) return invalid_argument(node.describe() + ": missing operand");
    TESSERA_RETURN_IF_ERROR(check_float_value(g, node.inputs[i]));
  }
  if (node.outputs.empty() || node.outputs[0] == kNoValue) return invalid_argument("no output");
  TESSERA_RETURN_IF_ERROR(check_float_value(g, node.outputs[0]));
  p.out_dims = g.value(node.outputs[0]).type.static_dims();
  const std::vector<int64_t> a = g.value(node.inputs[0]).type.static_dims();
  const std::vector<int64_t> b = g.value(node.inputs[1]).type.static_dims();
  GemmShape& s = p.shape;
  if (node.op_type == "MatMul") {
    TESSERA_ASSIGN_OR_RETURN(p.layout, matmul_layout(a, b));
    s.m = p.layout.m;
    s.k = p.layout.k;
    s.n = p.layout.n;
    s.a_rs = s.k;
    s.b_rs = s.n;
    const int64_t batches = static_cast<int64_t>(p.layout.a_offsets.size());
    p.fold = batches > 1;
    for (int64_t i = 0; i < batches && p.fold; ++i) {
      p.fold =
          p.layout.b_offsets[i] == p.layout.b_offsets[0] && p.layout.a_offsets[i] == i * s.m * s.k;
    }
    if (p.fold) {
      s.m *= batches;
      p.layout.a_offsets = {0};
      p.layout.b_offsets = {p.layout.b_offsets[0]};
    }
  } else {
    if (a.size() != 2 || b.size() != 2) return invalid_argument("Gemm operands must be 2-D");
    const bool ta = node.attr_int("transA", 0) != 0, tb = node.attr_int("transB", 0) != 0;
    s.m = ta ? a[1] : a[0];
    s.k = ta ? a[0] : a[1];
    s.n = tb ? b[0] : b[1];
    if ((tb ? b[1] : b[0]) != s.k) return invalid_argument("Gemm inner dims differ");
    s.a_rs = ta ? 1 : s.k;
    s.a_cs = ta ? s.m : 1;
    s.b_rs = tb ? 1 : s.n;
    s.b_cs = tb ? s.k : 1;
    s.alpha = node.attr_float("alpha", 1.0f);
    p.beta = node.attr_float("beta", 1.0f);
    p.layout.m = s.m;
    p.layout.a_offsets = {0};
    p.layout.b_offsets = {0};
    if (node.inputs.size() > 2 && node.inputs[2] != kNoValue && p.beta != 0.0f) {
      TESSERA_RETURN_IF_ERROR(check_float_value(g, node.inputs[2]));
      const std::vector<int64_t> c = g.value(node.inputs[2]).type.static_dims();
      if (c.size() > 2) return invalid_argument("Gemm C must have rank <= 2");
      p.bias_cols = c.empty() ? 1 : c.back();
      p.bias_rows = c.size() == 2 ? c[0] : 1;
      if ((p.bias_cols != 1 && p.bias_cols != s.n) || (p.bias_rows != 1 && p.bias_rows != s.m)) {
        return invalid_argument("Gemm C does not broadcast to the output");
      }
      p.bias = node.inputs[2];
    }
  }
  s.ldc = s.n;
  if (s.m * s.n * static_cast<int64_t>(p.layout.a_offsets.size()) != shape_numel(p.out_dims)) {
    return invalid_argument(node.describe() + ": output shape does not match the operands");
  }
  return p;
}

class GemmKernel final : public Kernel {
 public:
  GemmKernel(const IsaKernels& isa, GemmPlan plan) : isa_(isa), plan_(std::move(plan)) {}

  // softmax: the group's closing Softmax node, or -1.
  Status init(const SubGraph& sg, const Node& anchor, const std::vector<int>& tail, int softmax) {
    const Graph& g = sg.graph();
    // What the kernel stores: the subgraph's outputs, the closing Softmax's replaced by its
    // input (the Softmax then runs in place over that buffer).
    std::vector<int> stored = sg.outputs();
    if (softmax >= 0) {
      TESSERA_ASSIGN_OR_RETURN(softmax_len_, softmax_row_length(g, softmax));
      stored = {g.node(softmax).inputs[0]};
    }
    TESSERA_ASSIGN_OR_RETURN(a_, source_of(sg, anchor.inputs[0]));
    TESSERA_ASSIGN_OR_RETURN(b_, source_of(sg, anchor.inputs[1]));
    if (plan_.bias != kNoValue) {
      TESSERA_ASSIGN_OR_RETURN(bias_, source_of(sg, plan_.bias));
    }
    if (b_.constant) {  // weights: pack each distinct batch matrix of B once, now
      GemmShape& s = plan_.shape;
      std::map<int64_t, int> packed_of;
      for (int64_t off : plan_.layout.b_offsets) {
        auto [it, fresh] = packed_of.emplace(off, static_cast<int>(packed_b_.size()));
        if (fresh) {
          const int nr = gemm_panel_width(isa_, s.n);
          packed_b_.emplace_back(packed_b_floats(s.k, s.n, nr));
          pack_b(b_.constant->data<float>() + off, s.b_rs, s.b_cs, s.k, s.n, nr,
                 packed_b_.back().data());
        }
        b_index_.push_back(it->second);
      }
      s.b_packed = true;
    }
    const int anchor_out = anchor.outputs[0];
    if (!tail.empty()) {
      TESSERA_ASSIGN_OR_RETURN(
          tail_, compile_eltwise(g, tail, tail_outputs(stored, anchor_out), plan_.out_dims));
      for (int v : tail_.input_values) {
        if (v == anchor_out) {
          tail_sources_.push_back(ValueSource{});  // slot -1, no constant: the anchor's C
          continue;
        }
        TESSERA_ASSIGN_OR_RETURN(ValueSource src, source_of(sg, v));
        tail_sources_.push_back(std::move(src));
      }
    }
    // Kernel outputs: C itself (anchor_out), or a tail program output.
    for (int v : stored) {
      int pos = -1;
      for (size_t o = 0; o < tail_.program.outputs.size(); ++o)
        if (tail_stored_[o] == v) pos = static_cast<int>(o);
      if (pos < 0 && v != anchor_out) return internal_error("unexpected output of " + sg.label());
      out_pos_.push_back(pos);
    }
    // With one stored value that is not C itself, the tail writes over C in place.
    in_place_ = tail_stored_.size() == 1 && std::find(stored.begin(), stored.end(), anchor_out) == stored.end();
    return Status();
  }

  Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs,
             KernelRunContext& ctx) override {
    const GemmShape& s = plan_.shape;
    TESSERA_ASSIGN_OR_RETURN(const float* a, resolve_float(a_, inputs));
    const float* b = nullptr;
    if (!s.b_packed) {
      TESSERA_ASSIGN_OR_RETURN(b, resolve_float(b_, inputs));
    }
    const float* bias = nullptr;
    if (plan_.bias != kNoValue) {
      TESSERA_ASSIGN_OR_RETURN(bias, resolve_float(bias_, inputs));
    }
    // The blocks cover C (ldc == n) and overwrite it, unless k == 0 leaves it at zero.
    Tensor c = s.k > 0 ? ctx.alloc.allocate_uninitialized(DType::kFloat32, plan_.out_dims)
                       : ctx.alloc.allocate(DType::kFloat32, plan_.out_dims);
    float* cp = c.data<float>();
    std::vector<GemmOperands> problems;
    for (size_t i = 0; i < plan_.layout.a_offsets.size(); ++i) {
      const float* bi = s.b_packed ? packed_b_[b_index_[i]].data() : b + plan_.layout.b_offsets[i];
      problems.push_back(
          {a + plan_.layout.a_offsets[i], bi, cp + static_cast<int64_t>(i) * s.m * s.n});
    }
    GemmHooks hooks;
    if (bias && plan_.bias_rows == 1 && plan_.bias_cols == s.n && s.n > 1 && plan_.beta == 1.0f && s.k > 0) {
      hooks.column_bias = bias;  // a bias per column starts the accumulators
    } else if (bias) {
      const float beta = plan_.beta;
      const int64_t bc = plan_.bias_cols, br = plan_.bias_rows;
      hooks.init = [=](int64_t, int64_t m0, int64_t m1, int64_t n0, int64_t n1, float*) {
        for (int64_t r = m0; r < m1; ++r) {
          const float* src = bias + (br == 1 ? 0 : r * bc);
          float* dst = cp + r * s.ldc;
          for (int64_t j = n0; j < n1; ++j) dst[j] = beta * src[bc == 1 ? 0 : j];
        }
      };
    }
    // The tail's buffers: its inputs (C among them) and its outputs.
    std::vector<Tensor> tail_out(tail_stored_.size());
    std::vector<const float*> tail_in(tail_sources_.size());
    std::vector<float*> tail_out_ptr(tail_stored_.size());
    if (!tail_stored_.empty()) {
      for (size_t k = 0; k < tail_sources_.size(); ++k) {
        const ValueSource& src = tail_sources_[k];
        if (src.slot < 0 && !src.constant) {
          tail_in[k] = cp;
        } else {
          TESSERA_ASSIGN_OR_RETURN(tail_in[k], resolve_float(src, inputs));
        }
      }
      for (size_t o = 0; o < tail_stored_.size(); ++o) {
        // The tail runs on every finished block: it writes all of its outputs.
        tail_out[o] =
            in_place_ ? c : ctx.alloc.allocate_uninitialized(DType::kFloat32, plan_.out_dims);
        tail_out_ptr[o] = tail_out[o].data<float>();
      }
      const EltwiseBuffers buffers{tail_in.data(), tail_out_ptr.data()};
      const EltwiseProgram* program = &tail_.program;
      const IsaKernels* isa = &isa_;
      const int64_t mn = s.m * s.n, n = s.n;
      hooks.scratch_floats = program->scratch_floats();
      hooks.finish = [=](int64_t batch, int64_t m0, int64_t m1, int64_t n0, int64_t n1,
                         float* scratch) {
        const int64_t base = batch * mn;
        if (n0 == 0 && n1 == n) {
          isa->eltwise(*program, buffers, base + m0 * n, base + m1 * n, scratch);
          return;
        }
        for (int64_t r = m0; r < m1; ++r)
          isa->eltwise(*program, buffers, base + r * n + n0, base + r * n + n1, scratch);
      };
    }
    sgemm_batched(isa_, s, problems, hooks, ctx.pool);
    outputs.resize(out_pos_.size());
    for (size_t i = 0; i < out_pos_.size(); ++i)
      outputs[i] = out_pos_[i] < 0 ? c : tail_out[out_pos_[i]];
    if (softmax_len_ > 0) {  // the closing Softmax, row by row in place (this kernel's buffer)
      float* y = outputs[0].data<float>();
      const int64_t len = softmax_len_, rows = outputs[0].numel() / len;
      const IsaKernels* isa = &isa_;
      parallel(ctx.pool, rows, std::max<int64_t>(1, 4096 / len), [=](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) isa->softmax_row(y + r * len, len, y + r * len);
      });
    }
    return Status();
  }

 private:
  // The tail values the kernel stores: the subgraph outputs other than C.
  std::vector<int> tail_outputs(const std::vector<int>& stored, int anchor_out) {
    tail_stored_.clear();
    for (int v : stored)
      if (v != anchor_out) tail_stored_.push_back(v);
    return tail_stored_;
  }

  const IsaKernels& isa_;
  GemmPlan plan_;
  ValueSource a_, b_, bias_;
  std::vector<ScratchBuffer> packed_b_;
  std::vector<int> b_index_;  // per batch: which packed B
  EltwisePlan tail_;
  std::vector<int> tail_stored_;
  std::vector<ValueSource> tail_sources_;
  std::vector<int> out_pos_;  // per kernel output: tail output index, or -1 for C
  bool in_place_ = false;
  int64_t softmax_len_ = 0;  // > 0: a closing Softmax over rows of this length
};

}  // namespace

bool is_gemm_op(const std::string& op_type) { return op_type == "MatMul" || op_type == "Gemm"; }

Status check_gemm_node(const Graph& g, int n) {
  const Node& node = g.node(n);
  if (!node.domain.empty() || !is_gemm_op(node.op_type))
    return unimplemented(node.op_type + " is not MatMul/Gemm");
  return plan_gemm(g, node).status();
}

namespace {
// The one MatMul / Gemm node of a group, or -1.
int anchor_of(const SubGraph& sg) {
  int anchor = -1;
  for (int n : sg.nodes()) {
    if (!is_gemm_op(sg.graph().node(n).op_type)) continue;
    if (anchor >= 0) return -1;
    anchor = n;
  }
  return anchor;
}
}  // namespace

Status check_gemm_group(const SubGraph& sg) {
  const Graph& g = sg.graph();
  const int anchor = anchor_of(sg);
  if (anchor < 0) return unimplemented("a group holds one MatMul / Gemm");
  TESSERA_RETURN_IF_ERROR(check_gemm_node(g, anchor));
  const std::vector<int64_t> dims = g.value(g.node(anchor).outputs[0]).type.static_dims();
  for (int n : sg.nodes()) {
    if (n == anchor) continue;
    if (g.node(n).op_type == "Softmax") {
      // Closes the group: the only output, over rows, fed from inside (the product or the tail).
      TESSERA_RETURN_IF_ERROR(softmax_row_length(g, n).status());
      const Node& sm = g.node(n);
      if (sg.outputs().size() != 1 || sg.outputs()[0] != sm.outputs[0])
        return unimplemented("a Softmax in a MatMul group must produce the group's only output");
      const int producer = g.value(sm.inputs[0]).producer;
      if (producer < 0 || !sg.nodes().contains(producer))
        return unimplemented("a Softmax in a MatMul group must read the product or its tail");
      if (g.value(sm.outputs[0]).type.static_dims() != dims)
        return unimplemented("an elementwise tail must keep the product's shape");
      continue;
    }
    TESSERA_RETURN_IF_ERROR(check_eltwise_node(g, n));
    if (g.value(g.node(n).outputs[0]).type.static_dims() != dims) {
      return unimplemented("an elementwise tail must keep the product's shape");
    }
  }
  return Status();
}

Result<std::unique_ptr<Kernel>> compile_gemm_kernel(const SubGraph& sg, const IsaKernels& isa) {
  TESSERA_RETURN_IF_ERROR(check_gemm_group(sg));
  const Graph& g = sg.graph();
  const int a = anchor_of(sg);
  std::vector<int> tail;
  int softmax = -1;
  for (int n : sg.nodes()) {
    if (n == a) continue;
    if (g.node(n).op_type == "Softmax") softmax = n;
    else tail.push_back(n);
  }
  TESSERA_ASSIGN_OR_RETURN(GemmPlan plan, plan_gemm(g, g.node(a)));
  auto k = std::make_unique<GemmKernel>(isa, std::move(plan));
  TESSERA_RETURN_IF_ERROR(k->init(sg, g.node(a), tail, softmax));
  return std::unique_ptr<Kernel>(std::move(k));
}

}  // namespace tessera::native
