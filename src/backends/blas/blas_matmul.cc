// MatMul and Gemm as cblas_sgemm calls. MatMul broadcasts its batch dims numpy-style; batches of
// A over one shared B fold into a single taller product.
#include <cblas.h>

#include <algorithm>

#include "backends/blas/blas_kernels.h"

namespace tessera::blas {
namespace {


struct MatMulPlan {
  MatMulLayout layout;
  bool trans_a = false, trans_b = false;
  float alpha = 1, beta = 0;
  int bias = kNoValue;  // Gemm's C, broadcast to (m x n)
  int64_t bias_rows = 1, bias_cols = 1;
  std::vector<int64_t> out_dims;
};

Result<MatMulPlan> plan_matmul(const Graph& g, const Node& node) {
  MatMulPlan p;
  if (node.inputs.size() < 2) return invalid_argument(node.describe() + ": expects two operands");
  TESSERA_RETURN_IF_ERROR(check_float_value(g, node.inputs[0]));
  TESSERA_RETURN_IF_ERROR(check_float_value(g, node.inputs[1]));
  if (node.outputs.empty() || node.outputs[0] == kNoValue) return invalid_argument("no output");
  TESSERA_RETURN_IF_ERROR(check_float_value(g, node.outputs[0]));
  p.out_dims = g.value(node.outputs[0]).type.static_dims();
  const std::vector<int64_t> a = g.value(node.inputs[0]).type.static_dims();
  const std::vector<int64_t> b = g.value(node.inputs[1]).type.static_dims();
  MatMulLayout& l = p.layout;
  if (node.op_type == "MatMul") {
    TESSERA_ASSIGN_OR_RETURN(l, matmul_layout(a, b));
    bool fold = l.a_offsets.size() > 1;
    for (size_t i = 0; i < l.a_offsets.size() && fold; ++i) {
      fold =
          l.b_offsets[i] == l.b_offsets[0] && l.a_offsets[i] == static_cast<int64_t>(i) * l.m * l.k;
    }
    if (fold) {  // A's batches are consecutive rows of one taller A
      l.m *= static_cast<int64_t>(l.a_offsets.size());
      l.a_offsets = {0};
      l.b_offsets = {l.b_offsets[0]};
    }
  } else {
    if (a.size() != 2 || b.size() != 2) return invalid_argument("Gemm operands must be 2-D");
    p.trans_a = node.attr_int("transA", 0) != 0;
    p.trans_b = node.attr_int("transB", 0) != 0;
    l.m = p.trans_a ? a[1] : a[0];
    l.k = p.trans_a ? a[0] : a[1];
    l.n = p.trans_b ? b[0] : b[1];
    if ((p.trans_b ? b[1] : b[0]) != l.k) return invalid_argument("Gemm inner dims differ");
    l.a_offsets = {0};
    l.b_offsets = {0};
    p.alpha = node.attr_float("alpha", 1.0f);
    const float beta = node.attr_float("beta", 1.0f);
    if (node.inputs.size() > 2 && node.inputs[2] != kNoValue && beta != 0.0f) {
      TESSERA_RETURN_IF_ERROR(check_float_value(g, node.inputs[2]));
      const std::vector<int64_t> c = g.value(node.inputs[2]).type.static_dims();
      if (c.size() > 2) return invalid_argument("Gemm C must have rank <= 2");
      p.bias_cols = c.empty() ? 1 : c.back();
      p.bias_rows = c.size() == 2 ? c[0] : 1;
      if ((p.bias_cols != 1 && p.bias_cols != l.n) || (p.bias_rows != 1 && p.bias_rows != l.m)) {
        return invalid_argument("Gemm C does not broadcast to the output");
      }
      p.bias = node.inputs[2];
      p.beta = beta;
    }
  }
  if (l.m * l.n * static_cast<int64_t>(l.a_offsets.size()) != shape_numel(p.out_dims)) {
    return invalid_argument(node.describe() + ": output shape does not match the operands");
  }
  if (l.m > INT32_MAX || l.n > INT32_MAX || l.k > INT32_MAX)
    return unimplemented("dims beyond 32 bits");
  return p;
}

class MatMulKernel final : public Kernel {
 public:
  MatMulKernel(MatMulPlan plan, ValueSource a, ValueSource b, ValueSource bias, int threads)
      : p_(std::move(plan)),
        a_(std::move(a)),
        b_(std::move(b)),
        bias_(std::move(bias)),
        threads_(threads) {}

  Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs,
             KernelRunContext& ctx) override {
    TESSERA_ASSIGN_OR_RETURN(const float* a, resolve_float(a_, inputs));
    TESSERA_ASSIGN_OR_RETURN(const float* b, resolve_float(b_, inputs));
    outputs.resize(1);
    outputs[0] = ctx.alloc.allocate(DType::kFloat32, p_.out_dims);
    float* y = outputs[0].data<float>();
    const MatMulLayout& l = p_.layout;
    const auto m = static_cast<blasint>(l.m), n = static_cast<blasint>(l.n),
               k = static_cast<blasint>(l.k);
    float beta = 0.0f;
    if (p_.bias != kNoValue) {  // y = broadcast C, then sgemm adds alpha * A * B to beta * y
      TESSERA_ASSIGN_OR_RETURN(const float* c, resolve_float(bias_, inputs));
      for (int64_t r = 0; r < l.m; ++r) {
        const float* src = c + (p_.bias_rows == 1 ? 0 : r * p_.bias_cols);
        for (int64_t j = 0; j < l.n; ++j) y[r * l.n + j] = src[p_.bias_cols == 1 ? 0 : j];
      }
      beta = p_.beta;
    }
    const blasint lda = p_.trans_a ? m : k, ldb = p_.trans_b ? k : n;
    for (size_t i = 0; i < l.a_offsets.size(); ++i) {
      parallel_sgemm(ctx.pool, p_.trans_a, p_.trans_b, m, n, k, p_.alpha, a + l.a_offsets[i], lda,
                     b + l.b_offsets[i], ldb, beta, y + static_cast<int64_t>(i) * l.m * l.n, n);
    }
    return Status();
  }

 private:
  MatMulPlan p_;
  ValueSource a_, b_, bias_;
  int threads_;
};

}  // namespace

Status check_matmul_node(const Graph& g, int n) { return plan_matmul(g, g.node(n)).status(); }

Result<std::unique_ptr<Kernel>> compile_matmul(const SubGraph& sg, int threads) {
  const Node& node = sg.graph().node(sg.nodes().first());
  TESSERA_ASSIGN_OR_RETURN(MatMulPlan plan, plan_matmul(sg.graph(), node));
  TESSERA_ASSIGN_OR_RETURN(ValueSource a, source_of(sg, node.inputs[0]));
  TESSERA_ASSIGN_OR_RETURN(ValueSource b, source_of(sg, node.inputs[1]));
  ValueSource bias;
  if (plan.bias != kNoValue) {
    TESSERA_ASSIGN_OR_RETURN(bias, source_of(sg, plan.bias));
  }
  return std::unique_ptr<Kernel>(
      new MatMulKernel(std::move(plan), std::move(a), std::move(b), std::move(bias), threads));
}

}  // namespace tessera::blas
