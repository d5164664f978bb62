// Channels-last exchange between steps (CompileOptions::layout): the conversions, each backend's
// kernels in a channels-last plan (taking the layout themselves or wrapped), mixed plans, and the
// executor's buffers (converted inputs and outputs go back to the pool).
#include <gtest/gtest.h>

#include "../backends/test_graph.h"
#include "ir/tensor_compare.h"
#include "partition/plan.h"
#include "runtime/placement.h"

namespace tessera {
namespace {

using testing_graph::Dims;
using testing_graph::random_tensor;
using testing_graph::TestGraph;

TEST(ChannelsLast, ConversionMovesEveryElementAndRoundTrips) {
  for (const Dims& d : {Dims{2, 3, 4, 5}, Dims{1, 40, 7, 33}, Dims{3, 1, 2, 2}, Dims{1, 5, 1, 1}}) {
    const Tensor x = random_tensor(d, 11);
    HeapAllocator heap;
    const Tensor nhwc = to_channels_last(x, heap);
    ASSERT_EQ(nhwc.dims(), (Dims{d[0], d[2], d[3], d[1]}));
    const float* s = x.data<float>();
    const float* t = nhwc.data<float>();
    for (int64_t n = 0; n < d[0]; ++n)
      for (int64_t c = 0; c < d[1]; ++c)
        for (int64_t h = 0; h < d[2]; ++h)
          for (int64_t w = 0; w < d[3]; ++w)
            ASSERT_EQ(t[((n * d[2] + h) * d[3] + w) * d[1] + c], s[((n * d[1] + c) * d[2] + h) * d[3] + w]);
    const Tensor back = to_row_major(nhwc, heap);
    ASSERT_EQ(back.dims(), d);
    EXPECT_TRUE(compare_tensors(back, x, 0, 0).ok());
  }
  // Other ranks pass as they are, sharing the storage.
  HeapAllocator heap;
  const Tensor r3 = random_tensor({4, 5, 6}, 3);
  EXPECT_EQ(to_channels_last(r3, heap).raw_data(), r3.raw_data());
  // Integers move too (a rank-4 int64 tensor between steps).
  Tensor ints = Tensor::from_vector<int64_t>({1, 2, 1, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(to_channels_last(ints, heap).data<int64_t>()[1], 4);
}

// A small convolutional block with a squeeze-excitation branch, per-channel and broadcast
// elementwise ops, a residual, a rank-4 output and a flattened one.
TestGraph conv_block() {
  TestGraph t;
  const int x = t.input({1, 8, 6, 10});
  const int w = t.constant({16, 8, 3, 3}, -0.3f, 0.3f);
  const int b = t.constant({16});
  int y = t.op("Conv", {x, w, b}, {{"pads", Attribute::of_ints({1, 1, 1, 1})}});
  y = t.op("Relu", {y});
  const int pooled = t.op("GlobalAveragePool", {y});
  const int w1 = t.constant({16, 16, 1, 1}, -0.3f, 0.3f);
  const int s = t.op("Sigmoid", {t.op("Conv", {pooled, w1})});
  const int scaled = t.op("Mul", {y, s});                                // per channel, from a kernel input
  const int shifted = t.op("Add", {scaled, t.constant({16, 1, 1})});    // per channel, a constant
  const int rowwise = t.op("Mul", {shifted, t.constant({10})});        // along W, a rank-1 constant
  const int full = t.op("Sub", {rowwise, t.constant({1, 16, 6, 10})});  // a full-size constant
  const int w2 = t.constant({16, 16, 1, 1}, -0.3f, 0.3f);
  const int out = t.op("Add", {t.op("Conv", {full, w2}), y});
  const int flat = t.op("Flatten", {out});
  t.finish({out, flat});
  return t;
}

struct PlanRun {
  std::vector<Tensor> outputs;
  size_t reserved_after_first = 0, reserved_after_last = 0;
};

PlanRun run_plan(const TestGraph& t, const std::vector<Partition>& parts, TensorLayout layout, int runs = 4) {
  PlanRun r;
  CompileOptions opts;
  opts.threads = 2;
  opts.layout = layout;
  auto exec = GraphExecutor::create(t.g, parts, opts);
  EXPECT_TRUE(exec.ok()) << exec.status().to_string();
  if (!exec.ok()) return r;
  BufferPool buffers;
  ThreadPool pool(2);
  for (int i = 0; i < runs; ++i) {
    RunStats stats;
    auto out = exec->run(t.inputs, {}, buffers, &pool, stats);
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    if (!out.ok()) return r;
    if (i + 1 == runs) {
      r.outputs = *out;  // kept: their buffers stay out of the pool
    } else {
      for (Tensor& o : *out) buffers.release(o);
    }
    if (i == 0) r.reserved_after_first = buffers.reserved_bytes();
    if (i + 2 == runs) r.reserved_after_last = buffers.reserved_bytes();
  }
  return r;
}

void expect_close(const std::vector<Tensor>& got, const std::vector<Tensor>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].dims(), want[i].dims()) << what << " output " << i;
    Status st = compare_tensors(got[i], want[i], 1e-4, 1e-4);
    EXPECT_TRUE(st.ok()) << what << " output " << i << ": " << st.message();
  }
}

TEST(ChannelsLast, EveryBackendsPlacementMatchesTheReference) {
  const TestGraph t = conv_block();
  const std::vector<Tensor> want = testing_graph::run_ref(t);
  // Reference kernels alone: every node converts around its kernel.
  PlanRun ref = run_plan(t, {}, TensorLayout::kChannelsLast);
  expect_close(ref.outputs, want, "ref");
  for (const Backend* b : all_backends()) {
    if (b == &ref_backend() || !b->available().ok()) continue;
    auto placed = place_on_backend(t.g, *b);
    ASSERT_TRUE(placed.ok()) << placed.status().to_string();
    expect_close(run_plan(t, *placed, TensorLayout::kRowMajor).outputs, want, b->name() + " row-major");
    PlanRun r = run_plan(t, *placed, TensorLayout::kChannelsLast);
    expect_close(r.outputs, want, b->name());
    // Converted inputs, outputs and wrapped kernels' scratch return to the pool: runs after the
    // first allocate nothing new.
    EXPECT_EQ(r.reserved_after_last, r.reserved_after_first) << b->name();
  }
}

// Every node its own partition, backends taking turns: every boundary is crossed channels-last,
// between kernels that take the layout themselves and wrapped ones.
TEST(ChannelsLast, MixedSingleNodePlanMatchesTheReference) {
  const TestGraph t = conv_block();
  const std::vector<Tensor> want = testing_graph::run_ref(t);
  std::vector<const Backend*> backends;
  for (const Backend* b : all_backends())
    if (b->available().ok()) backends.push_back(b);
  for (size_t rotation = 0; rotation < backends.size(); ++rotation) {
    std::vector<Partition> parts;
    for (int n = 0; n < t.g.num_nodes(); ++n) {
      for (size_t k = 0; k < backends.size(); ++k) {
        const Backend* b = backends[(n + rotation + k) % backends.size()];
        if (b == &ref_backend() || !b->supports(t.g, n).ok()) continue;
        parts.push_back({NodeSet::of(t.g.num_nodes(), {n}), b});
        break;
      }
    }
    PlanRun r = run_plan(t, parts, TensorLayout::kChannelsLast);
    expect_close(r.outputs, want, "rotation " + std::to_string(rotation));
    EXPECT_EQ(r.reserved_after_last, r.reserved_after_first);
  }
}

// The kernels that take channels-last tensors themselves do (no conversion inside): a native
// elementwise group, an NHWC XNNPACK group, any oneDNN group.
TEST(ChannelsLast, BackendsSayWhichGroupsTakeTheLayout) {
  const TestGraph t = conv_block();
  auto single = [&](const std::string& op) {
    for (int n = 0; n < t.g.num_nodes(); ++n)
      if (t.g.node(n).op_type == op) return SubGraph(t.g, NodeSet::of(t.g.num_nodes(), {n}));
    ADD_FAILURE() << op;
    return SubGraph(t.g, NodeSet::of(t.g.num_nodes(), {0}));
  };
  if (const Backend* native = find_backend("native")) {
    EXPECT_TRUE(native->takes_channels_last(single("Mul")));
    EXPECT_FALSE(native->takes_channels_last(single("Conv")));
  }
  if (const Backend* onednn = find_backend("onednn"); onednn && onednn->available().ok()) {
    EXPECT_TRUE(onednn->takes_channels_last(single("Conv")));
  }
  if (const Backend* xnnpack = find_backend("xnnpack"); xnnpack && xnnpack->available().ok()) {
    EXPECT_TRUE(xnnpack->takes_channels_last(single("Conv")));
  }
  EXPECT_FALSE(ref_backend().takes_channels_last(single("Mul")));
}

TEST(ChannelsLast, PlanKeepsItsLayoutAndRefusesAnUnknownOne) {
  Plan plan;
  plan.model_hash = "0123456789abcdef";
  plan.layout = "channels-last";
  auto back = plan_from_json(plan_to_json(plan));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->layout, "channels-last");
  std::string text = plan_to_json(plan);
  text.replace(text.find("channels-last"), 13, "nchw");
  auto bad = plan_from_json(text);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown tensor layout 'nchw'"), std::string::npos);
  // A plan from before layouts existed runs row-major.
  Plan row_major;
  row_major.model_hash = "0123456789abcdef";
  text = plan_to_json(row_major);
  text.erase(text.find("\"layout\""), std::string("\"layout\": \"row-major\",").size());
  auto old = plan_from_json(text);
  ASSERT_TRUE(old.ok()) << old.status().to_string() << "\n" << text;
  EXPECT_EQ(old->layout, "row-major");
}

}  // namespace
}  // namespace tessera
namespace tessera {
namespace {
// A oneDNN binary op whose first source is a channels-last kernel input and whose second is a
// full-size constant: the constant is reordered to the input's layout at build time (that reorder
// once read a layout description that adding its tensor had moved, and crashed).
TEST(ChannelsLast, OnednnReordersAFullSizeConstantToTheInputsLayout) {
  const Backend* b = find_backend("onednn");
  if (!b || !b->available().ok()) GTEST_SKIP() << "no oneDNN";
  for (TensorLayout layout : {TensorLayout::kChannelsLast, TensorLayout::kRowMajor}) {
    TestGraph t;
    const int x = t.input({1, 16, 6, 10});
    const int out = t.op("Sub", {x, t.constant({1, 16, 6, 10})});
    t.finish({out});
    PlanRun r = run_plan(t, {{NodeSet::all(t.g.num_nodes()), b}}, layout, 2);
    expect_close(r.outputs, testing_graph::run_ref(t), layout_name(layout));
  }
}
}  // namespace
}  // namespace tessera
