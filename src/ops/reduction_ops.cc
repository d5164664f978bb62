// Schemas of the reduction family: Reduce*, ArgMax/ArgMin, Softmax/LogSoftmax/Hardmax, CumSum,
// TopK, Einsum, Det and the two losses (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss).
#include <algorithm>
#include <cctype>
#include <map>
#include <string>
#include <vector>

#include "ops/op_registry.h"

namespace tessera {

namespace {

// Whether the node's Reduce* op takes its axes as input 1 (ReduceSum from opset 13, all from 18).
bool reduce_axes_from_input(const Node& node) {
  return node.opset >= 18 || (node.op_type == "ReduceSum" && node.opset >= 13);
}

Status infer_reduce(InferContext& ctx) {
  const Node& node = ctx.node;
  TensorType& out = ctx.outputs[0];
  out.dtype = ctx.inputs[0].dtype;
  const bool keepdims = node.attr_int("keepdims", 1) != 0;
  if (!ctx.inputs[0].shape) return Status();
  const std::vector<Dim>& in = *ctx.inputs[0].shape;
  const int rank = static_cast<int>(in.size());

  std::vector<int64_t> axes;
  bool noop = false;
  if (reduce_axes_from_input(node)) {
    if (ctx.has_input(1)) {
      if (!ctx.constants[1]) {
        // Unknown axes: with keepdims the rank is still known.
        if (keepdims) out.shape = std::vector<Dim>(rank, Dim());
        return Status();
      }
      axes = ctx.constants[1]->to_int64_vector();
    }
    noop = axes.empty() && node.attr_int("noop_with_empty_axes", 0) != 0;
  } else {
    axes = node.attr_ints("axes");
  }
  if (noop) {
    out.shape = in;
    return Status();
  }
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t a : axes) {
    TESSERA_ASSIGN_OR_RETURN(int axis, normalize_axis(a, rank));
    if (reduced[axis]) return invalid_argument("axis " + std::to_string(a) + " repeated");
    reduced[axis] = true;
  }
  std::vector<Dim> dims;
  for (int d = 0; d < rank; ++d) {
    if (!reduced[d]) {
      dims.push_back(in[d]);
    } else if (keepdims) {
      dims.push_back(Dim(1));
    }
  }
  out.shape = std::move(dims);
  return Status();
}

Status infer_arg_reduce(InferContext& ctx) {
  TensorType& out = ctx.outputs[0];
  out.dtype = DType::kInt64;
  if (!ctx.inputs[0].shape) return Status();
  const std::vector<Dim>& in = *ctx.inputs[0].shape;
  const int rank = static_cast<int>(in.size());
  TESSERA_ASSIGN_OR_RETURN(int axis, normalize_axis(ctx.node.attr_int("axis", 0), rank));
  std::vector<Dim> dims = in;
  if (ctx.node.attr_int("keepdims", 1) != 0) {
    dims[axis] = Dim(1);
  } else {
    dims.erase(dims.begin() + axis);
  }
  out.shape = std::move(dims);
  return Status();
}

// Softmax / LogSoftmax / Hardmax: same type as the input; checks the axis when the rank is known.
Status infer_softmax_like(InferContext& ctx) {
  const int rank = ctx.inputs[0].rank();
  if (rank >= 0) {
    const int64_t fallback = ctx.node.opset >= 13 ? -1 : 1;
    const int64_t axis = ctx.node.attr_int("axis", fallback);
    // Before opset 13 the axis may equal the rank (the 2-D coercion's second dim is then 1).
    const int limit = ctx.node.opset >= 13 ? rank : rank + 1;
    TESSERA_RETURN_IF_ERROR(normalize_axis(axis, limit).status());
  }
  return infer_same_as_input0(ctx);
}

Status infer_top_k(InferContext& ctx) {
  const Node& node = ctx.node;
  ctx.outputs[0].dtype = ctx.inputs[0].dtype;
  ctx.outputs[1].dtype = DType::kInt64;
  if (!ctx.inputs[0].shape) return Status();
  std::vector<Dim> dims = *ctx.inputs[0].shape;
  const int rank = static_cast<int>(dims.size());
  TESSERA_ASSIGN_OR_RETURN(int axis, normalize_axis(node.attr_int("axis", -1), rank));
  Dim k;
  if (node.opset < 10) {
    k = Dim(node.attr_int("k", -1));
    if (!k.known()) return invalid_argument("attribute k missing or negative");
  } else if (ctx.num_inputs() > 1 && ctx.constants[1]) {
    if (ctx.constants[1]->numel() != 1) return invalid_argument("k must hold one value");
    int64_t kv = ctx.constants[1]->as_int64(0);
    if (kv < 0) return invalid_argument("k must be >= 0");
    k = Dim(kv);
  }
  if (k.known() && dims[axis].known() && k.value > dims[axis].value) {
    return invalid_argument("k " + std::to_string(k.value) + " exceeds axis size " +
                            std::to_string(dims[axis].value));
  }
  dims[axis] = k;
  ctx.outputs[0].shape = dims;
  ctx.outputs[1].shape = dims;
  return Status();
}

// Einsum: the output dims follow from the equation once every input's rank is known. Labels are
// letters; "..." stands for broadcast dims (right-aligned across the inputs).
Status infer_einsum(InferContext& ctx) {
  TensorType& out = ctx.outputs[0];
  out.dtype = ctx.inputs.empty() ? DType::kUndefined : ctx.inputs[0].dtype;
  std::string equation;
  for (char c : ctx.node.attr_string("equation", "")) {
    if (c != ' ') equation.push_back(c);
  }
  const size_t arrow = equation.find("->");
  const std::string lhs = equation.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (static_cast<int>(terms.size()) != ctx.num_inputs()) {
    return invalid_argument("equation has " + std::to_string(terms.size()) + " terms for " +
                            std::to_string(ctx.num_inputs()) + " inputs");
  }
  for (const TensorType& t : ctx.inputs) {
    if (!t.shape) return Status();
  }
  // Per letter: its dim (a known size other than 1 wins) and its use count.
  std::map<char, Dim> letter_dim;
  std::map<char, int> letter_uses;
  std::vector<Dim> ellipsis;  // widest broadcast dims, right-aligned
  auto merge = [](Dim& have, const Dim& d) {
    if (!have.known() && !d.known() && have.symbol.empty()) have = d;
    if (d.known() && (!have.known() || have.value == 1)) have = d;
  };
  for (size_t k = 0; k < terms.size(); ++k) {
    const std::vector<Dim>& dims = *ctx.inputs[k].shape;
    const std::string& term = terms[k];
    const size_t dots = term.find("...");
    const int letters = static_cast<int>(term.size()) - (dots == std::string::npos ? 0 : 3);
    const int ellipsis_dims = static_cast<int>(dims.size()) - letters;
    if (ellipsis_dims < 0 || (dots == std::string::npos && ellipsis_dims != 0)) {
      return invalid_argument("term '" + term + "' does not match input rank " +
                              std::to_string(dims.size()));
    }
    if (ellipsis_dims > static_cast<int>(ellipsis.size())) {
      ellipsis.insert(ellipsis.begin(), ellipsis_dims - ellipsis.size(), Dim(1));
    }
    int d = 0;
    for (size_t i = 0; i < term.size(); ++i) {
      if (i == dots) {
        for (int j = 0; j < ellipsis_dims; ++j, ++d) {
          merge(ellipsis[ellipsis.size() - ellipsis_dims + j], dims[d]);
        }
        i += 2;
      } else {
        if (!std::isalpha(static_cast<unsigned char>(term[i]))) {
          return invalid_argument(std::string("bad character '") + term[i] + "' in equation");
        }
        auto [it, added] = letter_dim.try_emplace(term[i], dims[d]);
        if (!added) merge(it->second, dims[d]);
        ++letter_uses[term[i]];
        ++d;
      }
    }
  }
  std::vector<Dim> dims;
  if (arrow == std::string::npos) {
    dims = ellipsis;
    for (const auto& [letter, uses] : letter_uses) {  // std::map: ASCII order
      if (uses == 1) dims.push_back(letter_dim[letter]);
    }
  } else {
    const std::string rhs = equation.substr(arrow + 2);
    for (size_t i = 0; i < rhs.size(); ++i) {
      if (rhs.compare(i, 3, "...") == 0) {
        dims.insert(dims.end(), ellipsis.begin(), ellipsis.end());
        i += 2;
      } else if (letter_dim.count(rhs[i])) {
        dims.push_back(letter_dim[rhs[i]]);
      } else {
        return invalid_argument(std::string("output label '") + rhs[i] + "' not in the inputs");
      }
    }
  }
  out.shape = std::move(dims);
  return Status();
}

Status infer_det(InferContext& ctx) {
  TensorType& out = ctx.outputs[0];
  out.dtype = ctx.inputs[0].dtype;
  if (!ctx.inputs[0].shape) return Status();
  const std::vector<Dim>& in = *ctx.inputs[0].shape;
  if (in.size() < 2) return invalid_argument("Det needs a rank >= 2 input");
  out.shape = std::vector<Dim>(in.begin(), in.end() - 2);
  return Status();
}

// NegativeLogLikelihoodLoss / SoftmaxCrossEntropyLoss: loss of the input's dtype; shape known
// for reduction "none" (the target's shape) and "sum"/"mean" (a scalar). The optional second
// output of SoftmaxCrossEntropyLoss has the scores' type.
Status infer_loss(InferContext& ctx) {
  const std::string reduction = ctx.node.attr_string("reduction", "mean");
  TensorType& loss = ctx.outputs[0];
  loss.dtype = ctx.inputs[0].dtype;
  if (reduction == "none") {
    loss.shape = ctx.inputs[1].shape;
  } else if (reduction == "sum" || reduction == "mean") {
    loss.shape = std::vector<Dim>();
  } else {
    return invalid_argument("unknown reduction '" + reduction + "'");
  }
  if (ctx.outputs.size() > 1) ctx.outputs[1] = ctx.inputs[0];
  return Status();
}

}  // namespace

void register_reduction_ops(OpRegistry& r) {
  for (const char* name :
       {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
        "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"}) {
    // Axes are input 1 for ReduceSum from opset 13 and for every Reduce* from opset 18.
    r.add(name, OpKind::kReduction).set_inputs(1, 2).set_infer(infer_reduce);
  }
  r.add("ArgMax", OpKind::kReduction).set_inputs(1, 1).set_infer(infer_arg_reduce);
  r.add("ArgMin", OpKind::kReduction).set_inputs(1, 1).set_infer(infer_arg_reduce);
  r.add("Softmax", OpKind::kOpaque).set_inputs(1, 1).set_infer(infer_softmax_like);
  r.add("LogSoftmax", OpKind::kOpaque).set_inputs(1, 1).set_infer(infer_softmax_like);
  r.add("Hardmax", OpKind::kOpaque).set_inputs(1, 1).set_infer(infer_softmax_like);
  r.add("CumSum", OpKind::kOpaque).set_inputs(2, 2).set_infer(infer_same_as_input0);
  r.add("TopK", OpKind::kOpaque).set_inputs(1, 2).set_outputs(2, 2).set_infer(infer_top_k);
  r.add("Einsum", OpKind::kOpaque).set_inputs(1, 1 << 20).set_infer(infer_einsum);
  r.add("Det", OpKind::kOpaque).set_inputs(1, 1).set_infer(infer_det);
  r.add("NegativeLogLikelihoodLoss", OpKind::kOpaque).set_inputs(2, 3).set_infer(infer_loss);
  r.add("SoftmaxCrossEntropyLoss", OpKind::kOpaque)
      .set_inputs(2, 3)
      .set_outputs(1, 2)
      .set_infer(infer_loss);
}

}  // namespace tessera
