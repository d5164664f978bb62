#include "bench_cases.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "ir/node_flops.h"
#include "onnx/onnx_import.h"
#include "ops/op_registry.h"

namespace tessera::bench {
namespace {

constexpr int kOpset = 17;
// The reference kernels are plain loops (a few GFLOP/s at best): above this they would take
// seconds per run, so they are neither timed nor used as the oracle.
constexpr double kRefMaxFlops = 4e9;
// Its elementwise kernels (generic broadcasting loops) reach well under 1 GB/s.
constexpr int64_t kRefMaxElements = int64_t{4} << 20;

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

Graph new_graph(const std::string& name) {
  Graph g;
  g.name = name;
  g.opsets[""] = kOpset;
  return g;
}

Status finish(Graph& g) {
  TESSERA_RETURN_IF_ERROR(g.finalize());
  TESSERA_RETURN_IF_ERROR(infer_graph_types(g));
  for (const Value& v : g.values())
    if (!v.type.is_static())
      return internal_error("bench graph '" + g.name + "': value '" + v.name +
                            "' has no static type");
  return Status();
}

// --- GEMM --------------------------------------------------------------------------------------

// A GEMM-group case "KIND MxKxN" of 2*m*k*n FLOPs, its graph still to build.
BenchCase gemm_group_case(const std::string& kind, int64_t m, int64_t k, int64_t n) {
  BenchCase c;
  c.name = kind + " " + std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n);
  c.group = "gemm";
  c.work = 2.0 * m * k * n;
  c.ref_cheap = c.work <= kRefMaxFlops;
  return c;
}

BenchCase gemm_case(int64_t m, int64_t k, int64_t n) {
  BenchCase c = gemm_group_case("matmul", m, k, n);
  c.build = [=, name = c.name]() -> Result<Graph> {
    Graph g = new_graph(name);
    int a = g.add_input("A", TensorType::of(DType::kFloat32, {m, k}));
    int b = g.add_constant("B", random_tensor({k, n}, 1, 1.0f / std::sqrt(static_cast<float>(k))));
    int y = g.add_value("Y");
    g.add_node("MatMul", {a, b}, {y}, {}, "matmul");
    g.mark_output(y);
    TESSERA_RETURN_IF_ERROR(finish(g));
    return g;
  };
  return c;
}

// A classifier head: Softmax(A * B + bias) over rows of n classes (PP-OCR rec's CTC head).
BenchCase gemm_softmax_case(int64_t m, int64_t k, int64_t n) {
  BenchCase c = gemm_group_case("softmax(matmul+b)", m, k, n);
  c.build = [=, name = c.name]() -> Result<Graph> {
    Graph g = new_graph(name);
    int a = g.add_input("A", TensorType::of(DType::kFloat32, {1, m, k}));
    int b = g.add_constant("B", random_tensor({k, n}, 1, 4.0f / std::sqrt(static_cast<float>(k))));
    int bias = g.add_constant("bias", random_tensor({n}, 2, 1.0f));
    int prod = g.add_value("prod"), logits = g.add_value("logits"), y = g.add_value("Y");
    g.add_node("MatMul", {a, b}, {prod}, {}, "matmul");
    g.add_node("Add", {prod, bias}, {logits}, {}, "add");
    g.add_node("Softmax", {logits}, {y}, {{"axis", Attribute::of_int(2)}}, "softmax");
    g.mark_output(y);
    TESSERA_RETURN_IF_ERROR(finish(g));
    return g;
  };
  return c;
}

// --- Conv --------------------------------------------------------------------------------------

struct ConvSpec {
  std::vector<int64_t> x, w;  // input N x C x H x W, weight Cout x C/group x kh x kw
  bool bias = false;
  std::map<std::string, Attribute>
      attrs;  // as in the model (kernel_shape, pads, strides, group...)
};

std::string attr_key(const std::map<std::string, Attribute>& attrs) {
  std::string key;
  for (const auto& [name, a] : attrs) {
    key += name + "=";
    switch (a.type) {
      case Attribute::Type::kInt: key += std::to_string(a.i); break;
      case Attribute::Type::kInts:
        for (int64_t v : a.ints) key += std::to_string(v) + ",";
        break;
      case Attribute::Type::kString: key += a.s; break;
      case Attribute::Type::kFloat: key += std::to_string(a.f); break;
      default: key += "?"; break;
    }
    key += ";";
  }
  return key;
}

int64_t attr_int(const std::map<std::string, Attribute>& attrs, const std::string& name,
                 int64_t fallback) {
  auto it = attrs.find(name);
  return it != attrs.end() && it->second.type == Attribute::Type::kInt ? it->second.i : fallback;
}

int64_t first_of(const std::map<std::string, Attribute>& attrs, const std::string& name,
                 int64_t fallback) {
  auto it = attrs.find(name);
  return it != attrs.end() && it->second.type == Attribute::Type::kInts && !it->second.ints.empty()
             ? it->second.ints[0]
             : fallback;
}

// "conv 1x16x320x320 o32 k3 s2 dw": input, output channels, kernel, stride, grouping, dilation.
std::string conv_name(const ConvSpec& s) {
  std::string name =
      "conv " + dims_to_string(s.x) + " o" + std::to_string(s.w[0]) + " k" + std::to_string(s.w[2]);
  if (s.w.size() > 3 && s.w[3] != s.w[2]) name += "x" + std::to_string(s.w[3]);
  int64_t stride = first_of(s.attrs, "strides", 1), dilation = first_of(s.attrs, "dilations", 1);
  int64_t group = attr_int(s.attrs, "group", 1);
  if (stride != 1) name += " s" + std::to_string(stride);
  if (dilation != 1) name += " d" + std::to_string(dilation);
  if (group != 1) name += group == s.x[1] && group == s.w[0] ? " dw" : " g" + std::to_string(group);
  return name;
}

BenchCase conv_case(ConvSpec spec, std::string name) {
  BenchCase c;
  c.name = std::move(name);
  int64_t group = std::max<int64_t>(1, attr_int(spec.attrs, "group", 1));
  c.group = group > 1 && group == spec.x[1] ? "depthwise" : "conv";
  c.build = [spec, name = c.name]() -> Result<Graph> {
    Graph g = new_graph(name);
    int64_t fan_in = 1;
    for (size_t i = 1; i < spec.w.size(); ++i) fan_in *= spec.w[i];
    std::vector<int> inputs = {
        g.add_input("X", TensorType::of(DType::kFloat32, spec.x)),
        g.add_constant("W",
                       random_tensor(spec.w, 2, 1.0f / std::sqrt(static_cast<float>(fan_in))))};
    if (spec.bias) inputs.push_back(g.add_constant("B", random_tensor({spec.w[0]}, 3, 0.1f)));
    int y = g.add_value("Y");
    g.add_node("Conv", inputs, {y}, spec.attrs, "conv");
    g.mark_output(y);
    TESSERA_RETURN_IF_ERROR(finish(g));
    return g;
  };
  // Work needs the output size: build once now (cheap: weights only) and count.
  Result<Graph> g = c.build();
  if (g.ok()) c.work = node_flops(*g, g->node(0));
  c.ref_cheap = c.work <= kRefMaxFlops;
  return c;
}

ConvSpec depthwise_spec(int64_t c, int64_t hw, int64_t k) {
  ConvSpec s;
  s.x = {1, c, hw, hw};
  s.w = {c, 1, k, k};
  s.bias = true;
  s.attrs["group"] = Attribute::of_int(c);
  s.attrs["kernel_shape"] = Attribute::of_ints({k, k});
  s.attrs["pads"] = Attribute::of_ints({k / 2, k / 2, k / 2, k / 2});
  s.attrs["strides"] = Attribute::of_ints({1, 1});
  return s;
}

// --- Elementwise -------------------------------------------------------------------------------

std::string count_name(int64_t n) {
  if (n % (1 << 20) == 0) return std::to_string(n >> 20) + "M";
  if (n % (1 << 10) == 0) return std::to_string(n >> 10) + "K";
  return std::to_string(n);
}

// relu(a*b + c): three inputs read, one output written.
BenchCase mul_add_relu_case(int64_t n) {
  BenchCase c;
  c.name = "relu(a*b+c) " + count_name(n);
  c.group = "elementwise";
  c.work_kind = WorkKind::kBytes;
  c.work = 4.0 * n * sizeof(float);
  c.ref_cheap = n <= kRefMaxElements;
  c.build = [=, name = c.name]() -> Result<Graph> {
    Graph g = new_graph(name);
    TensorType t = TensorType::of(DType::kFloat32, {n});
    int a = g.add_input("a", t), b = g.add_input("b", t), cc = g.add_input("c", t);
    int ab = g.add_value("ab"), abc = g.add_value("abc"), y = g.add_value("y");
    g.add_node("Mul", {a, b}, {ab}, {}, "mul");
    g.add_node("Add", {ab, cc}, {abc}, {}, "add");
    g.add_node("Relu", {abc}, {y}, {}, "relu");
    g.mark_output(y);
    TESSERA_RETURN_IF_ERROR(finish(g));
    return g;
  };
  return c;
}

// Hardswish spelled out (as exporters do): x*clip(x+3, 0, 6)/6. One input read, one output written.
BenchCase hardswish_chain_case(int64_t n) {
  BenchCase c;
  c.name = "x*clip(x+3,0,6)/6 " + count_name(n);
  c.group = "elementwise";
  c.work_kind = WorkKind::kBytes;
  c.work = 2.0 * n * sizeof(float);
  c.ref_cheap = n <= kRefMaxElements;
  c.build = [=, name = c.name]() -> Result<Graph> {
    Graph g = new_graph(name);
    int x = g.add_input("x", TensorType::of(DType::kFloat32, {n}));
    int three = g.add_constant("three", Tensor::scalar<float>(3.0f));
    int zero = g.add_constant("zero", Tensor::scalar<float>(0.0f));
    int six = g.add_constant("six", Tensor::scalar<float>(6.0f));
    int six_div = g.add_constant("six_div", Tensor::scalar<float>(6.0f));
    int x3 = g.add_value("x3"), clipped = g.add_value("clipped"), scaled = g.add_value("scaled"),
        y = g.add_value("y");
    // The chain feeds each next op's input 0 (the form the backends' patterns describe).
    g.add_node("Add", {x, three}, {x3}, {}, "add");
    g.add_node("Clip", {x3, zero, six}, {clipped}, {}, "clip");
    g.add_node("Mul", {clipped, x}, {scaled}, {}, "mul");
    g.add_node("Div", {scaled, six_div}, {y}, {}, "div");
    g.mark_output(y);
    TESSERA_RETURN_IF_ERROR(finish(g));
    return g;
  };
  return c;
}

// x * s with s per channel ([C, 1, 1]): a squeeze-excite block's scaling, on a small feature map.
BenchCase channel_scale_case(int64_t channels, int64_t h, int64_t w) {
  BenchCase c;
  c.name = "x*s[c] " + std::to_string(channels) + "x" + std::to_string(h) + "x" + std::to_string(w);
  c.group = "elementwise";
  c.work_kind = WorkKind::kBytes;
  c.work = 2.0 * channels * h * w * sizeof(float);
  c.ref_cheap = true;
  c.build = [=, name = c.name]() -> Result<Graph> {
    Graph g = new_graph(name);
    int x = g.add_input("x", TensorType::of(DType::kFloat32, {1, channels, h, w}));
    int scale = g.add_input("s", TensorType::of(DType::kFloat32, {1, channels, 1, 1}));
    int y = g.add_value("y");
    g.add_node("Mul", {x, scale}, {y}, {}, "mul");
    g.mark_output(y);
    TESSERA_RETURN_IF_ERROR(finish(g));
    return g;
  };
  return c;
}

// A squeeze-excite block's output projection: x * s (s per channel, computed at run time), a 1x1
// Conv and BatchNormalization: 2 * C * OC * H * W flops.
BenchCase se_projection_case(int64_t channels, int64_t out_channels, int64_t h, int64_t w) {
  BenchCase c;
  c.name = "conv1x1(x*s[c])+bn " + std::to_string(channels) + "x" + std::to_string(h) + "x" +
           std::to_string(w) + " o" + std::to_string(out_channels);
  c.group = "conv";
  c.work = 2.0 * channels * out_channels * h * w;
  c.ref_cheap = true;
  c.build = [=, name = c.name]() -> Result<Graph> {
    Graph g = new_graph(name);
    int x = g.add_input("x", TensorType::of(DType::kFloat32, {1, channels, h, w}));
    int scale = g.add_input("s", TensorType::of(DType::kFloat32, {1, channels, 1, 1}));
    int wt = g.add_constant("W", random_tensor({out_channels, channels, 1, 1}, 2,
                                               1.0f / std::sqrt(static_cast<float>(channels))));
    std::vector<int> bn = {g.add_constant("gamma", random_tensor({out_channels}, 3)),
                           g.add_constant("beta", random_tensor({out_channels}, 4)),
                           g.add_constant("mean", random_tensor({out_channels}, 5))};
    Tensor var = random_tensor({out_channels}, 6);
    for (int64_t k = 0; k < out_channels; ++k) var.data<float>()[k] = 1.0f + std::fabs(var.data<float>()[k]);
    bn.push_back(g.add_constant("var", std::move(var)));
    int xs = g.add_value("xs"), conv = g.add_value("conv"), y = g.add_value("y");
    g.add_node("Mul", {x, scale}, {xs}, {}, "mul");
    g.add_node("Conv", {xs, wt}, {conv}, {{"kernel_shape", Attribute::of_ints({1, 1})}}, "conv");
    g.add_node("BatchNormalization", {conv, bn[0], bn[1], bn[2], bn[3]}, {y}, {}, "bn");
    g.mark_output(y);
    TESSERA_RETURN_IF_ERROR(finish(g));
    return g;
  };
  return c;
}

}  // namespace

Tensor random_tensor(const std::vector<int64_t>& dims, uint64_t seed, float scale) {
  Tensor t(DType::kFloat32, dims);
  float* p = t.data<float>();
  uint64_t state = seed * 0x2545f4914f6cdd1dULL + 1;
  const float unit = scale / static_cast<float>(1u << 23);  // 24 random bits -> [-scale, scale)
  for (int64_t i = 0; i < t.numel(); ++i) {
    int32_t bits = static_cast<int32_t>(splitmix64(state) >> 40) - (1 << 23);
    p[i] = static_cast<float>(bits) * unit;
  }
  return t;
}

std::vector<BenchCase> gemm_cases() {
  // ... and the PP-OCR rec model's: its SVTR neck (40 tokens of 120) and its CTC head.
  return {gemm_case(1, 4096, 4096),   gemm_case(64, 768, 768),   gemm_case(512, 512, 512),
          gemm_case(2048, 2048, 2048), gemm_case(40, 120, 360),   gemm_case(40, 240, 120),
          gemm_case(40, 120, 6625), gemm_softmax_case(40, 120, 6625)};
}

std::vector<BenchCase> se_projection_cases() {
  // The PP-OCR cls model's squeeze-excite projections: its first, a middle and its last.
  return {se_projection_case(8, 8, 12, 96), se_projection_case(88, 16, 3, 96),
          se_projection_case(200, 32, 2, 96)};
}

std::vector<BenchCase> depthwise_cases() {
  return {conv_case(depthwise_spec(96, 160, 3), conv_name(depthwise_spec(96, 160, 3))),
          conv_case(depthwise_spec(480, 20, 5), conv_name(depthwise_spec(480, 20, 5)))};
}

std::vector<BenchCase> elementwise_cases() {
  const int64_t large = int64_t{32} << 20;  // 128 MiB per tensor: far beyond any cache
  const int64_t small = int64_t{64} << 10;  // 256 KiB per tensor: stays in L2
  // ... and the PP-OCR cls model's last squeeze-excite scaling (200 channels of 2x96).
  return {mul_add_relu_case(large), hardswish_chain_case(large), mul_add_relu_case(small),
          hardswish_chain_case(small), channel_scale_case(200, 2, 96)};
}

Result<std::vector<BenchCase>> model_conv_cases(const std::string& model_path,
                                                const std::vector<int64_t>& input_dims) {
  TESSERA_ASSIGN_OR_RETURN(Graph g, import_onnx_file(model_path));
  if (g.inputs().size() != 1)
    return invalid_argument(model_path + ": expected a model with one input");
  // The model's input has dynamic H/W: pin it and infer every type again (as `tessera run
  // --shape`).
  Value& in = g.value(g.inputs()[0]);
  in.type = TensorType::of(in.type.dtype == DType::kUndefined ? DType::kFloat32 : in.type.dtype,
                           input_dims);
  TESSERA_RETURN_IF_ERROR(infer_graph_types(g));

  std::map<std::string, int> index_of;  // dedupe key -> case index
  std::vector<ConvSpec> specs;
  std::vector<int> occurrences;
  int dynamic = 0;
  for (const Node& n : g.nodes()) {
    if (n.op_type != "Conv" || n.inputs.size() < 2) continue;
    const Value& x = g.value(n.inputs[0]);
    const Value& w = g.value(n.inputs[1]);
    if (!x.type.is_static() || !w.type.is_static() || x.type.rank() != 4) {
      ++dynamic;
      continue;
    }
    ConvSpec s;
    s.x = x.type.static_dims();
    s.w = w.type.static_dims();
    s.bias = n.inputs.size() > 2 && n.inputs[2] != kNoValue;
    s.attrs = n.attrs;
    std::string key = dims_to_string(s.x) + "|" + dims_to_string(s.w) + "|" + (s.bias ? "b" : "") +
                      "|" + attr_key(s.attrs);
    auto [it, inserted] = index_of.emplace(key, static_cast<int>(specs.size()));
    if (inserted) {
      specs.push_back(std::move(s));
      occurrences.push_back(0);
    }
    ++occurrences[it->second];
  }
  if (dynamic > 0)
    std::fprintf(stderr, "bench: %d Conv nodes of %s have no static input shape: skipped\n",
                 dynamic, model_path.c_str());

  std::vector<BenchCase> cases;
  std::set<std::string> names;
  for (size_t i = 0; i < specs.size(); ++i) {
    std::string name = conv_name(specs[i]);
    // Same shapes with other pads (or bias): keep both, told apart by a suffix.
    for (int v = 2; names.count(name); ++v) name = conv_name(specs[i]) + " #" + std::to_string(v);
    names.insert(name);
    BenchCase c = conv_case(specs[i], name);
    c.occurrences = occurrences[i];
    c.group = "model " + c.group;
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace tessera::bench
