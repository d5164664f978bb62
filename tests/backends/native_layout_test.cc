// The native backend's Transpose and Slice against the reference kernels, byte for byte: every
// permutation of ranks 1-4, the 5-D and 6-D ones models use, size-1 dims, tensors large enough
// to be split across threads, every element size, and Slice with negative / out-of-range
// indices, steps of either sign and empty results (opset 17 inputs and opset 9 attributes).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "backends/native/isa.h"
#include "backends/native/native_compile.h"
#include "backends/native_kernel_runner.h"
#include "backends/test_graph.h"

namespace tessera {
namespace {

using testing_graph::Dims;
using testing_graph::run_ref;
using testing_graph::TestGraph;
using testing_native::isas;
using testing_native::run_native;
using testing_native::whole;

void expect_same_bytes_as_ref(const TestGraph& t, const std::string& what) {
  ASSERT_TRUE(native::native_supports(t.g, 0).ok()) << what << ": " << native::native_supports(t.g, 0).to_string();
  ASSERT_TRUE(native::native_accepts(whole(t)).ok()) << what;
  const std::vector<Tensor> want = run_ref(t);
  ASSERT_EQ(want.size(), 1u);
  for (const native::IsaKernels* isa : isas()) {
    for (int threads : {1, 2}) {
      const std::vector<Tensor> got = run_native(t, *isa, threads);
      ASSERT_EQ(got.size(), 1u) << what;
      EXPECT_EQ(got[0].dims(), want[0].dims()) << what;
      EXPECT_EQ(got[0].dtype(), want[0].dtype()) << what;
      EXPECT_TRUE(got[0].nbytes() == want[0].nbytes() &&
                  std::memcmp(got[0].raw_data(), want[0].raw_data(), want[0].nbytes()) == 0)
          << what << " on " << native::isa_name(isa->isa) << " x" << threads;
    }
  }
}

// A graph input of any dtype, filled with distinct byte patterns (so a misplaced element shows).
int typed_input(TestGraph& t, DType dtype, const Dims& dims) {
  const int v = t.g.add_input(t.name('x'), TensorType::of(dtype, dims));
  Tensor x(dtype, dims);
  auto* bytes = static_cast<unsigned char*>(x.raw_data());
  for (size_t i = 0; i < x.nbytes(); ++i) bytes[i] = static_cast<unsigned char>((i * 131 + 7) % 251);
  if (dtype == DType::kBool)
    for (size_t i = 0; i < x.nbytes(); ++i) bytes[i] &= 1;
  t.inputs.push_back(std::move(x));
  return v;
}

TestGraph transpose_graph(const Dims& x, const Dims& perm, DType dtype = DType::kFloat32) {
  TestGraph t;
  const int in = dtype == DType::kFloat32 ? t.input(x) : typed_input(t, dtype, x);
  std::map<std::string, Attribute> attrs;
  if (!perm.empty()) attrs["perm"] = Attribute::of_ints(perm);
  t.finish({t.op("Transpose", {in}, attrs)});
  return t;
}

TEST(NativeTranspose, EveryPermutationOfSmallRanks) {
  const Dims shapes[] = {{7}, {5, 3}, {4, 1, 6}, {2, 3, 5}, {3, 4, 5, 6}, {2, 1, 7, 3}};
  for (const Dims& x : shapes) {
    Dims perm(x.size());
    std::iota(perm.begin(), perm.end(), 0);
    do {
      expect_same_bytes_as_ref(transpose_graph(x, perm),
                               "Transpose x" + dims_to_string(x) + " perm " + dims_to_string(perm));
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
}

TEST(NativeTranspose, ModelShapesDefaultPermAndLargeTensors) {
  struct Case { Dims x, perm; };
  const Case cases[] = {
      {{1, 40, 3, 8, 15}, {2, 0, 3, 1, 4}},  // rec's attention: q / k / v heads
      {{3, 8, 40, 15}, {0, 1, 3, 2}},        // k transposed for q @ k^T
      {{1, 120, 40}, {0, 2, 1}},
      {{2, 3, 4, 5, 6, 7}, {5, 3, 1, 0, 2, 4}},
      {{6, 5, 4}, {}},                       // no perm: reversed dims
      {{1, 64, 128, 40}, {0, 2, 3, 1}},      // 1.3 MB: split across threads, tiled
      {{1, 256, 32, 33}, {0, 1, 3, 2}},      // tiles with ragged edges
      {{8, 64, 300}, {1, 0, 2}},             // runs of 300 contiguous elements, split
      {{1, 1, 1}, {2, 0, 1}},
  };
  for (const Case& c : cases)
    expect_same_bytes_as_ref(transpose_graph(c.x, c.perm),
                             "Transpose x" + dims_to_string(c.x) + " perm " + dims_to_string(c.perm));
}

TEST(NativeTranspose, EveryElementSize) {
  for (DType dtype : {DType::kUint8, DType::kBool, DType::kFloat16, DType::kInt32, DType::kInt64, DType::kFloat64}) {
    for (const Dims& perm : {Dims{2, 0, 1}, Dims{0, 2, 1}, Dims{1, 0, 2}})
      expect_same_bytes_as_ref(transpose_graph({5, 7, 9}, perm, dtype),
                               std::string(dtype_name(dtype)) + " perm " + dims_to_string(perm));
  }
}

TEST(NativeTranspose, RefusesDynamicShapes) {
  TestGraph t;
  const int x = t.g.add_input("x", TensorType{DType::kFloat32, std::vector<Dim>{Dim(2), Dim()}});
  t.inputs.push_back(Tensor(DType::kFloat32, {2, 3}));
  t.finish({t.op("Transpose", {x}, {{"perm", Attribute::of_ints({1, 0})}})});
  EXPECT_FALSE(native::native_supports(t.g, 0).ok());
}

struct SliceSpec {
  Dims x, starts, ends, axes, steps;  // axes / steps may be empty (omitted inputs)
};

TestGraph slice_graph(const SliceSpec& c, DType dtype = DType::kFloat32, int opset = 17) {
  TestGraph t;
  t.opset = opset;
  const int in = dtype == DType::kFloat32 ? t.input(c.x) : typed_input(t, dtype, c.x);
  int y;
  if (opset < 10) {
    std::map<std::string, Attribute> attrs = {{"starts", Attribute::of_ints(c.starts)},
                                              {"ends", Attribute::of_ints(c.ends)}};
    if (!c.axes.empty()) attrs["axes"] = Attribute::of_ints(c.axes);
    y = t.op("Slice", {in}, attrs);
  } else {
    std::vector<int> ins = {in, t.ints(c.starts), t.ints(c.ends)};
    if (!c.axes.empty() || !c.steps.empty()) ins.push_back(c.axes.empty() ? kNoValue : t.ints(c.axes));
    if (!c.steps.empty()) ins.push_back(t.ints(c.steps));
    y = t.op("Slice", ins);
  }
  t.finish({y});
  return t;
}

std::string describe(const SliceSpec& c) {
  return "Slice x" + dims_to_string(c.x) + " starts " + dims_to_string(c.starts) + " ends " +
         dims_to_string(c.ends) + " axes " + dims_to_string(c.axes) + " steps " + dims_to_string(c.steps);
}

TEST(NativeSlice, IndicesStepsAndClamping) {
  const SliceSpec cases[] = {
      {{10}, {2}, {7}, {}, {}},
      {{10}, {-3}, {100}, {}, {}},
      {{10}, {8}, {1}, {0}, {-3}},
      {{10}, {-1}, {-100}, {0}, {-1}},                            // reversed whole
      {{10}, {5}, {5}, {}, {}},                                   // empty
      {{6, 9}, {1, 2}, {5, 8}, {}, {}},
      {{6, 9}, {0}, {9}, {1}, {2}},
      {{6, 9}, {5, 8}, {-100, -100}, {0, 1}, {-2, -1}},
      {{3, 40, 8, 15}, {2}, {3}, {0}, {}},                        // rec's q / k / v pick
      {{2, 5, 6, 7}, {1, 0, -100}, {4, 100, 100}, {1, 2, 3}, {2, 3, 1}},
      {{2, 5, 6, 7}, {0}, {1}, {-1}, {}},
      {{1, 3, 48, 320}, {0, 10}, {3, 300}, {1, 3}, {1, 1}},       // large: split across threads
      {{4, 64, 64, 8}, {0, 1}, {64, 64}, {1, 2}, {3, 2}},         // large, strided
      {{2, 3, 4}, {0, 0, 0}, {2, 3, 4}, {}, {}},                  // everything
  };
  for (const SliceSpec& c : cases) expect_same_bytes_as_ref(slice_graph(c), describe(c));
}

TEST(NativeSlice, EveryElementSizeAndOpset9Attributes) {
  const SliceSpec c = {{5, 7, 9}, {1, -6, 0}, {4, 7, 9}, {0, 1, 2}, {1, 2, -2}};
  for (DType dtype : {DType::kUint8, DType::kFloat16, DType::kInt32, DType::kInt64, DType::kFloat64})
    expect_same_bytes_as_ref(slice_graph(c, dtype), std::string(dtype_name(dtype)) + " " + describe(c));
  const SliceSpec attrs = {{5, 7, 9}, {1, -6}, {4, 100}, {0, 1}, {}};
  expect_same_bytes_as_ref(slice_graph(attrs, DType::kFloat32, 9), "opset 9 " + describe(attrs));
}

TEST(NativeSlice, RefusesComputedIndices) {
  TestGraph t;
  const int x = t.input({4, 6});
  const int starts = t.g.add_input("starts", TensorType::of(DType::kInt64, {1}));
  t.inputs.push_back(Tensor::from_vector<int64_t>({1}, {1}));
  t.finish({t.op("Slice", {x, starts, t.ints({3})})});
  EXPECT_FALSE(native::native_supports(t.g, t.g.num_nodes() - 1).ok());
}

}  // namespace
}  // namespace tessera
