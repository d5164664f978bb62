// Session: the public entry point. Load a model, set the thread count, run with named inputs.
//
// A Session is not safe for concurrent run() calls from several threads; use one per thread.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/parallel.h"
#include "ir/status.h"
#include "onnx/onnx_import.h"
#include "runtime/buffer_pool.h"
#include "runtime/executor.h"

namespace tessera {

struct SessionOptions {
  int threads = 1;
  // "" or "ref": reference kernels only. Otherwise a backend name: every node it supports runs
  // on it (grouped as its fusion style allows), the rest on the reference kernels.
  std::string backend;
  OnnxImportOptions import;
  // Dims of named graph inputs, fixed before compiling (load() re-infers every value's type), so
  // that a model with dynamic input dims has static shapes inside: backends that need them
  // (XNNPACK, oneDNN primitives) can then take its nodes. Runs must then use these dims.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // A plan from `tessera optimize` (read_plan): its partitions run on their backends (the
  // `backend` option must then be empty). Refused if made for another model. Without
  // input_shapes, the plan's are used.
  std::optional<Plan> plan;
  // How rank-4 tensors pass between steps (CompileOptions::layout); a plan brings its own.
  TensorLayout layout = TensorLayout::kRowMajor;
};

class Session {
 public:
  static Result<std::unique_ptr<Session>> load(const std::string& model_path, const SessionOptions& opts = {});
  static Result<std::unique_ptr<Session>> from_graph(Graph graph, const SessionOptions& opts = {});

  const Graph& graph() const { return *graph_; }
  int threads() const { return pool_->num_threads(); }
  // Recompiles the backend kernels for n threads.
  Status set_threads(int n);
  // Steps run by each backend (by name).
  std::map<std::string, int> steps_per_backend() const { return executor_->steps_per_backend(); }

  // Names and declared types of the graph inputs and outputs.
  std::vector<std::pair<std::string, TensorType>> input_types() const;
  std::vector<std::pair<std::string, TensorType>> output_types() const;

  // Runs the graph. Every graph input must be given (dtype and known dims are checked).
  Result<std::map<std::string, Tensor>> run(const std::map<std::string, Tensor>& inputs);
  const RunStats& last_run_stats() const { return stats_; }
  // With profiling on, every run records each step's wall time (last_run_stats().step_seconds).
  void set_profile(bool on) { stats_.profile = on; }
  // The nodes step i runs.
  std::vector<int> step_nodes(int i) const { return executor_->step_nodes(i); }
  std::string step_backend(int i) const { return executor_->step_backend(i); }
  int num_steps() const { return executor_->num_steps(); }
  // Frees the intermediate buffers kept for reuse between runs; returns their bytes.
  size_t release_free_buffers() { return buffers_.release_free(); }

 private:
  Session() = default;

  std::unique_ptr<Graph> graph_;  // stable address: the executor points into it
  Status compile();

  std::string backend_;
  std::optional<Plan> plan_;
  TensorLayout layout_ = TensorLayout::kRowMajor;
  std::optional<GraphExecutor> executor_;
  std::unique_ptr<ThreadPool> pool_;
  BufferPool buffers_;
  RunStats stats_;
};

}  // namespace tessera
