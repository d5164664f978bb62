// The cases of tessera_backend_bench: small graphs (one MatMul, one Conv, an elementwise chain)
// that every backend is asked to run, the way the partitioner would hand them over.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/status.h"
#include "ir/tensor.h"

namespace tessera::bench {

enum class WorkKind {
  kFlops,  // GEMM / conv: 2*M*N*K multiply-adds counted as two flops
  kBytes,  // elementwise: bytes read + written by an ideal (fused) kernel
};

struct BenchCase {
  std::string name;   // "matmul 64x768x768", "conv 1x16x320x320 o32 k3 s2"
  std::string group;  // "gemm", "conv", "depthwise", "elementwise"
  WorkKind work_kind = WorkKind::kFlops;
  double work = 0;        // flops or bytes per run
  int occurrences = 1;    // how many nodes of the source model this case stands for
  bool ref_cheap = true;  // the reference backend takes well under ~2 s per run: time and check it
  // Builds the graph (constants filled with seeded random data, every type inferred and static).
  std::function<Result<Graph>()> build;
};

// MatMul with a constant weight B: M x K times K x N.
std::vector<BenchCase> gemm_cases();
// x * s[c] -> 1x1 Conv -> BatchNormalization (squeeze-excite output projections).
std::vector<BenchCase> se_projection_cases();
// Depthwise convs of typical mobile-net sizes.
std::vector<BenchCase> depthwise_cases();
// relu(a*b + c) and hardswish written out as x*clip(x+3,0,6)/6, larger than caches and cache-sized.
std::vector<BenchCase> elementwise_cases();
// The distinct Conv nodes of an ONNX model at the given input shape (its single input), each as a
// one-node graph; occurrences counts how often each appears.
Result<std::vector<BenchCase>> model_conv_cases(const std::string& model_path,
                                                const std::vector<int64_t>& input_dims);

// Uniform values in [-scale, scale) from a seed (a fast generator: inputs reach 128 MiB).
Tensor random_tensor(const std::vector<int64_t>& dims, uint64_t seed, float scale = 1.0f);

}  // namespace tessera::bench
