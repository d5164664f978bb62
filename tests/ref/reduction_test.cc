// Property tests of the reference reduction kernels on seeded random data.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "backends/ref/ref_kernel.h"

namespace tessera {
namespace {

// Runs the reference kernel of `op` on `inputs`; returns its outputs.
Result<std::vector<Tensor>> run_op(const std::string& op, const std::vector<Tensor>& inputs,
                                   std::map<std::string, Attribute> attrs = {}, int opset = 13,
                                   int num_outputs = 1) {
  Node node;
  node.op_type = op;
  node.name = "test";
  node.opset = opset;
  node.attrs = std::move(attrs);
  std::vector<const Tensor*> ptrs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    node.inputs.push_back(static_cast<int>(i));
    ptrs.push_back(&inputs[i]);
  }
  for (int i = 0; i < num_outputs; ++i) node.outputs.push_back(i);
  const RefKernelFn* fn = RefKernelTable::global().find("", op);
  if (!fn) return not_found("no kernel for " + op);
  HeapAllocator alloc;
  RefKernelContext ctx(node, ptrs, alloc, nullptr);
  TESSERA_RETURN_IF_ERROR((*fn)(ctx));
  return ctx.outputs();
}

Tensor random_floats(std::vector<int64_t> dims, std::mt19937& rng, float lo = -5, float hi = 5) {
  Tensor t(DType::kFloat32, std::move(dims));
  std::uniform_real_distribution<float> dist(lo, hi);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
  return t;
}

// Element counts before, along and after `axis`.
struct Split {
  int64_t outer = 1, length = 1, inner = 1;
};
Split split(const std::vector<int64_t>& dims, int axis) {
  Split s;
  for (int d = 0; d < static_cast<int>(dims.size()); ++d) {
    (d < axis ? s.outer : d == axis ? s.length : s.inner) *= dims[d];
  }
  return s;
}

struct SoftmaxCase {
  std::vector<int64_t> dims;
  int axis;
};

TEST(ReductionKernels, SoftmaxRowsSumToOneAndIgnoreRowShift) {
  std::mt19937 rng(1234);
  const SoftmaxCase cases[] = {{{5, 7}, -1}, {{2, 3, 4}, 1}, {{3, 6, 1, 2}, 0}};
  for (const SoftmaxCase& c : cases) {
    SCOPED_TRACE(dims_to_string(c.dims) + " axis " + std::to_string(c.axis));
    const Tensor x = random_floats(c.dims, rng);
    const int axis = c.axis < 0 ? c.axis + static_cast<int>(c.dims.size()) : c.axis;
    const Split s = split(c.dims, axis);
    // x plus a different constant per row, large enough that exp() without subtracting the row
    // max overflows even in double.
    Tensor shifted = x.clone();
    std::uniform_real_distribution<float> shift_dist(-800, 800);
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t i = 0; i < s.inner; ++i) {
        const float shift = shift_dist(rng);
        for (int64_t k = 0; k < s.length; ++k) {
          shifted.data<float>()[(o * s.length + k) * s.inner + i] += shift;
        }
      }
    }
    std::map<std::string, Attribute> attrs{{"axis", Attribute::of_int(c.axis)}};
    auto y = run_op("Softmax", {x}, attrs);
    auto y_shifted = run_op("Softmax", {shifted}, attrs);
    ASSERT_TRUE(y.ok()) << y.status().to_string();
    ASSERT_TRUE(y_shifted.ok()) << y_shifted.status().to_string();
    const float* p = (*y)[0].data<float>();
    const float* q = (*y_shifted)[0].data<float>();
    ASSERT_EQ((*y)[0].dims(), c.dims);
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t i = 0; i < s.inner; ++i) {
        double row_sum = 0;
        for (int64_t k = 0; k < s.length; ++k) {
          const int64_t at = (o * s.length + k) * s.inner + i;
          EXPECT_GE(p[at], 0.0f);
          row_sum += p[at];
          // Shifts up to 800 cost float32 inputs about 6e-5 of absolute precision.
          EXPECT_NEAR(p[at], q[at], 1e-3 * p[at] + 1e-6) << "at " << at;
        }
        EXPECT_NEAR(row_sum, 1.0, 1e-5);
      }
    }
    // LogSoftmax agrees with log(Softmax).
    auto log_y = run_op("LogSoftmax", {x}, attrs);
    ASSERT_TRUE(log_y.ok()) << log_y.status().to_string();
    for (int64_t j = 0; j < x.numel(); ++j) {
      EXPECT_NEAR((*log_y)[0].data<float>()[j], std::log(p[j]), 1e-4);
    }
  }
}

TEST(ReductionKernels, SoftmaxBeforeOpset13CoercesTo2D) {
  std::mt19937 rng(7);
  const Tensor x = random_floats({2, 3, 4}, rng);
  auto y = run_op("Softmax", {x}, {{"axis", Attribute::of_int(1)}}, /*opset=*/11);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  // Each of the 2 rows of 12 elements sums to 1.
  for (int r = 0; r < 2; ++r) {
    double sum = 0;
    for (int k = 0; k < 12; ++k) sum += (*y)[0].data<float>()[r * 12 + k];
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
}

Tensor axes_tensor(std::vector<int64_t> axes) {
  const int64_t n = static_cast<int64_t>(axes.size());
  return Tensor::from_vector<int64_t>({n}, axes);
}

TEST(ReductionKernels, ReduceSumAllAxesMatchesPerAxisReductions) {
  std::mt19937 rng(99);
  const std::vector<int64_t> dims = {3, 4, 5};
  const Tensor x = random_floats(dims, rng);
  const std::map<std::string, Attribute> keep{{"keepdims", Attribute::of_int(1)}};
  auto all = run_op("ReduceSum", {x}, keep);
  ASSERT_TRUE(all.ok()) << all.status().to_string();
  ASSERT_EQ((*all)[0].dims(), (std::vector<int64_t>{1, 1, 1}));
  const double total = (*all)[0].data<float>()[0];
  double naive_total = 0;
  for (int64_t i = 0; i < x.numel(); ++i) naive_total += x.data<float>()[i];
  EXPECT_NEAR(total, naive_total, 1e-4);

  for (int axis = 0; axis < 3; ++axis) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    auto per_axis = run_op("ReduceSum", {x, axes_tensor({axis})}, keep);
    ASSERT_TRUE(per_axis.ok()) << per_axis.status().to_string();
    const Tensor& r = (*per_axis)[0];
    std::vector<int64_t> want_dims = dims;
    want_dims[axis] = 1;
    ASSERT_EQ(r.dims(), want_dims);
    // Each element equals a hand-written sum along the axis, and all of them add up to the total.
    const Split s = split(dims, axis);
    double sum_of_partials = 0;
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t i = 0; i < s.inner; ++i) {
        double want = 0;
        for (int64_t k = 0; k < s.length; ++k)
          want += x.data<float>()[(o * s.length + k) * s.inner + i];
        const float got = r.data<float>()[o * s.inner + i];
        EXPECT_NEAR(got, want, 1e-4);
        sum_of_partials += got;
      }
    }
    EXPECT_NEAR(sum_of_partials, total, 1e-4);
  }

  // Reducing one axis at a time (without keepdims) ends at the same total.
  Tensor step = x;
  for (int i = 0; i < 3; ++i) {
    auto r = run_op("ReduceSum", {step, axes_tensor({0})}, {{"keepdims", Attribute::of_int(0)}});
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    step = (*r)[0];
  }
  ASSERT_EQ(step.rank(), 0);
  EXPECT_NEAR(step.data<float>()[0], total, 1e-4);

  // Integer sums are exact.
  Tensor xi(DType::kInt64, dims);
  int64_t int_total = 0;
  for (int64_t i = 0; i < xi.numel(); ++i)
    int_total += (xi.data<int64_t>()[i] = (i * 7919) % 1000 - 500);
  auto ri = run_op("ReduceSum", {xi}, {{"keepdims", Attribute::of_int(0)}});
  ASSERT_TRUE(ri.ok()) << ri.status().to_string();
  EXPECT_EQ((*ri)[0].data<int64_t>()[0], int_total);
}

TEST(ReductionKernels, ReduceRejectsBadAxes) {
  const Tensor x(DType::kFloat32, {2, 3});
  EXPECT_FALSE(run_op("ReduceSum", {x, axes_tensor({2})}).ok());
  EXPECT_FALSE(run_op("ReduceSum", {x, axes_tensor({1, -1})}).ok());
  EXPECT_FALSE(run_op("ReduceMean", {x}, {{"axes", Attribute::of_ints({-3})}}).ok());
}

TEST(ReductionKernels, EinsumMatmulMatchesHandLoop) {
  std::mt19937 rng(42);
  const Tensor a = random_floats({3, 4}, rng);
  const Tensor b = random_floats({4, 5}, rng);
  auto y = run_op("Einsum", {a, b}, {{"equation", Attribute::of_string("ij,jk->ik")}}, 12);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  const Tensor& c = (*y)[0];
  ASSERT_EQ(c.dims(), (std::vector<int64_t>{3, 5}));
  for (int i = 0; i < 3; ++i) {
    for (int k = 0; k < 5; ++k) {
      double want = 0;
      for (int j = 0; j < 4; ++j) want += a.data<float>()[i * 4 + j] * b.data<float>()[j * 5 + k];
      EXPECT_NEAR(c.data<float>()[i * 5 + k], want, 1e-4);
    }
  }
  // The implicit form "ij,jk" names the same output.
  auto implicit = run_op("Einsum", {a, b}, {{"equation", Attribute::of_string("ij,jk")}}, 12);
  ASSERT_TRUE(implicit.ok()) << implicit.status().to_string();
  for (int64_t i = 0; i < c.numel(); ++i) {
    EXPECT_EQ((*implicit)[0].data<float>()[i], c.data<float>()[i]);
  }
}

TEST(ReductionKernels, EinsumTraceAndEllipsis) {
  const Tensor m = Tensor::from_vector<float>({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto trace = run_op("Einsum", {m}, {{"equation", Attribute::of_string("ii->")}}, 12);
  ASSERT_TRUE(trace.ok()) << trace.status().to_string();
  EXPECT_FLOAT_EQ((*trace)[0].data<float>()[0], 15.0f);
  auto diag = run_op("Einsum", {m}, {{"equation", Attribute::of_string("...ii->...i")}}, 12);
  ASSERT_TRUE(diag.ok()) << diag.status().to_string();
  EXPECT_EQ((*diag)[0].dims(), (std::vector<int64_t>{3}));
  EXPECT_FLOAT_EQ((*diag)[0].data<float>()[2], 9.0f);
  auto transpose = run_op("Einsum", {m}, {{"equation", Attribute::of_string("ji")}}, 12);
  ASSERT_TRUE(transpose.ok()) << transpose.status().to_string();
  EXPECT_FLOAT_EQ((*transpose)[0].data<float>()[1], 4.0f);
  EXPECT_FALSE(run_op("Einsum", {m}, {{"equation", Attribute::of_string("ijk->i")}}, 12).ok());
}

TEST(ReductionKernels, TopKBreaksTiesByLowerIndex) {
  const Tensor x = Tensor::from_vector<float>({6}, {3, 1, 3, 2, 1, 3});
  auto y = run_op("TopK", {x, Tensor::from_vector<int64_t>({1}, {4})}, {}, 11, 2);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  const int64_t* idx = (*y)[1].data<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(idx, idx + 4), (std::vector<int64_t>{0, 2, 5, 3}));
  auto smallest = run_op("TopK", {x, Tensor::from_vector<int64_t>({1}, {2})},
                         {{"largest", Attribute::of_int(0)}}, 11, 2);
  ASSERT_TRUE(smallest.ok());
  const int64_t* sidx = (*smallest)[1].data<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(sidx, sidx + 2), (std::vector<int64_t>{1, 4}));
  EXPECT_FALSE(run_op("TopK", {x, Tensor::from_vector<int64_t>({1}, {7})}, {}, 11, 2).ok());
}

TEST(ReductionKernels, DetOfKnownMatrices) {
  // Batch of two: a permutation-needing matrix (det -2) and a singular one (det 0).
  const Tensor m = Tensor::from_vector<double>({2, 2, 2}, {0, 1, 2, 0, 1, 2, 2, 4});
  auto y = run_op("Det", {m}, {}, 11);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_DOUBLE_EQ((*y)[0].data<double>()[0], -2.0);
  EXPECT_DOUBLE_EQ((*y)[0].data<double>()[1], 0.0);
}

TEST(ReductionKernels, BadInputsAreErrorsNotCrashes) {
  const Tensor m(DType::kFloat32, {2, 3});
  const Tensor scalar(DType::kFloat32, {});
  auto eq = [](const char* e) {
    return std::map<std::string, Attribute>{{"equation", Attribute::of_string(e)}};
  };
  EXPECT_FALSE(run_op("Einsum", {m}, eq("ij,jk->ik"), 12).ok());     // too few inputs
  EXPECT_FALSE(run_op("Einsum", {m}, eq("i.j->ij"), 12).ok());       // broken ellipsis
  EXPECT_FALSE(run_op("Einsum", {m}, eq("ij->iij"), 12).ok());       // repeated output label
  EXPECT_FALSE(run_op("Einsum", {m}, eq("ij->k"), 12).ok());         // unknown output label
  EXPECT_TRUE(run_op("Einsum", {m, m}, eq("ij,ij->ij"), 12).ok());   // elementwise product
  EXPECT_FALSE(run_op("Einsum", {m, m}, eq("ij,ji->ij"), 12).ok());  // 2x3 vs 3x2 sizes
  EXPECT_FALSE(run_op("Einsum", {m}, eq(""), 12).ok());
  EXPECT_FALSE(run_op("Softmax", {scalar}).ok());
  EXPECT_FALSE(run_op("Softmax", {m}, {{"axis", Attribute::of_int(2)}}).ok());
  EXPECT_FALSE(
      run_op("ArgMax", {Tensor(DType::kFloat32, {2, 0})}, {{"axis", Attribute::of_int(1)}}).ok());
  EXPECT_FALSE(run_op("CumSum", {m, Tensor::scalar<float>(0)}, {}, 14).ok());
  EXPECT_FALSE(run_op("CumSum", {m, Tensor::scalar<int64_t>(2)}, {}, 14).ok());
  EXPECT_FALSE(run_op("TopK", {m, Tensor::from_vector<int64_t>({1}, {-1})}, {}, 11, 2).ok());
  EXPECT_FALSE(run_op("Det", {m}, {}, 11).ok());
  // NLL: target out of range, wrong target shape, wrong weight shape.
  const Tensor log_prob(DType::kFloat32, {2, 3});
  EXPECT_FALSE(
      run_op("NegativeLogLikelihoodLoss", {log_prob, Tensor::from_vector<int64_t>({2}, {0, 3})})
          .ok());
  EXPECT_FALSE(
      run_op("NegativeLogLikelihoodLoss", {log_prob, Tensor::from_vector<int64_t>({3}, {0, 1, 2})})
          .ok());
  EXPECT_FALSE(
      run_op("NegativeLogLikelihoodLoss",
             {log_prob, Tensor::from_vector<int64_t>({2}, {0, 1}), Tensor(DType::kFloat32, {2})})
          .ok());
  // An ignored target may lie outside [0, C).
  EXPECT_TRUE(run_op("NegativeLogLikelihoodLoss",
                     {log_prob, Tensor::from_vector<int64_t>({2}, {-5, 1})},
                     {{"ignore_index", Attribute::of_int(-5)}})
                  .ok());
}

TEST(ReductionKernels, EmptyReductionsGiveIdentities) {
  const Tensor empty(DType::kFloat32, {2, 0});
  const std::map<std::string, Attribute> axis1{{"axes", Attribute::of_ints({1})},
                                               {"keepdims", Attribute::of_int(0)}};
  auto sum = run_op("ReduceProd", {empty}, axis1);
  ASSERT_TRUE(sum.ok()) << sum.status().to_string();
  EXPECT_EQ((*sum)[0].dims(), (std::vector<int64_t>{2}));
  EXPECT_EQ((*sum)[0].data<float>()[0], 1.0f);
  auto max = run_op("ReduceMax", {empty}, axis1);
  ASSERT_TRUE(max.ok());
  EXPECT_EQ((*max)[0].data<float>()[1], -std::numeric_limits<float>::infinity());
  auto lse = run_op("ReduceLogSumExp", {empty}, axis1);
  ASSERT_TRUE(lse.ok());
  EXPECT_EQ((*lse)[0].data<float>()[0], -std::numeric_limits<float>::infinity());
}

}  // namespace
}  // namespace tessera
