#include "onnx/tensor_proto.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

namespace tessera {

Result<DType> dtype_from_onnx(int elem_type) {
  if (elem_type == onnx::TensorProto::COMPLEX64) return unimplemented("dtype complex64 is not supported");
  if (elem_type == onnx::TensorProto::COMPLEX128) return unimplemented("dtype complex128 is not supported");
  DType t = dtype_from_onnx_code(elem_type);
  if (t == DType::kUndefined) return invalid_argument("unknown ONNX element type " + std::to_string(elem_type));
  return t;
}

int dtype_to_onnx(DType t) { return dtype_to_onnx_code(t); }

namespace {

// Tensors above this many elements are refused as absurd (2^40 elements = terabytes).
constexpr int64_t kMaxElements = int64_t{1} << 40;

Result<std::vector<int64_t>> checked_dims(const google::protobuf::RepeatedField<int64_t>& in) {
  std::vector<int64_t> dims;
  int64_t n = 1;
  for (int64_t d : in) {
    if (d < 0) return invalid_argument("negative dimension " + std::to_string(d));
    if (d > 0 && n > kMaxElements / d) return invalid_argument("absurd tensor size (dims overflow)");
    n *= d;
    dims.push_back(d);
  }
  return dims;
}

Result<std::string> read_external(const onnx::TensorProto& p, const std::string& base_dir) {
  std::string location;
  int64_t offset = 0, length = -1;
  // A non-negative decimal integer; anything else (including out-of-range values) fails.
  auto parse_size = [](const std::string& s, int64_t& out) {
    if (s.empty() || s[0] < '0' || s[0] > '9') return false;
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (errno != 0 || *end != '\0') return false;
    out = v;
    return true;
  };
  for (const auto& kv : p.external_data()) {
    if (kv.key() == "location") {
      location = kv.value();
    } else if ((kv.key() == "offset" && !parse_size(kv.value(), offset)) ||
               (kv.key() == "length" && !parse_size(kv.value(), length))) {
      return invalid_argument("external data " + kv.key() + " '" + kv.value() + "' is not a valid size");
    }
  }
  if (location.empty()) return invalid_argument("external data without a location");
  if (base_dir.empty()) return invalid_argument("external data '" + location + "' but no model folder");
  if (location[0] == '/' || location.find("..") != std::string::npos) {
    return invalid_argument("external data location '" + location + "' leaves the model folder");
  }
  if (location.find('\0') != std::string::npos) {
    return invalid_argument("external data location contains a NUL character");
  }
  std::string path = base_dir + "/" + location;
  // Only regular files: a folder opens as a stream whose "size" is absurd.
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return not_found("external data file '" + path + "' cannot be opened");
  }
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return not_found("external data file '" + path + "' cannot be opened");
  int64_t size = static_cast<int64_t>(f.tellg());
  if (offset < 0 || offset > size) return invalid_argument("external data offset beyond the end of '" + path + "'");
  if (length < 0) length = size - offset;
  if (length > size - offset) return invalid_argument("external data of '" + path + "' is truncated");
  std::string bytes(static_cast<size_t>(length), '\0');
  f.seekg(offset);
  f.read(bytes.data(), length);
  if (!f) return io_error("reading external data '" + path + "' failed");
  return bytes;
}

// Copies a typed data field whose size the caller has checked against t.numel().
template <typename T, typename Field>
void copy_field(const Field& field, Tensor& t) {
  T* dst = static_cast<T*>(t.raw_data());
  for (int i = 0; i < field.size(); ++i) {
    if constexpr (std::is_same_v<T, Float16>) dst[i] = Float16::from_bits(static_cast<uint16_t>(field[i]));
    else if constexpr (std::is_same_v<T, BFloat16>) dst[i] = BFloat16::from_bits(static_cast<uint16_t>(field[i]));
    else dst[i] = static_cast<T>(field[i]);
  }
}

}  // namespace

Result<Tensor> tensor_from_proto(const onnx::TensorProto& p, const std::string& base_dir) {
  std::string name = p.name().empty() ? "" : " '" + p.name() + "'";
  if (p.has_segment()) return unimplemented("segmented tensor" + name);
  TESSERA_ASSIGN_OR_RETURN(DType dtype, dtype_from_onnx(p.data_type()));
  auto dims_or = checked_dims(p.dims());
  if (!dims_or.ok()) return dims_or.status().with_context("tensor" + name);
  // Every size check happens before the tensor is allocated: the dims of a malformed file may
  // claim terabytes that its data does not hold.
  const int64_t numel = shape_numel(*dims_or);
  if (dtype == DType::kString) {
    if (p.string_data_size() != numel) return invalid_argument("string tensor" + name + ": element count does not match dims");
    Tensor t(dtype, *dims_or);
    for (int i = 0; i < p.string_data_size(); ++i) t.strings()[i] = p.string_data(i);
    return t;
  }
  const std::string* raw = nullptr;
  std::string external;
  if (p.data_location() == onnx::TensorProto::EXTERNAL) {
    auto ext = read_external(p, base_dir);
    if (!ext.ok()) return ext.status().with_context("tensor" + name);
    external = std::move(ext).value();
    raw = &external;
  } else if (p.has_raw_data()) {
    raw = &p.raw_data();
  }
  if (raw) {
    const uint64_t need = static_cast<uint64_t>(numel) * dtype_size(dtype);
    if (raw->size() != need) {
      return invalid_argument("tensor" + name + ": raw data has " + std::to_string(raw->size()) +
                              " bytes, the dims and dtype need " + std::to_string(need));
    }
    Tensor t(dtype, *dims_or);
    if (dtype == DType::kBool) {
      // A bool byte other than 0 or 1 is undefined behaviour to read: normalize.
      bool* dst = static_cast<bool*>(t.raw_data());
      for (size_t i = 0; i < raw->size(); ++i) dst[i] = (*raw)[i] != 0;
    } else if (!raw->empty()) {
      std::memcpy(t.raw_data(), raw->data(), raw->size());
    }
    return t;
  }
  int64_t have = -1;
  const char* field_name = "";
  switch (dtype) {
    case DType::kFloat32: have = p.float_data_size(); field_name = "float_data"; break;
    case DType::kFloat64: have = p.double_data_size(); field_name = "double_data"; break;
    case DType::kInt64: have = p.int64_data_size(); field_name = "int64_data"; break;
    case DType::kUint32:
    case DType::kUint64: have = p.uint64_data_size(); field_name = "uint64_data"; break;
    default: have = p.int32_data_size(); field_name = "int32_data"; break;
  }
  if (have != numel) {
    return invalid_argument("tensor" + name + ": " + field_name + " has " + std::to_string(have) +
                            " elements, the dims say " + std::to_string(numel));
  }
  Tensor t(dtype, *dims_or);
  switch (dtype) {
    case DType::kFloat32: copy_field<float>(p.float_data(), t); break;
    case DType::kFloat64: copy_field<double>(p.double_data(), t); break;
    case DType::kInt64: copy_field<int64_t>(p.int64_data(), t); break;
    case DType::kUint32: copy_field<uint32_t>(p.uint64_data(), t); break;
    case DType::kUint64: copy_field<uint64_t>(p.uint64_data(), t); break;
    case DType::kInt32: copy_field<int32_t>(p.int32_data(), t); break;
    case DType::kInt16: copy_field<int16_t>(p.int32_data(), t); break;
    case DType::kUint16: copy_field<uint16_t>(p.int32_data(), t); break;
    case DType::kInt8: copy_field<int8_t>(p.int32_data(), t); break;
    case DType::kUint8: copy_field<uint8_t>(p.int32_data(), t); break;
    case DType::kBool: copy_field<bool>(p.int32_data(), t); break;
    case DType::kFloat16: copy_field<Float16>(p.int32_data(), t); break;
    case DType::kBFloat16: copy_field<BFloat16>(p.int32_data(), t); break;
    default: return unimplemented("tensor" + name + ": dtype " + dtype_name(dtype));
  }
  return t;
}

void tensor_to_proto(const Tensor& t, const std::string& name, onnx::TensorProto* p) {
  p->Clear();
  p->set_name(name);
  p->set_data_type(dtype_to_onnx(t.dtype()));
  for (int64_t d : t.dims()) p->add_dims(d);
  if (t.dtype() == DType::kString) {
    for (const auto& s : t.strings()) p->add_string_data(s);
  } else {
    p->set_raw_data(t.raw_data(), t.nbytes());
  }
}

Result<TensorType> type_from_proto(const onnx::TypeProto& p) {
  if (!p.has_tensor_type()) {
    if (p.has_sequence_type()) return TensorType{DType::kSequence, std::nullopt};
    if (p.has_optional_type()) return TensorType{DType::kOptional, std::nullopt};
    if (p.has_map_type()) return unimplemented("map-typed values are not supported");
    if (p.has_sparse_tensor_type()) return unimplemented("sparse tensors are not supported");
    return TensorType{};
  }
  TensorType t;
  const auto& tt = p.tensor_type();
  if (tt.elem_type() != 0) {
    TESSERA_ASSIGN_OR_RETURN(t.dtype, dtype_from_onnx(tt.elem_type()));
  }
  if (tt.has_shape()) {
    std::vector<Dim> dims;
    for (const auto& d : tt.shape().dim()) {
      if (d.has_dim_value()) {
        if (d.dim_value() < 0) return invalid_argument("negative dimension " + std::to_string(d.dim_value()));
        dims.push_back(Dim(d.dim_value()));
      } else if (d.has_dim_param()) {
        dims.push_back(Dim::symbolic(d.dim_param()));
      } else {
        dims.push_back(Dim());
      }
    }
    // Declared shapes feed allocations (random inputs, buffers): refuse absurd ones here, as
    // tensor_from_proto does for data.
    int64_t n = 1;
    for (const Dim& d : dims) {
      if (!d.known() || d.value == 0) continue;
      if (n > kMaxElements / d.value) return invalid_argument("absurd tensor size (dims overflow)");
      n *= d.value;
    }
    t.shape = std::move(dims);
  }
  return t;
}

void type_to_proto(const TensorType& t, onnx::TypeProto* p) {
  auto* tt = p->mutable_tensor_type();
  tt->set_elem_type(dtype_to_onnx(t.dtype));
  if (!t.shape) return;
  auto* shape = tt->mutable_shape();
  for (const Dim& d : *t.shape) {
    auto* dim = shape->add_dim();
    if (d.known()) dim->set_dim_value(d.value);
    else if (!d.symbol.empty()) dim->set_dim_param(d.symbol);
  }
}

}  // namespace tessera
