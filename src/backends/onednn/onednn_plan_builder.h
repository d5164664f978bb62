// Internal to the plan: the builder that turns Program units into oneDNN steps. The generic
// part (tensors, layouts, post-op fusion with fallback, memory planning) is in onednn_plan.cc;
// one builder per unit kind is in onednn_plan_ops.cc.
#pragma once

#include <functional>
#include <optional>
#include <utility>

#include "backends/onednn/onednn_plan.h"

namespace tessera::onednn {

using Args = std::vector<std::pair<int, int>>;  // (DNNL_ARG_*, tensor id)

// f32 with the layout left to the primitive (format any).
inline memory::desc any_desc(const Dims& d) {
  return memory::desc(memory::dims(d.begin(), d.end()), memory::data_type::f32,
                      memory::format_tag::any);
}
inline memory::dims mdims(const Dims& d) { return memory::dims(d.begin(), d.end()); }
// d[from] * ... * d[to - 1]
inline int64_t product(const Dims& d, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= d[i];
  return p;
}

class PlanBuilder {
 public:
  // channels_last: the subgraph's rank-4 inputs and outputs are channels-last (CompileOptions).
  PlanBuilder(const SubGraph& sg, int threads, bool channels_last);
  Result<std::unique_ptr<Plan>> build(const Program& prog, const std::vector<Dims>& input_dims,
                                      bool trial);

 private:
  enum class Storage { kArena, kInput, kOutput, kConstant };
  struct TensorInfo {
    Dims dims;
    memory::desc md;
    Storage storage = Storage::kArena;
    int slot = -1;              // kInput / kOutput: the kernel's input or output index
    int root = -1;              // the tensor whose bytes these are (itself unless an alias)
    dnnl::memory constant;      // kConstant roots: the data
    int first = -1, last = -1;  // steps using the root (liveness)
    size_t offset = 0;          // kArena roots
  };

  // An anchor primitive waiting for its destination layout and post-ops.
  struct Anchor {
    std::string label;
    Dims dst_dims;
    std::optional<memory::desc> fixed_dst;  // else oneDNN chooses (format any)
    float output_scale = 1.0f;
    std::function<dnnl::primitive_desc(const memory::desc& dst, const dnnl::primitive_attr& attr)>
        make_pd;
    std::function<Result<Args>(const dnnl::primitive_desc& pd)> bind;  // the anchor's own inputs
    int in_place = -1;  // write into this tensor (its md is the dst md) rather than a new one
    std::optional<EltwiseOp> anchor_eltwise;  // an eltwise anchor's own function
    bool fuse_post_ops = true;  // false where oneDNN's fused post-ops are slow (deconvolution)
  };

  // ---- tensors ----
  int add_tensor(Dims dims, memory::desc md, Storage storage);
  int alias(int t, Dims dims, memory::desc md);
  const Dims& dims(int t) const { return tensors_[t].dims; }
  const memory::desc& md(int t) const { return tensors_[t].md; }
  bool is_constant(int t) const { return tensors_[tensors_[t].root].storage == Storage::kConstant; }
  Result<int> operand_tensor(const Operand& o);
  int constant_tensor(const Tensor& data);
  int zero_tensor(const Dims& dims);
  // t in layout md: itself, or a reordered copy (done now for constants, a step otherwise).
  // want by value: callers pass md() of another tensor, which adding a tensor may move.
  Result<int> to_layout(int t, memory::desc want);
  Result<int> to_plain(int t) { return to_layout(t, plain_desc(dims(t))); }
  // t as plain row-major data with other dims of the same element count.
  Result<int> reshape(int t, const Dims& new_dims);
  void add_step(const dnnl::primitive& p, Args args, std::string label, std::string impl);

  // ---- anchors and post-ops ----
  Result<int> emit(Anchor& a, const std::vector<PostOp>& post_ops);
  // The dst of a primitive whose sum post-op adds `operand` (of graph value `value`, or -1):
  // the operand's own buffer when nothing else reads it, else a copy.
  Result<int> sum_destination(int operand, int value, const memory::desc& dst, const Args& args);
  Result<int> emit_rest(int t, const std::vector<PostOp>& post_ops, size_t from,
                        const std::string& label);
  Result<int> emit_eltwise(int x, const EltwiseOp& op, const std::vector<PostOp>& post_ops,
                           bool in_place, const std::string& label);
  Result<int> emit_binary(int a, int b, algorithm alg, std::vector<PostOp> post_ops,
                          const std::string& label);

  // ---- unit builders (onednn_plan_ops.cc): each returns the tensor of the unit's output ----
  Result<int> build_unit(const Unit& u);
  // Folds the leading per-output-channel affine post-ops (Mul/Add by constants, linear) of a
  // convolution into its constant weights w and bias b; oc_of(i) is the output channel of weight
  // element i. Returns how many post-ops were folded (0 when w or b is not constant).
  Result<size_t> fold_affine(const std::vector<PostOp>& post_ops, const Dims& dst_dims, int& w,
                             int& b, const std::function<int64_t(int64_t)>& oc_of);
  Result<int> build_conv(const Unit& u);
  Result<int> build_deconv(const Unit& u);
  Result<int> build_tiling_deconv(const Unit& u, int x, int w, int b, const Dims& dst,
                                  const std::vector<PostOp>& post_ops);
  Result<int> build_matmul(const Unit& u);
  Result<int> build_gemm(const Unit& u);
  Result<int> build_pool(const Unit& u);
  Result<int> build_softmax(const Unit& u);
  Result<int> build_layer_norm(const Unit& u);
  Result<int> build_concat(const Unit& u);
  Result<int> build_resize(const Unit& u);
  Result<int> build_reduce(const Unit& u);

  // The threads a unit's primitives are created and run with: one for a unit too small to
  // split (see kSerialOutputElements), else the plan's.
  int threads_for(const Unit& u) const;

  // ---- finishing ----
  Status bind_outputs();
  Status plan_memory(Plan& plan);

  const SubGraph& sg_;
  const Graph& g_;
  int threads_;
  bool channels_last_io_;
  // The layout of an input or output tensor of these dims.
  memory::desc io_desc(const Dims& dims) const;
  dnnl::stream build_stream_;
  std::vector<TensorInfo> tensors_;
  std::vector<int> value_tensor_;      // graph value -> tensor as produced
  std::vector<int> last_reader_unit_;  // graph value -> last unit reading it
  std::vector<bool> is_output_value_;  // graph value -> a subgraph output
  int current_unit_ = -1;
  std::vector<std::pair<int, int>> constant_of_value_;  // (value, tensor) for constant operands
  std::vector<std::pair<int, int>> layout_cache_;       // (tensor, converted tensor)
  struct PendingStep {
    dnnl::primitive primitive;
    Args args;
    std::string label, impl;
    int threads = 1;
  };
  std::vector<PendingStep> steps_;
  int unit_threads_ = 1;  // what add_step records: threads_for() of the unit being built

  friend class Plan;
};

}  // namespace tessera::onednn
