// The reference backend's per-node kernels: simple, obviously right, the oracle for every other
// backend. A kernel reads its inputs and attributes from a RefKernelContext and allocates its
// outputs through it (so the runtime can reuse buffers by liveness).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/parallel.h"
#include "ir/status.h"
#include "ir/tensor.h"

namespace tessera {

// Runs a subgraph (an If/Loop/Scan body) with its formal inputs in order; values the body reads
// from enclosing graphs are bound by the runtime. Returns the body's outputs in order.
using SubgraphRunner = std::function<Result<std::vector<Tensor>>(const Graph& body, const std::vector<Tensor>& inputs)>;

// Supplies output buffers. The runtime's implementation reuses freed buffers.
class TensorAllocator {
 public:
  virtual ~TensorAllocator() = default;
  virtual Tensor allocate(DType dtype, std::vector<int64_t> dims) = 0;
  // Same, but the contents are unspecified: for kernels that write every element of the output
  // (saves a full write pass over the buffer).
  virtual Tensor allocate_uninitialized(DType dtype, std::vector<int64_t> dims) {
    return allocate(dtype, std::move(dims));
  }
  // Gives back a kernel's scratch tensor for reuse (a pool's buffer); the default drops it.
  virtual void release(Tensor& t) { t = Tensor(); }
};

// Plain heap allocation.
class HeapAllocator final : public TensorAllocator {
 public:
  Tensor allocate(DType dtype, std::vector<int64_t> dims) override { return Tensor(dtype, std::move(dims)); }
};

class RefKernelContext {
 public:
  RefKernelContext(const Node& node, std::vector<const Tensor*> inputs, TensorAllocator& alloc,
                   ThreadPool* pool)
      : node_(node), inputs_(std::move(inputs)), outputs_(node.outputs.size()), alloc_(alloc), pool_(pool) {}

  const Node& node() const { return node_; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  int num_outputs() const { return static_cast<int>(outputs_.size()); }
  // nullptr when input i is omitted or beyond the node's inputs.
  const Tensor* input(int i) const { return i < num_inputs() ? inputs_[i] : nullptr; }
  bool has_input(int i) const { return input(i) != nullptr; }
  // Whether the graph uses output i (optional outputs may be omitted).
  bool wants_output(int i) const { return i < num_outputs() && node_.outputs[i] != kNoValue; }

  // Allocates output i (zero-filled) and returns it. Calling it twice for one output replaces it.
  Tensor& output(int i, DType dtype, std::vector<int64_t> dims) {
    TESSERA_CHECK(i < num_outputs(), "output index out of range");
    outputs_[i] = alloc_.allocate(dtype, std::move(dims));
    return outputs_[i];
  }
  // Sets output i to an existing tensor (e.g. a shared constant).
  void set_output(int i, Tensor t) {
    TESSERA_CHECK(i < num_outputs(), "output index out of range");
    outputs_[i] = std::move(t);
  }
  std::vector<Tensor>& outputs() { return outputs_; }
  ThreadPool* pool() const { return pool_; }
  // parallel_for on the pool, or inline without one.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) const {
    if (pool_) pool_->parallel_for(n, grain, fn); else fn(0, n);
  }

  void set_subgraph_runner(SubgraphRunner r) { subgraph_runner_ = std::move(r); }
  Result<std::vector<Tensor>> run_subgraph(const Graph& body, const std::vector<Tensor>& inputs) const {
    if (!subgraph_runner_) return unimplemented(node_.describe() + ": subgraphs cannot run here");
    return subgraph_runner_(body, inputs);
  }
  TensorAllocator& allocator() const { return alloc_; }

  // Shorthand for errors that name the node.
  Status error(const std::string& msg) const { return invalid_argument(node_.describe() + ": " + msg); }
  Status unsupported(const std::string& msg) const { return unimplemented(node_.describe() + ": " + msg); }

 private:
  const Node& node_;
  std::vector<const Tensor*> inputs_;
  std::vector<Tensor> outputs_;
  TensorAllocator& alloc_;
  ThreadPool* pool_;
  SubgraphRunner subgraph_runner_;
};

using RefKernelFn = std::function<Status(RefKernelContext&)>;

// op name (with domain prefix "domain." for non-default domains) -> kernel.
class RefKernelTable {
 public:
  static const RefKernelTable& global();
  void add(const std::string& op, RefKernelFn fn);
  const RefKernelFn* find(const std::string& domain, const std::string& op) const;
  std::vector<std::string> ops() const;

 private:
  std::map<std::string, RefKernelFn> kernels_;
};

// One registration function per kernel family file (backends/ref/*.cc).
void register_elementwise_kernels(RefKernelTable& t);
void register_tensor_kernels(RefKernelTable& t);
void register_nn_kernels(RefKernelTable& t);
void register_reduction_kernels(RefKernelTable& t);
void register_misc_kernels(RefKernelTable& t);
void register_control_flow_kernels(RefKernelTable& t);
void register_sequence_kernels(RefKernelTable& t);
void register_llm_kernels(RefKernelTable& t);  // domain "tessera" (llm_kernels.cc)

}  // namespace tessera
