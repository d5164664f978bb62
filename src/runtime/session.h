// Session: the public entry point. Load a model, set the thread count, run with named inputs.
//
// A Session is not safe for concurrent run() calls from several threads; use one per thread.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/parallel.h"
#include "ir/status.h"
#include "onnx/onnx_import.h"
#include "runtime/buffer_pool.h"

namespace tessera {

struct SessionOptions {
  int threads = 1;
  OnnxImportOptions import;
};

struct RunStats {
  size_t peak_bytes = 0;      // most bytes held at once by intermediate values
  size_t reserved_bytes = 0;  // bytes the pool allocated in total (live + reusable)
  int nodes_run = 0;
};

class Session {
 public:
  static Result<std::unique_ptr<Session>> load(const std::string& model_path, const SessionOptions& opts = {});
  static Result<std::unique_ptr<Session>> from_graph(Graph graph, const SessionOptions& opts = {});

  const Graph& graph() const { return graph_; }
  int threads() const { return pool_->num_threads(); }
  void set_threads(int n);

  // Names and declared types of the graph inputs and outputs.
  std::vector<std::pair<std::string, TensorType>> input_types() const;
  std::vector<std::pair<std::string, TensorType>> output_types() const;

  // Runs the graph. Every graph input must be given (dtype and known dims are checked).
  Result<std::map<std::string, Tensor>> run(const std::map<std::string, Tensor>& inputs);
  const RunStats& last_run_stats() const { return stats_; }

 private:
  Session() = default;
  Status prepare();

  Graph graph_;
  std::unique_ptr<ThreadPool> pool_;
  BufferPool buffers_;
  std::vector<const void*> kernels_;  // per node: const RefKernelFn*
  std::vector<int> use_counts_;       // per value: number of consuming node inputs
  RunStats stats_;
};

}  // namespace tessera
