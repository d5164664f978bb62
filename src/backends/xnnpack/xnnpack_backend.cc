// The xnnpack backend: Debian's XNNPACK (2022-02) through its subgraph API. A whole tessera
// SubGraph becomes one XNNPACK runtime, NHWC inside when it holds convolutions or pooling, with
// the NCHW <-> NHWC transposes at its boundary inside the kernel. Float32 and static shapes only.
//
// What runs here is the op table (xnnpack_rules*.cc); this file adds the checks every node needs
// (dtypes, static shapes, unused extra outputs), the subgraph layout rule and the claims.
#include <xnnpack.h>

#include "backends/backend.h"
#include "backends/xnnpack/xnnpack_kernel.h"
#include "backends/xnnpack/xnnpack_rules.h"
#include "backends/xnnpack/xnnpack_threads.h"

namespace tessera {
namespace {

using xnnpack::find_rule;
using xnnpack::NodeView;
using xnnpack::OpRule;

Status check_value(const Node& node, const Value& v, const char* role) {
  if (!v.type.is_static())
    return unimplemented(node.describe() + ": dynamic shape of " + role + " '" + v.name + "'");
  if (v.type.rank() > XNN_MAX_TENSOR_DIMS)
    return unimplemented(node.describe() + ": more than 6 dims");
  if (shape_numel(v.type.static_dims()) == 0)
    return unimplemented(node.describe() + ": empty tensor '" + v.name + "'");
  return Status();
}

// Whether the subgraph runs NHWC: some node only runs on NHWC tensors.
bool subgraph_is_nhwc(const SubGraph& sg) {
  for (int n : sg.nodes()) {
    const OpRule* rule = find_rule(sg.graph().node(n));
    if (rule && rule->needs_nhwc(sg.graph().node(n))) return true;
  }
  return false;
}

class XnnpackBackend final : public Backend {
 public:
  std::string name() const override { return "xnnpack"; }
  std::string version() const override { return "XNNPACK 0.0~git20220216 (subgraph API, tessera threads)"; }

  Status available() const override {
    static const xnn_status init = xnn_initialize(nullptr);  // once per process
    if (init != xnn_status_success) {
      return unimplemented(std::string("xnn_initialize failed: ") + xnnpack::xnn_status_name(init));
    }
    if (!xnnpack::xnnpack_uses_tessera_threads()) {
      return unimplemented("XNNPACK would run on libpthreadpool's threads, not tessera's: link the program "
                           "with libXNNPACK so that it exports its pthreadpool functions");
    }
    return Status();
  }

  FusionStyle fusion_style() const override { return FusionStyle::kArbitrary; }
  // One XNNPACK runtime holds a whole network; every cut costs a layout round trip (NHWC -> NCHW
  // -> NHWC) at the boundary, so groups may be as deep as models are.
  int max_fusion_depth() const override { return 1024; }

  Status supports(const Graph& g, int n) const override {
    const Node& node = g.node(n);
    const OpRule* rule = find_rule(node);
    if (!rule) return unimplemented("op '" + node.op_type + "' has no XNNPACK mapping");
    if (node.outputs.empty() || node.outputs[0] == kNoValue)
      return unimplemented(node.describe() + ": no output");
    const Value& out = g.value(node.outputs[0]);
    TESSERA_RETURN_IF_ERROR(check_value(node, out, "output"));
    if (out.type.dtype != DType::kFloat32)
      return unimplemented(node.describe() + ": output is not float32");
    for (size_t o = 1; o < node.outputs.size(); ++o) {
      const int v = node.outputs[o];
      if (v != kNoValue && (!g.value(v).consumers.empty() || g.value(v).is_graph_output)) {
        return unimplemented(node.describe() + ": output " + std::to_string(o) + " is used");
      }
    }
    for (int v : node.inputs) {
      if (v == kNoValue || g.value(v).constant)
        continue;  // constants: the op's check looks at them
      TESSERA_RETURN_IF_ERROR(check_value(node, g.value(v), "input"));
      if (g.value(v).type.dtype != DType::kFloat32)
        return unimplemented(node.describe() + ": input is not float32");
    }
    return rule->check(NodeView{g, node});
  }

  // Any group of supported nodes, as long as each node runs in the group's layout.
  Status accepts(const SubGraph& sg) const override {
    if (sg.size() == 0) return invalid_argument("empty subgraph");
    const bool nhwc = subgraph_is_nhwc(sg);
    for (int n : sg.nodes()) {
      const Node& node = sg.graph().node(n);
      const OpRule* rule = find_rule(node);
      if (!rule) return unimplemented("op '" + node.op_type + "' has no XNNPACK mapping");
      if (rule->check_layout)
        TESSERA_RETURN_IF_ERROR(rule->check_layout(NodeView{sg.graph(), node}, nhwc));
    }
    return Status();
  }

  std::vector<std::string> claimed_patterns() const override {
    return {
        // single ops
        "Conv", "ConvTranspose", "MatMul", "Gemm", "MaxPool", "AveragePool", "GlobalAveragePool",
        "GlobalMaxPool", "BatchNormalization", "Softmax", "Concat", "Resize", "Relu", "Clip",
        "HardSigmoid", "HardSwish", "Sigmoid", "LeakyRelu", "Elu", "Sqrt", "Abs", "Neg", "Add",
        "Sub", "Mul", "Div", "Max", "Min", "PRelu",
        // chains: Relu / Clip fuse into the producer's output range; the rest run in one runtime
        "Conv+Relu", "Conv+Clip", "Conv+HardSwish", "Conv+HardSigmoid", "Conv+Sigmoid", "Conv+Add",
        "Conv+Add+Relu", "Conv+Mul", "ConvTranspose+Relu", "MatMul+Add", "Gemm+Relu",
        "MaxPool+Relu", "GlobalAveragePool+HardSigmoid", "BatchNormalization+Relu", "Add+Relu",
        "Mul+Add"};
  }

  Result<std::unique_ptr<Kernel>> compile(const SubGraph& sg,
                                          const CompileOptions& opts) const override {
    TESSERA_RETURN_IF_ERROR(available());
    for (int n : sg.nodes()) TESSERA_RETURN_IF_ERROR(supports(sg.graph(), n));
    TESSERA_RETURN_IF_ERROR(accepts(sg));
    const bool nhwc = subgraph_is_nhwc(sg);
    return xnnpack::XnnpackKernel::create(sg, nhwc, opts.threads,
                                          nhwc && opts.layout == TensorLayout::kChannelsLast);
  }
  // A subgraph that runs NHWC inside takes channels-last tensors as they are.
  bool takes_channels_last(const SubGraph& sg) const override { return subgraph_is_nhwc(sg); }
};

}  // namespace

const Backend& xnnpack_backend() {
  static const XnnpackBackend b;
  return b;
}

}  // namespace tessera
