#include "backends/harness.h"

#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "ops/op_registry.h"

namespace tessera::harness {
namespace {

using Dims = std::vector<int64_t>;

std::string dims_str(const Dims& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += std::string(i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

// Graph under construction: inputs with their random data, constants, nodes.
class Builder {
 public:
  Builder(uint64_t seed) : rng_(seed) {}

  Tensor random(const Dims& dims, float lo, float hi) {
    Tensor t(DType::kFloat32, dims);
    std::uniform_real_distribution<float> dist(lo, hi);
    float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng_);
    return t;
  }
  int input(const Dims& dims, float lo = -1.f, float hi = 1.f) {
    int v = g.add_input(std::string("in") + std::to_string(inputs.size()), TensorType::of(DType::kFloat32, dims));
    inputs.push_back(random(dims, lo, hi));
    return v;
  }
  int constant(const Dims& dims, float lo = -1.f, float hi = 1.f) { return constant(random(dims, lo, hi)); }
  int constant(Tensor t) { return g.add_constant(std::string("c") + std::to_string(next_id_++), std::move(t)); }
  int scalar(float x) {
    Tensor t(DType::kFloat32, {});
    t.data<float>()[0] = x;
    return constant(std::move(t));
  }
  int ints(const Dims& v) {
    Tensor t(DType::kInt64, {static_cast<int64_t>(v.size())});
    for (size_t i = 0; i < v.size(); ++i) t.data<int64_t>()[i] = v[i];
    return constant(std::move(t));
  }
  int floats(const std::vector<float>& v) {
    Tensor t(DType::kFloat32, {static_cast<int64_t>(v.size())});
    for (size_t i = 0; i < v.size(); ++i) t.data<float>()[i] = v[i];
    return constant(std::move(t));
  }
  int node(const std::string& op, std::vector<int> in, std::map<std::string, Attribute> attrs = {}) {
    int out = g.add_value(std::string("v") + std::to_string(next_id_++));
    g.add_node(op, std::move(in), {out}, std::move(attrs), op + std::to_string(g.num_nodes()));
    return out;
  }
  // The shape of a value built so far (types are inferred node by node).
  Result<Dims> dims_of(int v) {
    TESSERA_RETURN_IF_ERROR(infer());
    const TensorType& t = g.value(v).type;
    if (!t.is_static()) return internal_error("harness: value without a static shape");
    return t.static_dims();
  }
  Status infer() {
    for (int n = 0; n < g.num_nodes(); ++n) g.node(n).opset = 17;
    for (int i = inferred_; i < g.num_nodes(); ++i) TESSERA_RETURN_IF_ERROR(OpRegistry::global().infer_node(g, i));
    inferred_ = g.num_nodes();
    return Status();
  }

  Graph g;
  std::vector<Tensor> inputs;
  std::string description;

 private:
  std::mt19937 rng_;
  int next_id_ = 0;
  int inferred_ = 0;
};

Attribute ints(Dims v) { return Attribute::of_ints(std::move(v)); }
Attribute i(int64_t v) { return Attribute::of_int(v); }
Attribute f(float v) { return Attribute::of_float(v); }
Attribute s(std::string v) { return Attribute::of_string(std::move(v)); }

// ---- heads: build an op with its own inputs; return its output value -------------------------

struct ConvSpec {
  Dims x;           // N, C, H, W
  int64_t m, k, stride, group, dilation;
  Dims pads;        // top, left, bottom, right
  bool bias;
};

int conv(Builder& b, const ConvSpec& c) {
  int x = b.input(c.x);
  int w = b.constant({c.m, c.x[1] / c.group, c.k, c.k}, -0.5f, 0.5f);
  std::vector<int> in = {x, w};
  if (c.bias) in.push_back(b.constant({c.m}));
  b.description = "Conv x" + dims_str(c.x) + " m" + std::to_string(c.m) + " k" + std::to_string(c.k) + " s" +
                  std::to_string(c.stride) + " g" + std::to_string(c.group) + " d" + std::to_string(c.dilation) +
                  " pads" + dims_str(c.pads);
  return b.node("Conv", in, {{"kernel_shape", ints({c.k, c.k})}, {"strides", ints({c.stride, c.stride})},
                             {"group", i(c.group)}, {"dilations", ints({c.dilation, c.dilation})},
                             {"pads", ints({c.pads[0], c.pads[1], c.pads[2], c.pads[3]})}});
}

Result<int> head_conv(Builder& b, int v) {
  static const ConvSpec specs[kVariants] = {
      {{1, 3, 17, 19}, 8, 3, 1, 1, 1, {1, 1, 1, 1}, true},
      {{2, 8, 13, 11}, 12, 3, 2, 4, 1, {0, 1, 1, 0}, true},    // grouped, strided, asymmetric pads
      {{1, 16, 15, 15}, 16, 5, 1, 16, 1, {2, 2, 2, 2}, true},  // depthwise
      {{1, 6, 9, 10}, 10, 3, 1, 1, 2, {2, 2, 2, 2}, false},    // dilated, no bias
  };
  return conv(b, specs[v]);
}

Result<int> head_conv_transpose(Builder& b, int v) {
  struct Spec { Dims x; int64_t m, k, stride, pad, out_pad; };
  static const Spec specs[kVariants] = {
      {{1, 8, 7, 9}, 4, 3, 2, 1, 1}, {{2, 4, 5, 5}, 6, 2, 2, 0, 0}, {{1, 6, 6, 7}, 3, 4, 2, 1, 0},
      {{1, 5, 4, 6}, 5, 3, 1, 1, 0}};
  const Spec& c = specs[v];
  int x = b.input(c.x);
  int w = b.constant({c.x[1], c.m, c.k, c.k}, -0.5f, 0.5f);
  b.description = "ConvTranspose x" + dims_str(c.x) + " m" + std::to_string(c.m) + " k" + std::to_string(c.k) +
                  " s" + std::to_string(c.stride);
  return b.node("ConvTranspose", {x, w, b.constant({c.m})},
                {{"kernel_shape", ints({c.k, c.k})}, {"strides", ints({c.stride, c.stride})},
                 {"pads", ints({c.pad, c.pad, c.pad, c.pad})}, {"output_padding", ints({c.out_pad, c.out_pad})}});
}

Result<int> head_matmul(Builder& b, int v) {
  struct Spec { Dims a, w; bool const_w; };
  static const Spec specs[kVariants] = {
      {{7, 13}, {13, 9}, true}, {{2, 5, 17}, {17, 6}, true}, {{1, 33}, {33, 65}, true},
      {{3, 4, 8}, {3, 8, 5}, false}};  // batched, both operands computed
  const Spec& c = specs[v];
  int a = b.input(c.a);
  int w = c.const_w ? b.constant(c.w) : b.input(c.w);
  b.description = "MatMul " + dims_str(c.a) + "x" + dims_str(c.w) + (c.const_w ? " (constant B)" : "");
  return b.node("MatMul", {a, w});
}

Result<int> head_gemm(Builder& b, int v) {
  struct Spec { Dims a, w, c; int64_t trans_a, trans_b; float alpha, beta; };
  static const Spec specs[kVariants] = {
      {{7, 13}, {13, 9}, {9}, 0, 0, 1.f, 1.f}, {{5, 17}, {11, 17}, {1, 11}, 0, 1, 0.5f, 2.f},
      {{13, 7}, {13, 9}, {7, 9}, 1, 0, 1.f, 1.f}, {{3, 64}, {64, 32}, {}, 0, 0, 1.f, 1.f}};
  const Spec& c = specs[v];
  std::vector<int> in = {b.input(c.a), b.constant(c.w)};
  if (!c.c.empty()) in.push_back(b.constant(c.c));
  b.description = "Gemm " + dims_str(c.a) + "x" + dims_str(c.w) + " transA" + std::to_string(c.trans_a) +
                  " transB" + std::to_string(c.trans_b);
  return b.node("Gemm", in, {{"transA", i(c.trans_a)}, {"transB", i(c.trans_b)}, {"alpha", f(c.alpha)},
                             {"beta", f(c.beta)}});
}

Result<int> head_pool(Builder& b, int v, const std::string& op) {
  struct Spec { Dims x; int64_t k, stride, pad, count_include_pad; };
  static const Spec specs[kVariants] = {
      {{1, 3, 11, 13}, 3, 2, 1, 0}, {{2, 5, 8, 8}, 2, 2, 0, 0}, {{1, 4, 7, 9}, 3, 1, 1, 1}, {{1, 16, 10, 10}, 5, 1, 2, 0}};
  const Spec& c = specs[v];
  std::map<std::string, Attribute> attrs = {{"kernel_shape", ints({c.k, c.k})},
                                            {"strides", ints({c.stride, c.stride})},
                                            {"pads", ints({c.pad, c.pad, c.pad, c.pad})}};
  if (op == "AveragePool") attrs["count_include_pad"] = i(c.count_include_pad);
  b.description = op + " x" + dims_str(c.x) + " k" + std::to_string(c.k) + " s" + std::to_string(c.stride) + " p" +
                  std::to_string(c.pad);
  return b.node(op, {b.input(c.x)}, attrs);
}

// Elementwise-style heads share these input shapes.
const Dims kShapes[kVariants] = {{7, 13}, {2, 3, 17, 19}, {1, 8, 32, 32}, {3, 5, 33}};

// Inference BatchNormalization over axis 1 of x, with random scale, bias, mean and (positive) variance.
int batchnorm(Builder& b, int x, int64_t c) {
  return b.node("BatchNormalization", {x, b.constant({c}), b.constant({c}), b.constant({c}), b.constant({c}, 0.5f, 2.f)},
                {{"epsilon", f(1e-5f)}});
}

Result<int> head_batchnorm(Builder& b, int v) {
  static const Dims xs[kVariants] = {{1, 6, 7, 9}, {2, 3, 5, 5}, {1, 16, 1, 1}, {2, 4, 9}};
  b.description = "BatchNormalization x" + dims_str(xs[v]);
  return batchnorm(b, b.input(xs[v]), xs[v][1]);
}

Result<int> head_softmax(Builder& b, int v, const std::string& op) {
  static const Dims xs[kVariants] = {{7, 13}, {2, 3, 33}, {4, 1000}, {2, 5, 6, 7}};
  b.description = op + " x" + dims_str(xs[v]) + " axis -1";
  return b.node(op, {b.input(xs[v], -4.f, 4.f)}, {{"axis", i(-1)}});
}

Result<int> head_layernorm(Builder& b, int v) {
  static const Dims xs[kVariants] = {{7, 13}, {2, 5, 64}, {3, 4, 33}, {1, 197, 96}};
  int64_t n = xs[v].back();
  b.description = "LayerNormalization x" + dims_str(xs[v]) + " axis -1";
  return b.node("LayerNormalization", {b.input(xs[v]), b.constant({n}), b.constant({n})},
                {{"axis", i(-1)}, {"epsilon", f(1e-5f)}});
}

Result<int> head_concat(Builder& b, int v) {
  struct Spec { std::vector<Dims> parts; int64_t axis; };
  static const Spec specs[kVariants] = {{{{1, 3, 5, 7}, {1, 5, 5, 7}}, 1},
                                        {{{2, 4, 6, 6}, {2, 4, 6, 6}, {2, 1, 6, 6}}, 1},
                                        {{{2, 7}, {2, 9}}, 1},
                                        {{{1, 8, 4, 5}, {1, 8, 4, 5}}, 1}};
  std::vector<int> in;
  for (const Dims& d : specs[v].parts) in.push_back(b.input(d));
  b.description = "Concat of " + std::to_string(in.size()) + " axis " + std::to_string(specs[v].axis);
  return b.node("Concat", in, {{"axis", i(specs[v].axis)}});
}

Result<int> head_transpose(Builder& b, int v) {
  struct Spec { Dims x, perm; };
  static const Spec specs[kVariants] = {{{7, 13}, {1, 0}},
                                        {{2, 3, 33}, {0, 2, 1}},
                                        {{1, 40, 3, 8, 15}, {2, 0, 3, 1, 4}},  // attention's q/k/v split
                                        {{2, 5, 6, 7}, {0, 2, 3, 1}}};
  b.description = "Transpose x" + dims_str(specs[v].x) + " perm" + dims_str(specs[v].perm);
  return b.node("Transpose", {b.input(specs[v].x)}, {{"perm", ints(specs[v].perm)}});
}

Result<int> head_slice(Builder& b, int v) {
  struct Spec { Dims x, starts, ends, axes, steps; };
  static const Spec specs[kVariants] = {{{7, 13}, {1}, {-2}, {1}, {1}},
                                        {{2, 6, 9}, {0, 8}, {1, 0}, {0, 2}, {1, -2}},
                                        {{3, 40, 8, 15}, {1}, {2}, {0}, {1}},
                                        {{2, 5, 6, 7}, {1, 0, -100}, {4, 100, 100}, {1, 2, 3}, {2, 3, 1}}};
  const Spec& c = specs[v];
  b.description = "Slice x" + dims_str(c.x) + " starts" + dims_str(c.starts) + " ends" + dims_str(c.ends) +
                  " axes" + dims_str(c.axes) + " steps" + dims_str(c.steps);
  return b.node("Slice", {b.input(c.x), b.ints(c.starts), b.ints(c.ends), b.ints(c.axes), b.ints(c.steps)});
}

Result<int> head_resize(Builder& b, int v) {
  struct Spec { Dims x; std::vector<float> scales; std::string mode, coord, nearest; };
  static const Spec specs[kVariants] = {
      {{1, 4, 5, 7}, {1, 1, 2, 2}, "nearest", "asymmetric", "floor"},
      {{2, 3, 6, 5}, {1, 1, 2, 2}, "linear", "align_corners", "round_prefer_floor"},
      {{1, 2, 8, 8}, {1, 1, 4, 4}, "nearest", "asymmetric", "floor"},
      {{1, 3, 7, 9}, {1, 1, 3, 2}, "nearest", "half_pixel", "round_prefer_ceil"}};
  const Spec& c = specs[v];
  b.description = "Resize x" + dims_str(c.x) + " " + c.mode + " " + c.coord + " " + c.nearest + " scales" +
                  dims_str(Dims(c.scales.begin(), c.scales.end()));
  int roi = b.floats({});
  return b.node("Resize", {b.input(c.x), roi, b.floats(c.scales)},
                {{"mode", s(c.mode)}, {"coordinate_transformation_mode", s(c.coord)}, {"nearest_mode", s(c.nearest)}});
}

Result<int> head_reduce(Builder& b, int v, const std::string& op) {
  struct Spec { Dims x, axes; int64_t keepdims; };
  static const Spec specs[kVariants] = {
      {{7, 13}, {-1}, 1}, {{2, 5, 6, 7}, {2, 3}, 1}, {{3, 4, 5}, {1}, 0}, {{2, 3, 65}, {-1}, 0}};
  const Spec& c = specs[v];
  b.description = op + " x" + dims_str(c.x) + " axes" + dims_str(c.axes) + " keepdims " + std::to_string(c.keepdims);
  int x = b.input(c.x);
  if (op == "ReduceSum") return b.node(op, {x, b.ints(c.axes)}, {{"keepdims", i(c.keepdims)}});  // axes input (13+)
  return b.node(op, {x}, {{"axes", ints(c.axes)}, {"keepdims", i(c.keepdims)}});
}

// ---- elementwise ops: usable as heads (on their own input) and as tails -------------------------

// Input range for ops with a restricted domain.
std::pair<float, float> domain_of(const std::string& op) {
  if (op == "Log" || op == "Sqrt") return {0.05f, 3.f};
  return {-3.f, 3.f};
}

bool is_binary(const std::string& op) {
  static const std::set<std::string> ops = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "PRelu"};
  return ops.count(op) != 0;
}

bool is_unary(const std::string& op) {
  static const std::set<std::string> ops = {"Relu", "Clip", "HardSigmoid", "HardSwish", "Sigmoid", "Tanh",
                                            "LeakyRelu", "Elu", "Exp", "Log", "Sqrt", "Abs", "Neg", "Erf"};
  return ops.count(op) != 0;
}

// Applies a unary op to x.
int unary(Builder& b, const std::string& op, int x, int v) {
  if (op == "Clip") {
    if (v == 3) return b.node(op, {x, b.scalar(-1.f)});  // min only
    return b.node(op, {x, b.scalar(0.f), b.scalar(6.f)});
  }
  if (op == "HardSigmoid") return b.node(op, {x}, {{"alpha", f(v % 2 ? 0.2f : 1.f / 6)}, {"beta", f(0.5f)}});
  if (op == "LeakyRelu") return b.node(op, {x}, {{"alpha", f(0.1f)}});
  if (op == "Elu") return b.node(op, {x}, {{"alpha", f(1.f)}});
  return b.node(op, {x});
}

// Applies a binary op to x with a second operand chosen by variant: same shape (a graph input),
// per-channel (dim 1), scalar, or a two-sided broadcast.
Result<int> binary(Builder& b, const std::string& op, int x, const Dims& xd, int v) {
  // Divisors and exponents stay away from zero and non-integer powers of negatives.
  float lo = -1.f, hi = 1.f;
  if (op == "Div") lo = 0.5f, hi = 2.f;
  Dims yd;
  if (op == "PRelu") {
    // Unidirectional broadcast: the slope per channel, or a single one.
    if (v % 2 == 0 && xd.size() >= 2) yd = Dims(xd.begin() + 1, xd.end()), std::fill(yd.begin() + 1, yd.end(), 1);
    else yd = {1};
    return b.node(op, {x, b.constant(yd, 0.f, 0.5f)});
  }
  if (op == "Pow") {
    // Integer exponents: 2, 3 or per-channel 1/2/3.
    if (v == 0) return b.node(op, {x, b.scalar(2.f)});
    if (v == 1) return b.node(op, {x, b.scalar(3.f)});
    Tensor t(DType::kFloat32, {xd.back()});
    for (int64_t k = 0; k < xd.back(); ++k) t.data<float>()[k] = static_cast<float>(1 + k % 3);
    return b.node(op, {x, b.constant(std::move(t))});
  }
  switch (v) {
    case 0: return b.node(op, {x, b.input(xd, lo, hi)});
    case 1: {
      yd.assign(xd.size(), 1);
      if (xd.size() >= 2) yd[1] = xd[1];
      return b.node(op, {x, b.constant(yd, lo, hi)});
    }
    case 2: return b.node(op, {x, b.scalar(op == "Div" ? 1.7f : 0.7f)});
    default: {
      // y broadcasts along dim 0 and the last dim: [1, d1, ..., 1].
      yd = xd;
      yd.front() = 1;
      yd.back() = 1;
      return b.node(op, {b.input(yd, lo, hi), x});  // the broadcast operand first
    }
  }
}

Result<int> head_elementwise(Builder& b, const std::string& op, int v) {
  const Dims& d = kShapes[v];
  auto [lo, hi] = domain_of(op);
  int x = b.input(d, lo, hi);
  b.description = op + " x" + dims_str(d);
  if (is_unary(op)) return unary(b, op, x, v);
  return binary(b, op, x, d, v);
}

Result<int> head(Builder& b, const std::string& op, int v) {
  if (op == "Conv") return head_conv(b, v);
  if (op == "ConvTranspose") return head_conv_transpose(b, v);
  if (op == "MatMul") return head_matmul(b, v);
  if (op == "Gemm") return head_gemm(b, v);
  if (op == "MaxPool" || op == "AveragePool") return head_pool(b, v, op);
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool") {
    static const Dims xs[kVariants] = {{1, 8, 7, 9}, {2, 5, 4, 4}, {1, 16, 13, 1}, {1, 96, 20, 20}};
    b.description = op + " x" + dims_str(xs[v]);
    return b.node(op, {b.input(xs[v])});
  }
  if (op == "BatchNormalization") return head_batchnorm(b, v);
  if (op == "Softmax" || op == "LogSoftmax") return head_softmax(b, v, op);
  if (op == "LayerNormalization") return head_layernorm(b, v);
  if (op == "Concat") return head_concat(b, v);
  if (op == "Resize") return head_resize(b, v);
  if (op == "Transpose") return head_transpose(b, v);
  if (op == "Slice") return head_slice(b, v);
  if (op == "ReduceMean" || op == "ReduceSum" || op == "ReduceMax") return head_reduce(b, v, op);
  if (is_unary(op) || is_binary(op)) return head_elementwise(b, op, v);
  return unimplemented("the harness has no case for op '" + op + "'");
}

// Per-op tolerance on max|a-b| / max|b|: accumulating ops differ in summation order.
double tolerance_of(const std::string& op) {
  static const std::map<std::string, double> tol = {
      {"Conv", 1e-4}, {"ConvTranspose", 1e-4}, {"MatMul", 1e-4}, {"Gemm", 1e-4}, {"LayerNormalization", 1e-4},
      {"BatchNormalization", 1e-5}, {"Softmax", 1e-5}, {"ReduceMean", 1e-5}, {"ReduceSum", 1e-5},
      {"AveragePool", 1e-5}, {"GlobalAveragePool", 1e-5}, {"Resize", 1e-5}};
  auto it = tol.find(op);
  return it == tol.end() ? 2e-6 : it->second;
}

std::vector<std::string> split(const std::string& pattern) {
  std::vector<std::string> ops;
  std::stringstream ss(pattern);
  for (std::string op; std::getline(ss, op, '+');) ops.push_back(op);
  return ops;
}

}  // namespace

Result<Case> build_case(const std::string& pattern, int variant, uint64_t seed) {
  if (variant < 0 || variant >= kVariants) return invalid_argument("harness variant out of range");
  std::vector<std::string> ops = split(pattern);
  if (ops.empty()) return invalid_argument("empty pattern");
  Builder b(seed * 7919 + static_cast<uint64_t>(variant));
  b.g.name = pattern;
  b.g.opsets[""] = 17;
  TESSERA_ASSIGN_OR_RETURN(int x, head(b, ops[0], variant));
  double tol = tolerance_of(ops[0]);
  for (size_t k = 1; k < ops.size(); ++k) {
    const std::string& op = ops[k];
    if (is_unary(op)) {
      x = unary(b, op, x, variant);
    } else if (is_binary(op)) {
      TESSERA_ASSIGN_OR_RETURN(Dims xd, b.dims_of(x));
      TESSERA_ASSIGN_OR_RETURN(x, binary(b, op, x, xd, variant));
    } else if (op == "BatchNormalization") {
      TESSERA_ASSIGN_OR_RETURN(Dims xd, b.dims_of(x));
      if (xd.size() < 2) return unimplemented("BatchNormalization follows an op whose output has no channel axis");
      x = batchnorm(b, x, xd[1]);
    } else if (op == "Softmax") {
      x = b.node("Softmax", {x}, {{"axis", i(-1)}});  // over the last axis, as classifier heads
    } else if (op == "Concat") {
      // The previous output, then a graph input with 1 + variant channels, along axis 1.
      TESSERA_ASSIGN_OR_RETURN(Dims xd, b.dims_of(x));
      if (xd.size() < 2) return unimplemented("Concat follows an op whose output has no channel axis");
      Dims yd = xd;
      yd[1] = 1 + variant;
      x = b.node("Concat", {x, b.input(yd)}, {{"axis", i(1)}});
    } else {
      return unimplemented("op '" + op + "' cannot follow another op in a harness pattern (only elementwise, "
                           "BatchNormalization, Softmax and Concat ops can)");
    }
    tol = std::max(tol, tolerance_of(op));
  }
  b.g.mark_output(x);
  TESSERA_RETURN_IF_ERROR(b.g.finalize());
  for (int n = 0; n < b.g.num_nodes(); ++n) b.g.node(n).opset = 17;
  TESSERA_RETURN_IF_ERROR(infer_graph_types(b.g));
  if (!b.g.value(x).type.is_static()) return internal_error("harness: output shape not inferred for " + pattern);
  Case c;
  c.name = pattern + " v" + std::to_string(variant) + ": " + b.description;
  c.tolerance = tol * static_cast<double>(ops.size());
  c.inputs = std::move(b.inputs);
  c.graph = std::move(b.g);
  return c;
}

double relative_error(const Tensor& got, const Tensor& want) {
  const double inf = std::numeric_limits<double>::infinity();
  if (got.dtype() != DType::kFloat32 || want.dtype() != DType::kFloat32 || got.dims() != want.dims()) return inf;
  double max_diff = 0, max_ref = 0;
  const float* a = got.data<float>();
  const float* w = want.data<float>();
  for (int64_t k = 0; k < want.numel(); ++k) {
    if (std::isnan(w[k]) || std::isnan(a[k])) {
      if (std::isnan(w[k]) != std::isnan(a[k])) return inf;
      continue;
    }
    if (std::isinf(w[k]) || std::isinf(a[k])) {
      if (a[k] != w[k]) return inf;
      continue;
    }
    max_diff = std::max(max_diff, static_cast<double>(std::fabs(a[k] - w[k])));
    max_ref = std::max(max_ref, static_cast<double>(std::fabs(w[k])));
  }
  if (max_diff == 0) return 0;
  return max_ref == 0 ? inf : max_diff / max_ref;
}

}  // namespace tessera::harness
