// The oneDNN backend: any convex group of supported nodes becomes one kernel. The group is
// lowered once into units (anchor primitive + post-ops, onednn_program.h); a plan of oneDNN
// primitives is built per input shape (onednn_plan.h), at compile time when shapes are static.
#include <omp.h>

#include <cstdlib>
#include <mutex>
#include <string>

#include "backends/backend.h"
#include "backends/onednn/onednn_plan.h"
#include "backends/onednn/onednn_support.h"

namespace tessera {
namespace {

using onednn::Dims;
using onednn::Plan;
using onednn::Program;

// tessera's pool loops on OpenMP's threads (the team oneDNN's primitives run on).
void run_openmp_region(int num_threads, void* ctx, void (*body)(void* ctx, int thread)) {
#pragma omp parallel num_threads(num_threads)
  body(ctx, omp_get_thread_num());
}

class OnednnKernel final : public Kernel {
 public:
  OnednnKernel(const SubGraph& sg, Program prog, int threads, bool channels_last)
      : sg_(sg), prog_(std::move(prog)), threads_(threads), channels_last_(channels_last) {}

  // Builds the plan for these input dims now (compile time, static shapes).
  Status prepare(const std::vector<Dims>& input_dims) {
    std::lock_guard<std::mutex> lock(mu_);
    return plan_for(input_dims).status();
  }

  Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs,
             KernelRunContext& ctx) override {
    if (inputs.size() != sg_.inputs().size())
      return internal_error("onednn kernel: wrong number of inputs");
    std::vector<Dims> key;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i] || inputs[i]->dtype() != DType::kFloat32) {
        return invalid_argument("onednn kernel: input '" + sg_.graph().value(sg_.inputs()[i]).name +
                                "' must be float32");
      }
      key.push_back(inputs[i]->dims());
      if (channels_last_ && key.back().size() == 4) key.back() = row_major_dims(key.back());  // its ONNX dims
    }
    std::lock_guard<std::mutex> lock(mu_);
    TESSERA_ASSIGN_OR_RETURN(Plan * plan, plan_for(key));
    return plan->run(inputs, outputs, ctx.alloc);
  }

 private:
  // Plans are kept for a few recent input shapes (dynamic-shape models see few).
  static constexpr size_t kMaxPlans = 8;

  Result<Plan*> plan_for(const std::vector<Dims>& key) {
    for (auto& [dims, plan] : plans_)
      if (dims == key) return plan.get();
    TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<Plan> plan, Plan::build(sg_, prog_, key, threads_, channels_last_));
    if (plans_.size() >= kMaxPlans) plans_.erase(plans_.begin());
    plans_.emplace_back(key, std::move(plan));
    return plans_.back().second.get();
  }

  SubGraph sg_;
  Program prog_;
  int threads_;
  bool channels_last_;
  std::mutex mu_;
  std::vector<std::pair<std::vector<Dims>, std::unique_ptr<Plan>>> plans_;
};

std::string isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    case dnnl::cpu_isa::all: return "all";
    default: return "other";
  }
}

class OnednnBackend final : public Backend {
 public:
  std::string name() const override { return "onednn"; }

  std::string version() const override {
    const dnnl_version_t* v = dnnl_version();
    // "plan r3": the revision of how tessera builds and runs the primitives (r2: tiny units on
    // one thread; r3: matmul operands oneDNN only reads with its reference code are made plain),
    // part of every cost database key like the native backend's revision.
    std::string version = "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                          std::to_string(v->patch) + " (tessera plan r3)";
    // How OpenMP's idle workers wait changes every time measured (and how a plan that hands over
    // to other threads runs): costs taken under one setting are not reused under another.
    for (const char* name : {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"})
      if (const char* value = std::getenv(name)) version += std::string(" ") + name + "=" + value;
    return version;
  }

  Status available() const override {
    return onednn::guarded("onednn", []() -> Status {
      dnnl::stream s(onednn::cpu_engine());
      (void)s;
      // The JIT kernels need at least SSE4.1; below that only slow reference code runs.
      dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
      if (isa != dnnl::cpu_isa::all && isa_name(isa) == "other") {
        return unimplemented("oneDNN reports CPU ISA '" + isa_name(isa) + "'");
      }
      return Status();
    });
  }

  FusionStyle fusion_style() const override { return FusionStyle::kArbitrary; }
  std::string thread_runtime() const override { return "openmp"; }
  RegionRunner region_runner() const override { return &run_openmp_region; }
  // Deep enough that the PP-OCR det network is one kernel: layouts stay blocked throughout.
  int max_fusion_depth() const override { return 512; }

  Status supports(const Graph& g, int n) const override {
    TESSERA_RETURN_IF_ERROR(onednn::node_support(g, n));
    // With static shapes, oneDNN itself has the last word: create the node's primitives now
    // (cheap next time: oneDNN caches them), so a limit of the library is a reason here rather
    // than a compile error later.
    const std::string& op = g.node(n).op_type;
    if (onednn::is_activation_op(op) || onednn::is_binary_op(op)) return Status();  // always fine
    SubGraph sg(g, NodeSet::of(g.num_nodes(), {n}));
    std::vector<Dims> dims;
    for (int v : sg.inputs()) {
      if (!g.value(v).type.is_static()) return Status();
      dims.push_back(g.value(v).type.static_dims());
    }
    TESSERA_ASSIGN_OR_RETURN(Program prog, onednn::lower_subgraph(sg));
    auto plan = Plan::build(sg, prog, dims, 1, /*channels_last=*/false, /*trial=*/true);
    if (!plan.ok()) return unimplemented(plan.status().message());
    return Status();
  }

  Status accepts(const SubGraph& sg) const override {
    for (int n : sg.nodes()) TESSERA_RETURN_IF_ERROR(onednn::node_support(sg.graph(), n));
    return Status();
  }

  std::vector<std::string> claimed_patterns() const override {
    return {
        // single ops
        "Conv",
        "ConvTranspose",
        "MatMul",
        "Gemm",
        "MaxPool",
        "AveragePool",
        "GlobalAveragePool",
        "GlobalMaxPool",
        "BatchNormalization",
        "Softmax",
        "LayerNormalization",
        "Concat",
        "Resize",
        "ReduceMean",
        "ReduceSum",
        "ReduceMax",
        "Relu",
        "Clip",
        "HardSigmoid",
        "HardSwish",
        "Sigmoid",
        "Tanh",
        "LeakyRelu",
        "Elu",
        "Exp",
        "Log",
        "Sqrt",
        "Abs",
        "Neg",
        "Add",
        "Sub",
        "Mul",
        "Div",
        "Max",
        "Min",
        // post-op fusion on convolutions
        "Conv+Relu",
        "Conv+Clip",
        "Conv+HardSigmoid",
        "Conv+HardSwish",
        "Conv+Sigmoid",
        "Conv+Tanh",
        "Conv+LeakyRelu",
        "Conv+Elu",
        "Conv+Add",
        "Conv+Sub",
        "Conv+Mul",
        "Conv+Div",
        "Conv+Max",
        "Conv+Min",
        "Conv+Add+Relu",
        "Conv+Mul+Add",
        "Conv+Add+Clip",
        "Conv+Mul+Add+HardSwish",
        "ConvTranspose+Add",
        "ConvTranspose+Relu",
        "ConvTranspose+Add+Sigmoid",
        // matrix products
        "MatMul+Add",
        "MatMul+Relu",
        "MatMul+Add+Relu",
        "MatMul+Mul",
        "MatMul+Sigmoid",
        "MatMul+Tanh",
        "Gemm+Relu",
        "Gemm+Add",
        "Gemm+Sigmoid",
        "Gemm+Tanh",
        // pooling, binary and elementwise chains
        "MaxPool+Relu",
        "AveragePool+Relu",
        "GlobalAveragePool+Mul",
        "Add+Relu",
        "Add+Clip",
        "Mul+Add",
        "Sub+Mul",
        "Mul+Sigmoid",
        "Add+Add",
        "Relu+Mul",
        "Sigmoid+Mul",
        "Resize+Add",
    };
  }

  Result<std::unique_ptr<Kernel>> compile(const SubGraph& sg,
                                          const CompileOptions& opts) const override {
    TESSERA_RETURN_IF_ERROR(accepts(sg));
    TESSERA_ASSIGN_OR_RETURN(Program prog, onednn::lower_subgraph(sg));
    auto kernel = std::make_unique<OnednnKernel>(sg, std::move(prog), opts.threads,
                                                 opts.layout == TensorLayout::kChannelsLast);
    std::vector<Dims> dims;
    bool all_static = true;
    for (int v : sg.inputs()) {
      const TensorType& t = sg.graph().value(v).type;
      if (!t.is_static()) {
        all_static = false;
        break;
      }
      dims.push_back(t.static_dims());
    }
    if (all_static) TESSERA_RETURN_IF_ERROR(kernel->prepare(dims));
    return std::unique_ptr<Kernel>(std::move(kernel));
  }
  // Its plans read and write boundary tensors in either layout (a reorder only where a primitive
  // wants another).
  bool takes_channels_last(const SubGraph&) const override { return true; }
};

}  // namespace

const Backend& onednn_backend() {
  static const OnednnBackend b;
  return b;
}

}  // namespace tessera
