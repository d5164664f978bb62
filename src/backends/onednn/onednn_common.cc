#include "backends/onednn/onednn_common.h"

#include <omp.h>

namespace tessera::onednn {

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

void set_threads(int threads) { omp_set_num_threads(threads < 1 ? 1 : threads); }

memory::desc plain_desc(const Dims& dims) {
  Dims d = dims.empty() ? Dims{1} : dims;
  Dims strides(d.size(), 1);
  for (int i = static_cast<int>(d.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * std::max<int64_t>(1, d[i + 1]);
  return memory::desc(memory::dims(d.begin(), d.end()), memory::data_type::f32,
                      memory::dims(strides.begin(), strides.end()));
}

memory::desc strided_desc(const Dims& dims, const Dims& strides) {
  return memory::desc(memory::dims(dims.begin(), dims.end()), memory::data_type::f32,
                      memory::dims(strides.begin(), strides.end()));
}

memory::desc channels_last_desc(const Dims& dims) {
  if (dims.size() < 3) return plain_desc(dims);
  Dims strides(dims.size());
  int64_t s = std::max<int64_t>(1, dims[1]);
  strides[1] = 1;
  for (size_t i = dims.size(); i-- > 2;) {
    strides[i] = s;
    s *= std::max<int64_t>(1, dims[i]);
  }
  strides[0] = s;
  return strided_desc(dims, strides);
}

bool is_plain(const memory::desc& md) { return md == plain_desc(dims_of(md)); }

Dims dims_of(const memory::desc& md) {
  memory::dims d = md.dims();
  return Dims(d.begin(), d.end());
}

bool is_reference_impl(const dnnl::primitive_desc_base& pd) {
  return std::string(pd.impl_info_str()).rfind("ref", 0) == 0;
}

bool constant_scalar(const Graph& g, int v, double* out) {
  if (v < 0) return false;
  const Value& val = g.value(v);
  if (!val.constant || val.constant->numel() != 1 ||
      !(dtype_is_float(val.constant->dtype()) || dtype_is_integer(val.constant->dtype())))
    return false;
  *out = val.constant->as_double(0);
  return true;
}

const Tensor* float_constant(const Graph& g, int v) {
  if (v < 0) return nullptr;
  const Value& val = g.value(v);
  if (!val.constant || val.constant->dtype() != DType::kFloat32) return nullptr;
  return &*val.constant;
}

}  // namespace tessera::onednn
