#include "runtime/session.h"

#include "ops/op_registry.h"
#include "runtime/constant_folding.h"

namespace tessera {

namespace {
// Fixes the dims of the named graph inputs and re-infers the types of every value.
Status specialize_input_shapes(Graph& g, const std::map<std::string, std::vector<int64_t>>& shapes) {
  for (const auto& [name, dims] : shapes) {
    auto id = g.find_value(name);
    if (!id || !g.value(*id).is_graph_input) return invalid_argument("the model has no input named '" + name + "'");
    TensorType& t = g.value(*id).type;
    bool fits = !t.shape || t.shape->size() == dims.size();
    for (size_t i = 0; fits && t.shape && i < dims.size(); ++i) fits = !(*t.shape)[i].known() || (*t.shape)[i].value == dims[i];
    if (!fits) return invalid_argument("input '" + name + "' of type " + t.to_string() + " cannot have shape " + dims_to_string(dims));
    t.shape = std::vector<Dim>(dims.begin(), dims.end());
  }
  return infer_graph_types(g).with_context("inferring types for the given input shapes");
}
}  // namespace

Result<std::unique_ptr<Session>> Session::load(const std::string& model_path, const SessionOptions& opts) {
  TESSERA_ASSIGN_OR_RETURN(Graph g, import_onnx_file(model_path, opts.import));
  const auto& shapes = opts.input_shapes.empty() && opts.plan ? opts.plan->input_shapes : opts.input_shapes;
  if (!shapes.empty()) TESSERA_RETURN_IF_ERROR(specialize_input_shapes(g, shapes));
  // Shape computations over now-known dims become constants, so the dims after them are known.
  TESSERA_RETURN_IF_ERROR(fold_constants(g).status().with_context("folding constants"));
  return from_graph(std::move(g), opts);
}

Result<std::unique_ptr<Session>> Session::from_graph(Graph graph, const SessionOptions& opts) {
  std::unique_ptr<Session> s(new Session());
  s->graph_ = std::make_unique<Graph>(std::move(graph));
  s->pool_ = std::make_unique<ThreadPool>(opts.threads);
  s->backend_ = opts.backend;
  s->plan_ = opts.plan;
  if (s->plan_ && !s->backend_.empty() && s->backend_ != "ref")
    return invalid_argument("give either a plan or a backend, not both");
  s->layout_ = opts.layout;
  if (s->plan_) {
    TESSERA_ASSIGN_OR_RETURN(s->layout_, parse_layout(s->plan_->layout));
  }
  TESSERA_RETURN_IF_ERROR(s->compile());
  return s;
}

Status Session::compile() {
  std::vector<Partition> parts;
  if (plan_) {
    TESSERA_ASSIGN_OR_RETURN(parts, place_by_plan(*graph_, *plan_));
  } else if (!backend_.empty() && backend_ != "ref") {
    const Backend* b = find_backend(backend_);
    if (!b) return invalid_argument("unknown backend '" + backend_ + "' (this build has: " + backend_names() + ")");
    if (Status st = b->available(); !st.ok()) return Status(st.code(), "backend '" + backend_ + "' is not available: " + st.message());
    TESSERA_ASSIGN_OR_RETURN(parts, place_on_backend(*graph_, *b));
  }
  CompileOptions copts;
  copts.threads = pool_->num_threads();
  copts.layout = layout_;
  TESSERA_ASSIGN_OR_RETURN(GraphExecutor e, GraphExecutor::create(*graph_, parts, copts));
  executor_.emplace(std::move(e));
  return Status();
}

Status Session::set_threads(int n) {
  pool_ = std::make_unique<ThreadPool>(n);
  return compile();
}

std::vector<std::pair<std::string, TensorType>> Session::input_types() const {
  std::vector<std::pair<std::string, TensorType>> v;
  for (int id : graph_->inputs()) v.emplace_back(graph_->value(id).name, graph_->value(id).type);
  return v;
}

std::vector<std::pair<std::string, TensorType>> Session::output_types() const {
  std::vector<std::pair<std::string, TensorType>> v;
  for (int id : graph_->outputs()) v.emplace_back(graph_->value(id).name, graph_->value(id).type);
  return v;
}

namespace {
Status check_input(const Value& v, const Tensor& t) {
  if (v.type.dtype != DType::kUndefined && v.type.dtype != t.dtype()) {
    return invalid_argument("input '" + v.name + "' must be " + dtype_name(v.type.dtype) + ", got " +
                            dtype_name(t.dtype()));
  }
  if (!v.type.shape) return Status();
  const auto& dims = *v.type.shape;
  if (static_cast<int>(dims.size()) != t.rank()) {
    return invalid_argument("input '" + v.name + "' must have rank " + std::to_string(dims.size()) + ", got " +
                            t.describe());
  }
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i].known() && dims[i].value != t.dims()[i]) {
      return invalid_argument("input '" + v.name + "' must have shape " + v.type.to_string() + ", got " +
                              t.describe());
    }
  }
  return Status();
}
}  // namespace

Result<std::map<std::string, Tensor>> Session::run(const std::map<std::string, Tensor>& inputs) {
  const Graph& g = *graph_;
  std::vector<Tensor> ordered(g.inputs().size());
  for (const auto& [name, t] : inputs) {
    auto id = g.find_value(name);
    if (!id || !g.value(*id).is_graph_input) return invalid_argument("the model has no input named '" + name + "'");
    TESSERA_RETURN_IF_ERROR(check_input(g.value(*id), t));
    for (size_t i = 0; i < g.inputs().size(); ++i)
      if (g.inputs()[i] == *id) ordered[i] = t;
  }
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    if (!ordered[i].defined()) return invalid_argument("missing input '" + g.value(g.inputs()[i]).name + "'");
  }
  buffers_.reset_peak();
  const bool profile = stats_.profile;
  stats_ = RunStats();
  stats_.profile = profile;
  TESSERA_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, executor_->run(ordered, {}, buffers_, pool_.get(), stats_));
  std::map<std::string, Tensor> out;
  for (size_t i = 0; i < outputs.size(); ++i) {
    buffers_.detach(outputs[i]);
    out[g.value(g.outputs()[i]).name] = std::move(outputs[i]);
  }
  stats_.peak_bytes = buffers_.peak_bytes();
  stats_.reserved_bytes = buffers_.reserved_bytes();
  return out;
}

}  // namespace tessera
