#include "backends/xnnpack/xnnpack_kernel.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>

#include "backends/xnnpack/xnnpack_threads.h"
#include "backends/xnnpack/xnnpack_transpose.h"

namespace tessera::xnnpack {

size_t XnnpackKernel::Port::bytes() const {
  return static_cast<size_t>(shape_numel(dims)) * sizeof(float);
}

float* XnnpackKernel::Port::stage() {
  if (!staging) staging.reset(new float[static_cast<size_t>(shape_numel(dims)) + XNN_EXTRA_BYTES / sizeof(float) + 1]);
  return staging.get();
}

Result<std::unique_ptr<Kernel>> XnnpackKernel::create(const SubGraph& sg, bool nhwc, int threads,
                                                      bool channels_last_io) {
  std::unique_ptr<XnnpackKernel> k(new XnnpackKernel());
  const Graph& g = sg.graph();
  if (threads > 1) {
    k->pool_ = pthreadpool_create(static_cast<size_t>(threads));
    if (!k->pool_)
      return internal_error("pthreadpool_create(" + std::to_string(threads) + ") failed");
  }
  const size_t num_external = sg.inputs().size() + sg.outputs().size();
  xnn_subgraph_t subgraph = nullptr;
  xnn_status st = xnn_create_subgraph(static_cast<uint32_t>(num_external), 0, &subgraph);
  if (st != xnn_status_success)
    return internal_error(std::string("xnn_create_subgraph: ") + xnn_status_name(st));
  Emitter emitter(sg, nhwc, subgraph, k->statics_);
  Status built = emitter.emit_all();
  if (built.ok()) {
    st = xnn_create_runtime_v2(subgraph, k->pool_, 0, &k->runtime_);
    if (st != xnn_status_success) {
      built = unimplemented(sg.label() + ": xnn_create_runtime_v2 failed: " + xnn_status_name(st));
    }
  }
  xnn_delete_subgraph(subgraph);  // the runtime does not need it
  TESSERA_RETURN_IF_ERROR(built);
  for (size_t i = 0; i < num_external; ++i) {
    const bool is_input = i < sg.inputs().size();
    const int v = is_input ? sg.inputs()[i] : sg.outputs()[i - sg.inputs().size()];
    Port p;
    p.dims = g.value(v).type.static_dims();
    // A 4-D value whose NHWC data is its NCHW data (C == 1 or H * W == 1) needs no transpose.
    p.nhwc = emitter.is_nhwc(v) && !nhwc_is_plain(p.dims);
    if (channels_last_io && emitter.is_nhwc(v)) {  // the tensor is NHWC already
      p.nhwc = false;
      p.dims = channels_last_dims(p.dims);
    }
    for (int c : g.value(v).consumers)
      p.read_inside = p.read_inside || (!is_input && sg.nodes().contains(c));
    (is_input ? k->inputs_ : k->outputs_).push_back(std::move(p));
  }
  return std::unique_ptr<Kernel>(std::move(k));
}

XnnpackKernel::~XnnpackKernel() {
  if (runtime_) xnn_delete_runtime(runtime_);
  pthreadpool_destroy(pool_);
}

Status XnnpackKernel::bind(const std::vector<xnn_external_value>& values) {
  const bool same =
      values.size() == bound_.size() &&
      std::equal(values.begin(), values.end(), bound_.begin(),
                 [](const auto& a, const auto& b) { return a.id == b.id && a.data == b.data; });
  if (same) return Status();
  xnn_status st = xnn_setup_runtime(runtime_, values.size(), values.data());
  if (st != xnn_status_success) {
    bound_.clear();
    return internal_error(std::string("xnn_setup_runtime: ") + xnn_status_name(st));
  }
  bound_ = values;
  return Status();
}

Status XnnpackKernel::run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs,
                          KernelRunContext& ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  bind_thread_pool(pool_, ctx.pool);
  if (inputs.size() != inputs_.size())
    return invalid_argument("xnnpack kernel: wrong number of inputs");
  std::vector<xnn_external_value> values;
  for (size_t i = 0; i < inputs_.size(); ++i) {
    Port& p = inputs_[i];
    const Tensor* t = inputs[i];
    if (!t || t->dtype() != DType::kFloat32 || t->dims() != p.dims) {
      return invalid_argument("xnnpack kernel: input " + std::to_string(i) + " is " +
                              (t ? t->describe() : "missing") + ", compiled for float32[" +
                              dims_to_string(p.dims) + "]");
    }
    void* data = const_cast<void*>(t->raw_data());  // XNNPACK only reads its inputs
    if (p.nhwc) {
      data = p.stage();
      transpose_batched(t->data<float>(), p.stage(), p.dims[0], p.dims[1], p.dims[2] * p.dims[3],
                        pool_);
    } else if (t->storage()->capacity() < p.bytes() + XNN_EXTRA_BYTES) {
      data = p.stage();
      std::memcpy(data, t->raw_data(), p.bytes());
    }
    values.push_back({static_cast<uint32_t>(i), data});
  }
  outputs.resize(outputs_.size());
  std::vector<bool> direct(outputs_.size());
  for (size_t o = 0; o < outputs_.size(); ++o) {
    Port& p = outputs_[o];
    outputs[o] = ctx.alloc.allocate_uninitialized(DType::kFloat32, p.dims);  // written whole below
    // An output that later nodes read must have the slack of an input.
    direct[o] = !p.nhwc &&
                (!p.read_inside || outputs[o].storage()->capacity() >= p.bytes() + XNN_EXTRA_BYTES);
    values.push_back(
        {static_cast<uint32_t>(inputs_.size() + o), direct[o] ? outputs[o].raw_data() : p.stage()});
  }
  TESSERA_RETURN_IF_ERROR(bind(values));
  xnn_status st = xnn_invoke_runtime(runtime_);
  if (st != xnn_status_success)
    return internal_error(std::string("xnn_invoke_runtime: ") + xnn_status_name(st));
  for (size_t o = 0; o < outputs_.size(); ++o) {
    Port& p = outputs_[o];
    if (p.nhwc) {
      transpose_batched(p.stage(), outputs[o].data<float>(), p.dims[0], p.dims[2] * p.dims[3],
                        p.dims[1], pool_);
    } else if (!direct[o]) {
      std::memcpy(outputs[o].raw_data(), p.stage(), p.bytes());
    }
  }
  return Status();
}

}  // namespace tessera::xnnpack
