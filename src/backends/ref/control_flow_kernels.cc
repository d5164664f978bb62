// If, Loop and Scan: run their body subgraphs through the runtime's subgraph runner.
#include <algorithm>
#include <cstring>

#include "backends/ref/ref_kernel.h"
#include "backends/ref/ref_util.h"

namespace tessera {
namespace {

Result<const Graph*> body_attr(const RefKernelContext& ctx, const char* name) {
  const Attribute* a = ctx.node().attr(name);
  if (!a || a->type != Attribute::Type::kGraph || !a->g) return ctx.error(std::string("missing subgraph '") + name + "'");
  return a->g.get();
}

Result<bool> scalar_bool(const RefKernelContext& ctx, const Tensor& t, const char* what) {
  if (t.numel() != 1 || t.dtype() == DType::kString) return ctx.error(std::string(what) + " must hold one element");
  return t.as_double(0) != 0.0;
}

// t with `axis` removed, at position `index` along it.
Tensor slice_along(const Tensor& t, int axis, int64_t index) {
  std::vector<int64_t> dims = t.dims();
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= dims[i];
  for (int i = axis + 1; i < t.rank(); ++i) inner *= dims[i];
  int64_t len = dims[axis];
  dims.erase(dims.begin() + axis);
  Tensor out(t.dtype(), dims);
  size_t es = dtype_size(t.dtype());
  const char* src = static_cast<const char*>(t.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(dst + o * inner * es, src + ((o * len + index) * inner) * es, inner * es);
  return out;
}

// Stacks equally shaped tensors along a new `axis`.
Result<Tensor> stack_along(const RefKernelContext& ctx, const std::vector<Tensor>& parts, int axis) {
  if (parts.empty()) return ctx.error("nothing to stack");
  const Tensor& first = parts[0];
  for (const Tensor& p : parts) {
    if (p.dims() != first.dims() || p.dtype() != first.dtype()) return ctx.error("scan outputs differ in shape between iterations");
  }
  if (first.dtype() == DType::kString) return ctx.unsupported("string scan outputs");
  std::vector<int64_t> dims = first.dims();
  dims.insert(dims.begin() + axis, static_cast<int64_t>(parts.size()));
  Tensor out = ctx.allocator().allocate(first.dtype(), dims);
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= first.dims()[i];
  for (int i = axis; i < first.rank(); ++i) inner *= first.dims()[i];
  size_t es = dtype_size(first.dtype());
  int64_t len = static_cast<int64_t>(parts.size());
  char* dst = static_cast<char*>(out.raw_data());
  for (int64_t k = 0; k < len; ++k) {
    const char* src = static_cast<const char*>(parts[k].raw_data());
    for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + ((o * len + k) * inner) * es, src + o * inner * es, inner * es);
  }
  return out;
}

Status if_kernel(RefKernelContext& ctx) {
  if (!ctx.has_input(0)) return ctx.error("missing condition");
  TESSERA_ASSIGN_OR_RETURN(bool cond, scalar_bool(ctx, *ctx.input(0), "condition"));
  TESSERA_ASSIGN_OR_RETURN(const Graph* body, body_attr(ctx, cond ? "then_branch" : "else_branch"));
  TESSERA_ASSIGN_OR_RETURN(std::vector<Tensor> outs, ctx.run_subgraph(*body, {}));
  if (static_cast<int>(outs.size()) != ctx.num_outputs()) {
    return ctx.error("branch has " + std::to_string(outs.size()) + " outputs, the node " + std::to_string(ctx.num_outputs()));
  }
  for (int i = 0; i < ctx.num_outputs(); ++i) ctx.set_output(i, std::move(outs[i]));
  return Status();
}

Status loop_kernel(RefKernelContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const Graph* body, body_attr(ctx, "body"));
  int64_t max_trips = -1;
  if (ctx.has_input(0)) {
    if (ctx.input(0)->numel() != 1) return ctx.error("M must hold one element");
    max_trips = ctx.input(0)->as_int64(0);
  }
  bool cond = true;
  if (ctx.has_input(1)) {
    TESSERA_ASSIGN_OR_RETURN(cond, scalar_bool(ctx, *ctx.input(1), "cond"));
  }
  int num_carried = ctx.num_inputs() - 2;
  int num_scan = ctx.num_outputs() - num_carried;
  if (num_scan < 0) return ctx.error("fewer outputs than loop-carried values");
  if (static_cast<int>(body->inputs().size()) != num_carried + 2) return ctx.error("body inputs do not match the loop");
  std::vector<Tensor> carried;
  for (int i = 0; i < num_carried; ++i) {
    if (!ctx.has_input(2 + i)) return ctx.unsupported("optional loop-carried values");
    carried.push_back(*ctx.input(2 + i));
  }
  std::vector<std::vector<Tensor>> scans(num_scan);
  constexpr int64_t kMaxIterations = int64_t{1} << 31;
  for (int64_t it = 0; (max_trips < 0 || it < max_trips) && cond; ++it) {
    if (it >= kMaxIterations) return ctx.error("loop ran past 2^31 iterations");
    std::vector<Tensor> in{Tensor::scalar<int64_t>(it), Tensor::scalar<bool>(cond)};
    in.insert(in.end(), carried.begin(), carried.end());
    TESSERA_ASSIGN_OR_RETURN(std::vector<Tensor> out, ctx.run_subgraph(*body, in));
    if (static_cast<int>(out.size()) != 1 + num_carried + num_scan) return ctx.error("body outputs do not match the loop");
    TESSERA_ASSIGN_OR_RETURN(cond, scalar_bool(ctx, out[0], "body condition"));
    for (int i = 0; i < num_carried; ++i) carried[i] = out[1 + i];
    for (int k = 0; k < num_scan; ++k) scans[k].push_back(out[1 + num_carried + k]);
  }
  for (int i = 0; i < num_carried; ++i) ctx.set_output(i, carried[i]);
  for (int k = 0; k < num_scan; ++k) {
    if (scans[k].empty()) {
      const Graph& b = *body;
      DType dt = b.value(b.outputs()[1 + num_carried + k]).type.dtype;
      ctx.output(num_carried + k, dt == DType::kUndefined ? DType::kFloat32 : dt, {0});
      continue;
    }
    TESSERA_ASSIGN_OR_RETURN(Tensor stacked, stack_along(ctx, scans[k], 0));
    ctx.set_output(num_carried + k, std::move(stacked));
  }
  return Status();
}

Status scan_kernel(RefKernelContext& ctx) {
  if (ctx.node().opset < 9) return ctx.unsupported("Scan before opset 9 (batched form)");
  TESSERA_ASSIGN_OR_RETURN(const Graph* body, body_attr(ctx, "body"));
  int num_scan_in = static_cast<int>(ctx.node().attr_int("num_scan_inputs", -1));
  int num_state = ctx.num_inputs() - num_scan_in;
  if (num_scan_in < 1 || num_state < 0) return ctx.error("bad num_scan_inputs");
  int num_scan_out = ctx.num_outputs() - num_state;
  if (num_scan_out < 0) return ctx.error("fewer outputs than state values");
  auto in_axes = ctx.node().attr_ints("scan_input_axes", std::vector<int64_t>(num_scan_in, 0));
  auto in_dirs = ctx.node().attr_ints("scan_input_directions", std::vector<int64_t>(num_scan_in, 0));
  auto out_axes = ctx.node().attr_ints("scan_output_axes", std::vector<int64_t>(num_scan_out, 0));
  auto out_dirs = ctx.node().attr_ints("scan_output_directions", std::vector<int64_t>(num_scan_out, 0));
  if (static_cast<int>(in_axes.size()) != num_scan_in || static_cast<int>(in_dirs.size()) != num_scan_in ||
      static_cast<int>(out_axes.size()) != num_scan_out || static_cast<int>(out_dirs.size()) != num_scan_out) {
    return ctx.error("scan axes/directions do not match the inputs/outputs");
  }
  std::vector<Tensor> state;
  for (int i = 0; i < num_state; ++i) {
    if (!ctx.has_input(i)) return ctx.error("missing state input");
    state.push_back(*ctx.input(i));
  }
  int64_t length = -1;
  std::vector<int> axes(num_scan_in);
  for (int k = 0; k < num_scan_in; ++k) {
    const Tensor* t = ctx.input(num_state + k);
    if (!t) return ctx.error("missing scan input");
    if (t->dtype() == DType::kString) return ctx.unsupported("string scan inputs");
    TESSERA_ASSIGN_OR_RETURN(axes[k], ref::normalize_axis(in_axes[k], t->rank()));
    if (t->rank() == 0) return ctx.error("scan input must have rank >= 1");
    if (length >= 0 && t->dims()[axes[k]] != length) return ctx.error("scan inputs differ in length");
    length = t->dims()[axes[k]];
  }
  std::vector<std::vector<Tensor>> scans(num_scan_out);
  for (int64_t it = 0; it < length; ++it) {
    std::vector<Tensor> in = state;
    for (int k = 0; k < num_scan_in; ++k) {
      int64_t idx = in_dirs[k] ? length - 1 - it : it;
      in.push_back(slice_along(*ctx.input(num_state + k), axes[k], idx));
    }
    TESSERA_ASSIGN_OR_RETURN(std::vector<Tensor> out, ctx.run_subgraph(*body, in));
    if (static_cast<int>(out.size()) != num_state + num_scan_out) return ctx.error("body outputs do not match the scan");
    for (int i = 0; i < num_state; ++i) state[i] = out[i];
    for (int k = 0; k < num_scan_out; ++k) scans[k].push_back(out[num_state + k]);
  }
  for (int i = 0; i < num_state; ++i) ctx.set_output(i, state[i]);
  for (int k = 0; k < num_scan_out; ++k) {
    if (scans[k].empty()) return ctx.unsupported("scan over zero iterations");
    if (out_dirs[k]) std::reverse(scans[k].begin(), scans[k].end());
    TESSERA_ASSIGN_OR_RETURN(int axis, ref::normalize_axis(out_axes[k], scans[k][0].rank() + 1));
    TESSERA_ASSIGN_OR_RETURN(Tensor stacked, stack_along(ctx, scans[k], axis));
    ctx.set_output(num_state + k, std::move(stacked));
  }
  return Status();
}

}  // namespace

void register_control_flow_kernels(RefKernelTable& t) {
  t.add("If", if_kernel);
  t.add("Loop", loop_kernel);
  t.add("Scan", scan_kernel);
}

}  // namespace tessera
