// From graph nodes to an EltwiseProgram, and the kernel that runs one over the session's pool.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "backends/native/eltwise_program.h"
#include "backends/native/isa.h"
#include "backends/native/kernel_io.h"

namespace tessera::native {

// The elementwise ops the program runs (float32).
const std::vector<std::string>& eltwise_op_types();
bool is_eltwise_op(const std::string& op_type);
// Whether node n (an elementwise op) can be part of a program: dtypes, static shapes, constant
// Clip bounds, no legacy broadcasting. The reason when not.
Status check_eltwise_node(const Graph& g, int n);

// Relu as [0, inf] and Clip as its bounds (attributes before opset 11, else constant inputs;
// float's lowest / max when absent): y = min(max(x, lo), hi) as simd clip() computes it, NaN
// kept. nullopt for any other node.
std::optional<std::pair<float, float>> clamp_bounds(const Graph& g, const Node& node);

// A compiled program and, per program input, the graph value it reads.
struct EltwisePlan {
  EltwiseProgram program;
  std::vector<int> input_values;
};

// Compiles `nodes` (elementwise, in execution order, every output of shape out_dims) into a
// program that stores `stored_values` (outputs of those nodes) in that order. Values the nodes
// read from outside become program inputs, broadcast to out_dims. With `channels_last` and
// rank-4 out_dims, the program walks the outputs channels-last ([N, H, W, C] in memory), and
// reads the inputs for which channels_last(value) holds (rank 4) channels-last too.
Result<EltwisePlan> compile_eltwise(const Graph& g, const std::vector<int>& nodes,
                                    const std::vector<int>& stored_values,
                                    const std::vector<int64_t>& out_dims,
                                    const std::function<bool(int value)>& channels_last = nullptr);

// Rough cost of one output element of a program (about one unit per cheap vector operation per
// element, more for division and transcendental functions; inputs and outputs count one).
int64_t eltwise_element_cost(const EltwiseProgram& program);

// Runs a program over output elements [begin, end) split over the pool (into chunks of enough
// work to be worth a thread).
void run_eltwise_parallel(const IsaKernels& isa, const EltwiseProgram& program,
                          const EltwiseBuffers& buffers, int64_t begin, int64_t end,
                          ThreadPool* pool);

// A group of elementwise nodes with one output shape, as one kernel; with `channels_last`, its
// rank-4 inputs (not constants) and outputs are channels-last (CompileOptions::layout).
Result<std::unique_ptr<Kernel>> compile_eltwise_kernel(const SubGraph& sg, const IsaKernels& isa,
                                                       bool channels_last = false);
// Whether every node of sg is an elementwise op (compile_native makes it an elementwise kernel).
bool is_eltwise_group(const SubGraph& sg);

}  // namespace tessera::native
