// native::quant_matmul on TinyLlama's matrix shapes, per weight type (F16, Q8_0, Q4_0):
// decode (1 activation row) in GB/s of weight bytes and as a fraction of the read bandwidth
// measured at start (2-thread read loop over 1 GiB, best of 10 passes), rotating over weight copies totalling
// > 256 MiB so that the caches do not help; batched decode (8 rows by default, a server's decode step) in
// microseconds and as a multiple of 1 row's time; prefill (512 rows) in GFLOP/s. Median of repeats.
//
//   quant_matmul_bench [--threads N] [--json FILE] [--types f16,q8_0,q4_0,q8_0r,q4_0r,q4_0c,q8_0c] [--batch-rows N] [--quick]
// q4_0c / q8_0c (matrices of whole 16-row panels, as all of TinyLlama's) and q4_0r / q8_0r (others)
// are the regrouped layouts models run on AVX-512 (ModelOptions::regroup_quantized).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backends/native/quant_matmul.h"

namespace {

using tessera::ThreadPool;
using tessera::native::QuantWeight;
using tessera::quant::QType;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// CPU seconds of the whole process (all threads): with a loaded machine, flops per CPU second x
// threads estimates what the threads would do with their cores to themselves.
double process_cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Sum of words [b, e): vectorized for the widest loads the CPU has (SSE2 loads alone read about
// 20% below the bandwidth AVX-512 loads reach here, and the kernels use AVX-512).
__attribute__((target_clones("avx512f", "avx2", "default"))) uint64_t sum_words(const uint64_t* buf, size_t b, size_t e) {
  uint64_t s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  size_t i = b;
  for (; i + 8 <= e; i += 8) {
    for (int k = 0; k < 8; ++k) s[k] += buf[i + k];
  }
  for (; i < e; ++i) s[0] += buf[i];
  return s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
}

// Read bandwidth: `threads` threads each sum their part of a 1 GiB buffer; best of 10 passes.
double measure_read_gbps(int threads) {
  const size_t bytes = size_t{1} << 30, words = bytes / 8;
  // Page-aligned (a vector's 16-byte alignment splits every 64-byte load over two lines: ~20%
  // slower), every word written.
  std::unique_ptr<uint64_t[], decltype(&std::free)> buf(static_cast<uint64_t*>(std::aligned_alloc(4096, bytes)), &std::free);
  if (!buf) return 0;
  for (size_t i = 0; i < words; ++i) buf[i] = i;
  std::vector<uint64_t> sinks(threads * 8);
  double best = 0;
  for (int pass = 0; pass < 10; ++pass) {
    auto t0 = Clock::now();
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([&, t] {
        const size_t b = words / threads * t, e = t + 1 == threads ? words : b + words / threads;
        sinks[t * 8] = sum_words(buf.get(), b, e);
      });
    }
    for (auto& t : ts) t.join();
    best = std::max(best, bytes / seconds_since(t0) / 1e9);
  }
  uint64_t s = 0;
  for (uint64_t v : sinks) s += v;
  if (s == 42) std::printf(" ");
  return best;
}

struct Result {
  std::string type;
  int64_t k, n;
  double decode_gbps, decode_frac, decode_us, batch_us, prefill_gflops, prefill_ms, prefill_gflops_cpu;
};

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  std::string json_path, types_arg = "f16,q8_0,q4_0,q8_0r,q4_0r,q4_0c,q8_0c";
  bool quick = false;
  int64_t batch_rows = 8;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--json" && i + 1 < argc) json_path = argv[++i];
    else if (a == "--types" && i + 1 < argc) types_arg = argv[++i];
    else if (a == "--quick") quick = true;
    else if (a == "--batch-rows" && i + 1 < argc) batch_rows = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: %s [--threads N] [--json FILE] [--types f16,q8_0,q4_0,q8_0r,q4_0r,q4_0c,q8_0c] [--batch-rows N] [--quick]\n",
                   argv[0]);
      return 2;
    }
  }
  std::vector<QType> types;
  {
    std::stringstream ss(types_arg);
    std::string t;
    while (std::getline(ss, t, ',')) {
      auto q = tessera::quant::qtype_from_name(t);
      if (!q) {
        std::fprintf(stderr, "unknown type %s\n", t.c_str());
        return 2;
      }
      types.push_back(*q);
    }
  }
  double load[3] = {0, 0, 0};
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = -1;
    std::fclose(f);
  }
  const double bw = measure_read_gbps(threads);
  std::printf("threads %d, read bandwidth %.1f GB/s, load average %.2f %.2f %.2f, path %s\n",
              threads, bw, load[0], load[1], load[2],
              tessera::native::quant_matmul_path(QType::kQ4_0));

  ThreadPool pool(threads);
  // TinyLlama's products: attn_out, k or v alone, q|k|v joined, gate or up alone, gate|up joined, ffn_out, logits.
  const int64_t shapes[][2] = {{2048, 2048}, {2048, 256},  {2048, 2560}, {2048, 5632},
                               {2048, 11264}, {5632, 2048}, {2048, 32000}};
  const int64_t prefill_rows = 512;
  std::mt19937 g(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(prefill_rows * 5632);
  for (float& v : x) v = normal(g);
  std::vector<Result> results;
  std::printf("%-5s %5s %6s | %9s %9s %7s | %9s %6s | %9s %9s %12s\n", "type", "k", "n", "decode_us",
              "GB/s", "of_bw", "batch_us", "x_of_1", "prefill_ms", "GFLOP/s", "GFLOP/cpu-s*T");
  for (QType type : types) {
    for (const auto& s : shapes) {
      const int64_t k = s[0], n = s[1];
      const int64_t rb = tessera::quant::row_bytes(type, k), bytes = rb * n;
      // One quantized copy, replicated to > 256 MiB in all (at least 2 copies).
      std::vector<uint8_t> one(bytes);
      {
        // Q4_0C / Q8_0C: Q4_0 / Q8_0 rows repacked into 16-row panels.
        const QType row_type = type == QType::kQ4_0C ? QType::kQ4_0 : type == QType::kQ8_0C ? QType::kQ8_0 : type;
        std::vector<float> row(k);
        for (int64_t j = 0; j < n; ++j) {
          for (float& v : row) v = normal(g) * 0.02f;
          tessera::quant::quantize_row(row_type, row.data(), k, one.data() + j * rb);
        }
        if (type == QType::kQ4_0C) tessera::quant::repack_q4_0_to_q4_0c(one.data(), n, k);
        if (type == QType::kQ8_0C) tessera::quant::repack_q8_0_to_q8_0c(one.data(), n, k);
      }
      const int64_t copies = std::max<int64_t>(2, ((int64_t{256} << 20) + bytes - 1) / bytes + 1);
      // 64-byte aligned, as the model's tensors (a vector's 16-byte alignment splits the kernels'
      // 64-byte loads over two cache lines).
      std::vector<std::unique_ptr<uint8_t[], decltype(&std::free)>> w;
      for (int64_t c = 0; c < copies; ++c) {
        w.emplace_back(static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)), &std::free);
        std::memcpy(w.back().get(), one.data(), bytes);
      }
      std::vector<float> y(prefill_rows * n);

      // Decode: rotate over the copies.
      auto call = [&](int64_t c, int64_t rows) {
        QuantWeight qw{type, n, k, w[c].get()};
        tessera::native::quant_matmul(qw, x.data(), rows, k, y.data(), n, nullptr, nullptr, 0,
                                      &pool);
      };
      for (int64_t c = 0; c < copies; ++c) call(c, 1);  // warm-up
      std::vector<double> times;
      const double budget = quick ? 0.1 : 0.4;
      auto start = Clock::now();
      for (int64_t it = 0; times.size() < 5 || (seconds_since(start) < budget && times.size() < 2000);
           ++it) {
        auto t0 = Clock::now();
        call(it % copies, 1);
        times.push_back(seconds_since(t0));
      }
      const double dec = median(times);
      // Batched decode (batch_rows activation rows, as a server decoding that many requests).
      times.clear();
      start = Clock::now();
      for (int64_t it = 0; times.size() < 5 || (seconds_since(start) < budget && times.size() < 2000);
           ++it) {
        auto t0 = Clock::now();
        call(it % copies, batch_rows);
        times.push_back(seconds_since(t0));
      }
      const double batch = median(times);

      // Prefill: compute bound, one copy.
      call(0, prefill_rows);
      times.clear();
      std::vector<double> cpu_times;
      start = Clock::now();
      while (times.size() < 3 || (seconds_since(start) < budget * 2 && times.size() < 50)) {
        auto t0 = Clock::now();
        const double c0 = process_cpu_seconds();
        call(0, prefill_rows);
        times.push_back(seconds_since(t0));
        cpu_times.push_back(process_cpu_seconds() - c0);
        if (quick && times.size() >= 3) break;
      }
      const double pre = median(times);
      Result r{tessera::quant::qtype_name(type), k, n, bytes / dec / 1e9, bytes / dec / 1e9 / bw,
               dec * 1e6, batch * 1e6, 2.0 * prefill_rows * k * n / pre / 1e9, pre * 1e3,
               2.0 * prefill_rows * k * n / (median(cpu_times) / threads) / 1e9};
      std::printf("%-5s %5lld %6lld | %9.1f %9.1f %6.0f%% | %9.1f %6.2f | %9.2f %9.1f %12.1f\n",
                  r.type.c_str(), static_cast<long long>(k), static_cast<long long>(n), r.decode_us,
                  r.decode_gbps, 100 * r.decode_frac, r.batch_us, r.batch_us / r.decode_us, r.prefill_ms, r.prefill_gflops,
                  r.prefill_gflops_cpu);
      std::fflush(stdout);
      results.push_back(r);
    }
  }
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << "{\n  \"threads\": " << threads << ",\n  \"read_gbps\": " << bw
        << ",\n  \"loadavg\": [" << load[0] << ", " << load[1] << ", " << load[2]
        << "],\n  \"path\": \"" << tessera::native::quant_matmul_path(QType::kQ4_0)
        << "\",\n  \"prefill_rows\": " << prefill_rows << ",\n  \"results\": [\n";
    for (size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      out << "    {\"type\": \"" << r.type << "\", \"k\": " << r.k << ", \"n\": " << r.n
          << ", \"decode_us\": " << r.decode_us << ", \"decode_gbps\": " << r.decode_gbps
          << ", \"decode_fraction_of_bw\": " << r.decode_frac
          << ", \"batch" << batch_rows << "_us\": " << r.batch_us
          << ", \"prefill_ms\": " << r.prefill_ms << ", \"prefill_gflops\": " << r.prefill_gflops
          << ", \"prefill_gflops_per_cpu_second_x_threads\": " << r.prefill_gflops_cpu
          << "}" << (i + 1 < results.size() ? "," : "") << "\n";
    }
    out << "  ]\n}\n";
  }
  return 0;
}
