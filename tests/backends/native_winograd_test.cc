// The native Conv's Winograd F(2x2, 3x3) path (conv_winograd.cc, simd_winograd.h) against the
// reference kernels, for every ISA this CPU runs at 1 and 2 threads, on seeded random data. The
// kernels here are compiled with ConvAlgorithm::kWinograd, so every case takes that path whatever
// winograd_pays says: odd output sizes (the last tile half outside), outputs smaller than a tile,
// every pad of 0 to 2 on each side, channel counts off the weight blocks, two images, tiles of
// one row split between tasks (a wide image with many channels), the folded BatchNormalization and
// the elementwise tails; then the det model's own shapes through the backend's usual choice. And
// the two transforms alone (IsaKernels::winograd_input_tile_row / winograd_output_tile_row)
// against a plain double-precision loop, with their rows next to inaccessible pages.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/harness.h"
#include "backends/native/conv_kernels.h"
#include "backends/native/isa.h"
#include "backends/native/native_compile.h"
#include "backends/native_kernel_runner.h"
#include "backends/test_graph.h"

namespace tessera {
namespace {

using native::ConvAlgorithm;
using testing_graph::Dims;
using testing_graph::run_ref;
using testing_graph::TestGraph;
using testing_native::isas;
using testing_native::run_native;

// Winograd's rounding differs from the direct sum's by about 1e-6 of the output's magnitude.
constexpr double kTolerance = 1e-5;

// The whole graph (a Conv and its tail) as one native Conv kernel; outputs in graph order.
// kAuto goes through compile_native, as the backend does.
std::vector<Tensor> run_conv(const TestGraph& t, const native::IsaKernels& isa, int threads,
                             ConvAlgorithm algorithm) {
  if (algorithm == ConvAlgorithm::kAuto) return run_native(t, isa, threads);
  const SubGraph sg(t.g, NodeSet::all(t.g.num_nodes()));
  return testing_native::run_whole_graph(t, native::compile_conv_kernel(sg, isa, algorithm), threads);
}

void expect_matches_ref(const TestGraph& t, const std::string& what,
                        ConvAlgorithm algorithm = ConvAlgorithm::kWinograd) {
  const std::vector<Tensor> want = run_ref(t);
  for (const native::IsaKernels* isa : isas()) {
    for (int threads : {1, 2}) {
      const std::vector<Tensor> got = run_conv(t, *isa, threads, algorithm);
      ASSERT_EQ(got.size(), want.size()) << what;
      for (size_t o = 0; o < got.size(); ++o) {
        EXPECT_LE(harness::relative_error(got[o], want[o]), kTolerance)
            << what << " output " << o << " on " << native::isa_name(isa->isa) << " x" << threads;
      }
    }
  }
}

// A 3x3 Conv (W in [-0.5, 0.5]) of x [N, C, H, W] to oc channels, optionally with its bias.
struct Case {
  Dims x;
  int64_t oc;
  Dims pads = {1, 1, 1, 1};
  bool bias = true;
};

int conv3x3(TestGraph& t, int x, const Case& c) {
  std::vector<int> in = {x, t.constant({c.oc, c.x[1], 3, 3}, -0.5f, 0.5f)};
  if (c.bias) in.push_back(t.constant({c.oc}));
  return t.op("Conv", in, {{"pads", Attribute::of_ints(c.pads)}});
}

std::string name(const Case& c) {
  return "Conv3x3 " + dims_to_string(c.x) + " oc " + std::to_string(c.oc) + " pads " +
         dims_to_string(c.pads) + (c.bias ? "" : " no bias");
}

int batch_norm(TestGraph& t, int x, int64_t c) {
  return t.op("BatchNormalization",
              {x, t.constant({c}), t.constant({c}), t.constant({c}), t.constant({c}, 0.5f, 2.f)},
              {{"epsilon", Attribute::of_float(1e-3f)}});
}

TEST(NativeWinograd, MatchesTheReference) {
  const std::vector<Case> cases = {
      {{1, 16, 7, 9}, 24},                        // odd output: the last tiles half outside
      {{1, 19, 37, 41}, 5},                       // channels off every block
      {{2, 16, 8, 8}, 40, {1, 1, 1, 1}, false},   // two images, several blocks, no bias
      {{1, 5, 10, 12}, 1, {0, 0, 0, 0}},          // pads 0: a smaller output
      {{1, 7, 9, 11}, 5, {0, 0, 0, 0}},           // pads 0, odd output
      {{1, 6, 11, 6}, 13, {0, 1, 1, 0}},          // asymmetric pads
      {{1, 6, 8, 9}, 7, {1, 0, 0, 1}},            // ... the other way
      {{1, 9, 6, 7}, 8, {2, 2, 2, 2}},            // pads of 2: tiles of zeros only
      {{1, 4, 9, 5}, 3, {0, 2, 1, 0}, false},     // mixed pads
      {{1, 8, 3, 3}, 6, {0, 0, 0, 0}},            // a 1 x 1 output: one tile, 3 pixels outside
      {{1, 8, 1, 5}, 4},                          // one input row
      {{2, 8, 6, 1}, 9},                          // one input column
      {{1, 8, 2, 2}, 24, {1, 1, 1, 1}},           // one tile
      {{1, 1, 12, 35}, 3},                        // one input channel
      {{1, 12, 40, 70}, 24},                      // rows over the vector width, several tasks
      {{1, 96, 6, 200}, 24},                      // tile rows in parts (96 channels, 100 tiles)
      {{2, 40, 3, 520}, 5, {1, 1, 1, 1}, false},  // ... two images, a short last part
  };
  for (const Case& c : cases) {
    TestGraph t;
    t.finish({conv3x3(t, t.input(c.x), c)});
    expect_matches_ref(t, name(c));
  }
}

TEST(NativeWinograd, FoldsAffineNodesAndRunsTheTail) {
  const Case c{{1, 24, 9, 21}, 13};
  {
    TestGraph t;
    t.finish({t.op("Relu", {batch_norm(t, conv3x3(t, t.input(c.x), c), c.oc)})});
    expect_matches_ref(t, "Conv+BatchNormalization+Relu");
  }
  {
    TestGraph t;
    int y = t.op("Add", {conv3x3(t, t.input(c.x), c), t.constant({1, c.oc, 1, 1})});
    y = t.op("Clip", {y, t.constant(Tensor::scalar(0.f)), t.constant(Tensor::scalar(6.f))});
    t.finish({y});
    expect_matches_ref(t, "Conv+Add(per channel)+Clip");
  }
  {  // Mul, Div by per-channel constants; two outputs; a tail input
    TestGraph t;
    const Case d{{2, 6, 7, 9}, 3};
    int y = conv3x3(t, t.input(d.x), d);
    y = t.op("Div", {t.op("Mul", {t.constant({3, 1, 1}), y}), t.constant({1, 3, 1, 1}, 1.f, 2.f)});
    const int z = t.op("Add", {t.op("Sigmoid", {y}), t.input({2, 3, 7, 9})});
    t.finish({z, y});
    expect_matches_ref(t, "Conv+Mul+Div+Sigmoid+Add, two outputs");
  }
  {  // the Conv's own output leaves the group: nothing folds, the tail reads it
    TestGraph t;
    const int y = conv3x3(t, t.input(c.x), c);
    t.finish({t.op("Relu", {t.op("Add", {y, t.constant({1, c.oc, 1, 1})})}), y});
    expect_matches_ref(t, "Conv exported, Add+Relu tail");
  }
  {  // the tail on blocks that are parts of rows
    TestGraph t;
    const Case wide{{1, 96, 5, 201}, 7, {1, 0, 1, 1}};
    t.finish({t.op("Relu", {batch_norm(t, conv3x3(t, t.input(wide.x), wide), wide.oc)})});
    expect_matches_ref(t, "Conv+BatchNormalization+Relu, tile rows in parts");
  }
}

// The det model's two 96 -> 24 convolutions at 160 x 160 (one with BatchNormalization + Relu)
// and the smallest one: through the backend's own choice, which is Winograd where it pays.
TEST(NativeWinograd, DetectionModelShapes) {
  for (const int64_t size : {160, 20}) {
    for (const bool tail : {false, true}) {
      TestGraph t;
      const Case c{{1, 96, size, size}, 24, {1, 1, 1, 1}, !tail};
      int y = conv3x3(t, t.input(c.x), c);
      if (tail) y = t.op("Relu", {batch_norm(t, y, c.oc)});
      t.finish({y});
      const auto winograd = native::conv_uses_winograd(t.g, 0);
      ASSERT_TRUE(winograd.ok()) << winograd.status().to_string();
      if (size == 160) {
        EXPECT_TRUE(*winograd) << "the det model's 160 x 160 convolutions run as Winograd";
      }
      expect_matches_ref(t, name(c) + (tail ? " +BatchNormalization+Relu" : ""),
                         ConvAlgorithm::kAuto);
      if (!*winograd) expect_matches_ref(t, name(c) + " forced to Winograd");
    }
  }
}

TEST(NativeWinograd, OnlyForThreeByThreeStrideOneConvolutions) {
  TestGraph t;
  const int x = t.input({1, 32, 32, 32});
  const auto w = [&](int64_t k, int64_t ic = 32) { return t.constant({32, ic, k, k}); };
  std::vector<int> y;
  y.push_back(t.op("Conv", {x, w(3)}, {{"pads", Attribute::of_ints({1, 1, 1, 1})}}));  // Winograd
  y.push_back(t.op("Conv", {x, w(5)}, {{"pads", Attribute::of_ints({2, 2, 2, 2})}}));
  y.push_back(t.op("Conv", {x, w(3)}, {{"strides", Attribute::of_ints({2, 2})}}));
  y.push_back(t.op("Conv", {x, w(3)}, {{"dilations", Attribute::of_ints({2, 2})}}));
  y.push_back(t.op("Conv", {x, w(3, 16)}, {{"group", Attribute::of_int(2)}}));
  y.push_back(t.op("Conv", {x, w(1)}));
  t.finish(y);
  for (int n = 0; n < t.g.num_nodes(); ++n) {
    const auto winograd = native::conv_uses_winograd(t.g, n);
    ASSERT_TRUE(winograd.ok()) << winograd.status().to_string();
    EXPECT_EQ(*winograd, n == 0) << "node " << n;
    NodeSet one(t.g.num_nodes());
    one.add(n);
    const SubGraph sg(t.g, one);
    const auto forced =
        native::compile_conv_kernel(sg, native::scalar_kernels(), ConvAlgorithm::kWinograd);
    EXPECT_EQ(forced.ok(), n == 0) << "node " << n;
    if (!forced.ok()) {
      EXPECT_NE(forced.status().message().find("Winograd"), std::string::npos);
    }
  }
}

// n floats right after an inaccessible page (kFront) or right before one: a load or store past
// either end of the array faults.
enum class Guard { kFront, kBack };
class GuardedFloats {
 public:
  GuardedFloats(int64_t n, Guard guard) : page_(static_cast<size_t>(sysconf(_SC_PAGESIZE))) {
    const size_t data = (static_cast<size_t>(n) * sizeof(float) + page_ - 1) / page_ * page_;
    bytes_ = data + 2 * page_;
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    base_ = static_cast<char*>(p);
    if (mprotect(base_, page_, PROT_NONE) != 0 ||
        mprotect(base_ + bytes_ - page_, page_, PROT_NONE) != 0)
      throw std::bad_alloc();
    data_ = guard == Guard::kFront ? reinterpret_cast<float*>(base_ + page_)
                                   : reinterpret_cast<float*>(base_ + bytes_ - page_) - n;
  }
  ~GuardedFloats() { munmap(base_, bytes_); }
  GuardedFloats(const GuardedFloats&) = delete;
  GuardedFloats& operator=(const GuardedFloats&) = delete;
  float* data() const { return data_; }

 private:
  size_t page_, bytes_ = 0;
  char* base_ = nullptr;
  float* data_ = nullptr;
};

class NativeWinogradTransforms : public ::testing::TestWithParam<native::Isa> {};

// The input transform of one tile row of 2 channels: every width up to 40 (tiles reaching into
// the left padding, the right one, or both), rows above, inside and below the image, the image
// against either guard page; V against B^T d B in double.
TEST_P(NativeWinogradTransforms, InputTransformReadsOnlyTheRows) {
  if (!native::cpu_supports(GetParam())) GTEST_SKIP() << "this CPU cannot run the ISA";
  const native::IsaKernels& k = native::isa_kernels(GetParam());
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const int64_t channels = 2, height = 3;
  static constexpr double kBt[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
  for (const Guard guard : {Guard::kFront, Guard::kBack}) {
    for (int64_t width = 1; width <= 40; ++width) {
      for (const int64_t col0 : {-1, 0, -2}) {
        for (const int64_t row0 : {-1, 0, -3, 2}) {
          const int64_t tiles = (width - col0 + 1) / 2;
          SCOPED_TRACE("width " + std::to_string(width) + " col0 " + std::to_string(col0) +
                       " row0 " + std::to_string(row0) +
                       (guard == Guard::kFront ? " guard in front" : " guard behind"));
          GuardedFloats x(channels * height * width, guard);
          GuardedFloats v(16 * channels * tiles, Guard::kBack);
          for (int64_t i = 0; i < channels * height * width; ++i) x.data()[i] = u(rng);
          std::fill_n(v.data(), 16 * channels * tiles, NAN);
          native::WinogradInputArgs a{};
          a.in = x.data();
          a.channels = channels;
          a.plane_stride = height * width;
          a.height = height;
          a.width = width;
          a.row0 = row0;
          a.col0 = col0;
          a.tiles = tiles;
          a.v = v.data();
          a.channel_stride = tiles;
          a.xi_stride = channels * tiles;
          k.winograd_input_tile_row(a);
          double worst = 0;
          for (int64_t c = 0; c < channels; ++c)
            for (int64_t t = 0; t < tiles; ++t) {
              double d[4][4];
              for (int r = 0; r < 4; ++r)
                for (int j = 0; j < 4; ++j) {
                  const int64_t ih = row0 + r, iw = col0 + 2 * t + j;
                  d[r][j] = ih >= 0 && ih < height && iw >= 0 && iw < width
                                ? x.data()[(c * height + ih) * width + iw]
                                : 0.0;
                }
              for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j) {
                  double want = 0;
                  for (int r = 0; r < 4; ++r)
                    for (int q = 0; q < 4; ++q) want += kBt[i][r] * d[r][q] * kBt[j][q];
                  const float got = v.data()[c * tiles + (4 * i + j) * channels * tiles + t];
                  worst = std::isnan(got) ? INFINITY : std::max(worst, std::abs(got - want));
                }
            }
          EXPECT_LE(worst, 1e-5);
        }
      }
    }
  }
}

// The output transform: every width of 2 * tiles - 1 and 2 * tiles pixels up to 41, one and two
// rows, each output row right before a guard page; Y against A^T M A + bias in double.
TEST_P(NativeWinogradTransforms, OutputTransformWritesOnlyTheRows) {
  if (!native::cpu_supports(GetParam())) GTEST_SKIP() << "this CPU cannot run the ISA";
  const native::IsaKernels& k = native::isa_kernels(GetParam());
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  static constexpr double kAt[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
  for (int64_t width = 1; width <= 41; ++width) {
    for (const bool two_rows : {true, false}) {
      SCOPED_TRACE("width " + std::to_string(width) + (two_rows ? " two rows" : " one row"));
      const int64_t tiles = (width + 1) / 2, stride = (tiles + 15) / 16 * 16;
      std::vector<float> m(16 * stride);  // readable up to the tiles rounded up to 16
      for (float& f : m) f = u(rng);
      const float bias = u(rng);
      GuardedFloats y0(width, Guard::kBack), y1(width, Guard::kBack);
      std::fill_n(y0.data(), width, NAN);
      std::fill_n(y1.data(), width, NAN);
      k.winograd_output_tile_row(m.data(), stride, tiles, bias, y0.data(),
                                 two_rows ? y1.data() : nullptr, width);
      double worst = 0;
      for (int i = 0; i < (two_rows ? 2 : 1); ++i)
        for (int64_t p = 0; p < width; ++p) {
          double want = bias;
          for (int a = 0; a < 4; ++a)
            for (int b = 0; b < 4; ++b)
              want += kAt[i][a] * m[(4 * a + b) * stride + p / 2] * kAt[p % 2][b];
          const float got = (i == 0 ? y0 : y1).data()[p];
          worst = std::isnan(got) ? INFINITY : std::max(worst, std::abs(got - want));
        }
      EXPECT_LE(worst, 1e-5);
      if (!two_rows) {
        EXPECT_TRUE(std::isnan(y1.data()[0])) << "the second row was written";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, NativeWinogradTransforms,
                         ::testing::Values(native::Isa::kScalar, native::Isa::kAvx2,
                                           native::Isa::kAvx512),
                         [](const ::testing::TestParamInfo<native::Isa>& info) {
                           return std::string(native::isa_name(info.param));
                         });

}  // namespace
}  // namespace tessera
