// A Plan: the oneDNN primitives of one Program for fixed input dims, ready to run.
//
// Built once per input shape (at compile time when the subgraph's shapes are static): every
// primitive is created, constant weights are reordered into the layouts the primitives chose,
// and the intermediate tensors get offsets in one arena by liveness. Inside the plan tensors stay
// in oneDNN's blocked layouts; the subgraph inputs are read and its outputs written in plain
// row-major layout (or channels-last when the plan exchanges tensors so), with reorders only
// where a primitive wants another layout.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/onednn/onednn_program.h"
#include "backends/ref/ref_kernel.h"

namespace tessera::onednn {

class Plan {
 public:
  // A trial build (supports()) only creates the primitives: no memory, no verbose report.
  // input_dims are the ONNX dims; channels_last: rank-4 inputs and outputs are channels-last.
  static Result<std::unique_ptr<Plan>> build(const SubGraph& sg, const Program& prog,
                                             const std::vector<Dims>& input_dims, int threads,
                                             bool channels_last = false, bool trial = false);
  ~Plan();
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;

  // inputs match the dims the plan was built for; outputs are allocated from `alloc`.
  Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs,
             TensorAllocator& alloc);
  // One line per step: its label and oneDNN implementation (for TESSERA_ONEDNN_VERBOSE).
  std::string describe() const;

 private:
  friend class PlanBuilder;
  Plan() = default;

  struct Step {
    dnnl::primitive primitive;
    std::unordered_map<int, dnnl::memory> args;
    std::string label, impl;
    int threads = 1;
  };
  int threads_ = 1;
  dnnl::stream stream_;
  std::vector<Step> steps_;
  std::vector<std::vector<dnnl::memory>> input_memories_, output_memories_;  // per slot
  std::vector<Dims> output_dims_;
  std::vector<dnnl::memory> constants_;  // weights and other prepared constants
  void* arena_ = nullptr;
  size_t arena_bytes_ = 0;
};

}  // namespace tessera::onednn
