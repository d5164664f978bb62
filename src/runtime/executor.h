// GraphExecutor: runs one graph's nodes in order on the reference kernels, returning each value's
// buffer to the pool after its last consumer. Subgraphs (If/Loop/Scan bodies) run through nested
// executors that share the pool and the threads.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "backends/ref/ref_kernel.h"
#include "runtime/buffer_pool.h"

namespace tessera {

struct RunStats {
  size_t peak_bytes = 0;      // most bytes held at once by intermediate values
  size_t reserved_bytes = 0;  // bytes the pool allocated in total (live + reusable)
  int nodes_run = 0;
};

class GraphExecutor {
 public:
  // Resolves a kernel for every node; fails naming the first node without one.
  static Result<GraphExecutor> create(const Graph& g);

  // inputs: one tensor per graph input, in order. outer: tensors of the values this graph reads
  // from enclosing graphs, by name. Returns the graph outputs in order.
  Result<std::vector<Tensor>> run(const std::vector<Tensor>& inputs, const std::map<std::string, Tensor>& outer,
                                  BufferPool& buffers, ThreadPool* threads, RunStats& stats) const;

 private:
  explicit GraphExecutor(const Graph& g) : graph_(&g) {}
  const Graph* graph_;
  std::vector<const RefKernelFn*> kernels_;
  std::vector<bool> has_subgraph_;  // per node: an If/Loop/Scan-style body to run
  std::vector<int> use_counts_;  // per value: consuming node inputs (explicit and implicit)
};

}  // namespace tessera
