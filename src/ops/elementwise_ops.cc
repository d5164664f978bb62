// Schemas of the elementwise family: unary math and activations, binary and variadic ops with
// numpy broadcasting, comparisons and logic, Where, Clip, PRelu, Cast/CastLike, Identity, Dropout.
#include "ops/op_registry.h"

namespace tessera {
namespace {

// ONNX TensorProto.DataType code or Cast-1..5 type name -> DType (kUndefined if unknown).
DType cast_target_dtype(const Node& node) {
  const Attribute* to = node.attr("to");
  if (!to) return DType::kUndefined;
  static const std::pair<const char*, DType> kByCode[] = {
      {"FLOAT", DType::kFloat32},    {"UINT8", DType::kUint8},    {"INT8", DType::kInt8},
      {"UINT16", DType::kUint16},    {"INT16", DType::kInt16},    {"INT32", DType::kInt32},
      {"INT64", DType::kInt64},      {"STRING", DType::kString},  {"BOOL", DType::kBool},
      {"FLOAT16", DType::kFloat16},  {"DOUBLE", DType::kFloat64}, {"UINT32", DType::kUint32},
      {"UINT64", DType::kUint64},    {"", DType::kUndefined},     {"", DType::kUndefined},
      {"BFLOAT16", DType::kBFloat16}};
  if (to->type == Attribute::Type::kString) {
    for (const auto& [name, dtype] : kByCode) {
      if (to->s == name && dtype != DType::kUndefined) return dtype;
    }
    return DType::kUndefined;
  }
  // kByCode[i] is TensorProto.DataType i + 1.
  if (to->i < 1 || to->i > static_cast<int64_t>(std::size(kByCode))) return DType::kUndefined;
  return kByCode[to->i - 1].second;
}

Status infer_cast(InferContext& ctx) {
  TESSERA_RETURN_IF_ERROR(infer_same_as_input0(ctx));
  DType to = cast_target_dtype(ctx.node);
  if (to == DType::kUndefined) return unimplemented("unsupported Cast target type");
  ctx.outputs[0].dtype = to;
  return Status();
}

Status infer_cast_like(InferContext& ctx) {
  TESSERA_RETURN_IF_ERROR(infer_same_as_input0(ctx));
  ctx.outputs[0].dtype = ctx.has_input(1) ? ctx.inputs[1].dtype : DType::kUndefined;
  return Status();
}

Status infer_bool_same_shape(InferContext& ctx) {
  TESSERA_RETURN_IF_ERROR(infer_same_as_input0(ctx));
  for (auto& out : ctx.outputs) out.dtype = DType::kBool;
  return Status();
}

// Before opset 7, binary ops broadcast B into A (attribute broadcast=1, optional axis): the
// output has A's type. From opset 7, numpy broadcasting.
bool legacy_broadcast(const InferContext& ctx) {
  return ctx.node.opset < 7 && ctx.node.attr_int("broadcast", 0) != 0;
}

Status infer_binary(InferContext& ctx) {
  if (legacy_broadcast(ctx)) return infer_same_as_input0(ctx);
  return infer_broadcast(ctx);
}

Status infer_binary_bool(InferContext& ctx) {
  if (legacy_broadcast(ctx)) return infer_bool_same_shape(ctx);
  return infer_broadcast_bool(ctx);
}

Status infer_where(InferContext& ctx) {
  TESSERA_RETURN_IF_ERROR(infer_broadcast(ctx));
  ctx.outputs[0].dtype = ctx.num_inputs() > 1 ? ctx.inputs[1].dtype : DType::kUndefined;
  return Status();
}

Status infer_dropout(InferContext& ctx) {
  if (ctx.num_inputs() < 1) return invalid_argument("expected an input");
  ctx.outputs[0] = ctx.inputs[0];
  if (ctx.outputs.size() > 1) {
    ctx.outputs[1] = ctx.inputs[0];
    if (ctx.node.opset >= 10) ctx.outputs[1].dtype = DType::kBool;
  }
  return Status();
}

}  // namespace

void register_elementwise_ops(OpRegistry& r) {
  // out[i] = f(in[i]): same type as the input.
  // clang-format off
  static const char* const kUnaryOps[] = {
      "Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Sin",
      "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Erf",
      "Sigmoid", "Tanh", "Relu", "LeakyRelu", "Elu", "Selu", "Celu", "HardSigmoid", "HardSwish",
      "Softplus", "Softsign", "ThresholdedRelu", "Shrink", "Mish", "Not", "Identity"};
  // clang-format on
  for (const char* name : kUnaryOps) {
    r.add(name, OpKind::kElementwise).set_inputs(1, 1).set_infer(infer_same_as_input0);
  }
  for (const char* name : {"IsNaN", "IsInf"}) {
    r.add(name, OpKind::kElementwise).set_inputs(1, 1).set_infer(infer_bool_same_shape);
  }
  r.add("Cast", OpKind::kElementwise).set_inputs(1, 1).set_infer(infer_cast);
  r.add("CastLike", OpKind::kElementwise).set_inputs(2, 2).set_infer(infer_cast_like);
  r.add("Dropout", OpKind::kElementwise)
      .set_inputs(1, 3)
      .set_outputs(1, 2)
      .set_infer(infer_dropout);

  // Binary ops with broadcasting.
  for (const char* name : {"Add", "Sub", "Mul", "Div", "Pow", "Mod", "BitShift"}) {
    r.add(name, OpKind::kBroadcast).set_inputs(2, 2).set_infer(infer_binary);
  }
  for (const char* name :
       {"And", "Or", "Xor", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}) {
    r.add(name, OpKind::kBroadcast).set_inputs(2, 2).set_infer(infer_binary_bool);
  }
  for (const char* name : {"Max", "Min", "Sum", "Mean"}) {
    r.add(name, OpKind::kBroadcast).set_inputs(1, 1 << 20).set_infer(infer_broadcast);
  }
  r.add("Where", OpKind::kBroadcast).set_inputs(3, 3).set_infer(infer_where);
  r.add("Clip", OpKind::kBroadcast).set_inputs(1, 3).set_infer(infer_same_as_input0);
  r.add("PRelu", OpKind::kBroadcast).set_inputs(2, 2).set_infer(infer_same_as_input0);
}

}  // namespace tessera
