// The native attention row kernels (IsaKernels::attention_scores / attention_values) on every ISA
// this CPU runs, against plain double-precision loops over the same paged blocks: head counts
// around the 4-head pass, head dims that are and are not multiples of the vector width, block
// sizes smaller and larger than it, partial last blocks, and blocks scattered in memory.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/native/isa.h"

namespace tessera::native {
namespace {

struct Case {
  int64_t nq, hd, bs, len;
};

class AttentionKernels : public ::testing::TestWithParam<Isa> {};

TEST_P(AttentionKernels, MatchPlainLoopsOverPagedBlocks) {
  const Isa isa = GetParam();
  if (!cpu_supports(isa)) GTEST_SKIP() << "this CPU cannot run the ISA";
  const IsaKernels& k = isa_kernels(isa);
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const Case cases[] = {{8, 64, 16, 1},  {8, 64, 16, 100}, {5, 64, 16, 33}, {1, 20, 4, 9},
                        {3, 7, 5, 23},  {4, 96, 32, 70},  {2, 17, 16, 16}, {6, 64, 8, 250}};
  for (const Case& c : cases) {
    SCOPED_TRACE("nq=" + std::to_string(c.nq) + " hd=" + std::to_string(c.hd) + " bs=" + std::to_string(c.bs) +
                 " len=" + std::to_string(c.len));
    const int64_t nblocks = (c.len + c.bs - 1) / c.bs, ldq = c.hd + 3, lds = c.len + 5, ldo = c.hd + 2;
    // Blocks in reverse order inside one pool, with a spare block between each: the kernels must
    // follow the block pointers. Positions past len in the last block hold NaN: never read into
    // a result.
    const int64_t block_floats = c.bs * c.hd;
    std::vector<float> kpool((2 * nblocks + 1) * block_floats, NAN), vpool = kpool;
    std::vector<const float*> kt(nblocks), vb(nblocks);
    std::vector<double> keys(c.len * c.hd), values(c.len * c.hd);
    for (int64_t b = 0; b < nblocks; ++b) {
      const int64_t at = (2 * (nblocks - 1 - b) + 1) * block_floats;
      kt[b] = kpool.data() + at;
      vb[b] = vpool.data() + at;
      for (int64_t j = 0; j < c.bs && b * c.bs + j < c.len; ++j) {
        const int64_t p = b * c.bs + j;
        for (int64_t d = 0; d < c.hd; ++d) {
          kpool[at + d * c.bs + j] = normal(rng);
          vpool[at + j * c.hd + d] = normal(rng);
          keys[p * c.hd + d] = kpool[at + d * c.bs + j];
          values[p * c.hd + d] = vpool[at + j * c.hd + d];
        }
      }
    }
    std::vector<float> q(c.nq * ldq);
    for (float& x : q) x = normal(rng);
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.hd));

    std::vector<float> scores(c.nq * lds, -99.0f);
    k.attention_scores(q.data(), ldq, c.nq, c.hd, kt.data(), c.bs, c.len, scale, scores.data(), lds);
    for (int64_t h = 0; h < c.nq; ++h) {
      for (int64_t p = 0; p < c.len; ++p) {
        double want = 0, mag = 0;
        for (int64_t d = 0; d < c.hd; ++d) {
          want += q[h * ldq + d] * keys[p * c.hd + d];
          mag += std::fabs(q[h * ldq + d] * keys[p * c.hd + d]);
        }
        ASSERT_NEAR(scores[h * lds + p], want * scale, 1e-5 * mag * scale + 1e-6) << "head " << h << " position " << p;
      }
      for (int64_t p = c.len; p < lds; ++p) ASSERT_EQ(scores[h * lds + p], -99.0f) << "wrote past len";
    }

    // Weights: any values (here the scores themselves, rows of mixed sign).
    std::vector<float> out(c.nq * ldo, -99.0f);
    k.attention_values(scores.data(), lds, c.nq, c.len, vb.data(), c.bs, c.hd, out.data(), ldo);
    for (int64_t h = 0; h < c.nq; ++h) {
      for (int64_t d = 0; d < c.hd; ++d) {
        double want = 0, mag = 0;
        for (int64_t p = 0; p < c.len; ++p) {
          want += scores[h * lds + p] * values[p * c.hd + d];
          mag += std::fabs(scores[h * lds + p] * values[p * c.hd + d]);
        }
        ASSERT_NEAR(out[h * ldo + d], want, 1e-5 * mag + 1e-6) << "head " << h << " element " << d;
      }
      for (int64_t d = c.hd; d < ldo; ++d) ASSERT_EQ(out[h * ldo + d], -99.0f) << "wrote past head_dim";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, AttentionKernels, ::testing::Values(Isa::kScalar, Isa::kAvx2, Isa::kAvx512),
                         [](const ::testing::TestParamInfo<Isa>& i) {
                           return std::string(i.param == Isa::kScalar ? "scalar" : i.param == Isa::kAvx2 ? "avx2" : "avx512");
                         });

}  // namespace
}  // namespace tessera::native
