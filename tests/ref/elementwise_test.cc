// Property tests of the elementwise reference kernels on seeded random data: broadcasting against
// hand-written loops (serial and on a thread pool), Round half to even, Mod/Div sign rules.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backends/ref/elementwise_kernels.h"
#include "backends/ref/ref_kernel.h"

namespace tessera {
namespace {

struct KernelRun {
  Status status;
  std::vector<Tensor> outputs;
};

// Runs the reference kernel of `op` on `inputs` (one output unless num_outputs says otherwise).
KernelRun run_kernel(const std::string& op, const std::vector<const Tensor*>& inputs,
                     std::map<std::string, Attribute> attrs = {}, ThreadPool* pool = nullptr,
                     int opset = 17, int num_outputs = 1) {
  Node node;
  node.op_type = op;
  node.name = "test";
  node.opset = opset;
  node.attrs = std::move(attrs);
  for (size_t i = 0; i < inputs.size(); ++i) node.inputs.push_back(static_cast<int>(i));
  for (int o = 0; o < num_outputs; ++o) node.outputs.push_back(100 + o);
  const RefKernelFn* kernel = RefKernelTable::global().find("", op);
  EXPECT_NE(kernel, nullptr) << op;
  if (!kernel) return {internal_error("no kernel"), {}};
  HeapAllocator alloc;
  RefKernelContext ctx(node, inputs, alloc, pool);
  KernelRun run;
  run.status = (*kernel)(ctx);
  run.outputs = ctx.outputs();
  return run;
}

template <typename T>
Tensor random_tensor(std::vector<int64_t> dims, std::mt19937& rng, double lo, double hi) {
  Tensor t(DTypeOf<T>::value, std::move(dims));
  T* p = t.data<T>();
  if constexpr (std::is_integral_v<T>) {
    std::uniform_int_distribution<int64_t> dist(static_cast<int64_t>(lo), static_cast<int64_t>(hi));
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<T>(dist(rng));
  } else {
    std::uniform_real_distribution<double> dist(lo, hi);
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<T>(dist(rng));
  }
  return t;
}

// a[2,1,3] (op) b[4,1] -> [2,4,3], checked element by element against explicit index math.
TEST(ElementwiseBroadcast, MatchesHandWrittenLoop) {
  std::mt19937 rng(1234);
  Tensor a = random_tensor<float>({2, 1, 3}, rng, -5, 5);
  Tensor b = random_tensor<float>({4, 1}, rng, -5, 5);
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
    KernelRun r = run_kernel(op, {&a, &b});
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    const Tensor& y = r.outputs[0];
    ASSERT_EQ(y.dims(), (std::vector<int64_t>{2, 4, 3}));
    const float* pa = a.data<float>();
    const float* pb = b.data<float>();
    const float* py = y.data<float>();
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 4; ++j) {
        for (int k = 0; k < 3; ++k) {
          float x = pa[i * 3 + k], z = pb[j];
          std::string name = op;
          float want = name == "Add"   ? x + z
                       : name == "Sub" ? x - z
                       : name == "Mul" ? x * z
                                       : x / z;
          EXPECT_EQ(py[(i * 4 + j) * 3 + k], want) << op << " at " << i << "," << j << "," << k;
        }
      }
    }
  }
}

// Large enough to be split into many chunks on a pool: every chunk must start at the right
// multi-index and input offsets.
TEST(ElementwiseBroadcast, ParallelChunksMatchSerialLoop) {
  std::mt19937 rng(99);
  Tensor a = random_tensor<int32_t>({37, 1, 513}, rng, -1000, 1000);
  Tensor b = random_tensor<int32_t>({29, 1}, rng, -1000, 1000);
  Tensor c = random_tensor<int32_t>({513}, rng, -1000, 1000);
  ThreadPool pool(4);
  KernelRun r = run_kernel("Sum", {&a, &b, &c}, {}, &pool);
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  const Tensor& y = r.outputs[0];
  ASSERT_EQ(y.dims(), (std::vector<int64_t>{37, 29, 513}));
  const int32_t* pa = a.data<int32_t>();
  const int32_t* pb = b.data<int32_t>();
  const int32_t* pc = c.data<int32_t>();
  const int32_t* py = y.data<int32_t>();
  int64_t mismatches = 0;
  for (int i = 0; i < 37; ++i)
    for (int j = 0; j < 29; ++j)
      for (int k = 0; k < 513; ++k)
        mismatches += py[(i * 29 + j) * 513 + k] != pa[i * 513 + k] + pb[j] + pc[k];
  EXPECT_EQ(mismatches, 0);
}

TEST(ElementwiseBroadcast, WhereBroadcastsThreeWays) {
  std::mt19937 rng(7);
  Tensor cond(DType::kBool, {3, 1, 1});
  for (int i = 0; i < 3; ++i) cond.data<bool>()[i] = (rng() & 1) != 0;
  Tensor x = random_tensor<int64_t>({1, 4, 1}, rng, -9, 9);
  Tensor y = random_tensor<int64_t>({5}, rng, -9, 9);
  KernelRun r = run_kernel("Where", {&cond, &x, &y});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  ASSERT_EQ(r.outputs[0].dims(), (std::vector<int64_t>{3, 4, 5}));
  const int64_t* out = r.outputs[0].data<int64_t>();
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 5; ++k)
        EXPECT_EQ(out[(i * 4 + j) * 5 + k],
                  cond.data<bool>()[i] ? x.data<int64_t>()[j] : y.data<int64_t>()[k]);
}

TEST(ElementwiseBroadcast, IncompatibleShapesAreAnError) {
  Tensor a(DType::kFloat32, {2, 3});
  Tensor b(DType::kFloat32, {4});
  KernelRun r = run_kernel("Add", {&a, &b});
  EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
}

TEST(ElementwiseBroadcast, PlanCoalescesContiguousDims) {
  auto same = ref::plan_broadcast({{2, 3, 4}, {2, 3, 4}});
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->loop_dims, (std::vector<int64_t>{24}));
  auto row = ref::plan_broadcast({{2, 3, 4}, {4}});
  ASSERT_TRUE(row.ok());
  EXPECT_EQ(row->loop_dims, (std::vector<int64_t>{6, 4}));
  EXPECT_EQ(row->loop_strides[1], (std::vector<int64_t>{0, 1}));
}

TEST(ElementwiseRound, HalfToEven) {
  std::vector<float> in, want;
  for (int k = -10; k <= 10; ++k) {
    in.push_back(k + 0.5f);
    want.push_back(static_cast<float>(k % 2 == 0 ? k : k + 1));
  }
  in.insert(in.end(), {2.4f, 2.6f, -2.4f, -2.6f, 1e8f, -0.0f});
  want.insert(want.end(), {2.0f, 3.0f, -2.0f, -3.0f, 1e8f, -0.0f});
  Tensor x = Tensor::from_vector<float>({static_cast<int64_t>(in.size())}, in);
  KernelRun r = run_kernel("Round", {&x});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(r.outputs[0].data<float>()[i], want[i]) << in[i];

  // float16 and double take the same path through their compute types.
  Tensor h = Tensor::from_vector<Float16>({3}, {Float16(0.5f), Float16(1.5f), Float16(-2.5f)});
  KernelRun rh = run_kernel("Round", {&h});
  ASSERT_TRUE(rh.status.ok());
  EXPECT_EQ(static_cast<float>(rh.outputs[0].data<Float16>()[0]), 0.0f);
  EXPECT_EQ(static_cast<float>(rh.outputs[0].data<Float16>()[1]), 2.0f);
  EXPECT_EQ(static_cast<float>(rh.outputs[0].data<Float16>()[2]), -2.0f);
}

// Mod with fmod=0 takes the divisor's sign; fmod=1 the dividend's; both satisfy a = q*b + r.
TEST(ElementwiseMod, SignRulesOnRandomIntegers) {
  std::mt19937 rng(42);
  Tensor a = random_tensor<int32_t>({500}, rng, -100, 100);
  Tensor b = random_tensor<int32_t>({500}, rng, 1, 17);
  for (int i = 0; i < 500; ++i) {
    if (rng() & 1) b.data<int32_t>()[i] = -b.data<int32_t>()[i];
  }
  KernelRun floor_mod = run_kernel("Mod", {&a, &b});
  KernelRun trunc_mod = run_kernel("Mod", {&a, &b}, {{"fmod", Attribute::of_int(1)}});
  KernelRun div = run_kernel("Div", {&a, &b});
  ASSERT_TRUE(floor_mod.status.ok() && trunc_mod.status.ok() && div.status.ok());
  for (int i = 0; i < 500; ++i) {
    int32_t x = a.data<int32_t>()[i], y = b.data<int32_t>()[i];
    int32_t rf = floor_mod.outputs[0].data<int32_t>()[i];
    int32_t rt = trunc_mod.outputs[0].data<int32_t>()[i];
    int32_t q = div.outputs[0].data<int32_t>()[i];
    EXPECT_TRUE(rf == 0 || (rf < 0) == (y < 0)) << x << " mod " << y << " = " << rf;
    EXPECT_LT(std::abs(rf), std::abs(y));
    EXPECT_EQ((x - rf) % y, 0);
    EXPECT_TRUE(rt == 0 || (rt < 0) == (x < 0)) << x << " fmod " << y << " = " << rt;
    EXPECT_EQ(q, x / y);  // integer Div truncates toward zero
    EXPECT_EQ(q * y + rt, x);
  }
}

TEST(ElementwiseMod, FloatFmodMatchesStdFmod) {
  std::mt19937 rng(5);
  Tensor a = random_tensor<double>({200}, rng, -50, 50);
  Tensor b = random_tensor<double>({200}, rng, 0.5, 7);
  KernelRun r = run_kernel("Mod", {&a, &b}, {{"fmod", Attribute::of_int(1)}});
  ASSERT_TRUE(r.status.ok());
  for (int i = 0; i < 200; ++i) {
    EXPECT_EQ(r.outputs[0].data<double>()[i], std::fmod(a.data<double>()[i], b.data<double>()[i]));
  }
}

TEST(ElementwiseDiv, IntegerEdgeCasesAreDefined) {
  Tensor a = Tensor::from_vector<int32_t>({2}, {std::numeric_limits<int32_t>::min(), 7});
  Tensor minus_one = Tensor::from_vector<int32_t>({2}, {-1, -1});
  KernelRun r = run_kernel("Div", {&a, &minus_one});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.outputs[0].data<int32_t>()[0], std::numeric_limits<int32_t>::min());  // wraps
  EXPECT_EQ(r.outputs[0].data<int32_t>()[1], -7);
  Tensor zero = Tensor::from_vector<int32_t>({2}, {1, 0});
  EXPECT_EQ(run_kernel("Div", {&a, &zero}).status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(run_kernel("Mod", {&a, &zero}).status.code(), StatusCode::kInvalidArgument);
}

TEST(ElementwisePow, IntegerBaseAndExponents) {
  Tensor base = Tensor::from_vector<int64_t>({4}, {2, -3, 2, -1});
  Tensor exponent = Tensor::from_vector<int64_t>({4}, {10, 3, -1, -3});
  KernelRun r = run_kernel("Pow", {&base, &exponent});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.outputs[0].to_int64_vector(), (std::vector<int64_t>{1024, -27, 0, -1}));
  Tensor fexp = Tensor::from_vector<float>({4}, {0.5f, 2.0f, 3.0f, 2.0f});
  KernelRun rf = run_kernel("Pow", {&base, &fexp});
  ASSERT_TRUE(rf.status.ok());
  EXPECT_EQ(rf.outputs[0].dtype(), DType::kInt64);  // the output has the base's dtype
  EXPECT_EQ(rf.outputs[0].to_int64_vector(), (std::vector<int64_t>{1, 9, 8, 1}));
}

TEST(ElementwiseCast, FloatStringRoundTripIsExact) {
  std::mt19937 rng(3);
  Tensor x = random_tensor<float>({64}, rng, -1e6, 1e6);
  x.data<float>()[0] = std::numeric_limits<float>::infinity();
  x.data<float>()[1] = std::nanf("");
  x.data<float>()[2] = 1e-30f;
  Tensor like_string(DType::kString, {1});
  KernelRun to_string = run_kernel("CastLike", {&x, &like_string});
  ASSERT_TRUE(to_string.status.ok()) << to_string.status.to_string();
  EXPECT_EQ(to_string.outputs[0].strings()[0], "INF");
  EXPECT_EQ(to_string.outputs[0].strings()[1], "NaN");
  KernelRun back = run_kernel("Cast", {&to_string.outputs[0]}, {{"to", Attribute::of_int(1)}});
  ASSERT_TRUE(back.status.ok()) << back.status.to_string();
  const float* p = back.outputs[0].data<float>();
  EXPECT_TRUE(std::isnan(p[1]));
  for (int i = 0; i < 64; ++i) {
    if (i == 1) continue;
    EXPECT_EQ(p[i], x.data<float>()[i]) << to_string.outputs[0].strings()[i];
  }
}

TEST(ElementwiseCast, FloatToIntSaturatesAndNaNIsZero) {
  Tensor x = Tensor::from_vector<float>({4}, {1e20f, -1e20f, std::nanf(""), -3.7f});
  KernelRun r = run_kernel("Cast", {&x}, {{"to", Attribute::of_int(3)}});  // INT8
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.outputs[0].to_int64_vector(), (std::vector<int64_t>{127, -128, 0, -3}));
}

}  // namespace
}  // namespace tessera
