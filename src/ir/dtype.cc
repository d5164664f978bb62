#include "ir/dtype.h"

namespace tessera {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kUndefined: return 0;
    case DType::kFloat32: return 4;
    case DType::kFloat16: return 2;
    case DType::kBFloat16: return 2;
    case DType::kFloat64: return 8;
    case DType::kInt8: return 1;
    case DType::kUint8: return 1;
    case DType::kInt16: return 2;
    case DType::kUint16: return 2;
    case DType::kInt32: return 4;
    case DType::kUint32: return 4;
    case DType::kInt64: return 8;
    case DType::kUint64: return 8;
    case DType::kBool: return 1;
    case DType::kString: return sizeof(std::string);
    case DType::kSequence: return 0;
    case DType::kOptional: return 0;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kUndefined: return "undefined";
    case DType::kFloat32: return "float32";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat64: return "float64";
    case DType::kInt8: return "int8";
    case DType::kUint8: return "uint8";
    case DType::kInt16: return "int16";
    case DType::kUint16: return "uint16";
    case DType::kInt32: return "int32";
    case DType::kUint32: return "uint32";
    case DType::kInt64: return "int64";
    case DType::kUint64: return "uint64";
    case DType::kBool: return "bool";
    case DType::kString: return "string";
    case DType::kSequence: return "sequence";
    case DType::kOptional: return "optional";
  }
  return "unknown";
}

namespace {
struct OnnxCode {
  int code;
  DType dtype;
};
constexpr OnnxCode kOnnxCodes[] = {
    {1, DType::kFloat32}, {2, DType::kUint8},    {3, DType::kInt8},     {4, DType::kUint16},
    {5, DType::kInt16},   {6, DType::kInt32},    {7, DType::kInt64},    {8, DType::kString},
    {9, DType::kBool},    {10, DType::kFloat16}, {11, DType::kFloat64}, {12, DType::kUint32},
    {13, DType::kUint64}, {16, DType::kBFloat16},
};
}  // namespace

DType dtype_from_onnx_code(int64_t code) {
  for (const auto& e : kOnnxCodes)
    if (e.code == code) return e.dtype;
  return DType::kUndefined;
}

int dtype_to_onnx_code(DType t) {
  for (const auto& e : kOnnxCodes)
    if (e.dtype == t) return e.code;
  return 0;
}

bool dtype_is_float(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16 ||
         t == DType::kFloat64;
}

bool dtype_is_integer(DType t) {
  switch (t) {
    case DType::kInt8: case DType::kUint8: case DType::kInt16: case DType::kUint16:
    case DType::kInt32: case DType::kUint32: case DType::kInt64: case DType::kUint64:
      return true;
    default: return false;
  }
}

bool dtype_is_signed(DType t) {
  return dtype_is_float(t) || t == DType::kInt8 || t == DType::kInt16 || t == DType::kInt32 ||
         t == DType::kInt64;
}

}  // namespace tessera
