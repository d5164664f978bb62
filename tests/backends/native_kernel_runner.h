// What the native backend's kernel tests share: the ISAs this CPU runs, an allocator that poisons
// uninitialized buffers, and running a whole TestGraph as one compiled kernel.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backends/harness.h"
#include "backends/native/isa.h"
#include "backends/native/native_compile.h"
#include "backends/test_graph.h"
#include "runtime/buffer_pool.h"

namespace tessera::testing_native {

// Scalar, then AVX2 and AVX-512 where this CPU runs them.
inline std::vector<const native::IsaKernels*> isas() {
  std::vector<const native::IsaKernels*> v = {&native::scalar_kernels()};
  if (native::cpu_supports(native::Isa::kAvx2)) v.push_back(&native::avx2_kernels());
  if (native::cpu_supports(native::Isa::kAvx512)) v.push_back(&native::avx512_kernels());
  return v;
}

// A BufferPool whose uninitialized buffers are full of 0xff bytes (NaN for float32): an element a
// kernel forgets to write shows up as a mismatch with the reference.
class PoisoningAllocator final : public TensorAllocator {
 public:
  Tensor allocate(DType dtype, std::vector<int64_t> dims) override {
    return pool_.allocate(dtype, std::move(dims));
  }
  Tensor allocate_uninitialized(DType dtype, std::vector<int64_t> dims) override {
    Tensor t = pool_.allocate_uninitialized(dtype, std::move(dims));
    if (t.raw_data()) std::memset(t.raw_data(), 0xff, t.nbytes());
    return t;
  }

 private:
  BufferPool pool_;
};

// All of t's nodes as one subgraph.
inline SubGraph whole(const testing_graph::TestGraph& t) { return SubGraph(t.g, NodeSet::all(t.g.num_nodes())); }

// `kernel`, compiled from the whole graph of t, run at `threads` on t's inputs; outputs in graph
// output order (none when the kernel did not compile or failed, with a test failure). With
// `channels_last`, a kernel compiled for that layout: rank-4 inputs go in as NHWC, and its outputs
// come back converted to row-major.
inline std::vector<Tensor> run_whole_graph(const testing_graph::TestGraph& t,
                                           const Result<std::unique_ptr<Kernel>>& kernel,
                                           int threads, bool channels_last = false) {
  EXPECT_TRUE(kernel.ok()) << kernel.status().to_string();
  if (!kernel.ok()) return {};
  const SubGraph sg = whole(t);
  PoisoningAllocator buffers;
  std::vector<Tensor> given;
  given.reserve(sg.inputs().size());
  for (int v : sg.inputs())
    for (size_t i = 0; i < t.g.inputs().size(); ++i)
      if (t.g.inputs()[i] == v) given.push_back(channels_last ? to_channels_last(t.inputs[i], buffers) : t.inputs[i]);
  std::vector<const Tensor*> in;
  for (const Tensor& x : given) in.push_back(&x);
  ThreadPool pool(threads);
  KernelRunContext ctx{buffers, &pool};
  std::vector<Tensor> out(sg.outputs().size());
  const Status st = (*kernel)->run(in, out, ctx);
  EXPECT_TRUE(st.ok()) << st.to_string();
  if (!st.ok()) return {};
  std::vector<Tensor> result;
  for (int v : t.g.outputs())
    for (size_t o = 0; o < sg.outputs().size(); ++o)
      if (sg.outputs()[o] == v) result.push_back(channels_last ? to_row_major(out[o], buffers) : out[o]);
  return result;
}

// The whole graph as one kernel from compile_native, as the backend compiles it.
inline std::vector<Tensor> run_native(const testing_graph::TestGraph& t,
                                      const native::IsaKernels& isa, int threads) {
  return run_whole_graph(t, native::compile_native(whole(t), isa), threads);
}

// Every ISA of `on` at every thread count agrees with the reference on every output of t within
// tol (max|a-b| / max|b|).
inline void expect_matches_ref(const testing_graph::TestGraph& t, double tol, const std::string& what,
                               const std::vector<const native::IsaKernels*>& on = isas(),
                               const std::vector<int>& thread_counts = {1, 2}) {
  const std::vector<Tensor> want = testing_graph::run_ref(t);
  ASSERT_EQ(want.size(), t.g.outputs().size()) << what;
  for (const native::IsaKernels* isa : on) {
    for (int threads : thread_counts) {
      const std::vector<Tensor> got = run_native(t, *isa, threads);
      ASSERT_EQ(got.size(), want.size()) << what << " on " << native::isa_name(isa->isa);
      for (size_t o = 0; o < got.size(); ++o) {
        EXPECT_LE(harness::relative_error(got[o], want[o]), tol)
            << what << " output " << o << " on " << native::isa_name(isa->isa) << " x" << threads;
      }
    }
  }
}

// The same with the kernel compiled channels-last (compile_native's channels_last): rank-4 inputs
// go in NHWC and outputs come back converted to row-major.
inline void expect_channels_last_matches_ref(const testing_graph::TestGraph& t, double tol, const std::string& what,
                                             const std::vector<const native::IsaKernels*>& on = isas(),
                                             const std::vector<int>& thread_counts = {1, 2}) {
  const std::vector<Tensor> want = testing_graph::run_ref(t);
  for (const native::IsaKernels* isa : on) {
    for (int threads : thread_counts) {
      const std::vector<Tensor> got =
          run_whole_graph(t, native::compile_native(whole(t), *isa, /*channels_last=*/true), threads, true);
      ASSERT_EQ(got.size(), want.size()) << what << " (channels-last)";
      for (size_t o = 0; o < got.size(); ++o) {
        ASSERT_EQ(got[o].dims(), want[o].dims()) << what << " output " << o;
        EXPECT_LE(harness::relative_error(got[o], want[o]), tol)
            << what << " (channels-last) output " << o << " on " << native::isa_name(isa->isa) << " x" << threads;
      }
    }
  }
}

}  // namespace tessera::testing_native
