// A small graph builder for backend tests: float32 inputs with seeded random data, constants,
// nodes typed by the op registry's shape inference; and a reference run to compare with.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "ops/op_registry.h"
#include "runtime/buffer_pool.h"
#include "runtime/executor.h"

namespace tessera::testing_graph {

using Dims = std::vector<int64_t>;

inline Tensor random_tensor(const Dims& dims, uint64_t seed, float lo = -2.f, float hi = 2.f) {
  Tensor t(DType::kFloat32, dims);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

// A graph under construction with random data for its inputs.
struct TestGraph {
  Graph g;
  std::vector<Tensor> inputs;
  uint64_t seed = 1;
  int opset = 17;

  int input(const Dims& dims, float lo = -2.f, float hi = 2.f) {
    int v = g.add_input(name('x'), TensorType::of(DType::kFloat32, dims));
    inputs.push_back(random_tensor(dims, seed++, lo, hi));
    return v;
  }
  // A fresh value name: a letter and the value count.
  std::string name(char prefix) const {
    std::string s(1, prefix);
    s += std::to_string(g.num_values());
    return s;
  }
  int constant(Tensor t) { return g.add_constant(name('c'), std::move(t)); }
  int constant(const Dims& dims, float lo = -2.f, float hi = 2.f) {
    return constant(random_tensor(dims, seed++, lo, hi));
  }
  int ints(const std::vector<int64_t>& v) {
    return constant(Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v));
  }
  std::vector<int> node(const std::string& op, std::vector<int> in,
                        std::map<std::string, Attribute> attrs = {}, int outputs = 1) {
    std::vector<int> out;
    for (int i = 0; i < outputs; ++i) out.push_back(g.add_value(name('v')));
    int n = g.add_node(op, std::move(in), out, std::move(attrs));
    g.node(n).opset = opset;
    EXPECT_TRUE(OpRegistry::global().infer_node(g, n).ok()) << op;
    return out;
  }
  int op(const std::string& o, std::vector<int> in, std::map<std::string, Attribute> attrs = {}) {
    return node(o, std::move(in), std::move(attrs))[0];
  }
  void finish(std::vector<int> outputs) {
    for (int v : outputs) g.mark_output(v);
    ASSERT_TRUE(g.finalize().ok());
    for (int n = 0; n < g.num_nodes(); ++n) g.node(n).opset = opset;
  }
};

inline std::vector<Tensor> run_ref(const TestGraph& t) {
  auto exec = GraphExecutor::create(t.g, {}, CompileOptions{});
  EXPECT_TRUE(exec.ok()) << exec.status().to_string();
  BufferPool buffers;
  ThreadPool pool(1);
  RunStats stats;
  auto out = exec->run(t.inputs, {}, buffers, &pool, stats);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  return out.ok() ? *out : std::vector<Tensor>{};
}

// The whole graph as one partition of `backend` (which must accept it), at `threads` threads.
inline std::vector<Tensor> run_on(const TestGraph& t, const Backend& backend, int threads) {
  std::vector<Partition> parts = {{NodeSet::all(t.g.num_nodes()), &backend}};
  CompileOptions opts;
  opts.threads = threads;
  auto exec = GraphExecutor::create(t.g, parts, opts);
  EXPECT_TRUE(exec.ok()) << exec.status().to_string();
  if (!exec.ok()) return {};
  BufferPool buffers;
  ThreadPool pool(threads);
  RunStats stats;
  auto out = exec->run(t.inputs, {}, buffers, &pool, stats);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  return out.ok() ? *out : std::vector<Tensor>{};
}

}  // namespace tessera::testing_graph
