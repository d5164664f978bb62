#include "backends/kernel_io.h"

#include <algorithm>

namespace tessera {

Result<ValueSource> source_of(const SubGraph& sg, int v) {
  ValueSource s;
  const Value& val = sg.graph().value(v);
  if (!val.type.is_static()) return unimplemented("dynamic shape");
  s.dims = val.type.static_dims();
  if (val.constant) {
    s.constant = &*val.constant;
    return s;
  }
  for (size_t i = 0; i < sg.inputs().size(); ++i)
    if (sg.inputs()[i] == v) s.slot = static_cast<int>(i);
  if (s.slot < 0)
    return internal_error("value '" + val.name + "' is neither an input nor a constant");
  return s;
}

Result<const Tensor*> resolve_tensor(const ValueSource& s, DType dtype, const std::vector<const Tensor*>& inputs) {
  const Tensor* t =
      s.constant ? s.constant
                 : (s.slot >= 0 && s.slot < static_cast<int>(inputs.size()) ? inputs[s.slot] : nullptr);
  if (!t || t->dtype() != dtype || t->dims() != s.dims) {
    return invalid_argument("input " + (t ? t->describe() : std::string("missing")) + " differs from the compiled " +
                            dtype_name(dtype) + "[" + dims_to_string(s.dims) + "]");
  }
  return t;
}

Result<const float*> resolve_float(const ValueSource& s, const std::vector<const Tensor*>& inputs) {
  TESSERA_ASSIGN_OR_RETURN(const Tensor* t, resolve_tensor(s, DType::kFloat32, inputs));
  return t->data<float>();
}

Status check_float_value(const Graph& g, int v) {
  if (v == kNoValue) return invalid_argument("missing operand");
  const Value& val = g.value(v);
  if (!val.type.is_static()) return unimplemented("dynamic shape");
  if (val.type.dtype != DType::kFloat32)
    return unimplemented(std::string("dtype ") + dtype_name(val.type.dtype));
  if (shape_numel(val.type.static_dims()) == 0) return unimplemented("empty tensor");
  return Status();
}

Result<MatMulLayout> matmul_layout(std::vector<int64_t> a, std::vector<int64_t> b) {
  if (a.empty() || b.empty()) return invalid_argument("MatMul operands must have rank >= 1");
  if (a.size() == 1) a.insert(a.begin(), 1);
  if (b.size() == 1) b.push_back(1);
  MatMulLayout l;
  l.m = a[a.size() - 2];
  l.k = a.back();
  l.n = b.back();
  if (b[b.size() - 2] != l.k) return invalid_argument("MatMul inner dims differ");
  const std::vector<int64_t> ab(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  const size_t rank = std::max(ab.size(), bb.size());
  std::vector<int64_t> batch(rank), as(rank, 0), bs(rank, 0);
  int64_t a_stride = l.m * l.k, b_stride = l.k * l.n;
  for (size_t i = 0; i < rank; ++i) {
    const size_t d = rank - 1 - i;  // right-aligned
    const int64_t da = i < ab.size() ? ab[ab.size() - 1 - i] : 1;
    const int64_t db = i < bb.size() ? bb[bb.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1)
      return invalid_argument("MatMul batch dims do not broadcast");
    batch[d] = std::max(da, db);
    if (da != 1) as[d] = a_stride;
    if (db != 1) bs[d] = b_stride;
    a_stride *= da;
    b_stride *= db;
  }
  const int64_t batches = shape_numel(batch);
  std::vector<int64_t> idx(rank, 0);
  for (int64_t i = 0; i < batches; ++i) {
    int64_t ao = 0, bo = 0;
    for (size_t d = 0; d < rank; ++d) {
      ao += idx[d] * as[d];
      bo += idx[d] * bs[d];
    }
    l.a_offsets.push_back(ao);
    l.b_offsets.push_back(bo);
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < batch[d]) break;
      idx[d] = 0;
    }
  }
  return l;
}

}  // namespace tessera
