// Property tests of the reference nn kernels against naive loops written here.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backends/ref/ref_kernel.h"
#include "ops/op_registry.h"

namespace tessera {
namespace {

// Runs the reference kernel of node.op_type on `inputs` (null for omitted ones).
Result<std::vector<Tensor>> run_kernel(Node node, const std::vector<const Tensor*>& inputs,
                                       int num_outputs = 1, int threads = 3) {
  node.opset = 17;
  node.inputs.assign(inputs.size(), 0);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i]) node.inputs[i] = kNoValue;
  }
  node.outputs.assign(static_cast<size_t>(num_outputs), 0);
  const RefKernelFn* fn = RefKernelTable::global().find("", node.op_type);
  if (!fn) return not_found("no kernel for " + node.op_type);
  HeapAllocator alloc;
  ThreadPool pool(threads);
  RefKernelContext ctx(node, inputs, alloc, &pool);
  TESSERA_RETURN_IF_ERROR((*fn)(ctx));
  return ctx.outputs();
}

Tensor random_tensor(std::vector<int64_t> dims, std::mt19937& rng) {
  Tensor t(DType::kFloat32, std::move(dims));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
  return t;
}

void expect_near_all(const Tensor& got, const std::vector<float>& want, std::vector<int64_t> dims) {
  ASSERT_EQ(got.dims(), dims);
  ASSERT_EQ(static_cast<size_t>(got.numel()), want.size());
  const float* g = got.data<float>();
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(g[i], want[i], 1e-4f * (1.0f + std::fabs(want[i]))) << "element " << i;
  }
}

struct Conv2dCase {
  int64_t n, c, h, w, m, group, kh, kw;
  std::vector<int64_t> strides, dilations, pads;  // pads: h_begin, w_begin, h_end, w_end
  bool bias;
};

// Naive 2-D convolution: seven nested loops over (n, m, oh, ow, c, kh, kw).
std::vector<float> naive_conv2d(const Conv2dCase& k, const Tensor& x, const Tensor& w,
                                const Tensor* b, int64_t oh_n, int64_t ow_n) {
  std::vector<float> y(static_cast<size_t>(k.n * k.m * oh_n * ow_n));
  const int64_t cpg = k.c / k.group, mpg = k.m / k.group;
  const float* xp = x.data<float>();
  const float* wp = w.data<float>();
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t m = 0; m < k.m; ++m)
      for (int64_t oh = 0; oh < oh_n; ++oh)
        for (int64_t ow = 0; ow < ow_n; ++ow) {
          double acc = b ? b->data<float>()[m] : 0.0;
          const int64_t g = m / mpg;
          for (int64_t c = 0; c < cpg; ++c)
            for (int64_t i = 0; i < k.kh; ++i)
              for (int64_t j = 0; j < k.kw; ++j) {
                const int64_t ih = oh * k.strides[0] + i * k.dilations[0] - k.pads[0];
                const int64_t iw = ow * k.strides[1] + j * k.dilations[1] - k.pads[1];
                if (ih < 0 || ih >= k.h || iw < 0 || iw >= k.w) continue;
                acc += static_cast<double>(xp[((n * k.c + g * cpg + c) * k.h + ih) * k.w + iw]) *
                       wp[((m * cpg + c) * k.kh + i) * k.kw + j];
              }
          y[static_cast<size_t>(((n * k.m + m) * oh_n + oh) * ow_n + ow)] = static_cast<float>(acc);
        }
  return y;
}

TEST(NnRef, ConvMatchesNaiveLoops) {
  std::mt19937 rng(7);
  const std::vector<Conv2dCase> cases = {
      {1, 3, 7, 9, 5, 1, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, true},
      {2, 6, 11, 13, 4, 2, 3, 2, {2, 1}, {2, 1}, {1, 0, 2, 1}, true},
      {1, 4, 9, 8, 8, 4, 3, 3, {2, 2}, {1, 1}, {1, 1, 1, 1}, false},   // depthwise, multiplier 2
      {2, 3, 5, 17, 2, 1, 1, 5, {1, 3}, {1, 2}, {0, 4, 0, 3}, true},    // wide kernel, stride 3
      {1, 8, 6, 6, 6, 2, 1, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, false},   // 1x1 grouped
      {1, 2, 40, 70, 3, 1, 3, 3, {1, 1}, {3, 3}, {3, 3, 3, 3}, true},   // many row blocks
  };
  for (const Conv2dCase& k : cases) {
    Tensor x = random_tensor({k.n, k.c, k.h, k.w}, rng);
    Tensor w = random_tensor({k.m, k.c / k.group, k.kh, k.kw}, rng);
    Tensor b = random_tensor({k.m}, rng);
    Node node;
    node.op_type = "Conv";
    node.attrs["group"] = Attribute::of_int(k.group);
    node.attrs["strides"] = Attribute::of_ints(k.strides);
    node.attrs["dilations"] = Attribute::of_ints(k.dilations);
    node.attrs["pads"] = Attribute::of_ints(k.pads);
    auto out = run_kernel(node, {&x, &w, k.bias ? &b : nullptr});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    const int64_t oh = (k.h + k.pads[0] + k.pads[2] - ((k.kh - 1) * k.dilations[0] + 1)) /
                           k.strides[0] + 1;
    const int64_t ow = (k.w + k.pads[1] + k.pads[3] - ((k.kw - 1) * k.dilations[1] + 1)) /
                           k.strides[1] + 1;
    expect_near_all((*out)[0], naive_conv2d(k, x, w, k.bias ? &b : nullptr, oh, ow),
                    {k.n, k.m, oh, ow});
  }
}

TEST(NnRef, Conv1dAnd3dMatchTheir2dForm) {
  std::mt19937 rng(11);
  // 1-D: x (2, 4, 15), w (6, 2, 3), group 2, stride 2, dilation 2, pads 3/1.
  Tensor x = random_tensor({2, 4, 15}, rng);
  Tensor w = random_tensor({6, 2, 3}, rng);
  Node node;
  node.op_type = "Conv";
  node.attrs["group"] = Attribute::of_int(2);
  node.attrs["strides"] = Attribute::of_ints({2});
  node.attrs["dilations"] = Attribute::of_ints({2});
  node.attrs["pads"] = Attribute::of_ints({3, 1});
  auto out1 = run_kernel(node, {&x, &w});
  ASSERT_TRUE(out1.ok()) << out1.status().to_string();
  Conv2dCase k{2, 4, 1, 15, 6, 2, 1, 3, {1, 2}, {1, 2}, {0, 3, 0, 1}, false};
  const int64_t ow = (15 + 4 - 5) / 2 + 1;
  expect_near_all((*out1)[0], naive_conv2d(k, x.reshaped({2, 4, 1, 15}), w.reshaped({6, 2, 1, 3}),
                                           nullptr, 1, ow),
                  {2, 6, ow});
  // 3-D with depth 1 equals 2-D.
  Tensor x3 = random_tensor({1, 3, 1, 6, 7}, rng);
  Tensor w3 = random_tensor({2, 3, 1, 3, 3}, rng);
  Node node3;
  node3.op_type = "Conv";
  node3.attrs["pads"] = Attribute::of_ints({0, 1, 1, 0, 1, 1});
  auto out3 = run_kernel(node3, {&x3, &w3});
  ASSERT_TRUE(out3.ok()) << out3.status().to_string();
  Conv2dCase k3{1, 3, 6, 7, 2, 1, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, false};
  expect_near_all((*out3)[0],
                  naive_conv2d(k3, x3.reshaped({1, 3, 6, 7}), w3.reshaped({2, 3, 3, 3}), nullptr, 6, 7),
                  {1, 2, 1, 6, 7});
}

TEST(NnRef, ConvAutoPadSameUpperKeepsSizeAndInferAgrees) {
  std::mt19937 rng(3);
  Tensor x = random_tensor({1, 2, 7, 8}, rng);
  Tensor w = random_tensor({3, 2, 4, 3}, rng);
  Node node;
  node.op_type = "Conv";
  node.attrs["auto_pad"] = Attribute::of_string("SAME_UPPER");
  node.attrs["strides"] = Attribute::of_ints({2, 2});
  auto out = run_kernel(node, {&x, &w});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  // out = ceil(in / stride); total pad h = (4-1)*2 + 4 - 7 = 3 -> 1 before, 2 after;
  // w: (4-1)*2 + 3 - 8 = 1 -> 0 before, 1 after.
  Conv2dCase k{1, 2, 7, 8, 3, 1, 4, 3, {2, 2}, {1, 1}, {1, 0, 2, 1}, false};
  expect_near_all((*out)[0], naive_conv2d(k, x, w, nullptr, 4, 4), {1, 3, 4, 4});

  const OpSchema* schema = OpRegistry::global().find("", "Conv");
  ASSERT_NE(schema, nullptr);
  InferContext ictx{node,
                    {TensorType::of(DType::kFloat32, x.dims()), TensorType::of(DType::kFloat32, w.dims())},
                    {nullptr, nullptr},
                    {TensorType{}}};
  ASSERT_TRUE(schema->infer(ictx).ok());
  EXPECT_EQ(ictx.outputs[0], TensorType::of(DType::kFloat32, {1, 3, 4, 4}));
}

TEST(NnRef, ConvTransposeMatchesNaiveScatter) {
  std::mt19937 rng(5);
  const int64_t n = 2, c = 4, h = 5, wd = 6, group = 2, mpg = 3, kh = 3, kw = 2;
  const std::vector<int64_t> s = {2, 3}, d = {1, 2}, pads = {1, 0, 0, 2}, opad = {1, 0};
  Tensor x = random_tensor({n, c, h, wd}, rng);
  Tensor w = random_tensor({c, mpg, kh, kw}, rng);
  Tensor b = random_tensor({group * mpg}, rng);
  Node node;
  node.op_type = "ConvTranspose";
  node.attrs["group"] = Attribute::of_int(group);
  node.attrs["strides"] = Attribute::of_ints(s);
  node.attrs["dilations"] = Attribute::of_ints(d);
  node.attrs["pads"] = Attribute::of_ints(pads);
  node.attrs["output_padding"] = Attribute::of_ints(opad);
  auto out = run_kernel(node, {&x, &w, &b});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const int64_t m = group * mpg;
  const int64_t oh = s[0] * (h - 1) + opad[0] + (kh - 1) * d[0] + 1 - pads[0] - pads[2];
  const int64_t ow = s[1] * (wd - 1) + opad[1] + (kw - 1) * d[1] + 1 - pads[1] - pads[3];
  std::vector<double> y(static_cast<size_t>(n * m * oh * ow));
  for (int64_t in = 0; in < n; ++in)
    for (int64_t om = 0; om < m; ++om)
      for (int64_t i = 0; i < oh * ow; ++i) y[static_cast<size_t>((in * m + om) * oh * ow + i)] = b.data<float>()[om];
  const int64_t cpg = c / group;
  for (int64_t in = 0; in < n; ++in)
    for (int64_t ic = 0; ic < c; ++ic)
      for (int64_t ih = 0; ih < h; ++ih)
        for (int64_t iw = 0; iw < wd; ++iw)
          for (int64_t om = 0; om < mpg; ++om)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t y_h = ih * s[0] + i * d[0] - pads[0];
                const int64_t y_w = iw * s[1] + j * d[1] - pads[1];
                if (y_h < 0 || y_h >= oh || y_w < 0 || y_w >= ow) continue;
                const int64_t oc = (ic / cpg) * mpg + om;
                y[static_cast<size_t>(((in * m + oc) * oh + y_h) * ow + y_w)] +=
                    static_cast<double>(x.data<float>()[((in * c + ic) * h + ih) * wd + iw]) *
                    w.data<float>()[((ic * mpg + om) * kh + i) * kw + j];
              }
  expect_near_all((*out)[0], std::vector<float>(y.begin(), y.end()), {n, m, oh, ow});
}

TEST(NnRef, MatMulBroadcastsBatchesAndVectors) {
  std::mt19937 rng(9);
  struct Case {
    std::vector<int64_t> a, b, out;
  };
  const std::vector<Case> cases = {
      {{2, 1, 3, 5}, {4, 5, 7}, {2, 4, 3, 7}},
      {{5}, {2, 5, 3}, {2, 3}},
      {{2, 3, 5}, {5}, {2, 3}},
      {{5}, {5}, {}},
      {{1, 17, 600}, {600, 9}, {1, 17, 9}},  // more than one column block row
  };
  for (const Case& k : cases) {
    Tensor a = random_tensor(k.a, rng), b = random_tensor(k.b, rng);
    Node node;
    node.op_type = "MatMul";
    auto out = run_kernel(node, {&a, &b});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    // Hand loop: promote vectors, right-align batch dims, broadcast by index modulo size.
    std::vector<int64_t> ad = k.a, bd = k.b;
    if (ad.size() == 1) ad.insert(ad.begin(), 1);
    if (bd.size() == 1) bd.push_back(1);
    const int64_t m = ad[ad.size() - 2], kk = ad.back(), n = bd.back();
    const size_t batch_rank = std::max(ad.size(), bd.size()) - 2;
    std::vector<int64_t> abat(batch_rank, 1), bbat(batch_rank, 1), obat(batch_rank, 1);
    for (size_t i = 0; i + 2 < ad.size(); ++i) abat[batch_rank - (ad.size() - 2) + i] = ad[i];
    for (size_t i = 0; i + 2 < bd.size(); ++i) bbat[batch_rank - (bd.size() - 2) + i] = bd[i];
    int64_t batches = 1;
    for (size_t i = 0; i < batch_rank; ++i) {
      obat[i] = std::max(abat[i], bbat[i]);
      batches *= obat[i];
    }
    std::vector<float> want;
    for (int64_t bi = 0; bi < batches; ++bi) {
      int64_t rest = bi, aoff = 0, boff = 0, astride = 1, bstride = 1;
      for (size_t i = batch_rank; i-- > 0;) {
        const int64_t idx = rest % obat[i];
        rest /= obat[i];
        aoff += (abat[i] == 1 ? 0 : idx) * astride;
        boff += (bbat[i] == 1 ? 0 : idx) * bstride;
        astride *= abat[i];
        bstride *= bbat[i];
      }
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double acc = 0;
          for (int64_t p = 0; p < kk; ++p) {
            acc += static_cast<double>(a.data<float>()[aoff * m * kk + i * kk + p]) *
                   b.data<float>()[boff * kk * n + p * n + j];
          }
          want.push_back(static_cast<float>(acc));
        }
    }
    expect_near_all((*out)[0], want, k.out);
  }
}

TEST(NnRef, MatMulRejectsMismatchedInnerDims) {
  std::mt19937 rng(1);
  Tensor a = random_tensor({2, 3}, rng), b = random_tensor({4, 2}, rng);
  Node node;
  node.op_type = "MatMul";
  auto out = run_kernel(node, {&a, &b});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
}

TEST(NnRef, GemmTransposesAndBroadcastsC) {
  std::mt19937 rng(2);
  Tensor a = random_tensor({4, 3}, rng);  // transA: A^T is 3 x 4
  Tensor b = random_tensor({5, 4}, rng);  // transB: B^T is 4 x 5
  Tensor c = random_tensor({5}, rng);
  Node node;
  node.op_type = "Gemm";
  node.attrs["transA"] = Attribute::of_int(1);
  node.attrs["transB"] = Attribute::of_int(1);
  node.attrs["alpha"] = Attribute::of_float(0.5f);
  node.attrs["beta"] = Attribute::of_float(2.0f);
  auto out = run_kernel(node, {&a, &b, &c});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  std::vector<float> want;
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 5; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < 4; ++p) {
        acc += static_cast<double>(a.data<float>()[p * 3 + i]) * b.data<float>()[j * 4 + p];
      }
      want.push_back(static_cast<float>(0.5 * acc + 2.0 * c.data<float>()[j]));
    }
  expect_near_all((*out)[0], want, {3, 5});
}

TEST(NnRef, PoolsHandleCeilModeAndPadCounting) {
  // 1 x 1 x 5 x 5 ramp; 2x2 windows, stride 2, ceil mode: 3x3 output, last windows partial.
  std::vector<float> ramp(25);
  for (int i = 0; i < 25; ++i) ramp[static_cast<size_t>(i)] = static_cast<float>(i);
  Tensor x = Tensor::from_vector<float>({1, 1, 5, 5}, ramp);
  Node node;
  node.op_type = "MaxPool";
  node.attrs["kernel_shape"] = Attribute::of_ints({2, 2});
  node.attrs["strides"] = Attribute::of_ints({2, 2});
  node.attrs["ceil_mode"] = Attribute::of_int(1);
  auto maxed = run_kernel(node, {&x}, 2);
  ASSERT_TRUE(maxed.ok()) << maxed.status().to_string();
  expect_near_all((*maxed)[0], {6, 8, 9, 16, 18, 19, 21, 23, 24}, {1, 1, 3, 3});
  EXPECT_EQ((*maxed)[1].to_int64_vector(), (std::vector<int64_t>{6, 8, 9, 16, 18, 19, 21, 23, 24}));

  node.op_type = "AveragePool";
  auto avg = run_kernel(node, {&x});
  ASSERT_TRUE(avg.ok()) << avg.status().to_string();
  expect_near_all((*avg)[0], {3, 5, 6.5f, 13, 15, 16.5f, 20.5f, 22.5f, 24}, {1, 1, 3, 3});

  // Explicit pads with count_include_pad: the corner window sees 1 real value of 4 positions.
  Node padded;
  padded.op_type = "AveragePool";
  padded.attrs["kernel_shape"] = Attribute::of_ints({2, 2});
  padded.attrs["strides"] = Attribute::of_ints({4, 4});
  padded.attrs["pads"] = Attribute::of_ints({1, 1, 0, 0});
  padded.attrs["count_include_pad"] = Attribute::of_int(1);
  auto inc = run_kernel(padded, {&x});
  ASSERT_TRUE(inc.ok()) << inc.status().to_string();
  expect_near_all((*inc)[0], {0.0f / 4, (3 + 4) / 4.0f, (15 + 20) / 4.0f, (18 + 19 + 23 + 24) / 4.0f},
                  {1, 1, 2, 2});
}

TEST(NnRef, BadAttributesAreErrorsNotCrashes) {
  std::mt19937 rng(4);
  Tensor x = random_tensor({1, 3, 4, 4}, rng);
  Tensor w = random_tensor({2, 2, 3, 3}, rng);  // C/group mismatch
  Node node;
  node.op_type = "Conv";
  EXPECT_FALSE(run_kernel(node, {&x, &w}).ok());
  Tensor w_ok = random_tensor({2, 3, 5, 5}, rng);  // kernel larger than the input
  EXPECT_FALSE(run_kernel(node, {&x, &w_ok}).ok());
  Node pool;
  pool.op_type = "MaxPool";
  pool.attrs["kernel_shape"] = Attribute::of_ints({2});  // wrong rank
  EXPECT_FALSE(run_kernel(pool, {&x}).ok());
}

}  // namespace
}  // namespace tessera
