// Sequence and optional values in the ONNX test data (SequenceProto / OptionalProto files).
#include <fstream>

#include "onnx/onnx_import.h"
#include "onnx/tensor_proto.h"  // first: onnx_pb.h defines ONNX_API for the generated headers
// NOLINTNEXTLINE(llvm-include-order)
#include "onnx/onnx-data.pb.h"

namespace tessera {
namespace {

std::string folder_of(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

Result<Tensor> sequence_from_proto(const onnx::SequenceProto& p, const std::string& dir, int depth);

Result<Tensor> optional_from_proto(const onnx::OptionalProto& p, const std::string& dir, int depth) {
  if (p.has_tensor_value()) {
    TESSERA_ASSIGN_OR_RETURN(Tensor t, tensor_from_proto(p.tensor_value(), dir));
    DType dt = t.dtype();
    return Tensor::optional(std::move(t), dt);
  }
  if (p.has_sequence_value()) {
    TESSERA_ASSIGN_OR_RETURN(Tensor s, sequence_from_proto(p.sequence_value(), dir, depth + 1));
    return Tensor::optional(std::move(s), DType::kSequence);
  }
  if (p.elem_type() == onnx::OptionalProto::SEQUENCE) return Tensor::optional(std::nullopt, DType::kSequence);
  return Tensor::optional(std::nullopt, DType::kUndefined);
}

Result<Tensor> sequence_from_proto(const onnx::SequenceProto& p, const std::string& dir, int depth) {
  if (depth > 16) return invalid_argument("sequence nesting deeper than 16");
  std::vector<Tensor> elements;
  DType elem = DType::kUndefined;
  for (const auto& tp : p.tensor_values()) {
    TESSERA_ASSIGN_OR_RETURN(Tensor t, tensor_from_proto(tp, dir));
    elem = t.dtype();
    elements.push_back(std::move(t));
  }
  for (const auto& sp : p.sequence_values()) {
    TESSERA_ASSIGN_OR_RETURN(Tensor t, sequence_from_proto(sp, dir, depth + 1));
    elem = DType::kSequence;
    elements.push_back(std::move(t));
  }
  if (p.map_values_size() > 0) return unimplemented("sequences of maps");
  return Tensor::sequence(std::move(elements), elem);
}

}  // namespace

Result<std::pair<std::string, Tensor>> read_value_proto_file(const std::string& path, DType declared) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return not_found("cannot open '" + path + "'");
  std::string dir = folder_of(path);
  if (declared == DType::kSequence) {
    onnx::SequenceProto p;
    if (!p.ParseFromIstream(&f)) return invalid_argument("'" + path + "' is not a serialized SequenceProto");
    TESSERA_ASSIGN_OR_RETURN(Tensor t, sequence_from_proto(p, dir, 0));
    return std::make_pair(p.name(), std::move(t));
  }
  if (declared == DType::kOptional) {
    onnx::OptionalProto p;
    if (!p.ParseFromIstream(&f)) return invalid_argument("'" + path + "' is not a serialized OptionalProto");
    TESSERA_ASSIGN_OR_RETURN(Tensor t, optional_from_proto(p, dir, 0));
    return std::make_pair(p.name(), std::move(t));
  }
  onnx::TensorProto p;
  if (!p.ParseFromIstream(&f)) return invalid_argument("'" + path + "' is not a serialized TensorProto");
  auto t = tensor_from_proto(p, dir);
  if (!t.ok()) return t.status().with_context(path);
  return std::make_pair(p.name(), std::move(t).value());
}

}  // namespace tessera
