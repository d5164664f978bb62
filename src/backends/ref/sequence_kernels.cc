// Sequence and optional ops. A sequence value is a Tensor of dtype kSequence whose storage holds
// its element tensors; an optional is a kOptional Tensor with zero or one element. Values are
// immutable: every op builds a new container (element buffers are shared, not copied).
#include "backends/ref/ref_kernel.h"
#include "backends/ref/ref_util.h"

namespace tessera {
namespace {

Result<const Tensor*> sequence_input(const RefKernelContext& ctx, int i) {
  const Tensor* t = ctx.input(i);
  if (!t || t->dtype() != DType::kSequence) return ctx.error("input " + std::to_string(i) + " must be a sequence");
  return t;
}

// Position input (scalar int32/int64), wrapped into [0, limit] (`inclusive_end`) or [0, limit).
Result<int64_t> position(const RefKernelContext& ctx, int i, int64_t n, bool inclusive_end, int64_t fallback) {
  if (!ctx.has_input(i)) return fallback;
  const Tensor& p = *ctx.input(i);
  if (p.numel() != 1 || !dtype_is_integer(p.dtype())) return ctx.error("position must be one integer");
  int64_t pos = p.as_int64(0);
  int64_t upper = inclusive_end ? n : n - 1;
  if (pos < -n || pos > upper) return ctx.error("position " + std::to_string(pos) + " out of range for " + std::to_string(n) + " elements");
  return pos < 0 ? pos + n : pos;
}

// Runs another reference kernel (Concat, Split) on a synthetic node: one implementation of each.
Result<std::vector<Tensor>> run_kernel(RefKernelContext& ctx, const std::string& op, std::map<std::string, Attribute> attrs,
                                       std::vector<const Tensor*> inputs, int num_outputs) {
  Node node;
  node.op_type = op;
  node.name = ctx.node().name;
  node.opset = 13;
  node.attrs = std::move(attrs);
  node.inputs.assign(inputs.size(), 0);
  for (int i = 0; i < num_outputs; ++i) node.outputs.push_back(i);
  const RefKernelFn* k = RefKernelTable::global().find("", op);
  if (!k) return internal_error("no reference kernel for " + op);
  RefKernelContext inner(node, std::move(inputs), ctx.allocator(), ctx.pool());
  TESSERA_RETURN_IF_ERROR((*k)(inner));
  return std::move(inner.outputs());
}

Status sequence_empty(RefKernelContext& ctx) {
  DType dt = dtype_from_onnx_code(ctx.node().attr_int("dtype", 1));
  if (dt == DType::kUndefined) return ctx.unsupported("dtype " + std::to_string(ctx.node().attr_int("dtype", 1)));
  ctx.set_output(0, Tensor::sequence({}, dt));
  return Status();
}

Status sequence_construct(RefKernelContext& ctx) {
  std::vector<Tensor> elems;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return ctx.error("missing input");
    if (ctx.input(i)->dtype() != ctx.input(0)->dtype()) return ctx.error("sequence elements must share one dtype");
    elems.push_back(*ctx.input(i));
  }
  DType dt = elems.front().dtype();
  ctx.set_output(0, Tensor::sequence(std::move(elems), dt));
  return Status();
}

Status sequence_insert(RefKernelContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const Tensor* seq, sequence_input(ctx, 0));
  if (!ctx.has_input(1)) return ctx.error("missing tensor to insert");
  const Tensor& t = *ctx.input(1);
  if (seq->element_dtype() != DType::kUndefined && t.dtype() != seq->element_dtype()) {
    return ctx.error(std::string("inserting ") + dtype_name(t.dtype()) + " into a sequence of " + dtype_name(seq->element_dtype()));
  }
  int64_t n = static_cast<int64_t>(seq->elements().size());
  TESSERA_ASSIGN_OR_RETURN(int64_t pos, position(ctx, 2, n, true, n));
  std::vector<Tensor> elems = seq->elements();
  elems.insert(elems.begin() + pos, t);
  ctx.set_output(0, Tensor::sequence(std::move(elems), t.dtype()));
  return Status();
}

Status sequence_erase(RefKernelContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const Tensor* seq, sequence_input(ctx, 0));
  int64_t n = static_cast<int64_t>(seq->elements().size());
  if (n == 0) return ctx.error("erase from an empty sequence");
  TESSERA_ASSIGN_OR_RETURN(int64_t pos, position(ctx, 1, n, false, n - 1));
  std::vector<Tensor> elems = seq->elements();
  elems.erase(elems.begin() + pos);
  ctx.set_output(0, Tensor::sequence(std::move(elems), seq->element_dtype()));
  return Status();
}

Status sequence_at(RefKernelContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const Tensor* seq, sequence_input(ctx, 0));
  int64_t n = static_cast<int64_t>(seq->elements().size());
  if (!ctx.has_input(1)) return ctx.error("missing position");
  TESSERA_ASSIGN_OR_RETURN(int64_t pos, position(ctx, 1, n, false, 0));
  ctx.set_output(0, seq->elements()[pos]);
  return Status();
}

Status sequence_length(RefKernelContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const Tensor* seq, sequence_input(ctx, 0));
  ctx.output(0, DType::kInt64, {}).data<int64_t>()[0] = static_cast<int64_t>(seq->elements().size());
  return Status();
}

Status split_to_sequence(RefKernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  if (x.rank() == 0) return ctx.error("cannot split a scalar");
  TESSERA_ASSIGN_OR_RETURN(int axis, ref::normalize_axis(ctx.node().attr_int("axis", 0), x.rank()));
  int64_t len = x.dims()[axis];
  std::vector<int64_t> sizes;
  bool squeeze = false;
  if (!ctx.has_input(1)) {
    sizes.assign(static_cast<size_t>(len), 1);
    squeeze = ctx.node().attr_int("keepdims", 1) == 0;
  } else {
    const Tensor& split = *ctx.input(1);
    if (!dtype_is_integer(split.dtype())) return ctx.error("split must be integers");
    if (split.rank() == 0) {
      int64_t chunk = split.as_int64(0);
      if (chunk <= 0) return ctx.error("split size must be positive");
      for (int64_t done = 0; done < len; done += chunk) sizes.push_back(std::min(chunk, len - done));
    } else {
      sizes = split.to_int64_vector();
    }
  }
  std::vector<Tensor> parts;
  if (!sizes.empty()) {
    Tensor split_sizes = Tensor::from_vector<int64_t>({static_cast<int64_t>(sizes.size())}, sizes);
    TESSERA_ASSIGN_OR_RETURN(parts, run_kernel(ctx, "Split", {{"axis", Attribute::of_int(axis)}}, {&x, &split_sizes},
                                               static_cast<int>(sizes.size())));
  }
  if (squeeze) {
    for (Tensor& p : parts) {
      std::vector<int64_t> dims = p.dims();
      dims.erase(dims.begin() + axis);
      p = p.reshaped(dims);
    }
  }
  ctx.set_output(0, Tensor::sequence(std::move(parts), x.dtype()));
  return Status();
}

Status concat_from_sequence(RefKernelContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const Tensor* seq, sequence_input(ctx, 0));
  const auto& elems = seq->elements();
  if (elems.empty()) return ctx.error("cannot concatenate an empty sequence");
  bool new_axis = ctx.node().attr_int("new_axis", 0) != 0;
  int rank = elems[0].rank() + (new_axis ? 1 : 0);
  TESSERA_ASSIGN_OR_RETURN(int axis, ref::normalize_axis(ctx.node().attr_int("axis", 0), rank));
  std::vector<Tensor> parts;
  for (const Tensor& e : elems) {
    if (!new_axis) {
      parts.push_back(e);
      continue;
    }
    if (e.rank() + 1 != rank) return ctx.error("sequence elements differ in rank");
    std::vector<int64_t> dims = e.dims();
    dims.insert(dims.begin() + axis, 1);
    parts.push_back(e.reshaped(dims));
  }
  std::vector<const Tensor*> ptrs;
  for (const Tensor& p : parts) ptrs.push_back(&p);
  TESSERA_ASSIGN_OR_RETURN(std::vector<Tensor> out, run_kernel(ctx, "Concat", {{"axis", Attribute::of_int(axis)}}, ptrs, 1));
  ctx.set_output(0, std::move(out[0]));
  return Status();
}

Status sequence_map(RefKernelContext& ctx) {
  const Attribute* body = ctx.node().attr("body");
  if (!body || body->type != Attribute::Type::kGraph || !body->g) return ctx.error("missing body");
  TESSERA_ASSIGN_OR_RETURN(const Tensor* first, sequence_input(ctx, 0));
  size_t n = first->elements().size();
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    const Tensor* t = ctx.input(i);
    if (!t) return ctx.error("missing input");
    if (t->dtype() == DType::kSequence && t->elements().size() != n) return ctx.error("input sequences differ in length");
  }
  std::vector<std::vector<Tensor>> outs(ctx.num_outputs());
  for (size_t k = 0; k < n; ++k) {
    std::vector<Tensor> in;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor& t = *ctx.input(i);
      in.push_back(t.dtype() == DType::kSequence ? t.elements()[k] : t);
    }
    TESSERA_ASSIGN_OR_RETURN(std::vector<Tensor> r, ctx.run_subgraph(*body->g, in));
    if (static_cast<int>(r.size()) != ctx.num_outputs()) return ctx.error("body outputs do not match the node");
    for (int o = 0; o < ctx.num_outputs(); ++o) outs[o].push_back(std::move(r[o]));
  }
  for (int o = 0; o < ctx.num_outputs(); ++o) {
    const Graph& g = *body->g;
    DType dt = outs[o].empty() ? g.value(g.outputs()[o]).type.dtype : outs[o][0].dtype();
    ctx.set_output(o, Tensor::sequence(std::move(outs[o]), dt));
  }
  return Status();
}

Status optional_kernel(RefKernelContext& ctx) {
  if (ctx.has_input(0)) {
    DType dt = ctx.input(0)->dtype();
    ctx.set_output(0, Tensor::optional(*ctx.input(0), dt));
    return Status();
  }
  const Attribute* type = ctx.node().attr("type");
  if (!type || type->type != Attribute::Type::kType) return ctx.error("an empty Optional needs the 'type' attribute");
  ctx.set_output(0, Tensor::optional(std::nullopt, type->type_value.dtype));
  return Status();
}

Status optional_has_element(RefKernelContext& ctx) {
  bool has = false;
  if (ctx.has_input(0)) {
    const Tensor& t = *ctx.input(0);
    has = t.dtype() != DType::kOptional || !t.elements().empty();
  }
  ctx.output(0, DType::kBool, {}).data<bool>()[0] = has;
  return Status();
}

Status optional_get_element(RefKernelContext& ctx) {
  if (!ctx.has_input(0)) return ctx.error("missing input");
  const Tensor& t = *ctx.input(0);
  if (t.dtype() != DType::kOptional) {  // opset 18: a plain tensor or sequence passes through
    ctx.set_output(0, t);
    return Status();
  }
  if (t.elements().empty()) return ctx.error("the optional holds no element");
  ctx.set_output(0, t.elements()[0]);
  return Status();
}

}  // namespace

void register_sequence_kernels(RefKernelTable& t) {
  t.add("SequenceEmpty", sequence_empty);
  t.add("SequenceConstruct", sequence_construct);
  t.add("SequenceInsert", sequence_insert);
  t.add("SequenceErase", sequence_erase);
  t.add("SequenceAt", sequence_at);
  t.add("SequenceLength", sequence_length);
  t.add("SplitToSequence", split_to_sequence);
  t.add("ConcatFromSequence", concat_from_sequence);
  t.add("SequenceMap", sequence_map);
  t.add("Optional", optional_kernel);
  t.add("OptionalHasElement", optional_has_element);
  t.add("OptionalGetElement", optional_get_element);
}

}  // namespace tessera
