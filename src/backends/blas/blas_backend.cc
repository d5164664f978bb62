// OpenBLAS (through CBLAS) as a Backend: MatMul (batched, broadcast batch dims), Gemm (transA,
// transB, alpha, beta, C broadcast), Conv by im2col + sgemm. One node per kernel; every call runs
// with the session's thread count: OpenBLAS single-threaded on blocks spread over tessera's pool
// (blas_gemm.cc).
#include <cblas.h>

#include <cstring>

#include "backends/backend.h"
#include "backends/blas/blas_kernels.h"

namespace tessera {
namespace blas {

namespace {

class BlasBackend final : public Backend {
 public:
  std::string name() const override { return "blas"; }
  std::string version() const override {
    const char* config = openblas_get_config();  // "OpenBLAS 0.3.21 DYNAMIC_ARCH ... Haswell ..."
    return config ? config : "OpenBLAS";
  }
  Status available() const override { return Status(); }  // linked in: present when this runs
  FusionStyle fusion_style() const override { return FusionStyle::kNone; }

  Status supports(const Graph& g, int n) const override {
    const Node& node = g.node(n);
    if (!node.domain.empty()) return unimplemented("domain '" + node.domain + "'");
    if (node.op_type == "MatMul" || node.op_type == "Gemm") return check_matmul_node(g, n);
    if (node.op_type == "Conv") return check_conv_node(g, n);
    return unimplemented("blas runs MatMul, Gemm and Conv only");
  }

  std::vector<std::string> claimed_patterns() const override { return {"MatMul", "Gemm", "Conv"}; }

  Result<std::unique_ptr<Kernel>> compile(const SubGraph& sg,
                                          const CompileOptions& opts) const override {
    TESSERA_RETURN_IF_ERROR(accepts(sg));
    const int n = sg.nodes().first();
    TESSERA_RETURN_IF_ERROR(supports(sg.graph(), n));
    const int threads = opts.threads < 1 ? 1 : opts.threads;
    if (sg.graph().node(n).op_type == "Conv") return compile_conv(sg, threads);
    return compile_matmul(sg, threads);
  }
};

}  // namespace
}  // namespace blas

const Backend& blas_backend() {
  static const blas::BlasBackend b;
  return b;
}

}  // namespace tessera
