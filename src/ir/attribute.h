// Node attributes (ONNX's AttributeProto, as a tagged value).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/shape.h"
#include "ir/tensor.h"

namespace tessera {

class Graph;

struct Attribute {
  enum class Type { kUndefined, kInt, kFloat, kString, kTensor, kGraph, kInts, kFloats, kStrings, kTensors, kGraphs, kType };
  Type type = Type::kUndefined;
  int64_t i = 0;
  float f = 0;
  std::string s;
  Tensor t;
  std::shared_ptr<Graph> g;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<std::string> strings;
  std::vector<Tensor> tensors;
  std::vector<std::shared_ptr<Graph>> graphs;
  TensorType type_value;  // kType: a value type (e.g. Optional's `type`)

  static Attribute of_int(int64_t v) { Attribute a; a.type = Type::kInt; a.i = v; return a; }
  static Attribute of_float(float v) { Attribute a; a.type = Type::kFloat; a.f = v; return a; }
  static Attribute of_string(std::string v) { Attribute a; a.type = Type::kString; a.s = std::move(v); return a; }
  static Attribute of_ints(std::vector<int64_t> v) { Attribute a; a.type = Type::kInts; a.ints = std::move(v); return a; }
  static Attribute of_floats(std::vector<float> v) { Attribute a; a.type = Type::kFloats; a.floats = std::move(v); return a; }
  static Attribute of_tensor(Tensor v) { Attribute a; a.type = Type::kTensor; a.t = std::move(v); return a; }
  static Attribute of_strings(std::vector<std::string> v) { Attribute a; a.type = Type::kStrings; a.strings = std::move(v); return a; }
};

const char* attribute_type_name(Attribute::Type t);

}  // namespace tessera
