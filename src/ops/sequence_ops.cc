// Sequence and optional ops (ONNX sequence / optional types). Their values are tessera Tensors of
// dtype kSequence / kOptional holding element tensors.
#include "ops/op_registry.h"

namespace tessera {
namespace {

Status infer_sequence(InferContext& ctx) {
  for (auto& out : ctx.outputs) out.dtype = DType::kSequence;
  return Status();
}

}  // namespace

void register_sequence_ops(OpRegistry& r) {
  r.add("SequenceEmpty", OpKind::kOpaque).set_inputs(0, 0).set_infer(infer_sequence);
  r.add("SequenceConstruct", OpKind::kOpaque).set_inputs(1, 1 << 20).set_infer(infer_sequence);
  r.add("SequenceInsert", OpKind::kOpaque).set_inputs(2, 3).set_infer(infer_sequence);
  r.add("SequenceErase", OpKind::kOpaque).set_inputs(1, 2).set_infer(infer_sequence);
  r.add("SequenceAt", OpKind::kOpaque).set_inputs(2, 2);
  r.add("SequenceLength", OpKind::kOpaque).set_inputs(1, 1).set_infer([](InferContext& ctx) {
    ctx.outputs[0] = TensorType::of(DType::kInt64, {});
    return Status();
  });
  r.add("SplitToSequence", OpKind::kOpaque).set_inputs(1, 2).set_infer(infer_sequence);
  r.add("ConcatFromSequence", OpKind::kOpaque).set_inputs(1, 1);
  r.add("SequenceMap", OpKind::kOpaque).set_inputs(1, 1 << 20).set_outputs(1, 1 << 20);
  r.add("Optional", OpKind::kOpaque).set_inputs(0, 1).set_infer([](InferContext& ctx) {
    ctx.outputs[0].dtype = DType::kOptional;
    return Status();
  });
  r.add("OptionalHasElement", OpKind::kOpaque).set_inputs(0, 1).set_infer([](InferContext& ctx) {
    ctx.outputs[0] = TensorType::of(DType::kBool, {});
    return Status();
  });
  r.add("OptionalGetElement", OpKind::kOpaque).set_inputs(1, 1);
}

}  // namespace tessera
