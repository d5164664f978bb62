// What `tessera optimize` tells people: a plain-text summary on stdout, JSON with --json, and an
// HTML report with a picture of the graph coloured by backend (Graphviz's `dot`, when installed).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/fma_peak.h"
#include "runtime/optimizer.h"

namespace tessera {

struct OptimizeSummary {
  double predicted_seconds = 0, measured_seconds = 0, noise_seconds = 0, transition_seconds = 0;
  // |measured - predicted| / measured.
  double prediction_error = 0;
  // The prediction again with each partition's time alone measured anew after the end-to-end runs
  // (the stored one where that failed), and its error: a difference from the prediction is drift
  // of the machine since the costs were stored, not interaction. Above 15% the interacting
  // partitions are listed.
  double remeasured_seconds = 0, remeasured_error = 0;
  std::string best_single;  // the fastest single-backend placement ("" when not timed)
  double best_single_seconds = 0;
  double speedup = 0;  // best_single_seconds / the plan's time, both from the placements timed in turn
  std::map<std::string, std::pair<int, int>> per_backend;  // name -> (partitions, nodes)
  // Plan partitions (indices) whose time inside the whole plan differs from their time alone by
  // more than 15% and 2% of the total: the ones that interact (caches, threads).
  std::vector<int> interacting;
  // The plan's time as compared: timed in turns with the placements, else end to end.
  double plan_seconds = 0;
  // Compute floor (ir/node_flops.h): the model's Conv / ConvTranspose / MatMul / Gemm work, per
  // plan partition too, and that work at the machine's measured fp32 FMA peak (0: not measured).
  double flops = 0;
  std::vector<double> partition_flops;
  FmaPeak peak;
  double floor_seconds = 0;  // flops at peak.gflops_nt; 0 without a peak
};

// peak: the machine's measured FMA peak at the plan's thread count, or nullptr (no floor).
OptimizeSummary summarize_optimization(const Graph& g, const OptimizeResult& r,
                                       const std::vector<PlacementTiming>& placements,
                                       const FmaPeak* peak = nullptr);
std::string summary_text(const OptimizeSummary& s, const OptimizeResult& r);
nlohmann::json summary_json(const OptimizeSummary& s, const OptimizeResult& r);

// The graph as Graphviz dot text: nodes filled by backend, each backend partition a cluster.
std::string plan_dot(const Graph& g, const Plan& plan);
// plan_dot rendered to SVG by `dot -Tsvg`; an error when Graphviz is not installed or fails.
Result<std::string> render_svg(const std::string& dot);

Status write_report_html(const std::string& path, const Graph& g, const OptimizeResult& r,
                         const OptimizeSummary& s, const std::vector<PlacementTiming>& placements);

// "90s", "10m", "1h", "250ms", "42" (seconds).
Result<double> parse_duration(const std::string& s);

}  // namespace tessera
