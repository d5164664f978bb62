// tessera's own kernels as a Backend: fused elementwise / broadcast chains (one pass over
// memory), reductions, Softmax, LayerNormalization, SGEMM for MatMul / Gemm with an
// elementwise tail, direct (or Winograd) Conv and ConvTranspose (affine nodes folded in, an
// elementwise tail), MaxPool / AveragePool and inference BatchNormalization. Vector code for AVX-512 or AVX2 is chosen at run time (see isa.h).
#include "backends/backend.h"
#include "backends/native/attention_fusion.h"
#include "backends/native/conv_kernels.h"
#include "backends/native/deconv_kernels.h"
#include "backends/native/eltwise_compile.h"
#include "backends/native/gather_kernels.h"
#include "backends/native/gemm_kernels.h"
#include "backends/native/isa.h"
#include "backends/native/layer_norm_fusion.h"
#include "backends/native/layout_kernels.h"
#include "backends/native/llm_kernels.h"
#include "backends/native/native_compile.h"
#include "backends/native/pointwise_conv.h"
#include "backends/native/pool_kernels.h"
#include "backends/native/row_kernels.h"
#include "backends/native/separable_conv.h"
#include "ir/parallel.h"

namespace tessera {
namespace native {

Status native_supports(const Graph& g, int n) {
  const std::string& op = g.node(n).op_type;
  if (is_llm_op(g.node(n))) return check_llm_node(g, n);
  if (!g.node(n).domain.empty()) return unimplemented("domain '" + g.node(n).domain + "'");
  if (is_eltwise_op(op)) return check_eltwise_node(g, n);
  if (is_row_op(op)) return check_row_node(g, n);
  if (is_gemm_op(op)) return check_gemm_node(g, n);
  if (is_deconv_op(op)) return check_deconv_node(g, n);
  if (is_conv_op(op)) return check_conv_node(g, n);
  if (op == "BatchNormalization") return check_batch_norm_node(g, n);
  if (is_gather_op(op)) return check_gather_node(g, n);
  if (is_layout_op(op)) return check_layout_node(g, n);
  if (is_pool_op(op)) return check_pool_node(g, n);
  return unimplemented("native has no kernel for " + op);
}

static int count_convs(const SubGraph& sg) {
  int convs = 0;
  for (int n : sg.nodes()) convs += is_conv_op(sg.graph().node(n).op_type) ? 1 : 0;
  return convs;
}

Status native_accepts(const SubGraph& sg) {
  const Graph& g = sg.graph();
  if (sg.size() == 1) return native_supports(g, sg.nodes().first());
  bool has_gemm = false;
  for (int n : sg.nodes())
    if (is_gather_op(g.node(n).op_type)) return check_gather_group(sg);
  for (int n : sg.nodes()) {
    if (g.node(n).op_type == "ReduceMean") return match_decomposed_layer_norm(sg).status();
    if (g.node(n).op_type == "Squeeze") return match_packed_attention(sg).status();
  }
  if (count_convs(sg) == 2) return check_separable_group(sg);
  for (int n : sg.nodes()) {
    if (is_deconv_op(g.node(n).op_type)) return check_deconv_group(sg);
    if (!is_conv_op(g.node(n).op_type)) continue;
    if (!conv_has_head(sg)) return check_conv_group(sg);
    if (Status st = check_pointwise_conv_group(sg); !st.ok())
      return unimplemented("Conv must come first in its group, unless it is a 1x1 convolution after a per-channel "
                           "scaling Mul (" + st.message() + ")");
    return Status();
  }
  for (int n : sg.nodes()) {
    const std::string& op = g.node(n).op_type;
    if (is_llm_op(g.node(n))) return unimplemented(op + " runs alone on native");
    if (is_gemm_op(op)) {
      has_gemm = true;
    } else if (!is_eltwise_op(op) && op != "Softmax") {  // a Softmax may close a MatMul group
      return unimplemented(op + " runs alone on native");
    }
  }
  if (has_gemm) return check_gemm_group(sg);
  const int first = sg.nodes().first();
  TESSERA_RETURN_IF_ERROR(check_eltwise_node(g, first));
  const auto dims = g.value(g.node(first).outputs[0]).type.static_dims();
  for (int n : sg.nodes()) {
    TESSERA_RETURN_IF_ERROR(check_eltwise_node(g, n));
    if (g.value(g.node(n).outputs[0]).type.static_dims() != dims) {
      return unimplemented("an elementwise group has one output shape");
    }
  }
  if (sg.size() + static_cast<int>(sg.inputs().size() + sg.constants().size()) > 200) {
    return unimplemented("elementwise group too large");
  }
  return Status();
}

bool native_takes_channels_last(const SubGraph& sg) {
  return is_eltwise_group(sg) || check_pointwise_conv_group(sg).ok() || check_depthwise_group(sg).ok() ||
         check_separable_group(sg).ok() || gather_takes_channels_last(sg);
}

Result<std::unique_ptr<Kernel>> compile_native(const SubGraph& sg, const IsaKernels& isa, bool channels_last) {
  if (channels_last && !native_takes_channels_last(sg))
    return internal_error(
        "only elementwise kernels, 1x1 and depthwise convolutions and GlobalAveragePool take channels-last");
  TESSERA_RETURN_IF_ERROR(native_accepts(sg));
  const Graph& g = sg.graph();
  if (sg.size() == 1 && is_llm_op(g.node(sg.nodes().first()))) return compile_llm_kernel(sg, isa);
  for (int n : sg.nodes())
    if (is_gather_op(g.node(n).op_type)) return compile_gather_kernel(sg, isa, channels_last);
  if (sg.size() > 1) {
    if (Result<DecomposedLayerNorm> ln = match_decomposed_layer_norm(sg); ln.ok())
      return compile_layer_norm(sg, isa, ln->x, ln->axis, ln->epsilon, ln->scale, ln->bias);
    if (Result<PackedAttention> a = match_packed_attention(sg); a.ok())
      return compile_packed_attention(sg, isa, *a);
  }
  for (int n : sg.nodes()) {
    if (is_gemm_op(g.node(n).op_type)) return compile_gemm_kernel(sg, isa);
    if (is_deconv_op(g.node(n).op_type)) return compile_deconv_kernel(sg, isa);
    if (is_conv_op(g.node(n).op_type)) {
      if (count_convs(sg) == 2) return compile_separable(sg, isa, channels_last);
      if (channels_last && check_depthwise_group(sg).ok()) return compile_depthwise_channels_last(sg, isa);
      if (channels_last || conv_has_head(sg)) return compile_pointwise_conv(sg, isa, channels_last);
      return compile_conv_kernel(sg, isa);
    }
  }
  if (sg.size() == 1 && g.node(sg.nodes().first()).op_type == "BatchNormalization")
    return compile_batch_norm_kernel(sg);
  if (sg.size() == 1 && is_row_op(g.node(sg.nodes().first()).op_type))
    return compile_row_kernel(sg, isa);
  if (sg.size() == 1 && is_layout_op(g.node(sg.nodes().first()).op_type))
    return compile_layout_kernel(sg);
  if (sg.size() == 1 && is_pool_op(g.node(sg.nodes().first()).op_type)) return compile_pool_kernel(sg);
  return compile_eltwise_kernel(sg, isa, channels_last);
}

}  // namespace native

namespace {

// Chains the harness builds and this backend runs as one kernel (besides every single op).
const char* const kFusedChains[] = {
    "Add+Relu",      "Mul+Add",         "Mul+Add+Relu",     "Add+Clip",       "Add+Clip+Mul+Div",
    "Sigmoid+Mul",   "HardSigmoid+Mul", "Sub+Mul",          "Sub+Pow",        "Div+Erf+Add+Mul",
    "Add+Sqrt+Div",  "Exp+Log",         "Tanh+Mul",         "Neg+Exp+Add",    "Max+Min",
    "LeakyRelu+Mul", "MatMul+Add", "MatMul+Add+Softmax",      "MatMul+Add+Relu",  "MatMul+Add+Add", "MatMul+Mul",
    "Gemm+Relu",     "Gemm+HardSwish",  "Gemm+Add+Sigmoid",
    "ConvTranspose+Add", "ConvTranspose+Add+Sigmoid",
    "ConvTranspose+BatchNormalization+Relu", "ConvTranspose+Relu",
    "Conv+Relu", "Conv+Add", "Conv+Add+Relu", "Conv+Add+Clip", "Conv+BatchNormalization",
    "Conv+BatchNormalization+Relu", "Conv+HardSigmoid+Mul", "Conv+Sigmoid+Mul", "Conv+HardSwish",
    "Resize+Concat",
};

class NativeBackend final : public Backend {
 public:
  std::string name() const override { return "native"; }
  std::string version() const override {
    // The revision is part of every cost database key of this backend: raise it when what the
    // kernels accept or how fast they run changes, so that costs measured before (a group once
    // refused, a slower kernel) are measured again instead of read back.
    return std::string("tessera native r14 (") + native::isa_name(native::best_isa()) + ")";
  }
  Status available() const override { return Status(); }  // the scalar kernels run anywhere
  FusionStyle fusion_style() const override { return FusionStyle::kTvmLike; }
  Status supports(const Graph& g, int n) const override { return native::native_supports(g, n); }
  Status accepts(const SubGraph& sg) const override { return native::native_accepts(sg); }

  std::vector<std::string> claimed_patterns() const override {
    std::vector<std::string> p = native::eltwise_op_types();
    for (const char* op : {"ReduceMean", "ReduceSum", "ReduceMax", "Softmax", "LayerNormalization",
                           "MatMul", "Gemm", "Conv", "ConvTranspose", "BatchNormalization",
                           "Resize", "Concat", "GlobalAveragePool", "MaxPool", "AveragePool", "Transpose",
                           "Slice"}) {
      p.push_back(op);
    }
    for (const char* chain : kFusedChains) p.push_back(chain);
    return p;
  }

  std::vector<FusedPattern> fused_patterns() const override {
    return {{"LayerNormalization(decomposed)", native::decomposed_layer_norm_pattern()},
            {"Attention(packed QKV)", native::packed_attention_pattern()},
            {"Conv(scaled input)", native::scaled_pointwise_conv_pattern()}};
  }

  // Elementwise groups walk channels-last tensors in their memory order (broadcasts included); 1x1
  // convolutions are a GEMM either way round; depthwise ones and separable pairs have their own
  // channels-last kernels (separable_conv.h).
  bool takes_channels_last(const SubGraph& sg) const override { return native::native_takes_channels_last(sg); }

  // Kernels run on the session's pool (KernelRunContext::pool), sized to opts.threads already,
  // with subnormal floats flushed to zero.
  Result<std::unique_ptr<Kernel>> compile(const SubGraph& sg,
                                          const CompileOptions& opts) const override {
    TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> kernel,
                             native::compile_native(sg, native::isa_kernels(native::best_isa()),
                                                    opts.layout == TensorLayout::kChannelsLast));
    return std::unique_ptr<Kernel>(std::make_unique<FlushingDenormals>(std::move(kernel)));
  }

 private:
  // Runs a kernel with flush-to-zero and denormals-are-zero set on the calling thread (the pool's
  // workers take the mode on with each job): subnormal weights or activations otherwise cost a
  // slow FPU path per operation (rec's squeeze-excite 1x1 convolutions, 480 channels on one
  // pixel, ran in 0.6 ms instead of 0.035 ms on the Xeon test machine).
  class FlushingDenormals final : public Kernel {
   public:
    explicit FlushingDenormals(std::unique_ptr<Kernel> inner) : inner_(std::move(inner)) {}
    Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs,
               KernelRunContext& ctx) override {
      ScopedFlushDenormals flush;
      return inner_->run(inputs, outputs, ctx);
    }

   private:
    std::unique_ptr<Kernel> inner_;
  };
};

}  // namespace

const Backend& native_backend() {
  static const NativeBackend b;
  return b;
}

}  // namespace tessera
