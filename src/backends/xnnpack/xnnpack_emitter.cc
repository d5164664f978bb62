#include "backends/backend.h"
#include "backends/xnnpack/xnnpack_emitter.h"

#include <algorithm>
#include <cstring>

namespace tessera::xnnpack {

float* StaticStore::allocate(size_t count) {
  // XNNPACK may read XNN_EXTRA_BYTES past the end of any tensor it reads.
  const size_t pad = (XNN_EXTRA_BYTES + sizeof(float) - 1) / sizeof(float);
  buffers_.emplace_back(count + pad, 0.0f);
  return buffers_.back().data();
}

const char* xnn_status_name(xnn_status st) {
  switch (st) {
    case xnn_status_success: return "success";
    case xnn_status_uninitialized: return "XNNPACK is not initialized";
    case xnn_status_invalid_parameter: return "invalid parameter";
    case xnn_status_invalid_state: return "invalid state";
    case xnn_status_unsupported_parameter: return "unsupported parameter";
    case xnn_status_unsupported_hardware: return "unsupported hardware";
    case xnn_status_out_of_memory: return "out of memory";
  }
  return "unknown status";
}

namespace {

std::vector<size_t> to_sizes(const std::vector<int64_t>& d) {
  std::vector<size_t> s(d.begin(), d.end());
  if (s.empty()) s.push_back(1);  // XNNPACK sees a scalar as a 1-element vector
  return s;
}

// dims with leading 1s up to `rank`.
std::vector<int64_t> expand_rank(const std::vector<int64_t>& d, int rank) {
  std::vector<int64_t> e(static_cast<size_t>(rank) - d.size(), 1);
  e.insert(e.end(), d.begin(), d.end());
  return e;
}

// NCHW data of dims d to NHWC.
std::vector<float> nchw_to_nhwc(const float* src, const std::vector<int64_t>& d) {
  const int64_t n = d[0], c = d[1], hw = d[2] * d[3];
  std::vector<float> dst(static_cast<size_t>(n * c * hw));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < hw; ++p) dst[(b * hw + p) * c + ch] = src[(b * c + ch) * hw + p];
  return dst;
}

}  // namespace

Emitter::Emitter(const SubGraph& sg, bool nhwc, xnn_subgraph_t subgraph, StaticStore& store)
    : sg_(sg), nhwc_(nhwc), subgraph_(subgraph), store_(store), plan_(sg) {}

std::vector<size_t> Emitter::layout_dims(int v) const {
  std::vector<int64_t> d = dims(v);
  return to_sizes(is_nhwc(v) ? channels_last_dims(d) : d);
}

Status Emitter::define_external() {
  const auto& ins = sg_.inputs();
  const auto& outs = sg_.outputs();
  for (size_t k = 0; k < ins.size() + outs.size(); ++k) {
    const bool is_input = k < ins.size();
    const int v = is_input ? ins[k] : outs[k - ins.size()];
    std::vector<size_t> d = layout_dims(v);
    uint32_t id = 0;
    xnn_status st = xnn_define_tensor_value(
        subgraph_, xnn_datatype_fp32, d.size(), d.data(), nullptr, static_cast<uint32_t>(k),
        is_input ? XNN_VALUE_FLAG_EXTERNAL_INPUT : XNN_VALUE_FLAG_EXTERNAL_OUTPUT, &id);
    if (st != xnn_status_success) {
      return internal_error("xnn_define_tensor_value for '" + graph().value(v).name +
                            "': " + xnn_status_name(st));
    }
    ids_[v] = id;
  }
  return Status();
}

Status Emitter::emit_all() {
  TESSERA_RETURN_IF_ERROR(define_external());
  for (int n : sg_.nodes()) {
    if (plan_.absorbed(n)) continue;
    const Node& node = graph().node(n);
    if (const int x = plan_.hardswish_input(n); x >= 0) {  // a written-out HardSwish
      TESSERA_ASSIGN_OR_RETURN(uint32_t in, value(x));
      TESSERA_ASSIGN_OR_RETURN(uint32_t out, output(node));
      TESSERA_RETURN_IF_ERROR(
          check(xnn_define_hardswish(subgraph_, in, out, 0), node, "xnn_define_hardswish"));
      continue;
    }
    const OpRule* rule = find_rule(node);
    if (!rule) return unimplemented(node.describe() + ": not an XNNPACK op");
    TESSERA_RETURN_IF_ERROR(rule->emit(*this, node));
  }
  return Status();
}

Result<uint32_t> Emitter::value(int v) {
  auto it = ids_.find(v);
  if (it == ids_.end())
    return internal_error("XNNPACK subgraph: value '" + graph().value(v).name +
                          "' used before defined");
  return it->second;
}

Result<uint32_t> Emitter::output(const Node& n, int o) {
  const int v = o == 0 ? plan_.final_value(index_of(n)) : n.outputs[o];
  auto it = ids_.find(v);
  if (it != ids_.end()) return it->second;  // a subgraph output
  TESSERA_ASSIGN_OR_RETURN(uint32_t id, internal(layout_dims(v)));
  ids_[v] = id;
  return id;
}

Result<uint32_t> Emitter::operand(int v, int out_rank) {
  const Value& val = graph().value(v);
  const bool out_nhwc = nhwc_ && out_rank == 4;
  if (val.constant) {
    const Tensor& t = *val.constant;
    if (t.dtype() != DType::kFloat32)
      return unimplemented("constant '" + val.name + "' is not float32");
    std::vector<int64_t> e = expand_rank(t.dims(), out_rank);
    std::vector<float> data(t.data<float>(), t.data<float>() + t.numel());
    if (out_nhwc) {
      data = nchw_to_nhwc(data.data(), e);
      e = channels_last_dims(e);
    }
    return constant(to_sizes(e), data);
  }
  TESSERA_ASSIGN_OR_RETURN(uint32_t id, value(v));
  if (val.type.rank() == out_rank || !out_nhwc) return id;  // XNNPACK broadcasts lower ranks itself
  // A lower-rank operand of an NHWC result: the same data, viewed in NHWC order.
  std::vector<size_t> d = to_sizes(channels_last_dims(expand_rank(dims(v), out_rank)));
  TESSERA_ASSIGN_OR_RETURN(uint32_t out, internal(d));
  xnn_status st = xnn_define_static_reshape(subgraph_, d.size(), d.data(), id, out, 0);
  if (st != xnn_status_success)
    return internal_error(std::string("xnn_define_static_reshape: ") + xnn_status_name(st));
  return out;
}

Result<uint32_t> Emitter::constant(const std::vector<size_t>& dims,
                                   const std::vector<float>& data) {
  size_t count = 1;
  for (size_t d : dims) count *= d;
  if (data.size() != count)
    return internal_error("XNNPACK constant: data size does not match its dims");
  float* p = store_.allocate(count);
  std::memcpy(p, data.data(), count * sizeof(float));
  uint32_t id = 0;
  xnn_status st = xnn_define_tensor_value(subgraph_, xnn_datatype_fp32, dims.size(), dims.data(), p,
                                          XNN_INVALID_VALUE_ID, 0, &id);
  if (st != xnn_status_success)
    return internal_error(std::string("xnn_define_tensor_value: ") + xnn_status_name(st));
  return id;
}

Result<uint32_t> Emitter::channel_constant(const std::vector<float>& values, int rank, bool nhwc) {
  std::vector<size_t> d(static_cast<size_t>(rank), 1);
  d[nhwc && rank == 4 ? 3 : 1] = values.size();
  return constant(d, values);
}

Result<uint32_t> Emitter::internal(const std::vector<size_t>& dims) {
  uint32_t id = 0;
  xnn_status st = xnn_define_tensor_value(subgraph_, xnn_datatype_fp32, dims.size(), dims.data(),
                                          nullptr, XNN_INVALID_VALUE_ID, 0, &id);
  if (st != xnn_status_success)
    return internal_error(std::string("xnn_define_tensor_value: ") + xnn_status_name(st));
  return id;
}

Status Emitter::check(xnn_status st, const Node& n, const char* call) const {
  if (st == xnn_status_success) return Status();
  return unimplemented(n.describe() + ": " + call + " failed: " + xnn_status_name(st));
}

}  // namespace tessera::xnnpack
