// Property tests of the tensor-family reference kernels on random data: inverses compose to the
// identity, round trips reproduce their input, and index wrapping matches its definition.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backends/ref/ref_kernel.h"
#include "ops/op_registry.h"

namespace tessera {
namespace {

// Runs the reference kernel of `op` (default domain) on `inputs` with `num_outputs` outputs.
Result<std::vector<Tensor>> run_kernel(const std::string& op, std::vector<const Tensor*> inputs,
                                       std::map<std::string, Attribute> attrs, int num_outputs = 1,
                                       int opset = 17) {
  Node node;
  node.op_type = op;
  node.name = op + "_test";
  node.opset = opset;
  node.attrs = std::move(attrs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    node.inputs.push_back(inputs[i] ? static_cast<int>(i) : kNoValue);
  }
  for (int i = 0; i < num_outputs; ++i) node.outputs.push_back(100 + i);
  const RefKernelFn* fn = RefKernelTable::global().find("", op);
  if (!fn) return not_found("no kernel for " + op);
  HeapAllocator alloc;
  RefKernelContext ctx(node, std::move(inputs), alloc, nullptr);
  TESSERA_RETURN_IF_ERROR((*fn)(ctx));
  return ctx.outputs();
}

std::vector<int64_t> random_dims(std::mt19937& rng, int rank, int64_t max_dim) {
  std::uniform_int_distribution<int64_t> dist(1, max_dim);
  std::vector<int64_t> dims(rank);
  for (auto& d : dims) d = dist(rng);
  return dims;
}

Tensor random_floats(std::mt19937& rng, const std::vector<int64_t>& dims) {
  Tensor t(DType::kFloat32, dims);
  std::uniform_real_distribution<float> dist(-10.0f, 10.0f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

Tensor numbered_strings(const std::vector<int64_t>& dims) {
  Tensor t(DType::kString, dims);
  for (int64_t i = 0; i < t.numel(); ++i) {
    std::string s = std::to_string(i);
    s.append("s");  // (not "s" + ...: GCC 12 warns a false -Wrestrict on it)
    t.strings()[i] = s;
  }
  return t;
}

void expect_same(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.dtype(), b.dtype());
  ASSERT_EQ(a.dims(), b.dims());
  if (a.dtype() == DType::kString) {
    for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.strings()[i], b.strings()[i]) << "at " << i;
  } else {
    ASSERT_EQ(0, std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()));
  }
}

std::vector<int64_t> unravel(int64_t flat, const std::vector<int64_t>& dims) {
  std::vector<int64_t> index(dims.size());
  for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
    index[d] = flat % dims[d];
    flat /= dims[d];
  }
  return index;
}

int64_t ravel(const std::vector<int64_t>& index, const std::vector<int64_t>& dims) {
  int64_t flat = 0;
  for (size_t d = 0; d < dims.size(); ++d) flat = flat * dims[d] + index[d];
  return flat;
}

TEST(TensorKernels, TransposeThenInversePermIsIdentity) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    int rank = 1 + trial % 5;
    Tensor x = trial % 4 == 3 ? numbered_strings(random_dims(rng, rank, 4))
                              : random_floats(rng, random_dims(rng, rank, 5));
    std::vector<int64_t> perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<int64_t> inverse(rank);
    for (int d = 0; d < rank; ++d) inverse[perm[d]] = d;

    auto once = run_kernel("Transpose", {&x}, {{"perm", Attribute::of_ints(perm)}});
    ASSERT_TRUE(once.ok()) << once.status().to_string();
    const Tensor& y = (*once)[0];
    // Each output element is the input element at the permuted coordinates.
    for (int64_t i = 0; i < y.numel(); ++i) {
      std::vector<int64_t> out_index = unravel(i, y.dims()), in_index(rank);
      for (int d = 0; d < rank; ++d) in_index[perm[d]] = out_index[d];
      int64_t src = ravel(in_index, x.dims());
      if (x.dtype() == DType::kString) {
        ASSERT_EQ(y.strings()[i], x.strings()[src]);
      } else {
        ASSERT_EQ(y.data<float>()[i], x.data<float>()[src]);
      }
    }
    auto twice = run_kernel("Transpose", {&y}, {{"perm", Attribute::of_ints(inverse)}});
    ASSERT_TRUE(twice.ok()) << twice.status().to_string();
    expect_same((*twice)[0], x);
  }
}

TEST(TensorKernels, SplitThenConcatRoundTrips) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    int rank = 1 + trial % 4;
    Tensor x = trial % 3 == 2 ? numbered_strings(random_dims(rng, rank, 6))
                              : random_floats(rng, random_dims(rng, rank, 6));
    int axis = std::uniform_int_distribution<int>(-rank, rank - 1)(rng);
    int64_t dim = x.dim(axis);
    // Random cut points give random split sizes, zero-sized parts included.
    int parts = std::uniform_int_distribution<int>(1, 4)(rng);
    std::vector<int64_t> cuts = {0, dim};
    for (int p = 1; p < parts; ++p)
      cuts.push_back(std::uniform_int_distribution<int64_t>(0, dim)(rng));
    std::sort(cuts.begin(), cuts.end());
    std::vector<int64_t> sizes;
    for (size_t p = 1; p < cuts.size(); ++p) sizes.push_back(cuts[p] - cuts[p - 1]);
    Tensor split = Tensor::from_vector<int64_t>({static_cast<int64_t>(sizes.size())}, sizes);

    auto pieces = run_kernel("Split", {&x, &split}, {{"axis", Attribute::of_int(axis)}},
                             static_cast<int>(sizes.size()));
    ASSERT_TRUE(pieces.ok()) << pieces.status().to_string();
    std::vector<const Tensor*> parts_in;
    for (size_t p = 0; p < sizes.size(); ++p) {
      ASSERT_EQ((*pieces)[p].dim(axis), sizes[p]);
      parts_in.push_back(&(*pieces)[p]);
    }
    auto joined = run_kernel("Concat", parts_in, {{"axis", Attribute::of_int(axis)}});
    ASSERT_TRUE(joined.ok()) << joined.status().to_string();
    expect_same((*joined)[0], x);
  }
}

TEST(TensorKernels, SplitRejectsSizesThatDoNotSum) {
  Tensor x = Tensor::from_vector<float>({5}, {1, 2, 3, 4, 5});
  Tensor split = Tensor::from_vector<int64_t>({2}, {2, 2});
  auto r = run_kernel("Split", {&x, &split}, {}, 2);
  EXPECT_FALSE(r.ok());
}

TEST(TensorKernels, GatherNegativeIndicesWrap) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 20; ++trial) {
    int rank = 1 + trial % 3;
    Tensor x = random_floats(rng, random_dims(rng, rank, 5));
    int axis = std::uniform_int_distribution<int>(0, rank - 1)(rng);
    int64_t dim = x.dim(axis);
    std::vector<int64_t> positive(6), negative(6);
    for (size_t i = 0; i < positive.size(); ++i) {
      positive[i] = std::uniform_int_distribution<int64_t>(0, dim - 1)(rng);
      negative[i] = positive[i] - dim;
    }
    Tensor pos = Tensor::from_vector<int64_t>({2, 3}, positive);
    Tensor neg = Tensor::from_vector<int64_t>({2, 3}, negative);
    std::map<std::string, Attribute> attrs = {{"axis", Attribute::of_int(axis)}};
    auto a = run_kernel("Gather", {&x, &pos}, attrs);
    auto b = run_kernel("Gather", {&x, &neg}, attrs);
    ASSERT_TRUE(a.ok() && b.ok());
    expect_same((*a)[0], (*b)[0]);
    // Element check along the axis for the first index.
    const Tensor& y = (*a)[0];
    std::vector<int64_t> out_index(y.rank(), 0);
    std::vector<int64_t> in_index(rank, 0);
    in_index[axis] = positive[0];
    EXPECT_EQ(y.data<float>()[ravel(out_index, y.dims())],
              x.data<float>()[ravel(in_index, x.dims())]);
  }
}

TEST(TensorKernels, GatherOutOfRangeIndexIsAnError) {
  Tensor x = Tensor::from_vector<float>({3}, {1, 2, 3});
  for (int64_t bad : std::vector<int64_t>{3, -4, int64_t{1} << 40}) {
    Tensor ind = Tensor::from_vector<int64_t>({1}, {bad});
    auto r = run_kernel("Gather", {&x, &ind}, {});
    EXPECT_FALSE(r.ok()) << "index " << bad;
  }
}

TEST(TensorKernels, SliceWithNegativeStepReverses) {
  std::mt19937 rng(5);
  Tensor x = random_floats(rng, {4, 7});
  Tensor starts = Tensor::from_vector<int64_t>({1}, {-1});
  Tensor ends = Tensor::from_vector<int64_t>({1}, {std::numeric_limits<int64_t>::min()});
  Tensor axes = Tensor::from_vector<int64_t>({1}, {1});
  Tensor steps = Tensor::from_vector<int64_t>({1}, {-1});
  auto r = run_kernel("Slice", {&x, &starts, &ends, &axes, &steps}, {});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Tensor& y = (*r)[0];
  ASSERT_EQ(y.dims(), x.dims());
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t j = 0; j < 7; ++j)
      EXPECT_EQ(y.data<float>()[i * 7 + j], x.data<float>()[i * 7 + 6 - j]);
  }
}

TEST(TensorKernels, UniqueInverseReconstructsInput) {
  std::mt19937 rng(9);
  for (int sorted = 0; sorted < 2; ++sorted) {
    std::vector<int64_t> values(50);
    for (auto& v : values) v = std::uniform_int_distribution<int64_t>(-5, 5)(rng);
    Tensor x = Tensor::from_vector<int64_t>({50}, values);
    auto r = run_kernel("Unique", {&x}, {{"sorted", Attribute::of_int(sorted)}}, 4);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const Tensor& y = (*r)[0];
    const Tensor& first = (*r)[1];
    const Tensor& inverse = (*r)[2];
    const Tensor& counts = (*r)[3];
    int64_t total = 0;
    for (int64_t g = 0; g < y.numel(); ++g) {
      total += counts.data<int64_t>()[g];
      EXPECT_EQ(values[first.data<int64_t>()[g]], y.data<int64_t>()[g]);
      if (g == 0) continue;
      if (sorted) {
        EXPECT_LT(y.data<int64_t>()[g - 1], y.data<int64_t>()[g]);
      } else {
        EXPECT_LT(first.data<int64_t>()[g - 1], first.data<int64_t>()[g]);
      }
    }
    EXPECT_EQ(total, 50);
    for (int64_t i = 0; i < 50; ++i)
      EXPECT_EQ(y.data<int64_t>()[inverse.data<int64_t>()[i]], values[i]);
  }
}

TEST(TensorKernels, BadInputsAreErrorsNotCrashes) {
  Tensor x = Tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto i64 = [](std::vector<int64_t> v) {
    return Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v);
  };
  const int64_t big = std::numeric_limits<int64_t>::max();
  Tensor two_minus_ones = i64({-1, -1}), huge_shape = i64({big, big}), huge_repeats = i64({big, 2});
  Tensor starts = i64({0}), ends = i64({2}), axes = i64({0}), zero_step = i64({0});
  Tensor huge_pads = i64({0, big, 0, 0}), bad_nd = i64({2, 0}), update = i64({1});
  Tensor ind2x1 = Tensor::from_vector<int64_t>({1, 2}, {0, 5});
  Tensor scalar_float = Tensor::scalar<float>(1.0f);
  Tensor nan_index = Tensor::from_vector<float>({1}, {std::numeric_limits<float>::quiet_NaN()});
  Tensor depth = Tensor::scalar<int64_t>(3), values = i64({0, 1});
  EXPECT_FALSE(run_kernel("Reshape", {&x, &two_minus_ones}, {}).ok());
  EXPECT_FALSE(run_kernel("Reshape", {&x, &huge_shape}, {}).ok());
  EXPECT_FALSE(run_kernel("Expand", {&x, &huge_shape}, {}).ok());
  EXPECT_FALSE(run_kernel("Tile", {&x, &huge_repeats}, {}).ok());
  EXPECT_FALSE(run_kernel("Slice", {&x, &starts, &ends, &axes, &zero_step}, {}).ok());
  EXPECT_FALSE(run_kernel("Pad", {&x, &huge_pads}, {}).ok());
  EXPECT_FALSE(run_kernel("GatherND", {&x, &ind2x1}, {}).ok());
  Tensor xi = i64({1, 2, 3});
  EXPECT_FALSE(run_kernel("ScatterND", {&xi, &bad_nd, &update}, {}).ok());
  EXPECT_FALSE(run_kernel("Gather", {&x, &scalar_float}, {}).ok());
  EXPECT_FALSE(run_kernel("Transpose", {&x}, {{"perm", Attribute::of_ints({0, 0})}}).ok());
  EXPECT_FALSE(run_kernel("Squeeze", {&x, &axes}, {}).ok());
  EXPECT_FALSE(run_kernel("DepthToSpace", {&x}, {{"blocksize", Attribute::of_int(big)}}).ok());
  // A NaN index selects nothing: the row is all off values.
  auto hot = run_kernel("OneHot", {&nan_index, &depth, &values}, {});
  ASSERT_TRUE(hot.ok()) << hot.status().to_string();
  EXPECT_EQ((*hot)[0].to_int64_vector(), (std::vector<int64_t>{0, 0, 0}));
}

TEST(TensorOps, ReshapeInfersFromConstantShape) {
  Graph g;
  int x = g.add_input("x", TensorType::of(DType::kFloat32, {2, 3, 4}));
  int shape = g.add_constant("shape", Tensor::from_vector<int64_t>({2}, {0, -1}));
  int y = g.add_value("y");
  g.add_node("Reshape", {x, shape}, {y}, {}, "reshape");
  g.mark_output(y);
  ASSERT_TRUE(g.finalize().ok());
  g.node(0).opset = 17;
  ASSERT_TRUE(infer_graph_types(g).ok());
  EXPECT_EQ(g.value(y).type, TensorType::of(DType::kFloat32, {2, 12}));
}

}  // namespace
}  // namespace tessera
