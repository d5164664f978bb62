#include "runtime/session.h"

#include "backends/ref/ref_kernel.h"

namespace tessera {

Result<std::unique_ptr<Session>> Session::load(const std::string& model_path, const SessionOptions& opts) {
  TESSERA_ASSIGN_OR_RETURN(Graph g, import_onnx_file(model_path, opts.import));
  return from_graph(std::move(g), opts);
}

Result<std::unique_ptr<Session>> Session::from_graph(Graph graph, const SessionOptions& opts) {
  std::unique_ptr<Session> s(new Session());
  s->graph_ = std::move(graph);
  s->pool_ = std::make_unique<ThreadPool>(opts.threads);
  TESSERA_RETURN_IF_ERROR(s->prepare());
  return s;
}

void Session::set_threads(int n) { pool_ = std::make_unique<ThreadPool>(n); }

Status Session::prepare() {
  const RefKernelTable& table = RefKernelTable::global();
  kernels_.clear();
  for (const Node& n : graph_.nodes()) {
    const RefKernelFn* k = table.find(n.domain, n.op_type);
    if (!k) return unimplemented(n.describe() + ": no kernel for op '" + n.op_type + "'");
    kernels_.push_back(k);
  }
  use_counts_.assign(graph_.num_values(), 0);
  for (const Node& n : graph_.nodes())
    for (int v : n.inputs)
      if (v != kNoValue) ++use_counts_[v];
  return Status();
}

std::vector<std::pair<std::string, TensorType>> Session::input_types() const {
  std::vector<std::pair<std::string, TensorType>> v;
  for (int id : graph_.inputs()) v.emplace_back(graph_.value(id).name, graph_.value(id).type);
  return v;
}

std::vector<std::pair<std::string, TensorType>> Session::output_types() const {
  std::vector<std::pair<std::string, TensorType>> v;
  for (int id : graph_.outputs()) v.emplace_back(graph_.value(id).name, graph_.value(id).type);
  return v;
}

namespace {
Status check_input(const Value& v, const Tensor& t) {
  if (v.type.dtype != DType::kUndefined && v.type.dtype != t.dtype()) {
    return invalid_argument("input '" + v.name + "' must be " + dtype_name(v.type.dtype) + ", got " + dtype_name(t.dtype()));
  }
  if (!v.type.shape) return Status();
  const auto& dims = *v.type.shape;
  if (static_cast<int>(dims.size()) != t.rank()) {
    return invalid_argument("input '" + v.name + "' must have rank " + std::to_string(dims.size()) + ", got " +
                            t.describe());
  }
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i].known() && dims[i].value != t.dims()[i]) {
      return invalid_argument("input '" + v.name + "' must have shape " + v.type.to_string() + ", got " + t.describe());
    }
  }
  return Status();
}
}  // namespace

Result<std::map<std::string, Tensor>> Session::run(const std::map<std::string, Tensor>& inputs) {
  std::vector<Tensor> values(graph_.num_values());
  std::vector<int> remaining = use_counts_;
  for (const auto& [name, t] : inputs) {
    auto id = graph_.find_value(name);
    if (!id || !graph_.value(*id).is_graph_input) return invalid_argument("the model has no input named '" + name + "'");
    TESSERA_RETURN_IF_ERROR(check_input(graph_.value(*id), t));
    values[*id] = t;
  }
  for (int id : graph_.inputs()) {
    if (!values[id].defined()) return invalid_argument("missing input '" + graph_.value(id).name + "'");
  }
  buffers_.reset_peak();
  stats_ = RunStats();

  for (int n = 0; n < graph_.num_nodes(); ++n) {
    const Node& node = graph_.node(n);
    std::vector<const Tensor*> in;
    for (int v : node.inputs) {
      if (v == kNoValue) in.push_back(nullptr);
      else if (graph_.value(v).constant) in.push_back(&*graph_.value(v).constant);
      else in.push_back(&values[v]);
    }
    RefKernelContext ctx(node, std::move(in), buffers_, pool_.get());
    const auto* kernel = static_cast<const RefKernelFn*>(kernels_[n]);
    TESSERA_RETURN_IF_ERROR((*kernel)(ctx));
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      int v = node.outputs[o];
      if (v == kNoValue) continue;
      if (!ctx.outputs()[o].defined()) return internal_error(node.describe() + ": kernel did not produce output " + std::to_string(o));
      values[v] = std::move(ctx.outputs()[o]);
      if (remaining[v] == 0 && !graph_.value(v).is_graph_output) buffers_.release(values[v]);
    }
    // Liveness: a value's buffer returns to the pool after its last consumer.
    for (int v : node.inputs) {
      if (v == kNoValue || graph_.value(v).constant) continue;
      if (--remaining[v] == 0 && !graph_.value(v).is_graph_output && !graph_.value(v).is_graph_input) {
        buffers_.release(values[v]);
      }
    }
    ++stats_.nodes_run;
  }
  std::map<std::string, Tensor> out;
  for (int id : graph_.outputs()) {
    const Value& v = graph_.value(id);
    Tensor t = v.constant ? *v.constant : values[id];
    buffers_.detach(t);
    out[v.name] = t;
  }
  stats_.peak_bytes = buffers_.peak_bytes();
  stats_.reserved_bytes = buffers_.reserved_bytes();
  return out;
}

}  // namespace tessera
