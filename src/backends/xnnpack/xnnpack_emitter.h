// Emitter: turns one tessera SubGraph into one XNNPACK subgraph (xnn_subgraph_t).
//
// Subgraph inputs and outputs become external XNNPACK values (ids 0..inputs-1, then outputs), in
// the subgraph's layout (NHWC for 4-D values of an NHWC subgraph); the kernel converts at the
// boundary. Weights and other constants are repacked into buffers owned by a StaticStore, which
// must outlive every runtime created from the subgraph (XNNPACK keeps pointers to static data).
#pragma once

#include <xnnpack.h>

#include <deque>
#include <map>
#include <vector>

#include "backends/xnnpack/xnnpack_fusion.h"
#include "backends/xnnpack/xnnpack_rules.h"
#include "ir/subgraph.h"

namespace tessera::xnnpack {

// Buffers of static tensor data, each with XNN_EXTRA_BYTES of readable padding.
class StaticStore {
 public:
  float* allocate(size_t count);

 private:
  std::deque<std::vector<float>> buffers_;  // deque: buffers never move
};

// Why an XNNPACK call failed, in words.
const char* xnn_status_name(xnn_status st);

class Emitter {
 public:
  // Plans the folds (FusionPlan); defines nothing yet.
  Emitter(const SubGraph& sg, bool nhwc, xnn_subgraph_t subgraph, StaticStore& store);

  // Defines the external values and emits every node of the subgraph in order.
  Status emit_all();

  const Graph& graph() const { return sg_.graph(); }
  xnn_subgraph_t subgraph() const { return subgraph_; }
  bool nhwc_subgraph() const { return nhwc_; }
  // Whether value v is stored NHWC inside the subgraph.
  bool is_nhwc(int v) const { return nhwc_ && graph().value(v).type.rank() == 4; }
  std::vector<int64_t> dims(int v) const { return graph().value(v).type.static_dims(); }
  // The dims XNNPACK sees for value v ([1] for a scalar).
  std::vector<size_t> layout_dims(int v) const;

  // The XNNPACK value of non-constant value v: a subgraph input or an output emitted before.
  Result<uint32_t> value(int v);
  // The XNNPACK value node n writes its output o to (the last folded node's output if any).
  Result<uint32_t> output(const Node& n, int o = 0);
  // The clamp range of node n's output from a folded Relu/Clip; (-inf, inf) when none.
  Range range(const Node& n) const { return plan_.range(index_of(n)); }
  // The per-channel affine tail folded into node n's weights, or nullptr.
  const Affine* affine(const Node& n) const { return plan_.affine(index_of(n)); }
  // The per-channel affine head folded into node n's input, or nullptr; node n then reads
  // input_value(n) instead of its input 0.
  const Affine* input_affine(const Node& n) const { return plan_.input_affine(index_of(n)); }
  int input_value(const Node& n) const { return plan_.input_value(index_of(n)); }
  // Operand v of a broadcasting op whose output has rank out_rank, in that output's layout:
  // constants are expanded to out_rank and permuted at compile time; a lower-rank computed
  // operand of an NHWC output is reshaped (the checks allow only reshapes that keep the data).
  Result<uint32_t> operand(int v, int out_rank);
  // A static tensor with the given dims and data (copied into the store).
  Result<uint32_t> constant(const std::vector<size_t>& dims, const std::vector<float>& data);
  // A per-channel constant (values[c] along dim 1) broadcasting against a value of rank `rank`
  // in its layout: [1, C, 1, ...] plain, [1, 1, 1, C] NHWC.
  Result<uint32_t> channel_constant(const std::vector<float>& values, int rank, bool nhwc);
  // A new internal value.
  Result<uint32_t> internal(const std::vector<size_t>& dims);
  // ok, or an error naming node n and the call.
  Status check(xnn_status st, const Node& n, const char* call) const;

 private:
  Status define_external();
  int index_of(const Node& n) const { return static_cast<int>(&n - graph().nodes().data()); }

  const SubGraph& sg_;
  bool nhwc_;
  xnn_subgraph_t subgraph_;
  StaticStore& store_;
  FusionPlan plan_;
  std::map<int, uint32_t> ids_;  // graph value -> XNNPACK value
};

}  // namespace tessera::xnnpack
