// Conversions between onnx::TensorProto / TypeProto and tessera's Tensor / TensorType.
// Internal to onnx/ (includes the protobuf headers).
#pragma once

#include <string>

#include "ir/graph.h"
#include "ir/status.h"
#include "onnx/onnx_pb.h"

namespace tessera {

Result<DType> dtype_from_onnx(int elem_type);
int dtype_to_onnx(DType t);
// base_dir resolves external data locations; empty means external data is refused.
Result<Tensor> tensor_from_proto(const onnx::TensorProto& p, const std::string& base_dir);
void tensor_to_proto(const Tensor& t, const std::string& name, onnx::TensorProto* p);
Result<TensorType> type_from_proto(const onnx::TypeProto& p);
void type_to_proto(const TensorType& t, onnx::TypeProto* p);

}  // namespace tessera
