// ONNX import and export. The protobuf types stay inside onnx/: callers see Graph and Tensor.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/status.h"

namespace tessera {

struct OnnxImportOptions {
  bool run_checker = true;          // the ONNX library's model checker
  bool run_shape_inference = true;  // fill value types with ONNX's shape inference
  bool require_known_ops = true;    // fail on ops missing from the op registry
};

// The opset range of the default domain this importer accepts.
inline constexpr int kMinOnnxOpset = 1;
inline constexpr int kMaxOnnxOpset = 17;

// Loads a model file. External data files are resolved relative to the model's folder.
// Errors (malformed or truncated file, unsupported op/domain/dtype/opset, dangling values,
// cycles) say what is wrong and name the node.
Result<Graph> import_onnx_file(const std::string& path, const OnnxImportOptions& opts = {});
// Same, from serialized bytes; external data resolved relative to base_dir.
Result<Graph> import_onnx_bytes(const std::string& bytes, const std::string& base_dir,
                                const OnnxImportOptions& opts = {});

// Reads a serialized TensorProto file (the ONNX test data's input_0.pb...).
Result<Tensor> read_tensor_proto_file(const std::string& path);
// Returns the `name` field of a serialized TensorProto file ("" if none).
Result<std::string> read_tensor_proto_name(const std::string& path);
// Reads a serialized TensorProto, or a SequenceProto / OptionalProto when `declared` is kSequence /
// kOptional (the test data of sequence- and optional-typed values). Returns the proto's name too.
Result<std::pair<std::string, Tensor>> read_value_proto_file(const std::string& path, DType declared);

// Serializes the subgraph made of `nodes` (indices into g) as a standalone ONNX model: values
// consumed but not produced inside become graph inputs (or initializers when constant); values
// produced inside and used outside (or graph outputs) become outputs.
Result<std::string> export_onnx_subgraph(const Graph& g, const std::vector<int>& nodes);
// The whole graph.
Result<std::string> export_onnx(const Graph& g);

}  // namespace tessera
