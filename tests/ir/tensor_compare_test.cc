// Tests of compare_tensors and max_abs: the tolerance rule, NaN and infinities, the index of the
// first difference, on float32 and float64 (their own loops) and float16 (the generic one).
#include "ir/tensor_compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

namespace tessera {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kNan = std::nan("");

// want, and got = want with element `at` replaced by `value`, in dtype `dt`.
std::pair<Tensor, Tensor> pair_with(DType dt, const std::vector<double>& want, size_t at, double value) {
  std::vector<double> got = want;
  got[at] = value;
  const std::vector<int64_t> dims = {static_cast<int64_t>(want.size())};
  return {*Tensor::from_vector<double>(dims, got).cast(dt), *Tensor::from_vector<double>(dims, want).cast(dt)};
}

class CompareTensors : public ::testing::TestWithParam<DType> {};

TEST_P(CompareTensors, ToleranceNanAndInfinities) {
  const DType dt = GetParam();
  const std::vector<double> want = {1.0, -2.0, 0.5, kInf, -kInf, kNan, 4.0, 0.0};
  const double rtol = 1e-2, atol = 1e-3;
  auto verdict = [&](size_t at, double value) {
    auto [got, ref] = pair_with(dt, want, at, value);
    return compare_tensors(got, ref, rtol, atol);
  };
  EXPECT_TRUE(verdict(0, 1.0).ok());
  EXPECT_TRUE(verdict(6, 4.0 + 0.03).ok());   // within 1e-3 + 1e-2 * 4
  EXPECT_FALSE(verdict(6, 4.0 + 0.06).ok());  // outside it
  EXPECT_TRUE(verdict(7, 0.0005).ok());       // atol alone near zero
  EXPECT_FALSE(verdict(7, 0.004).ok());
  EXPECT_TRUE(verdict(3, kInf).ok());   // an infinity matches itself
  EXPECT_FALSE(verdict(3, -kInf).ok());
  EXPECT_FALSE(verdict(3, 1e4).ok());   // and nothing finite, however large the tolerance it implies
  EXPECT_FALSE(verdict(0, kInf).ok());  // a finite value is not matched by an infinity
  EXPECT_TRUE(verdict(5, kNan).ok());   // NaN matches NaN
  EXPECT_FALSE(verdict(5, 1.0).ok());
  EXPECT_FALSE(verdict(1, kNan).ok());
  Status st = verdict(6, 5.0);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("element 6 is 5.0"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("expected 4.0"), std::string::npos) << st.message();
}

TEST_P(CompareTensors, ReportsTheFirstDifferenceInLargeRandomTensors) {
  const DType dt = GetParam();
  std::mt19937 rng(11);
  for (int n : {1, 17, 1000, 65537}) {
    std::vector<double> want(n);
    for (double& x : want) x = std::uniform_real_distribution<double>(-3, 3)(rng);
    const size_t at = rng() % n;
    auto [same, ref] = pair_with(dt, want, at, want[at]);
    EXPECT_TRUE(compare_tensors(same, ref, 1e-3, 1e-4).ok());
    auto [off, ref2] = pair_with(dt, want, at, want[at] + 0.5);
    Status st = compare_tensors(off, ref2, 1e-3, 1e-4);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.message().rfind("element " + std::to_string(at) + " is", 0), 0u) << st.message();
  }
}

TEST_P(CompareTensors, MaxAbsSkipsNanAndInfinities) {
  const DType dt = GetParam();
  auto [t, unused] = pair_with(dt, {0.5, -3.0, kInf, kNan, -kInf, 2.0}, 0, 0.5);
  EXPECT_EQ(max_abs(t), 3.0);
  auto [z, unused2] = pair_with(dt, {kNan, kInf}, 0, kNan);
  EXPECT_EQ(max_abs(z), 0.0);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CompareTensors,
                         ::testing::Values(DType::kFloat32, DType::kFloat64, DType::kFloat16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(CompareTensors, ShapeDtypeAndIntegers) {
  Tensor a = Tensor::from_vector<int64_t>({3}, {1, 2, 3});
  Tensor b = Tensor::from_vector<int64_t>({3}, {1, 2, 4});
  EXPECT_TRUE(compare_tensors(a, a, 0.5, 10).ok());
  Status st = compare_tensors(a, b, 0.5, 10);  // integers must be equal whatever the tolerance
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "element 2 is 3, expected 4");
  EXPECT_FALSE(compare_tensors(a, a.reshaped({1, 3}), 0, 0).ok());
  EXPECT_FALSE(compare_tensors(*a.cast(DType::kFloat32), a, 1, 1).ok());
}

}  // namespace
}  // namespace tessera
