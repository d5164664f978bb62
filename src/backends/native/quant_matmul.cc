// quant_matmul: ISA selection, activation quantization and threading, and the scalar kernels
// (the path of CPUs without AVX2, and the oracle the vector paths are tested against).
#include "backends/native/quant_matmul.h"

#include "ir/status.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backends/native/quant_matmul_internal.h"

namespace tessera::native {
namespace {

using quant::QType;
using qmm::kActBlock;
using qmm::Problem;

float fp16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return quant::fp16_to_float(h);
}

// --- scalar kernels ---

void scalar_quantize_rows(const float* x, int64_t ldx, int64_t r0, int64_t r1, int64_t k,
                          int8_t* xq, int64_t ldxq, float* xd, int64_t ldxd) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * ldx;
    for (int64_t b = 0; b < k / kActBlock; ++b) {
      float amax = 0;
      for (int i = 0; i < kActBlock; ++i) amax = std::max(amax, std::fabs(xr[b * kActBlock + i]));
      const float d = amax / 127.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      for (int i = 0; i < kActBlock; ++i) {
        xq[r * ldxq + b * kActBlock + i] =
            static_cast<int8_t>(std::nearbyint(xr[b * kActBlock + i] * id));
      }
      xd[r * ldxd + b] = d;
    }
  }
}

void store(const Problem& p, int64_t t, int64_t j, double s) {
  if (p.bias) s += p.bias[j];
  if (p.residual) s += p.residual[t * p.ld_residual + j];
  p.y[t * p.ldy + j] = static_cast<float>(s);
}

// Integer dot of one Q8_0 / Q4_0 weight row with one quantized activation row.
double quant_dot(QType type, const uint8_t* w, const int8_t* xq, const float* xd, int64_t k) {
  double sum = 0;
  const int64_t nb = k / 32;
  for (int64_t b = 0; b < nb; ++b) {
    int32_t dot = 0;
    float dw;
    const int8_t* a = xq + b * 32;
    if (type == QType::kQ8_0) {
      const uint8_t* blk = w + b * sizeof(quant::BlockQ8_0);
      dw = fp16(blk);
      for (int i = 0; i < 32; ++i) dot += static_cast<int8_t>(blk[2 + i]) * a[i];
    } else if (type == QType::kQ8_0R) {
      const quant::BlockQ8_0 blk = quant::q8_0r_block(w, b);
      dw = quant::fp16_to_float(blk.d);
      for (int i = 0; i < 32; ++i) dot += blk.qs[i] * a[i];
    } else if (type == QType::kQ4_0R) {
      const uint8_t* group = w + b / 4 * sizeof(quant::BlockQ4_0x4);
      dw = fp16(group + 2 * (b % 4));
      const uint8_t* qs = group + 8 + 16 * (b % 4);
      for (int i = 0; i < 16; ++i) {
        dot += ((qs[i] & 15) - 8) * a[i];
        dot += ((qs[i] >> 4) - 8) * a[i + 16];
      }
    } else {
      const uint8_t* blk = w + b * sizeof(quant::BlockQ4_0);
      dw = fp16(blk);
      for (int i = 0; i < 16; ++i) {
        dot += ((blk[2 + i] & 15) - 8) * a[i];
        dot += ((blk[2 + i] >> 4) - 8) * a[i + 16];
      }
    }
    sum += static_cast<double>(dw * xd[b]) * dot;
  }
  return sum;
}

void scalar_block(const Problem& p, int64_t j0, int64_t j1) {
  thread_local std::vector<float> wrow;
  const bool quantized = qmm::uses_quantized_activations(p.type);
  // A panel type's row j, gathered as the blocks of its row type (Q4_0C: Q4_0, Q8_0C: Q8_0).
  thread_local std::vector<uint8_t> gathered;
  const QType type = p.type == QType::kQ4_0C ? QType::kQ4_0 : p.type == QType::kQ8_0C ? QType::kQ8_0 : p.type;
  for (int64_t j = j0; j < j1; ++j) {
    const uint8_t* w = p.w + j * p.w_row_bytes;
    if (quant::is_panel_type(p.type)) {
      gathered.resize(p.w_row_bytes);
      for (int64_t b = 0; b < p.k / 32; ++b) {
        if (type == QType::kQ4_0) {
          const quant::BlockQ4_0 block = quant::q4_0c_block(p.w, p.n, p.k, j, b);
          std::memcpy(gathered.data() + b * sizeof(block), &block, sizeof(block));
        } else {
          const quant::BlockQ8_0 block = quant::q8_0c_block(p.w, p.n, p.k, j, b);
          std::memcpy(gathered.data() + b * sizeof(block), &block, sizeof(block));
        }
      }
      w = gathered.data();
    }
    if (quantized) {
      for (int64_t t = 0; t < p.rows; ++t) {
        store(p, t, j, quant_dot(type, w, p.xq + t * p.ldxq, p.xd + t * p.ldxd, p.k));
      }
      continue;
    }
    const float* wf = reinterpret_cast<const float*>(w);
    if (p.type != QType::kF32) {
      wrow.resize(p.k);
      quant::dequantize_row(type, w, p.k, wrow.data());
      wf = wrow.data();
    }
    for (int64_t t = 0; t < p.rows; ++t) {
      const float* x = p.x + t * p.ldx;
      double s = 0;
      for (int64_t i = 0; i < p.k; ++i) s += static_cast<double>(x[i]) * wf[i];
      store(p, t, j, s);
    }
  }
}

const qmm::Kernels kScalar = {scalar_quantize_rows, scalar_block, nullptr, nullptr};

bool type_supported(QType t) {
  switch (t) {
    case QType::kF32: case QType::kF16: case QType::kBF16: case QType::kQ8_0: case QType::kQ4_0:
    case QType::kQ4_K: case QType::kQ6_K: case QType::kQ4_0R: case QType::kQ8_0R: case QType::kQ4_0C:
    case QType::kQ8_0C:
      return true;
  }
  return false;
}

// The ISA quant_matmul_for_isa really runs for a requested one.
Isa effective_isa(Isa isa) {
  if (isa == Isa::kAvx512 && !quant_matmul_isa_runs(Isa::kAvx512)) isa = Isa::kAvx2;
  if (isa == Isa::kAvx2 && !quant_matmul_isa_runs(Isa::kAvx2)) isa = Isa::kScalar;
  return isa;
}

const qmm::Kernels& kernels_for(Isa isa) {
  switch (effective_isa(isa)) {
    case Isa::kAvx512: return qmm::avx512_qmm_kernels();
    case Isa::kAvx2: return qmm::avx2_qmm_kernels();
    case Isa::kScalar: break;
  }
  return kScalar;
}

}  // namespace

namespace qmm {
const Kernels& scalar_qmm_kernels() { return kScalar; }

int64_t unpack_rows_to_q8_0(const Problem& p, int64_t j0, int64_t j1, uint8_t* dst) {
  const int64_t blocks = p.k / quant::kQK4_0;
  const int64_t out_row = blocks * int64_t{sizeof(quant::BlockQ8_0)};
  const bool regrouped = p.type == QType::kQ4_0R;
  for (int64_t j = j0; j < j1; ++j) {
    const uint8_t* row = p.w + j * p.w_row_bytes;
    auto* out = reinterpret_cast<quant::BlockQ8_0*>(dst + (j - j0) * out_row);
    if (p.type == QType::kQ8_0R) {
      for (int64_t b = 0; b < blocks; ++b) out[b] = quant::q8_0r_block(row, b);
      continue;
    }
    if (p.type == QType::kQ8_0C) {
      for (int64_t b = 0; b < blocks; ++b) out[b] = quant::q8_0c_block(p.w, p.n, p.k, j, b);
      continue;
    }
    for (int64_t b = 0; b < blocks; ++b) {
      const auto* g = reinterpret_cast<const quant::BlockQ4_0x4*>(row) + b / 4;
      quant::BlockQ4_0 q4 = reinterpret_cast<const quant::BlockQ4_0*>(row)[b];
      if (p.type == QType::kQ4_0C) q4 = quant::q4_0c_block(p.w, p.n, p.k, j, b);
      out[b].d = regrouped ? g->d[b % 4] : q4.d;
      const uint8_t* qs = regrouped ? g->qs[b % 4] : q4.qs;
      for (int i = 0; i < quant::kQK4_0 / 2; ++i) {
        out[b].qs[i] = static_cast<int8_t>((qs[i] & 15) - 8);
        out[b].qs[i + quant::kQK4_0 / 2] = static_cast<int8_t>((qs[i] >> 4) - 8);
      }
    }
  }
  return out_row;
}
}  // namespace qmm

bool quant_matmul_isa_runs(Isa isa) {
#if defined(__x86_64__) || defined(__i386__)
  switch (isa) {
    case Isa::kScalar: return true;
    case Isa::kAvx2: return cpu_supports(Isa::kAvx2) && __builtin_cpu_supports("f16c");
    case Isa::kAvx512:
      return cpu_supports(Isa::kAvx512) && quant_matmul_isa_runs(Isa::kAvx2) &&
             __builtin_cpu_supports("avx512vnni");
  }
  return false;
#else
  return isa == Isa::kScalar;
#endif
}

const char* quant_matmul_path(QType) {
  switch (effective_isa(best_isa())) {
    case Isa::kAvx512: return "avx512-vnni";
    case Isa::kAvx2: return "avx2";
    case Isa::kScalar: break;
  }
  return "scalar";
}

void quant_matmul_for_isa(Isa isa, const QuantWeight& w, const float* x, int64_t rows,
                          int64_t ldx, float* y, int64_t ldy, const float* bias,
                          const float* residual, int64_t ld_residual, ThreadPool* pool) {
  // Callers check types and shapes (the QMatMul schema): a mismatch here is a bug.
  TESSERA_CHECK(type_supported(w.type), "quant_matmul: unsupported weight type");
  TESSERA_CHECK(w.k % quant::block_elements(w.type) == 0, "quant_matmul: k is not a multiple of the block size");
  TESSERA_CHECK(!quant::is_panel_type(w.type) || w.n % quant::kPanelRows == 0, "quant_matmul: whole panels only");
  if (rows <= 0 || w.n <= 0) return;
  const qmm::Kernels& kern = kernels_for(isa);
  Problem p{};
  p.type = w.type;
  p.n = w.n;
  p.k = w.k;
  p.rows = rows;
  p.w = w.data;
  p.w_row_bytes = quant::row_bytes(w.type, w.k);
  p.x = x;
  p.ldx = ldx;
  p.y = y;
  p.ldy = ldy;
  p.bias = bias;
  p.residual = residual;
  p.ld_residual = ld_residual;
  const int threads = pool ? pool->num_threads() : 1;

  // The quantized activations live in the calling thread's buffers for the whole call.
  thread_local std::vector<int8_t> xq;
  thread_local std::vector<float> xd;
  if (qmm::uses_quantized_activations(w.type)) {
    const int64_t ldxq = (w.k + 63) / 64 * 64, ldxd = w.k / kActBlock;
    if (static_cast<int64_t>(xq.size()) < rows * ldxq) xq.resize(rows * ldxq);
    if (static_cast<int64_t>(xd.size()) < rows * ldxd + 1) xd.resize(rows * ldxd + 1);
    // (Pointers, not the thread_local names: the pool's workers must write this thread's buffers.)
    int8_t* xq_data = xq.data();
    float* xd_data = xd.data();
    p.xq = xq_data;
    p.ldxq = ldxq;
    p.xd = xd_data;
    p.ldxd = ldxd;
    auto quantize = [&](int64_t r0, int64_t r1) {
      kern.quantize_rows(x, ldx, r0, r1, w.k, xq_data, ldxq, xd_data, ldxd);
    };
    const bool parallel = threads > 1 && rows * w.k >= (1 << 16);
    if (parallel) {
      pool->parallel_for(rows, std::max<int64_t>(1, (1 << 15) / w.k), quantize);
    } else {
      quantize(0, rows);
    }
    const int64_t ldxr = kern.regrouped_row_bytes ? kern.regrouped_row_bytes(p) : 0;
    if (ldxr > 0) {
      thread_local std::vector<uint8_t> xr;
      if (static_cast<int64_t>(xr.size()) < rows * ldxr + 64) xr.resize(rows * ldxr + 64);
      // 64-byte aligned rows (ldxr is a multiple of 64).
      uint8_t* xr_data = xr.data() + (64 - reinterpret_cast<uintptr_t>(xr.data()) % 64) % 64;
      auto regroup = [&](int64_t r0, int64_t r1) { kern.regroup_rows(p, r0, r1, xr_data, ldxr); };
      if (parallel) {
        pool->parallel_for(rows, std::max<int64_t>(1, (1 << 15) / w.k), regroup);
      } else {
        regroup(0, rows);
      }
      p.xr = xr_data;
      p.ldxr = ldxr;
    }
  }

  // Output features in units of 4 (every ISA's tile width divides into them; panel types: two
  // panels); a chunk gets at least ~64k multiply-adds (the grain: the pool's steals go down to it,
  // so that the threads finish together; decode's is one unit).
  const int64_t kUnit = quant::is_panel_type(w.type) ? 2 * quant::kPanelRows : 4;
  const int64_t units = (w.n + kUnit - 1) / kUnit;
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / (kUnit * w.k * rows));
  auto run_all = [&](const Problem& q) {
    auto run = [&](int64_t u0, int64_t u1) { kern.block(q, u0 * kUnit, std::min(w.n, u1 * kUnit)); };
    if (threads > 1 && units > 1) {
      pool->parallel_for(units, grain, run);
    } else {
      run(0, units);
    }
  };
  // Decode of a panel type whose rows are cut into segments: one loop per segment, so that each
  // thread streams one contiguous range at a time (quant::panel_block_offsets). (The vector tiles
  // sum a range of blocks into y; the scalar ones always sum all of k.)
  const int64_t blocks = w.k / quant::kQK4_0;
  if (rows == 1 && quant::is_panel_type(w.type) && quant::panel_segment_blocks(blocks) < blocks && &kern != &kScalar) {
    return qmm::for_each_panel_segment(p, run_all);
  }
  run_all(p);
}

void quant_matmul(const QuantWeight& w, const float* x, int64_t rows, int64_t ldx, float* y,
                  int64_t ldy, const float* bias, const float* residual, int64_t ld_residual,
                  ThreadPool* pool) {
  quant_matmul_for_isa(best_isa(), w, x, rows, ldx, y, ldy, bias, residual, ld_residual, pool);
}

}  // namespace tessera::native
