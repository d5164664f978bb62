#include "backends/native/sgemm.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>

namespace tessera::native {
namespace {

constexpr int64_t kKc =
    256;  // k per packed block: an mr x kc A panel and a kc x nr B panel fit L1/L2

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The register block for n columns (the narrow one when it holds them all) and its kernels.
struct Blocking {
  int mr, nr;
  int64_t mc, nc;
  const IsaKernels::GemmMicroFn* micro;
  const IsaKernels::GemmMicroRowsFn* micro_rows;
};
bool use_narrow(const IsaKernels& isa, int64_t n) { return isa.gemm_narrow_nr > 0 && n <= isa.gemm_narrow_nr; }
Blocking blocking_for(const IsaKernels& isa, int64_t n) {
  Blocking b{isa.gemm_mr, isa.gemm_nr, 0, 0, isa.gemm_micro, isa.gemm_micro_rows};
  if (use_narrow(isa, n))
    b = {isa.gemm_narrow_mr, isa.gemm_narrow_nr, 0, 0, isa.gemm_micro_narrow, isa.gemm_micro_rows_narrow};
  b.mc = static_cast<int64_t>(b.mr) * std::max(1, 168 / b.mr);  // A block of mc x kc in L2
  b.nc = std::max<int64_t>(b.nr, 512 / b.nr * b.nr);            // C block of mc x nc in L2
  return b;
}

// Packs rows [m0, m0 + mc) x cols [k0, k0 + kc) of alpha * A into panels of mr rows ([k][mr]),
// zero padded.
void pack_a(const float* a, int64_t rs, int64_t cs, int64_t m0, int64_t mc, int64_t k0, int64_t kc,
            int mr, float alpha, float* dst) {
  for (int64_t p = 0; p < mc; p += mr) {
    const int rows = static_cast<int>(std::min<int64_t>(mr, mc - p));
    float* d = dst + p * kc;
    if (cs == 1) {
      for (int i = 0; i < rows; ++i) {
        const float* src = a + (m0 + p + i) * rs + k0;
        for (int64_t kk = 0; kk < kc; ++kk) d[kk * mr + i] = src[kk] * alpha;
      }
    } else {
      for (int64_t kk = 0; kk < kc; ++kk) {
        const float* src = a + (k0 + kk) * cs + (m0 + p) * rs;
        for (int i = 0; i < rows; ++i) d[kk * mr + i] = src[i * rs] * alpha;
      }
    }
    for (int i = rows; i < mr; ++i)
      for (int64_t kk = 0; kk < kc; ++kk) d[kk * mr + i] = 0.0f;
  }
}

// The thread grid over one problem's C: tm x tn slabs (tm * tn = want), the most balanced.
std::pair<int64_t, int64_t> slab_grid(int64_t m, int64_t n, int mr, int nr, int64_t want) {
  std::pair<int64_t, int64_t> best{1, 1};
  int64_t best_area = -1;
  const int64_t mp = ceil_div(m, mr), np = ceil_div(n, nr);
  for (int64_t tm = 1; tm <= want; ++tm) {
    if (want % tm != 0) continue;
    const int64_t tn = want / tm;
    if (tm > mp || tn > np) continue;
    const int64_t area = ceil_div(mp, tm) * mr * ceil_div(np, tn) * nr;
    if (best_area < 0 || area <= best_area) {
      best = {tm, tn};
      best_area = area;
    }
  }
  return best;
}

}  // namespace

int gemm_panel_width(const IsaKernels& isa, int64_t n) { return use_narrow(isa, n) ? isa.gemm_narrow_nr : isa.gemm_nr; }

int64_t packed_b_floats(int64_t k, int64_t n, int nr) { return ceil_div(n, nr) * nr * k; }

void pack_b(const float* b, int64_t rs, int64_t cs, int64_t k, int64_t n, int nr, float* dst) {
  for (int64_t j0 = 0; j0 < n; j0 += nr) {
    const int cols = static_cast<int>(std::min<int64_t>(nr, n - j0));
    float* d = dst + j0 * k;  // panel j0 / nr starts at (j0 / nr) * k * nr
    if (cs == 1) {
      for (int64_t kk = 0; kk < k; ++kk) {
        std::memcpy(d + kk * nr, b + kk * rs + j0, cols * sizeof(float));
        std::fill(d + kk * nr + cols, d + (kk + 1) * nr, 0.0f);
      }
    } else {
      for (int j = 0; j < cols; ++j) {
        const float* src = b + (j0 + j) * cs;
        for (int64_t kk = 0; kk < k; ++kk) d[kk * nr + j] = src[kk * rs];
      }
      for (int64_t kk = 0; kk < k; ++kk) std::fill(d + kk * nr + cols, d + (kk + 1) * nr, 0.0f);
    }
  }
}

void sgemm_batched(const IsaKernels& isa, const GemmShape& s,
                   const std::vector<GemmOperands>& problems, const GemmHooks& hooks,
                   ThreadPool* pool) {
  const Blocking bl = blocking_for(isa, s.n);
  const int64_t batches = static_cast<int64_t>(problems.size());
  if (batches == 0 || s.m == 0 || s.n == 0) return;
  // Small products run on the calling thread: handing a few hundred thousand flops to a second
  // thread costs more than it saves (the cls model's squeeze-excite projections, 0.15-0.8 MFLOP,
  // took 4.3 / 13.2 us on one thread and 7.9 / 17.0 us on two: tessera_backend_bench).
  constexpr double kMinParallelFlops = 1e6;
  if (2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k) *
          static_cast<double>(batches) < kMinParallelFlops)
    pool = nullptr;
  const int threads = pool_threads(pool);
  const int64_t want = batches >= threads ? 1 : threads / batches;
  const auto [tm, tn] = slab_grid(s.m, s.n, bl.mr, bl.nr, want);
  const int64_t slabs = tm * tn;
  const int64_t b_floats = packed_b_floats(s.k, s.n, bl.nr);

  // Activation B: packed here once per problem, shared by the slabs; or per task below when each
  // task owns a whole problem.
  const bool pack_per_task = !s.b_packed && slabs == 1;
  std::vector<float*> b_panels(batches, nullptr);
  std::unique_ptr<ScratchBuffer> shared_b;
  if (s.b_packed) {
    for (int64_t i = 0; i < batches; ++i) b_panels[i] = const_cast<float*>(problems[i].b);
  } else if (!pack_per_task) {
    shared_b = std::make_unique<ScratchBuffer>(b_floats * batches);
    const int64_t panels = ceil_div(s.n, bl.nr);
    parallel(pool, batches * panels, std::max<int64_t>(1, 16384 / (s.k * bl.nr)),
             [&](int64_t t0, int64_t t1) {
               for (int64_t t = t0; t < t1; ++t) {
                 const int64_t i = t / panels, j0 = (t % panels) * bl.nr;
                 pack_b(problems[i].b + j0 * s.b_cs, s.b_rs, s.b_cs, s.k,
                        std::min<int64_t>(bl.nr, s.n - j0), bl.nr,
                        shared_b->data() + i * b_floats + j0 * s.k);
               }
             });
    for (int64_t i = 0; i < batches; ++i) b_panels[i] = shared_b->data() + i * b_floats;
  }

  const int64_t m_panels = ceil_div(s.m, bl.mr), n_panels = ceil_div(s.n, bl.nr);
  // A slab spanning several column blocks is packed once, whole, when it fits in kMaxPackedA
  // floats, rather than once per column block.
  constexpr int64_t kMaxPackedA = int64_t{1} << 22;
  const int64_t slab_rows = ceil_div(m_panels, tm) * bl.mr;
  const bool a_in_place = s.a_in_place && s.a_cs == 1 && s.alpha == 1.0f;
  const bool pack_whole_a =
      !a_in_place && ceil_div(n_panels, tn) * bl.nr > bl.nc && slab_rows * s.k <= kMaxPackedA;
  const int64_t a_floats = a_in_place     ? 0
                           : pack_whole_a ? slab_rows * s.k
                                          : std::max<int64_t>(bl.mc * kKc, 16384 + bl.mr * kKc);
  parallel(pool, batches * slabs, 1, [&](int64_t t0, int64_t t1) {
    RunScratch a_scratch(ScratchSlot::kGemmA, a_floats), hook_scratch_(ScratchSlot::kGemmHook, hooks.scratch_floats);
    std::optional<RunScratch> b_scratch;
    if (pack_per_task) b_scratch.emplace(ScratchSlot::kGemmB, b_floats);
    float* const a_pack = a_scratch.data();
    float* const hook_scratch = hook_scratch_.data();
    float* const own_b = b_scratch ? b_scratch->data() : nullptr;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t batch = t / slabs, im = (t % slabs) / tn, in = (t % slabs) % tn;
      const GemmOperands& op = problems[batch];
      const float* bp = b_panels[batch];
      if (pack_per_task) {
        pack_b(op.b, s.b_rs, s.b_cs, s.k, s.n, bl.nr, own_b);
        bp = own_b;
      }
      const int64_t m0 = std::min(s.m, im * ceil_div(m_panels, tm) * bl.mr);
      const int64_t m1 = std::min(s.m, (im + 1) * ceil_div(m_panels, tm) * bl.mr);
      const int64_t n0 = std::min(s.n, in * ceil_div(n_panels, tn) * bl.nr);
      const int64_t n1 = std::min(s.n, (in + 1) * ceil_div(n_panels, tn) * bl.nr);
      // One row panel (GEMV-like) reuses no B panel across rows: no k blocking then, so each B
      // panel streams through in one piece while the A panel (<= 16K floats) stays in L2.
      const int64_t kc_max = m1 - m0 <= bl.mr ? std::max<int64_t>(kKc, 16384 / bl.mr) : kKc;
      // Row block ic, k block pc of the packed A: ic blocks are mc (a multiple of mr) rows.
      auto a_block = [&](int64_t ic, int64_t mc, int64_t pc) {
        return a_pack + (ic - m0) * s.k + pc * (ceil_div(mc, bl.mr) * bl.mr);
      };
      if (pack_whole_a) {
        for (int64_t ic = m0; ic < m1; ic += bl.mc) {
          const int64_t mc = std::min(bl.mc, m1 - ic);
          for (int64_t pc = 0; pc < s.k; pc += kc_max) {
            pack_a(op.a, s.a_rs, s.a_cs, ic, mc, pc, std::min(kc_max, s.k - pc), bl.mr, s.alpha,
                   a_block(ic, mc, pc));
          }
        }
      }
      for (int64_t jc = n0; jc < n1; jc += bl.nc) {
        const int64_t nc = std::min(bl.nc, n1 - jc);
        for (int64_t ic = m0; ic < m1; ic += bl.mc) {
          const int64_t mc = std::min(bl.mc, m1 - ic);
          if (hooks.init) hooks.init(batch, ic, ic + mc, jc, jc + nc, hook_scratch);
          for (int64_t pc = 0; pc < s.k; pc += kc_max) {
            const int64_t kc = std::min(kc_max, s.k - pc);
            const float* ap = pack_whole_a ? a_block(ic, mc, pc) : a_pack;
            if (!pack_whole_a && !a_in_place)
              pack_a(op.a, s.a_rs, s.a_cs, ic, mc, pc, kc, bl.mr, s.alpha, a_pack);
            const bool accumulate = pc > 0 || static_cast<bool>(hooks.init);
            // Where this k block's micro-kernels start C from: a bias only in the first.
            auto start_of = [&](int64_t row, int64_t col) {
              if (accumulate) return GemmStart{GemmStart::kC, nullptr};
              if (hooks.column_bias) return GemmStart{GemmStart::kColumnBias, hooks.column_bias + col};
              if (hooks.row_bias) return GemmStart{GemmStart::kRowBias, hooks.row_bias + row};
              return GemmStart{};
            };
            for (int64_t jr = jc; jr < jc + nc; jr += bl.nr) {
              const int cols = static_cast<int>(std::min<int64_t>(bl.nr, jc + nc - jr));
              const float* b_block = bp + jr * s.k + pc * bl.nr;
              for (int64_t ir = 0; ir < mc; ir += bl.mr) {
                const int rows = static_cast<int>(std::min<int64_t>(bl.mr, mc - ir));
                float* c = op.c + (ic + ir) * s.ldc + jr;
                GemmStart start = start_of(ic + ir, jr);
                // The first row panel reads this B panel first: the next one streams in meanwhile.
                if (ir == 0 && jr + bl.nr < n1) start.prefetch_b = bl.nr * s.k;
                if (a_in_place) {
                  bl.micro_rows[rows - 1](kc, op.a + (ic + ir) * s.a_rs + pc, s.a_rs, b_block, c, s.ldc, cols, start);
                } else {
                  bl.micro[rows - 1](kc, ap + ir * kc, b_block, c, s.ldc, cols, start);
                }
              }
            }
          }
          if (hooks.finish) hooks.finish(batch, ic, ic + mc, jc, jc + nc, hook_scratch);
        }
      }
    }
  });
}

}  // namespace tessera::native
