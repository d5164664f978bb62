// Property tests of the misc reference kernels: Resize, RNN/GRU/LSTM, NMS, GridSample, DFT.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "backends/ref/ref_kernel.h"
#include "ir/graph.h"

namespace tessera {
namespace {

// Runs one node of `op` on the reference backend. Null inputs are omitted optional inputs.
struct NodeRun {
  Status status;
  std::vector<Tensor> outputs;
};

NodeRun run_node(const std::string& op, std::vector<const Tensor*> inputs,
                 std::map<std::string, Attribute> attrs, int num_outputs = 1, int opset = 17) {
  Node node;
  node.name = "n";
  node.op_type = op;
  node.opset = opset;
  node.attrs = std::move(attrs);
  for (size_t i = 0; i < inputs.size(); ++i) node.inputs.push_back(inputs[i] ? static_cast<int>(i) : kNoValue);
  for (int o = 0; o < num_outputs; ++o) node.outputs.push_back(o);
  const RefKernelFn* kernel = RefKernelTable::global().find("", op);
  NodeRun run;
  if (!kernel) {
    run.status = not_found("no kernel for " + op);
    return run;
  }
  HeapAllocator alloc;
  RefKernelContext ctx(node, inputs, alloc, nullptr);
  run.status = (*kernel)(ctx);
  run.outputs = ctx.outputs();
  return run;
}

Tensor random_tensor(std::vector<int64_t> dims, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  Tensor t(DType::kFloat32, std::move(dims));
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
  return t;
}

std::vector<float> values(const Tensor& t) {
  const float* p = t.data<float>();
  return std::vector<float>(p, p + t.numel());
}

void expect_near(const Tensor& a, const Tensor& b, float tol) {
  ASSERT_EQ(a.dims(), b.dims());
  std::vector<float> va = values(a), vb = values(b);
  for (size_t i = 0; i < va.size(); ++i) ASSERT_NEAR(va[i], vb[i], tol) << "at " << i;
}

Attribute str(const char* s) { return Attribute::of_string(s); }

// ---------------------------------------------------------------------------------------------
// Resize

TEST(MiscResize, NearestUpsampleBy2ReplicatesEachPixelIntoA2x2Block) {
  for (const char* coord : {"half_pixel", "asymmetric", "pytorch_half_pixel"}) {
    for (auto dims : std::vector<std::vector<int64_t>>{{1, 3, 5, 7}, {2, 1, 4, 4}, {1, 1, 1, 9}}) {
      Tensor x = random_tensor(dims, 7);
      Tensor scales = Tensor::from_vector<float>({4}, {1, 1, 2, 2});
      NodeRun r = run_node("Resize", {&x, nullptr, &scales},
                           {{"mode", str("nearest")}, {"coordinate_transformation_mode", str(coord)}}, 1, 13);
      ASSERT_TRUE(r.status.ok()) << r.status.to_string();
      const Tensor& y = r.outputs[0];
      ASSERT_EQ(y.dims(), (std::vector<int64_t>{dims[0], dims[1], 2 * dims[2], 2 * dims[3]})) << coord;
      const float* xp = x.data<float>();
      const float* yp = y.data<float>();
      const int64_t H = dims[2], W = dims[3];
      for (int64_t nc = 0; nc < dims[0] * dims[1]; ++nc)
        for (int64_t i = 0; i < 2 * H; ++i)
          for (int64_t j = 0; j < 2 * W; ++j)
            ASSERT_EQ(yp[(nc * 2 * H + i) * 2 * W + j], xp[(nc * H + i / 2) * W + j / 2])
                << coord << " at " << nc << "," << i << "," << j;
    }
  }
}

TEST(MiscResize, UpsampleOpset9NearestMatchesResizeAsymmetricFloor) {
  Tensor x = random_tensor({1, 2, 3, 4}, 11);
  Tensor scales = Tensor::from_vector<float>({4}, {1, 1, 3, 2});
  NodeRun up = run_node("Upsample", {&x, &scales}, {{"mode", str("nearest")}}, 1, 9);
  NodeRun rs = run_node("Resize", {&x, nullptr, &scales},
                        {{"mode", str("nearest")}, {"coordinate_transformation_mode", str("asymmetric")},
                         {"nearest_mode", str("floor")}},
                        1, 13);
  ASSERT_TRUE(up.status.ok()) << up.status.to_string();
  ASSERT_TRUE(rs.status.ok()) << rs.status.to_string();
  expect_near(up.outputs[0], rs.outputs[0], 0);
}

TEST(MiscResize, ScaleOneIsTheIdentityForEveryModeAndCoordinateMode) {
  Tensor x = random_tensor({2, 3, 5, 6}, 3);
  Tensor scales = Tensor::from_vector<float>({4}, {1, 1, 1, 1});
  for (const char* mode : {"nearest", "linear", "cubic"}) {
    for (const char* coord : {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"}) {
      NodeRun r = run_node("Resize", {&x, nullptr, &scales},
                           {{"mode", str(mode)}, {"coordinate_transformation_mode", str(coord)}}, 1, 13);
      ASSERT_TRUE(r.status.ok()) << r.status.to_string();
      SCOPED_TRACE(std::string(mode) + " " + coord);
      expect_near(r.outputs[0], x, 1e-6f);
    }
  }
}

TEST(MiscResize, LinearAlignCornersReproducesALinearRamp) {
  // x[i, j] = 2 i + 3 j; bilinear interpolation of a linear function is exact.
  const int64_t H = 4, W = 5, OH = 7, OW = 13;
  std::vector<float> v;
  for (int64_t i = 0; i < H; ++i)
    for (int64_t j = 0; j < W; ++j) v.push_back(static_cast<float>(2 * i + 3 * j));
  Tensor x = Tensor::from_vector<float>({1, 1, H, W}, v);
  Tensor sizes = Tensor::from_vector<int64_t>({4}, {1, 1, OH, OW});
  NodeRun r = run_node("Resize", {&x, nullptr, nullptr, &sizes},
                       {{"mode", str("linear")}, {"coordinate_transformation_mode", str("align_corners")}}, 1, 13);
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  const float* y = r.outputs[0].data<float>();
  for (int64_t i = 0; i < OH; ++i) {
    for (int64_t j = 0; j < OW; ++j) {
      double expect = 2.0 * i * (H - 1) / (OH - 1) + 3.0 * j * (W - 1) / (OW - 1);
      ASSERT_NEAR(y[i * OW + j], expect, 1e-4) << i << "," << j;
    }
  }
}

TEST(MiscResize, LinearUpsampleOfAConstantImageIsConstant) {
  std::vector<float> v(1 * 2 * 3 * 3, 4.5f);
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 3}, v);
  Tensor scales = Tensor::from_vector<float>({4}, {1, 1, 2.5f, 2});
  for (const char* mode : {"linear", "cubic"}) {
    NodeRun r = run_node("Resize", {&x, nullptr, &scales}, {{"mode", str(mode)}}, 1, 13);
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    ASSERT_EQ(r.outputs[0].dims(), (std::vector<int64_t>{1, 2, 7, 6}));
    for (float f : values(r.outputs[0])) ASSERT_NEAR(f, 4.5f, 1e-5f) << mode;
  }
}

TEST(MiscResize, SizesAndEquivalentScalesAgree) {
  Tensor x = random_tensor({1, 2, 6, 4}, 5);
  Tensor scales = Tensor::from_vector<float>({4}, {1, 1, 0.5f, 2});
  Tensor sizes = Tensor::from_vector<int64_t>({4}, {1, 2, 3, 8});
  NodeRun a = run_node("Resize", {&x, nullptr, &scales}, {{"mode", str("linear")}}, 1, 13);
  NodeRun b = run_node("Resize", {&x, nullptr, nullptr, &sizes}, {{"mode", str("linear")}}, 1, 13);
  ASSERT_TRUE(a.status.ok() && b.status.ok());
  expect_near(a.outputs[0], b.outputs[0], 1e-6f);
}

TEST(MiscResize, BadScalesAreErrorsNotCrashes) {
  Tensor x = random_tensor({1, 1, 2, 2}, 1);
  Tensor short_scales = Tensor::from_vector<float>({2}, {2, 2});
  Tensor negative = Tensor::from_vector<float>({4}, {1, 1, -2, 2});
  Tensor bad_sizes = Tensor::from_vector<int64_t>({3}, {1, 1, 4});
  EXPECT_FALSE(run_node("Resize", {&x, nullptr, &short_scales}, {}, 1, 13).status.ok());
  EXPECT_FALSE(run_node("Resize", {&x, nullptr, &negative}, {}, 1, 13).status.ok());
  EXPECT_FALSE(run_node("Resize", {&x, nullptr, nullptr, &bad_sizes}, {}, 1, 13).status.ok());
  EXPECT_FALSE(run_node("Resize", {&x, nullptr, &negative}, {{"mode", str("bogus")}}, 1, 13).status.ok());
  // tf_crop_and_resize without a roi.
  Tensor scales = Tensor::from_vector<float>({4}, {1, 1, 2, 2});
  EXPECT_FALSE(run_node("Resize", {&x, nullptr, &scales},
                        {{"coordinate_transformation_mode", str("tf_crop_and_resize")}}, 1, 13)
                   .status.ok());
}

// ---------------------------------------------------------------------------------------------
// Recurrent nets

TEST(MiscRecurrent, LstmWithZeroWeightsDecaysTheCellByHalfEachStep) {
  // All gates are sigmoid(0) = 0.5 and the candidate is tanh(0) = 0, so c_t = 0.5^t c_0 and
  // h_t = 0.5 tanh(c_t); with c_0 = 0 everything stays zero.
  const int64_t seq = 4, batch = 2, input = 3, hidden = 5;
  Tensor x = random_tensor({seq, batch, input}, 9);
  Tensor w(DType::kFloat32, {1, 4 * hidden, input});
  Tensor r(DType::kFloat32, {1, 4 * hidden, hidden});
  Tensor c0 = random_tensor({1, batch, hidden}, 10, 0.5f, 2.0f);
  NodeRun zero = run_node("LSTM", {&x, &w, &r}, {{"hidden_size", Attribute::of_int(hidden)}}, 3, 14);
  ASSERT_TRUE(zero.status.ok()) << zero.status.to_string();
  for (const Tensor& t : zero.outputs) for (float f : values(t)) ASSERT_EQ(f, 0.0f);
  NodeRun run = run_node("LSTM", {&x, &w, &r, nullptr, nullptr, nullptr, &c0},
                         {{"hidden_size", Attribute::of_int(hidden)}}, 3, 14);
  ASSERT_TRUE(run.status.ok()) << run.status.to_string();
  const Tensor& y = run.outputs[0];
  ASSERT_EQ(y.dims(), (std::vector<int64_t>{seq, 1, batch, hidden}));
  std::vector<float> c = values(c0), yv = values(y), yc = values(run.outputs[2]);
  for (int64_t t = 0; t < seq; ++t) {
    for (int64_t i = 0; i < batch * hidden; ++i) {
      double ct = c[i] * std::pow(0.5, t + 1);
      ASSERT_NEAR(yv[t * batch * hidden + i], 0.5 * std::tanh(ct), 1e-6);
      if (t == seq - 1) {
        ASSERT_NEAR(yc[i], ct, 1e-6);
      }
    }
  }
}

Tensor reverse_time(const Tensor& x) {  // [seq, batch, ...]
  Tensor out(x.dtype(), x.dims());
  const int64_t seq = x.dim(0), row = x.numel() / std::max<int64_t>(seq, 1);
  for (int64_t t = 0; t < seq; ++t)
    for (int64_t i = 0; i < row; ++i) out.data<float>()[t * row + i] = x.data<float>()[(seq - 1 - t) * row + i];
  return out;
}

TEST(MiscRecurrent, BidirectionalBackwardHalfIsForwardOnReversedInput) {
  for (const char* op : {"RNN", "GRU", "LSTM"}) {
    const int64_t gates = std::string(op) == "RNN" ? 1 : std::string(op) == "GRU" ? 3 : 4;
    const int64_t seq = 5, batch = 2, input = 3, hidden = 4;
    Tensor x = random_tensor({seq, batch, input}, 21);
    Tensor w = random_tensor({2, gates * hidden, input}, 22);
    Tensor r = random_tensor({2, gates * hidden, hidden}, 23);
    Tensor b = random_tensor({2, 2 * gates * hidden}, 24);
    std::map<std::string, Attribute> attrs{{"hidden_size", Attribute::of_int(hidden)},
                                           {"direction", str("bidirectional")}};
    NodeRun bi = run_node(op, {&x, &w, &r, &b}, attrs, 2, 14);
    ASSERT_TRUE(bi.status.ok()) << bi.status.to_string();
    // Direction 1 weights alone, as a forward net on the time-reversed input.
    auto second = [](const Tensor& t) {
      int64_t half = t.numel() / 2;
      std::vector<int64_t> dims = t.dims();
      dims[0] = 1;
      std::vector<float> v(t.data<float>() + half, t.data<float>() + 2 * half);
      return Tensor::from_vector<float>(dims, v);
    };
    Tensor w1 = second(w), r1 = second(r), b1 = second(b);
    Tensor xr = reverse_time(x);
    attrs["direction"] = str("forward");
    NodeRun fw = run_node(op, {&xr, &w1, &r1, &b1}, attrs, 2, 14);
    ASSERT_TRUE(fw.status.ok()) << fw.status.to_string();
    std::vector<float> ybi = values(bi.outputs[0]), yfw = values(fw.outputs[0]);
    for (int64_t t = 0; t < seq; ++t)
      for (int64_t i = 0; i < batch * hidden; ++i)
        ASSERT_NEAR(ybi[(t * 2 + 1) * batch * hidden + i], yfw[(seq - 1 - t) * batch * hidden + i], 1e-5) << op;
    std::vector<float> hbi = values(bi.outputs[1]), hfw = values(fw.outputs[1]);
    for (int64_t i = 0; i < batch * hidden; ++i) ASSERT_NEAR(hbi[batch * hidden + i], hfw[i], 1e-5) << op;
  }
}

TEST(MiscRecurrent, SequenceLensStopsEachBatchRowAndZeroesTheTail) {
  const int64_t seq = 6, batch = 2, input = 2, hidden = 3;
  Tensor x = random_tensor({seq, batch, input}, 31);
  Tensor w = random_tensor({1, 3 * hidden, input}, 32);
  Tensor r = random_tensor({1, 3 * hidden, hidden}, 33);
  Tensor lens = Tensor::from_vector<int32_t>({2}, {3, 6});
  std::map<std::string, Attribute> attrs{{"hidden_size", Attribute::of_int(hidden)}};
  NodeRun full = run_node("GRU", {&x, &w, &r, nullptr, &lens}, attrs, 2, 14);
  ASSERT_TRUE(full.status.ok()) << full.status.to_string();
  // Row 0 alone over its first 3 steps.
  std::vector<float> x0;
  for (int64_t t = 0; t < 3; ++t)
    for (int64_t i = 0; i < input; ++i) x0.push_back(x.data<float>()[(t * batch) * input + i]);
  Tensor xs = Tensor::from_vector<float>({3, 1, input}, x0);
  NodeRun part = run_node("GRU", {&xs, &w, &r}, attrs, 2, 14);
  ASSERT_TRUE(part.status.ok());
  std::vector<float> y = values(full.outputs[0]), yh = values(full.outputs[1]), ph = values(part.outputs[1]);
  for (int64_t j = 0; j < hidden; ++j) ASSERT_NEAR(yh[j], ph[j], 1e-6);
  for (int64_t t = 3; t < seq; ++t)
    for (int64_t j = 0; j < hidden; ++j) ASSERT_EQ(y[(t * batch) * hidden + j], 0.0f);
}

TEST(MiscRecurrent, BatchFirstLayoutIsATransposeOfTheDefault) {
  const int64_t seq = 3, batch = 2, input = 2, hidden = 3;
  Tensor x = random_tensor({seq, batch, input}, 41);
  Tensor w = random_tensor({1, 4 * hidden, input}, 42);
  Tensor r = random_tensor({1, 4 * hidden, hidden}, 43);
  std::vector<float> xt;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < seq; ++t)
      for (int64_t i = 0; i < input; ++i) xt.push_back(x.data<float>()[(t * batch + b) * input + i]);
  Tensor xb = Tensor::from_vector<float>({batch, seq, input}, xt);
  std::map<std::string, Attribute> attrs{{"hidden_size", Attribute::of_int(hidden)}};
  NodeRun a = run_node("LSTM", {&x, &w, &r}, attrs, 2, 14);
  attrs["layout"] = Attribute::of_int(1);
  NodeRun b = run_node("LSTM", {&xb, &w, &r}, attrs, 2, 14);
  ASSERT_TRUE(a.status.ok() && b.status.ok());
  ASSERT_EQ(b.outputs[0].dims(), (std::vector<int64_t>{batch, seq, 1, hidden}));
  std::vector<float> ya = values(a.outputs[0]), yb = values(b.outputs[0]);
  for (int64_t t = 0; t < seq; ++t)
    for (int64_t bb = 0; bb < batch; ++bb)
      for (int64_t j = 0; j < hidden; ++j)
        ASSERT_NEAR(ya[(t * batch + bb) * hidden + j], yb[(bb * seq + t) * hidden + j], 1e-6);
}

TEST(MiscRecurrent, WrongWeightShapeIsAnError) {
  Tensor x = random_tensor({2, 1, 3}, 1);
  Tensor w = random_tensor({1, 4 * 5, 2}, 2);  // input size 2, but X has 3
  Tensor r = random_tensor({1, 4 * 5, 5}, 3);
  NodeRun run = run_node("LSTM", {&x, &w, &r}, {{"hidden_size", Attribute::of_int(5)}}, 2, 14);
  EXPECT_FALSE(run.status.ok());
}

// ---------------------------------------------------------------------------------------------
// Vision and signal ops

TEST(MiscVision, NmsKeepsOneOfIdenticalBoxesAndHonoursTheLimit) {
  Tensor boxes = Tensor::from_vector<float>({1, 4, 4}, {0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 5, 5, 6, 6});
  Tensor scores = Tensor::from_vector<float>({1, 1, 4}, {0.5f, 0.9f, 0.7f, 0.1f});
  Tensor limit = Tensor::from_vector<int64_t>({1}, {10});
  Tensor iou = Tensor::from_vector<float>({1}, {0.5f});
  NodeRun r = run_node("NonMaxSuppression", {&boxes, &scores, &limit, &iou}, {}, 1, 11);
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  const Tensor& sel = r.outputs[0];
  ASSERT_EQ(sel.dims(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(sel.to_int64_vector(), (std::vector<int64_t>{0, 0, 1, 0, 0, 3}));
  Tensor one = Tensor::from_vector<int64_t>({1}, {1});
  NodeRun limited = run_node("NonMaxSuppression", {&boxes, &scores, &one, &iou}, {}, 1, 11);
  ASSERT_TRUE(limited.status.ok());
  EXPECT_EQ(limited.outputs[0].to_int64_vector(), (std::vector<int64_t>{0, 0, 1}));
}

TEST(MiscVision, GridSampleIdentityGridReproducesTheInput) {
  const int64_t H = 4, W = 5;
  Tensor x = random_tensor({1, 2, H, W}, 51);
  std::vector<float> g;
  for (int64_t i = 0; i < H; ++i)
    for (int64_t j = 0; j < W; ++j) {
      g.push_back(-1.0f + 2.0f * j / (W - 1));
      g.push_back(-1.0f + 2.0f * i / (H - 1));
    }
  Tensor grid = Tensor::from_vector<float>({1, H, W, 2}, g);
  for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
    NodeRun r = run_node("GridSample", {&x, &grid},
                         {{"align_corners", Attribute::of_int(1)}, {"mode", str(mode)}}, 1, 16);
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    SCOPED_TRACE(mode);
    expect_near(r.outputs[0], x, 1e-5f);
  }
}

TEST(MiscSignal, InverseDftUndoesDft) {
  Tensor x = random_tensor({2, 7, 2}, 61);
  NodeRun fwd = run_node("DFT", {&x}, {{"axis", Attribute::of_int(1)}});
  ASSERT_TRUE(fwd.status.ok()) << fwd.status.to_string();
  NodeRun inv = run_node("DFT", {&fwd.outputs[0]}, {{"axis", Attribute::of_int(1)}, {"inverse", Attribute::of_int(1)}});
  ASSERT_TRUE(inv.status.ok());
  expect_near(inv.outputs[0], x, 1e-5f);
}

TEST(MiscSignal, DftOfACosineHasTwoPeaks) {
  const int64_t n = 16, k = 3;
  std::vector<float> v;
  for (int64_t t = 0; t < n; ++t) v.push_back(static_cast<float>(std::cos(2 * M_PI * k * t / n)));
  Tensor x = Tensor::from_vector<float>({1, n, 1}, v);
  NodeRun r = run_node("DFT", {&x}, {});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  std::vector<float> y = values(r.outputs[0]);
  for (int64_t b = 0; b < n; ++b) {
    float expect = (b == k || b == n - k) ? n / 2.0f : 0.0f;
    ASSERT_NEAR(y[b * 2], expect, 1e-4) << b;
    ASSERT_NEAR(y[b * 2 + 1], 0.0f, 1e-4) << b;
  }
}

TEST(MiscSignal, PeriodicHannWindowSumsToHalfItsLength) {
  Tensor size = Tensor::from_vector<int64_t>({}, {10});
  NodeRun r = run_node("HannWindow", {&size}, {});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  double sum = 0;
  for (float f : values(r.outputs[0])) sum += f;
  EXPECT_NEAR(sum, 5.0, 1e-5);
  EXPECT_EQ(r.outputs[0].data<float>()[0], 0.0f);
}

}  // namespace
}  // namespace tessera
