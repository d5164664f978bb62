// The measuring cost estimator: compiles a candidate on its own and times it on the machine.
//
// A candidate is fed the *real* tensors it would see inside the model: every value of one
// reference run (capture_reference_values) is kept, so a Conv after a Relu sees non-negative
// activations, a Gather sees valid indices, and data-dependent kernels take their real paths.
// The kernel runs once and its outputs are checked against the reference run (a mismatch makes
// the candidate invalid, with the worst element in the reason); then it warms up and repeats
// until a minimum total time, and the median run time is the cost, with the interquartile range
// as its noise. Output buffers are reused between runs, as the executor reuses them.
//
// Transition costs (Collage ignores them): a kernel boundary where the next partition runs on
// another backend hands work from one thread pool to another (tessera's, OpenMP's)
// and its data between layouts. The layout conversions happen inside each kernel, so they are
// part of its measured cost; the hand-over is measured here, per pair of backends, by timing a
// small probe kernel of each back to back against each alone (transition_seconds).
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "backends/backend.h"
#include "ir/graph.h"
#include "ir/parallel.h"
#include "partition/cost_estimator.h"

namespace tessera {

class BufferPool;

struct MeasureOptions {
  int threads = 1;
  int warmup_runs = 1;
  int min_runs = 3;
  int max_runs = 1000;
  double min_total_seconds = 0.01;  // repeat until the timed runs take this long in total
  // Outputs must match the reference run: |x - ref| <= rtol * |ref| + atol * max(1, max |ref|).
  double rtol = 1e-3;
  double atol = 1e-4;
  // How the plan measured passes rank-4 tensors between its steps; candidates get and return
  // theirs so (CompileOptions::layout).
  TensorLayout layout = TensorLayout::kRowMajor;
};

// Runs g on the reference kernels and returns every value's tensor by value id (graph inputs,
// intermediates, outputs and constants). `inputs` maps graph input names to tensors; inputs not
// given get seeded random data (integers in [0, 4), floats in [-1, 1]). Dynamic input dims must
// have been fixed (Session's input_shapes) for random inputs.
// With `node_seconds`, each node's reference kernel time in that run lands there.
Result<std::vector<Tensor>> capture_reference_values(const Graph& g, const std::map<std::string, Tensor>& inputs,
                                                     int threads, uint64_t seed = 1,
                                                     std::vector<double>* node_seconds = nullptr);

// Random data of a given type (integers in [0, 4), bools, floats in [-1, 1]), seeded.
Tensor random_input_tensor(DType dtype, const std::vector<int64_t>& dims, uint64_t seed);

class MeasuringEstimator final : public CostEstimator {
 public:
  // `values`: capture_reference_values(g, ...). Both must outlive the estimator.
  MeasuringEstimator(const Graph& g, const std::vector<Tensor>& values, MeasureOptions options = {});
  ~MeasuringEstimator() override;

  Cost cost(const Candidate& c) override;
  // The extra time of running a kernel of `to` right after one of `from` (0 when they are the
  // same backend), measured once per pair with probe kernels; never negative.
  double transition_seconds(const Backend* from, const Backend* to);

  int measured() const { return measured_; }  // candidates compiled and timed
  const MeasureOptions& options() const { return options_; }

 private:
  const Graph& graph_;
  const std::vector<Tensor>& values_;
  MeasureOptions options_;
  std::unique_ptr<ThreadPool> pool_;
  static constexpr size_t kKeptBufferBytes = size_t{512} << 20;
  std::unique_ptr<BufferPool> buffers_;  // shared by the candidates' runs, freed past kKeptBufferBytes
  std::vector<double> max_abs_;          // by value id: max_abs of its reference tensor (-1: not yet)
  std::map<std::pair<const Backend*, const Backend*>, double> transitions_;
  int measured_ = 0;
};

// Times `run` (one call = one run): warm-up, then repeats until the options' minimum total time;
// the median and the interquartile range in seconds. Used for candidates and whole plans.
Cost time_repeatedly(const std::function<Status()>& run, const MeasureOptions& options);
// The median and interquartile range of run times in seconds (invalid when there are none).
Cost median_cost(std::vector<double> times);

}  // namespace tessera
