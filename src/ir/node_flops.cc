#include "ir/node_flops.h"

namespace tessera {
namespace {

// Sets dims to the static dims of value v; false when v is missing or not static.
bool dims_of(const Graph& g, int v, std::vector<int64_t>& dims) {
  if (v == kNoValue || v < 0 || v >= g.num_values() || !g.value(v).type.is_static()) return false;
  dims = g.value(v).type.static_dims();
  return true;
}

double product(const std::vector<int64_t>& dims, size_t from = 0) {
  double p = 1;
  for (size_t i = from; i < dims.size(); ++i) p *= static_cast<double>(dims[i]);
  return p;
}

}  // namespace

double node_flops(const Graph& g, const Node& node) {
  const std::string& op = node.op_type;
  if (op != "Conv" && op != "ConvTranspose" && op != "MatMul" && op != "Gemm") return 0;
  if (!node.domain.empty() || node.inputs.size() < 2 || node.outputs.empty()) return 0;
  std::vector<int64_t> a, b, y;
  if (!dims_of(g, node.inputs[0], a) || !dims_of(g, node.inputs[1], b) || !dims_of(g, node.outputs[0], y))
    return 0;
  if (op == "Conv") {
    // W is M x C/group x k1 x ...: each output element takes C/group * k1 * ... multiply-adds.
    if (b.size() < 2) return 0;
    return 2 * product(y) * product(b, 1);
  }
  if (op == "ConvTranspose") {
    // W is C x M/group x k1 x ...: each input element is scattered to M/group * k1 * ... outputs.
    if (b.size() < 2) return 0;
    return 2 * product(a) * product(b, 1);
  }
  if (op == "MatMul") {
    // Each output element is a dot product along A's last axis (its only one when A is 1-D).
    if (a.empty()) return 0;
    return 2 * product(y) * static_cast<double>(a.back());
  }
  // Gemm: A is M x K, or K x M with transA.
  if (a.size() != 2) return 0;
  const int64_t k = node.attr_int("transA", 0) != 0 ? a[0] : a[1];
  return 2 * product(y) * static_cast<double>(k);
}

double nodes_flops(const Graph& g, const std::vector<int>& nodes) {
  double sum = 0;
  for (int n : nodes) sum += node_flops(g, g.node(n));
  return sum;
}

double graph_flops(const Graph& g) {
  double sum = 0;
  for (const Node& node : g.nodes()) sum += node_flops(g, node);
  return sum;
}

}  // namespace tessera
