// The backend interface: what a kernel library can run and how it compiles a subgraph.
//
// A Backend says what it can take (supports(): per node, with the reason when it cannot; its
// fusion style; accepts(): the final word on a whole group) and compiles a SubGraph into a Kernel.
// A backend never decides placement: the partitioner (or `--backend`) does.
//
// A Kernel is prepared once (weights packed, primitives created, for a fixed thread count) and
// run many times. It receives one tensor per SubGraph::inputs() and returns one per outputs().
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/ref/ref_kernel.h"
#include "ir/graph.h"
#include "ir/parallel.h"
#include "ir/pattern.h"
#include "ir/status.h"
#include "ir/subgraph.h"
#include "ir/tensor.h"

namespace tessera {

// How a backend groups nodes (Collage's fusion styles).
enum class FusionStyle {
  kNone,       // one node per kernel
  kTvmLike,    // groups by op kind (elementwise chains, an anchor op plus its elementwise tail)
  kArbitrary,  // any convex group of supported nodes, up to max_fusion_depth()
};
const char* fusion_style_name(FusionStyle s);

// How a plan stores the rank-4 tensors that pass between its steps (partitions, reference nodes).
// Row-major: as ONNX defines them, [N, C, H, W]. Channels-last: [N, H, W, C] in memory, and the
// Tensor's dims say so (physical dims): oneDNN's convolutions and XNNPACK work in that layout, and
// a plan that hands their tensors over in it saves a layout conversion at every boundary. Graph
// inputs, outputs and constants stay row-major (the executor converts inputs and outputs).
enum class TensorLayout { kRowMajor, kChannelsLast };
const char* layout_name(TensorLayout layout);  // "row-major", "channels-last"
Result<TensorLayout> parse_layout(const std::string& name);

struct CompileOptions {
  int threads = 1;  // the session's thread count: the kernel runs with exactly this many
  // The layout of the kernel's rank-4 inputs and outputs (compile_in_layout() wraps kernels of
  // backends that do not take channels-last themselves).
  TensorLayout layout = TensorLayout::kRowMajor;
};

struct KernelRunContext {
  TensorAllocator& alloc;  // output buffers come from here (the runtime reuses them by liveness)
  ThreadPool* pool;        // the session's pool, for backends that use tessera's threads
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  // inputs[i] is the tensor of SubGraph::inputs()[i]; fills outputs (resized by the caller to
  // SubGraph::outputs().size()) in that order.
  virtual Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs,
                     KernelRunContext& ctx) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // The library's version, e.g. "oneDNN 2.6.3".
  virtual std::string version() const = 0;
  // Checked at run time: the library loads, the CPU has the features the kernels need.
  virtual Status available() const = 0;
  virtual FusionStyle fusion_style() const = 0;
  // Longest chain of nodes one kernel may hold (kArbitrary; 1 for kNone).
  virtual int max_fusion_depth() const { return fusion_style() == FusionStyle::kNone ? 1 : 64; }
  // The threads its kernels run on: "tessera" (the session's pool, whose idle workers sleep after
  // ~50 us; XNNPACK's loops run there too, see xnnpack_threads.h) or a library's own ("openmp"),
  // whose idle workers spin for longer. A plan that
  // mixes two own-thread runtimes has their spinning workers take cores from each other, which
  // no per-kernel measurement sees: the optimizer also measures plans limited to one of them.
  virtual std::string thread_runtime() const { return "tessera"; }
  // For a backend with its own thread runtime: runs a parallel region on those threads. A plan
  // with kernels of this backend runs tessera's pool loops there too (ThreadPool::
  // set_region_runner), so one set of workers serves the whole plan. nullptr for "tessera".
  virtual RegionRunner region_runner() const { return nullptr; }

  // Whether node n of g can run here, alone or in a group: ok, or why not ("grouped
  // ConvTranspose not supported"). Types and shapes are the graph's (known after import).
  virtual Status supports(const Graph& g, int n) const = 0;
  // Whether a whole group of supported nodes can be one kernel (fusion rules beyond single
  // nodes). The default accepts single nodes only.
  virtual Status accepts(const SubGraph& sg) const;

  // The patterns this backend claims, as rows of `tessera backends`' support matrix and keys of
  // the differential harness: an op type ("Conv"), or a chain whose first op feeds the next
  // ("Conv+Relu", "MatMul+Add+Gelu"). Every claimed pattern must have a harness case.
  virtual std::vector<std::string> claimed_patterns() const = 0;

  // Groups beyond chains that one kernel of this backend runs, as named dataflow patterns (each
  // match, rooted at its last node, one candidate): a LayerNormalization spelled out in nine
  // elementwise and reduction nodes, say. accepts() still decides; no fusion depth limit applies.
  struct FusedPattern {
    std::string name;
    Pattern pattern;
  };
  virtual std::vector<FusedPattern> fused_patterns() const { return {}; }

  virtual Result<std::unique_ptr<Kernel>> compile(const SubGraph& sg, const CompileOptions& opts) const = 0;

  // Whether compile() of sg with CompileOptions::layout kChannelsLast gives a kernel that reads
  // and writes its rank-4 tensors channels-last itself (else compile_in_layout() converts them).
  virtual bool takes_channels_last(const SubGraph& sg) const {
    (void)sg;
    return false;
  }
};

// b.compile(sg, opts), in opts.layout: a backend that does not take channels-last tensors for sg
// gets row-major ones, converted before and after its kernel runs (the time a plan then spends
// converting is part of the kernel's measured cost).
Result<std::unique_ptr<Kernel>> compile_in_layout(const Backend& b, const SubGraph& sg, const CompileOptions& opts);

// The dims of a rank-4 tensor stored channels-last: [N, C, H, W] -> [N, H, W, C]; and back.
std::vector<int64_t> channels_last_dims(const std::vector<int64_t>& nchw);
std::vector<int64_t> row_major_dims(const std::vector<int64_t>& nhwc);

// A rank-4 tensor [N, C, H, W] copied channels-last ([N, H, W, C]), and back; other ranks and
// non-numeric tensors are returned as they are (sharing storage).
Tensor to_channels_last(const Tensor& t, TensorAllocator& alloc);
Tensor to_row_major(const Tensor& t, TensorAllocator& alloc);

// Every backend compiled in (by the TESSERA_WITH_* CMake options), in a fixed order; "ref" first.
const std::vector<const Backend*>& all_backends();
// The backend called `name`, or nullptr.
const Backend* find_backend(const std::string& name);
// Names of all compiled-in backends, comma separated (for error messages and --help).
std::string backend_names();

// The reference backend as a Backend (single nodes, every op with a ref kernel).
const Backend& ref_backend();

}  // namespace tessera
