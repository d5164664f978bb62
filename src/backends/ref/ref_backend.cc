// The reference kernels as a Backend: one node per kernel, every op with a reference kernel.
#include "backends/backend.h"

namespace tessera {
namespace {

class RefNodeKernel final : public Kernel {
 public:
  RefNodeKernel(const SubGraph& sg, const RefKernelFn* fn) : node_(&sg.graph().node(sg.nodes().first())), fn_(fn) {
    const Graph& g = sg.graph();
    for (int v : node_->inputs) {
      Source src;
      if (v != kNoValue) {
        for (size_t i = 0; i < sg.inputs().size(); ++i)
          if (sg.inputs()[i] == v) src.slot = static_cast<int>(i);
        if (src.slot < 0) src.constant = &*g.value(v).constant;
      }
      sources_.push_back(src);
    }
    for (int v : sg.outputs())
      for (size_t o = 0; o < node_->outputs.size(); ++o)
        if (node_->outputs[o] == v) output_index_.push_back(static_cast<int>(o));
  }

  Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs, KernelRunContext& ctx) override {
    std::vector<const Tensor*> in;
    for (const Source& s : sources_) in.push_back(s.slot >= 0 ? inputs[s.slot] : s.constant);
    RefKernelContext kctx(*node_, std::move(in), ctx.alloc, ctx.pool);
    TESSERA_RETURN_IF_ERROR((*fn_)(kctx));
    outputs.resize(output_index_.size());
    for (size_t i = 0; i < output_index_.size(); ++i) outputs[i] = std::move(kctx.outputs()[output_index_[i]]);
    return Status();
  }

 private:
  struct Source {
    int slot = -1;                    // index into the kernel's inputs
    const Tensor* constant = nullptr;  // or an initializer; both unset for an omitted input
  };
  const Node* node_;
  const RefKernelFn* fn_;
  std::vector<Source> sources_;  // per node input
  std::vector<int> output_index_;  // per kernel output: the node output it is
};

class RefBackend final : public Backend {
 public:
  std::string name() const override { return "ref"; }
  std::string version() const override { return "tessera reference kernels"; }
  Status available() const override { return Status(); }
  FusionStyle fusion_style() const override { return FusionStyle::kNone; }
  Status supports(const Graph& g, int n) const override {
    const Node& node = g.node(n);
    if (!RefKernelTable::global().find(node.domain, node.op_type))
      return unimplemented("no reference kernel for op '" + node.op_type + "'");
    return Status();
  }
  std::vector<std::string> claimed_patterns() const override { return {}; }  // the oracle itself
  Result<std::unique_ptr<Kernel>> compile(const SubGraph& sg, const CompileOptions&) const override {
    TESSERA_RETURN_IF_ERROR(accepts(sg));
    const Node& node = sg.graph().node(sg.nodes().first());
    const RefKernelFn* fn = RefKernelTable::global().find(node.domain, node.op_type);
    if (!fn) return unimplemented(node.describe() + ": no reference kernel");
    return std::unique_ptr<Kernel>(new RefNodeKernel(sg, fn));
  }
};

}  // namespace

const Backend& ref_backend() {
  static const RefBackend b;
  return b;
}

}  // namespace tessera
