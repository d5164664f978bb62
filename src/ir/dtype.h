// Element types of tensors, with their sizes and names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ir/half.h"

namespace tessera {

enum class DType : uint8_t {
  kUndefined = 0,
  kFloat32,
  kFloat16,
  kBFloat16,
  kFloat64,
  kInt8,
  kUint8,
  kInt16,
  kUint16,
  kInt32,
  kUint32,
  kInt64,
  kUint64,
  kBool,
  kString,
  kSequence,  // a sequence of tensors (ONNX sequence types); elements live in the storage
  kOptional,  // an optional tensor or sequence: zero or one element
};

// Bytes per element; 0 for kUndefined, kSequence and kOptional. kString elements are std::string objects.
size_t dtype_size(DType t);
// "float32", "int64", ...
const char* dtype_name(DType t);
// ONNX's TensorProto.DataType numbers (fixed by the ONNX spec; also used by attributes such as
// Cast's `to`): kUndefined for numbers tessera has no type for.
DType dtype_from_onnx_code(int64_t code);
int dtype_to_onnx_code(DType t);  // 0 (UNDEFINED) for kSequence / kOptional / kUndefined
bool dtype_is_float(DType t);    // float16/bfloat16/float32/float64
bool dtype_is_integer(DType t);  // signed or unsigned integers (not bool)
bool dtype_is_signed(DType t);

// Maps a C++ element type to its DType.
template <typename T>
struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::kFloat32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::kFloat64; };
template <> struct DTypeOf<Float16> { static constexpr DType value = DType::kFloat16; };
template <> struct DTypeOf<BFloat16> { static constexpr DType value = DType::kBFloat16; };
template <> struct DTypeOf<int8_t> { static constexpr DType value = DType::kInt8; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::kUint8; };
template <> struct DTypeOf<int16_t> { static constexpr DType value = DType::kInt16; };
template <> struct DTypeOf<uint16_t> { static constexpr DType value = DType::kUint16; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::kInt32; };
template <> struct DTypeOf<uint32_t> { static constexpr DType value = DType::kUint32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::kInt64; };
template <> struct DTypeOf<uint64_t> { static constexpr DType value = DType::kUint64; };
template <> struct DTypeOf<bool> { static constexpr DType value = DType::kBool; };
template <> struct DTypeOf<std::string> { static constexpr DType value = DType::kString; };

// Calls f(T{}) with T the C++ type of `t` (numeric types and bool; not string).
// Returns false if `t` has no numeric C++ type.
template <typename F>
bool visit_numeric_dtype(DType t, F&& f) {
  switch (t) {
    case DType::kFloat32: f(float{}); return true;
    case DType::kFloat64: f(double{}); return true;
    case DType::kFloat16: f(Float16{}); return true;
    case DType::kBFloat16: f(BFloat16{}); return true;
    case DType::kInt8: f(int8_t{}); return true;
    case DType::kUint8: f(uint8_t{}); return true;
    case DType::kInt16: f(int16_t{}); return true;
    case DType::kUint16: f(uint16_t{}); return true;
    case DType::kInt32: f(int32_t{}); return true;
    case DType::kUint32: f(uint32_t{}); return true;
    case DType::kInt64: f(int64_t{}); return true;
    case DType::kUint64: f(uint64_t{}); return true;
    case DType::kBool: f(bool{}); return true;
    default: return false;
  }
}

}  // namespace tessera
