// Shared pieces of the oneDNN backend: the CPU engine, plain (row-major) memory descriptors,
// elementwise op descriptions, the OpenMP thread setting and the dnnl::error -> Status bridge.
#pragma once

#include <cstdint>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/status.h"

namespace tessera::onednn {

using dnnl::algorithm;
using dnnl::memory;
using Dims = std::vector<int64_t>;

// The one CPU engine every kernel uses (created on first use).
const dnnl::engine& cpu_engine();

// Sets the OpenMP thread count oneDNN uses on the calling thread (its primitives run on OpenMP).
void set_threads(int threads);

// f32, row-major. Rank-0 tensors become {1} (oneDNN has no scalars).
memory::desc plain_desc(const Dims& dims);
// Same dims with explicit strides (for transposed Gemm operands and broadcast views).
memory::desc strided_desc(const Dims& dims, const Dims& strides);
// f32 with the channels (dim 1) innermost: NHWC for 4-D.
memory::desc channels_last_desc(const Dims& dims);
// Whether md is the row-major layout of its dims.
bool is_plain(const memory::desc& md);
Dims dims_of(const memory::desc& md);

// One oneDNN elementwise function: alpha and beta as oneDNN defines them per algorithm.
struct EltwiseOp {
  algorithm alg = algorithm::eltwise_linear;
  float alpha = 0.0f, beta = 0.0f;
};

// Whether oneDNN picked its slow reference implementation ("ref:any") for pd.
bool is_reference_impl(const dnnl::primitive_desc_base& pd);

// A float scalar held by constant value v (any numeric dtype, one element), if it is one.
bool constant_scalar(const Graph& g, int v, double* out);

// The data of a constant float32 value, or nullptr.
const Tensor* float_constant(const Graph& g, int v);

// Runs f, turning a dnnl::error (or std::exception) into an error Status prefixed by `what`.
template <typename F>
Status guarded(const std::string& what, F&& f) {
  try {
    return f();
  } catch (const dnnl::error& e) {
    return unimplemented(what + ": oneDNN: " + e.what());
  } catch (const std::bad_alloc&) {
    return invalid_argument(what + ": out of memory");
  } catch (const std::exception& e) {
    return internal_error(what + ": " + e.what());
  }
}

}  // namespace tessera::onednn
