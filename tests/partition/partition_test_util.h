// Shared by the partition tests: fake backends (no kernels: rules and search only look at
// supports/accepts) and small hand-built graphs whose candidate sets are worked out by hand.
#pragma once

#include <algorithm>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "ops/op_registry.h"
#include "partition/candidate.h"

namespace tessera::partition_test {

class FakeBackend final : public Backend {
 public:
  FakeBackend(std::string name, FusionStyle style, std::set<std::string> ops, int max_depth = 64)
      : name_(std::move(name)), style_(style), ops_(std::move(ops)), max_depth_(max_depth) {}
  std::string name() const override { return name_; }
  std::string version() const override { return name_ + " 1.0"; }
  Status available() const override { return Status(); }
  FusionStyle fusion_style() const override { return style_; }
  int max_fusion_depth() const override { return style_ == FusionStyle::kNone ? 1 : max_depth_; }
  Status supports(const Graph& g, int n) const override {
    return ops_.count(g.node(n).op_type) ? Status()
                                         : unimplemented(name_ + " has no " + g.node(n).op_type);
  }
  Status accepts(const SubGraph& sg) const override {
    if (accept_fn) return accept_fn(sg);
    return style_ == FusionStyle::kNone && sg.size() != 1 ? unimplemented("single nodes only")
                                                          : Status();
  }
  std::vector<std::string> claimed_patterns() const override { return claimed; }
  Result<std::unique_ptr<Kernel>> compile(const SubGraph&, const CompileOptions&) const override {
    return unimplemented("a fake backend compiles nothing");
  }

  std::function<Status(const SubGraph&)> accept_fn;
  std::vector<std::string> claimed;

 private:
  std::string name_;
  FusionStyle style_;
  std::set<std::string> ops_;
  int max_depth_;
};

inline TensorType f32(std::vector<int64_t> dims) { return TensorType::of(DType::kFloat32, dims); }

inline int node_named(const Graph& g, const std::string& name) {
  for (int n = 0; n < g.num_nodes(); ++n)
    if (g.node(n).name == name) return n;
  return -1;
}

inline NodeSet nodes_named(const Graph& g, std::initializer_list<std::string> names) {
  NodeSet s(g.num_nodes());
  for (const std::string& name : names) s.add(node_named(g, name));
  return s;
}

// "a,b,c": the node names of a set, in node order.
inline std::string names_of(const Graph& g, const NodeSet& s) {
  std::string out;
  for (int n : s) out += (out.empty() ? "" : ",") + g.node(n).name;
  return out;
}

// The candidates as sets of node-name lists (names sorted, so the set does not depend on the
// graph's node order).
inline std::set<std::string> name_sets(const Graph& g, const std::vector<Candidate>& cs) {
  std::set<std::string> out;
  for (const Candidate& c : cs) {
    std::vector<std::string> names;
    for (int n : c.nodes) names.push_back(g.node(n).name);
    std::sort(names.begin(), names.end());
    std::string s;
    for (const std::string& name : names) s += (s.empty() ? "" : ",") + name;
    out.insert(s);
  }
  return out;
}

inline Graph finalized(Graph g) {
  g.opsets[""] = 17;
  for (int n = 0; n < g.num_nodes(); ++n) g.node(n).opset = 17;  // builders leave it to importers
  Status st = g.finalize();
  if (st.ok()) st = infer_graph_types(g);
  if (!st.ok()) check_failed(__FILE__, __LINE__, "test graph", st.to_string());
  return g;
}

// x -> relu -> neg -> exp -> add -> y, and relu -> add: {relu, add} is not convex.
inline Graph diamond() {
  Graph g;
  int x = g.add_input("x", f32({5, 7}));
  int r = g.add_value("r"), n = g.add_value("n"), e = g.add_value("e"), y = g.add_value("y");
  g.add_node("Relu", {x}, {r}, {}, "relu");
  g.add_node("Neg", {r}, {n}, {}, "neg");
  g.add_node("Exp", {n}, {e}, {}, "exp");
  g.add_node("Add", {r, e}, {y}, {}, "add");
  g.mark_output(y);
  return finalized(std::move(g));
}

// a = relu(x); b = neg(a); c = a + b; d = exp(c); e = c + d: two residual connections.
inline Graph double_residual() {
  Graph g;
  int x = g.add_input("x", f32({4, 4}));
  int a = g.add_value("va"), b = g.add_value("vb"), c = g.add_value("vc"), d = g.add_value("vd"),
      e = g.add_value("ve");
  g.add_node("Relu", {x}, {a}, {}, "a");
  g.add_node("Neg", {a}, {b}, {}, "b");
  g.add_node("Add", {a, b}, {c}, {}, "c");
  g.add_node("Exp", {c}, {d}, {}, "d");
  g.add_node("Add", {c, d}, {e}, {}, "e");
  g.mark_output(e);
  return finalized(std::move(g));
}

// s0, s1 = split(x); y = concat(relu(s0), neg(s1)): a node with two used outputs.
inline Graph multi_output() {
  Graph g;
  int x = g.add_input("x", f32({4, 6}));
  int sizes = g.add_constant("sizes", Tensor::from_vector<int64_t>({2}, {3, 3}));
  int s0 = g.add_value("s0"), s1 = g.add_value("s1"), r = g.add_value("r"), n = g.add_value("n"),
      y = g.add_value("y");
  g.add_node("Split", {x, sizes}, {s0, s1}, {{"axis", Attribute::of_int(1)}}, "S");
  g.add_node("Relu", {s0}, {r}, {}, "R");
  g.add_node("Neg", {s1}, {n}, {}, "N");
  g.add_node("Concat", {r, n}, {y}, {{"axis", Attribute::of_int(1)}}, "C");
  g.mark_output(y);
  return finalized(std::move(g));
}

// y = concat(relu(x), neg(x), exp(x)): a variadic node with three producers.
inline Graph tuple_args() {
  Graph g;
  int x = g.add_input("x", f32({2, 3}));
  int a = g.add_value("va"), b = g.add_value("vb"), c = g.add_value("vc"), y = g.add_value("y");
  g.add_node("Relu", {x}, {a}, {}, "a");
  g.add_node("Neg", {x}, {b}, {}, "b");
  g.add_node("Exp", {x}, {c}, {}, "c");
  g.add_node("Concat", {a, b, c}, {y}, {{"axis", Attribute::of_int(0)}}, "C");
  g.mark_output(y);
  return finalized(std::move(g));
}

// y = relu(x @ reshape(w, [4, 2])): reshape computes from constants only.
inline Graph constants() {
  Graph g;
  int x = g.add_input("x", f32({2, 4}));
  int w = g.add_constant("w", Tensor::from_vector<float>({8}, {1, 2, 3, 4, 5, 6, 7, 8}));
  int shape = g.add_constant("shape", Tensor::from_vector<int64_t>({2}, {4, 2}));
  int wr = g.add_value("wr"), m = g.add_value("m"), y = g.add_value("y");
  g.add_node("Reshape", {w, shape}, {wr}, {}, "reshape");
  g.add_node("MatMul", {x, wr}, {m}, {}, "matmul");
  g.add_node("Relu", {m}, {y}, {}, "relu");
  g.mark_output(y);
  return finalized(std::move(g));
}

// Two convex groups that feed each other: P = {A, D}, Q = {C, B} with A -> B and C -> D.
inline Graph mutually_feeding() {
  Graph g;
  int x = g.add_input("x", f32({3}));
  int a = g.add_value("a"), c = g.add_value("c"), b = g.add_value("b"), d = g.add_value("d");
  g.add_node("Relu", {x}, {a}, {}, "A");
  g.add_node("Neg", {x}, {c}, {}, "C");
  g.add_node("Add", {a, c}, {b}, {}, "B");
  g.add_node("Mul", {c, a}, {d}, {}, "D");
  g.mark_output(b);
  g.mark_output(d);
  return finalized(std::move(g));
}

}  // namespace tessera::partition_test
