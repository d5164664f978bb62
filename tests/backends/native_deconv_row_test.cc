// The native ConvTranspose row kernel (IsaKernels::deconv_row, simd_deconv.h) on every ISA this
// CPU runs, against a plain double-precision loop: x and y each end right before an
// inaccessible page, so a load or store past a row's last pixel faults; every width up to 40
// (every partial last vector of every tile), KW = 1 to 4, column counts that fill a block or
// leave a narrower last one, one and several input channels, with and without the clamp.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "backends/native/isa.h"

namespace tessera::native {
namespace {

// n floats that end where an inaccessible page begins.
class GuardedFloats {
 public:
  explicit GuardedFloats(int64_t n) : n_(n), page_(static_cast<size_t>(sysconf(_SC_PAGESIZE))) {
    bytes_ = (static_cast<size_t>(n) * sizeof(float) + page_ - 1) / page_ * page_ + page_;
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    base_ = static_cast<char*>(p);
    if (mprotect(base_ + bytes_ - page_, page_, PROT_NONE) != 0) throw std::bad_alloc();
  }
  ~GuardedFloats() { munmap(base_, bytes_); }
  GuardedFloats(const GuardedFloats&) = delete;
  GuardedFloats& operator=(const GuardedFloats&) = delete;
  float* data() const { return reinterpret_cast<float*>(base_ + bytes_ - page_) - n_; }

 private:
  int64_t n_;
  size_t page_, bytes_ = 0;
  char* base_ = nullptr;
};

struct Columns {
  int64_t oc, kh, kw;
};

class NativeDeconvRowKernels : public ::testing::TestWithParam<Isa> {};

TEST_P(NativeDeconvRowKernels, MatchAPlainLoopAndStayInsideTheirRows) {
  const Isa isa = GetParam();
  if (!cpu_supports(isa)) GTEST_SKIP() << "this CPU cannot run the ISA";
  const IsaKernels& k = isa_kernels(isa);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const Columns column_cases[] = {{1, 2, 2}, {3, 1, 1},  {5, 2, 3},
                                  {2, 1, 4}, {13, 2, 2}, {6, 2, 1}};
  for (const Columns& c : column_cases) {
    for (int64_t ic : {1, 5}) {
      for (int64_t w = 1; w <= 40; ++w) {
        const bool clamp = w % 3 == 0;
        SCOPED_TRACE("oc=" + std::to_string(c.oc) + " k=" + std::to_string(c.kh) + "x" +
                     std::to_string(c.kw) + " ic=" + std::to_string(ic) +
                     " w=" + std::to_string(w) + (clamp ? " clamped" : ""));
        const int64_t h = 2, cols = c.oc * c.kh * c.kw, block = k.deconv_col_block;
        const int64_t padded = (cols + block - 1) / block * block, oh = h * c.kh, ow = w * c.kw;
        GuardedFloats x(ic * h * w), y(c.oc * oh * ow);
        std::vector<float> weights(ic * cols), packed(padded * ic, 0.f), bias(padded, 0.f);
        std::vector<int64_t> offsets(cols);
        for (int64_t i = 0; i < ic * h * w; ++i) x.data()[i] = u(rng);
        for (float& v : weights) v = u(rng);
        for (int64_t j = 0; j < cols; ++j) {
          bias[j] = u(rng);
          for (int64_t ch = 0; ch < ic; ++ch)
            packed[((j / block) * ic + ch) * block + j % block] = weights[ch * cols + j];
          offsets[j] = (j / (c.kh * c.kw)) * oh * ow + (j / c.kw % c.kh) * ow + j % c.kw;
        }
        DeconvRowArgs a{};
        a.channels = ic;
        a.channel_stride = h * w;
        a.width = w;
        a.weights = packed.data();
        a.bias = bias.data();
        a.columns = cols;
        a.column_offsets = offsets.data();
        a.kw = c.kw;
        a.clamp = clamp;
        a.lo = -0.25f;
        a.hi = 0.5f;
        std::fill_n(y.data(), c.oc * oh * ow, NAN);  // an element never written stays NaN
        for (int64_t r = 0; r < h; ++r) {
          a.in = x.data() + r * w;
          a.out = y.data() + r * c.kh * ow;
          k.deconv_row(a);
        }
        double worst = 0;
        for (int64_t r = 0; r < h; ++r)
          for (int64_t p = 0; p < w; ++p)
            for (int64_t j = 0; j < cols; ++j) {
              double want = bias[j];
              for (int64_t ch = 0; ch < ic; ++ch)
                want += double{x.data()[(ch * h + r) * w + p]} * weights[ch * cols + j];
              if (clamp) want = std::min(0.5, std::max(-0.25, want));
              const float got = y.data()[offsets[j] + r * c.kh * ow + p * c.kw];
              worst = std::isnan(got) ? INFINITY : std::max(worst, std::abs(got - want));
            }
        EXPECT_LE(worst, 1e-5);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, NativeDeconvRowKernels,
                         ::testing::Values(Isa::kScalar, Isa::kAvx2, Isa::kAvx512),
                         [](const ::testing::TestParamInfo<Isa>& info) {
                           return std::string(isa_name(info.param));
                         });

}  // namespace
}  // namespace tessera::native
