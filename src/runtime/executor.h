// GraphExecutor: runs one graph as a sequence of steps — a reference kernel for a single node, or
// a compiled backend Kernel for a partition — in dependency order, returning each value's buffer
// to the pool after its last consumer. Subgraphs (If/Loop/Scan bodies) run through nested
// executors that share the pool and the threads.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/ref/ref_kernel.h"
#include "runtime/buffer_pool.h"
#include "runtime/placement.h"

namespace tessera {

struct RunStats {
  size_t peak_bytes = 0;      // most bytes held at once by intermediate values
  size_t reserved_bytes = 0;  // bytes the pool allocated in total (live + reusable)
  int nodes_run = 0;
  // When `profile` is set before a run, step_seconds[i] gets the wall time of step i
  // (GraphExecutor::step_nodes(i)) of the top-level graph.
  bool profile = false;
  std::vector<double> step_seconds;
};

class GraphExecutor {
 public:
  // Compiles every partition on its backend and resolves a reference kernel for every other
  // node; fails naming the first node without one, or when the partitions, contracted, do not
  // form a DAG (they cannot run one after another). With opts.layout channels-last, rank-4
  // tensors pass between steps channels-last (run() takes and returns them row-major).
  static Result<GraphExecutor> create(const Graph& g, const std::vector<Partition>& partitions = {},
                                      const CompileOptions& opts = {});

  // inputs: one tensor per graph input, in order. outer: tensors of the values this graph reads
  // from enclosing graphs, by name. Returns the graph outputs in order. With `keep_values`, no
  // buffer is recycled and every value's tensor (by value id; constants included) lands there:
  // the real intermediate tensors the measuring estimator feeds to candidates.
  Result<std::vector<Tensor>> run(const std::vector<Tensor>& inputs, const std::map<std::string, Tensor>& outer,
                                  BufferPool& buffers, ThreadPool* threads, RunStats& stats,
                                  std::vector<Tensor>* keep_values = nullptr) const;

  // Steps run by each backend (by name), for reports.
  std::map<std::string, int> steps_per_backend() const;
  int num_steps() const { return static_cast<int>(steps_.size()); }
  // The nodes step i runs (one for a reference step).
  std::vector<int> step_nodes(int i) const;
  // The backend step i runs on ("ref" for a reference step).
  std::string step_backend(int i) const;
  TensorLayout layout() const { return layout_; }

 private:
  struct Step {
    int node = -1;                       // a reference step: this node
    const RefKernelFn* ref = nullptr;
    bool has_subgraph = false;
    std::unique_ptr<SubGraph> subgraph;  // a compiled step: its partition and kernel
    std::unique_ptr<Kernel> kernel;
    const Backend* backend = nullptr;
    std::vector<int> reads;  // values consumed, once per use (for liveness)
  };
  explicit GraphExecutor(const Graph& g) : graph_(&g) {}
  const Graph* graph_;
  std::vector<Step> steps_;
  std::vector<int> use_counts_;  // per value: consuming node inputs (explicit and implicit)
  TensorLayout layout_ = TensorLayout::kRowMajor;  // of the rank-4 tensors between steps
  // The first step backend's own threads, which run the pool's loops during run() (see
  // Backend::region_runner); nullptr: the pool's workers.
  RegionRunner region_runner_ = nullptr;
};

}  // namespace tessera
