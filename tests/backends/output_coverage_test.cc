// oneDNN and XNNPACK kernels take their output buffers uninitialized: every output element must be
// written. Run with an allocator that fills uninitialized buffers with NaN bytes, each kernel's
// outputs must match the reference everywhere: outputs a primitive writes directly, concatenations
// written in parts, outputs converted from another layout and outputs that later nodes also read.
#include <gtest/gtest.h>

#include "backends/native_kernel_runner.h"
#include "ir/tensor_compare.h"

namespace tessera {
namespace {

using testing_graph::TestGraph;

Attribute pads1() { return Attribute::of_ints({1, 1, 1, 1}); }

// Conv -> Relu, and a Concat of two convolutions along channels; both are graph outputs.
TestGraph conv_and_concat(int64_t c, int64_t hw) {
  TestGraph t;
  int x = t.input({1, c, hw, hw});
  int a = t.op("Conv", {x, t.constant({c, c, 3, 3}, -0.3f, 0.3f), t.constant({c})}, {{"pads", pads1()}});
  int r = t.op("Relu", {a});
  int b = t.op("Conv", {x, t.constant({c + 3, c, 1, 1}, -0.3f, 0.3f)});
  t.finish({r, t.op("Concat", {r, b}, {{"axis", Attribute::of_int(1)}})});
  return t;
}

// An elementwise chain whose middle value is an output that the next node reads too.
TestGraph chain_with_inner_output(int64_t c, int64_t hw) {
  TestGraph t;
  int x = t.input({1, c, hw, hw});
  int y = t.input({1, c, hw, hw});
  int s = t.op("Add", {x, y});
  int m = t.op("Mul", {s, x});
  t.finish({s, t.op("Sigmoid", {m})});
  return t;
}

void expect_every_element_written(const char* backend, const TestGraph& t) {
  const Backend* b = find_backend(backend);
  if (!b || !b->available().ok()) GTEST_SKIP() << backend << " is not available";
  for (int n = 0; n < t.g.num_nodes(); ++n)
    if (!b->supports(t.g, n).ok()) GTEST_SKIP() << backend << " does not run " << t.g.node(n).op_type;
  const std::vector<Tensor> want = testing_graph::run_ref(t);
  for (int threads : {1, 2}) {
    CompileOptions opts;
    opts.threads = threads;
    const SubGraph sg = testing_native::whole(t);
    const std::vector<Tensor> got = testing_native::run_whole_graph(t, b->compile(sg, opts), threads);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      Status st = compare_tensors(got[i], want[i], 1e-4, 1e-4 * std::max(1.0, max_abs(want[i])));
      EXPECT_TRUE(st.ok()) << backend << " output " << i << ", " << threads << " thread(s): " << st.message();
    }
  }
}

TEST(OutputCoverage, OnednnWritesEveryOutputElement) {
  for (auto [c, hw] : {std::pair<int64_t, int64_t>{3, 5}, {16, 12}, {24, 7}}) {
    SCOPED_TRACE(std::to_string(c) + " channels, " + std::to_string(hw) + "x" + std::to_string(hw));
    expect_every_element_written("onednn", conv_and_concat(c, hw));
    expect_every_element_written("onednn", chain_with_inner_output(c, hw));
  }
}

TEST(OutputCoverage, XnnpackWritesEveryOutputElement) {
  for (auto [c, hw] : {std::pair<int64_t, int64_t>{3, 5}, {16, 12}, {24, 7}}) {
    SCOPED_TRACE(std::to_string(c) + " channels, " + std::to_string(hw) + "x" + std::to_string(hw));
    expect_every_element_written("xnnpack", conv_and_concat(c, hw));
    expect_every_element_written("xnnpack", chain_with_inner_output(c, hw));
  }
}

}  // namespace
}  // namespace tessera
