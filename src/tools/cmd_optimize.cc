// `tessera optimize MODEL.onnx -o plan.json`: measured partitioning across backends.
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>

#include "onnx/onnx_import.h"
#include "runtime/optimizer.h"
#include "runtime/session.h"
#include "tools/cli.h"
#include "tools/model_inputs.h"
#include "tools/report.h"

namespace tessera {
namespace {

// Every measured candidate is a fresh kernel whose buffers (XNNPACK's packed weights and
// workspace, staging, outputs) glibc maps anew and unmaps after it: det's XNNPACK candidates took
// 7.6 million page faults a minute, 16 of 92 CPU seconds in the kernel. Kept by the allocator
// instead (no mmap for large blocks, no trimming), the faults fell to 0.3 million and the peak
// resident size stayed the same (1.6 GB): the optimizer reuses what it frees.
void keep_freed_memory() {
#ifdef __GLIBC__
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
#endif
}

struct OptimizeFlags {
  std::string model;
  std::string output = "plan.json";
  std::string report;
  InputFlags in;
  int threads = 1;
  std::string budget = "10m";
  std::vector<std::string> backends;
  std::string cost_db;
  bool no_cost_db = false;
  bool retime = false;
  bool no_transitions = false;
  bool mix_runtimes = false;
  bool no_placements = false;
  bool no_compare = false;
  bool json = false;
  bool quiet = false;
};

std::string format_duration(double s) {
  char buf[32];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%.0fs", s);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(s) / 3600, static_cast<int>(s) % 3600 / 60);
  }
  return buf;
}

// The progress line on stderr: redrawn in place on a terminal, a line every few seconds otherwise.
class ProgressBar {
 public:
  ProgressBar(double budget, bool quiet) : budget_(budget), quiet_(quiet), tty_(isatty(STDERR_FILENO) != 0) {}
  ~ProgressBar() { finish(); }

  void update(const std::string& phase, const SearchProgress& p) {
    if (quiet_) return;
    bool new_phase = phase != phase_;
    phase_ = phase;
    if (!new_phase && p.elapsed_seconds - last_ < (tty_ ? 0.2 : 5.0)) return;
    last_ = p.elapsed_seconds;
    const int width = 24;
    double done = p.num_nodes > 0 ? static_cast<double>(p.nodes_covered) / p.num_nodes : 0;
    int filled = static_cast<int>(done * width);
    std::string bar(filled, '#');
    bar += std::string(width - filled, '.');
    std::string eta = "?";
    if (phase.rfind("search", 0) == 0 && done > 0.02) {
      // Nodes covered grow roughly linearly once measuring dominates; never past the budget.
      eta = format_duration(std::min(budget_ - p.elapsed_seconds, p.elapsed_seconds * (1 - done) / done));
    } else if (phase.rfind("search", 0) != 0) {
      eta = "-";
    }
    char line[256];
    std::snprintf(line, sizeof line, "%-10s [%s] %d/%d nodes, %lld costed, best %s, %s elapsed, ETA %s (budget %s)",
                  phase.c_str(), bar.c_str(), p.nodes_covered, p.num_nodes,
                  static_cast<long long>(p.candidates_costed),
                  p.best_seconds >= 0 ? (std::to_string(p.best_seconds * 1e3).substr(0, 6) + " ms").c_str() : "-",
                  format_duration(p.elapsed_seconds).c_str(), eta.c_str(), format_duration(budget_).c_str());
    if (tty_) {
      std::fprintf(stderr, "\r%-150s", line);
    } else {
      std::fprintf(stderr, "%s\n", line);
    }
    drawn_ = true;
  }
  void finish() {
    if (drawn_ && tty_) std::fprintf(stderr, "\n");
    drawn_ = false;
  }

 private:
  double budget_;
  bool quiet_, tty_;
  std::string phase_;
  double last_ = -1e9;
  bool drawn_ = false;
};

int run_optimize(const OptimizeFlags& o) {
  auto fail = [](const Status& st) {
    std::fprintf(stderr, "error: %s\n", st.to_string().c_str());
    return 1;
  };
  if (o.threads < 1) return fail(invalid_argument("--threads must be >= 1"));
  auto budget = parse_duration(o.budget);
  if (!budget.ok()) return fail(budget.status());
  if (Status st = check_writable(o.output, "plan"); !st.ok()) return fail(st);
  if (Status st = check_writable(o.report, "report"); !st.ok()) return fail(st);

  std::map<std::string, Tensor> files = read_input_files(o.in);
  auto shapes = given_shapes(o.in, files);
  if (!shapes.ok()) return fail(shapes.status());
  SessionOptions so;
  so.threads = o.threads;
  so.input_shapes = *shapes;
  auto session = Session::load(o.model, so);  // imports, fixes the shapes, checks the model runs
  if (!session.ok()) return fail(session.status());
  auto inputs = make_inputs(**session, o.in, std::move(files));
  if (!inputs.ok()) return fail(inputs.status());
  const Graph& g = (*session)->graph();

  OptimizeOptions opts;
  opts.threads = o.threads;
  opts.backends = o.backends;
  opts.budget_seconds = *budget;
  opts.cost_db = o.cost_db;
  opts.use_cost_db = !o.no_cost_db;
  opts.recall_timings = !o.retime;
  opts.transitions = !o.no_transitions;
  opts.mix_runtimes = o.mix_runtimes;
  opts.placements = !o.no_placements;
  opts.inputs = *inputs;
  opts.seed = o.in.seed;
  opts.model_name = o.model;
  opts.input_shapes = *shapes;
  ProgressBar bar(*budget, o.quiet || o.json);
  opts.progress = [&](const std::string& phase, const SearchProgress& p) { bar.update(phase, p); };
  keep_freed_memory();
  auto result = optimize_graph(g, opts);
  bar.finish();
  if (!result.ok()) return fail(result.status());
  const Plan& plan = result->plan;
  if (!result->db_warning.empty()) std::fprintf(stderr, "warning: %s\n", result->db_warning.c_str());
  if (Status st = write_plan(o.output, plan); !st.ok()) return fail(st);

  std::vector<PlacementTiming> placements;
  if (!o.no_compare) {
    if (!o.quiet && !o.json) std::fprintf(stderr, "timing the single-backend placements for comparison...\n");
    MeasureOptions m;
    m.threads = o.threads;
    m.min_total_seconds = 0.25;  // the quick placements get more runs; slow ones their 3
    // Placements far slower than the plan when they contended are not timed again.
    std::map<std::string, double> known;
    for (const PlanVariant& v : result->variants) {
      if (v.name.rfind("placement:", 0) != 0 || v.layout != TensorLayout::kRowMajor) continue;
      const double seconds = v.measured_seconds >= 0 ? v.measured_seconds : v.predicted_seconds;
      if (seconds > opts.hopeless_factor * plan.measured_seconds) known[v.name.substr(10)] = seconds;
    }
    placements = time_placements(g, &plan, *inputs, m, 1, /*with_ref=*/false, known);  // ref never wins
  }
  // About 0.25 s: the machine's FMA peak at the plan's thread count, for the compute floor.
  const FmaPeak peak = measure_fma_peak(o.threads);
  OptimizeSummary summary = summarize_optimization(g, *result, placements, &peak);
  if (!o.report.empty()) {
    if (Status st = write_report_html(o.report, g, *result, summary, placements); !st.ok()) return fail(st);
  }
  if (o.json) {
    std::printf("%s\n", summary_json(summary, *result).dump(2).c_str());
  } else {
    std::printf("%s", summary_text(summary, *result).c_str());
    std::printf("plan written to %s%s%s\n", o.output.c_str(), o.report.empty() ? "" : ", report to ",
                o.report.c_str());
  }
  return 0;
}

}  // namespace

void add_optimize_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<OptimizeFlags>();
  CLI::App* sub = app.add_subcommand(
      "optimize",
      "Choose which backend runs which part of a model by measuring every candidate partition on this machine "
      "(costs are cached in a database, so a second run is fast); write the plan as JSON");
  sub->add_option("model", o->model, "ONNX model file")->required();
  sub->add_option("-o,--output", o->output, "Where to write the plan (run it with `tessera run MODEL --plan FILE`)")
      ->capture_default_str();
  sub->add_option("--report", o->report, "Also write an HTML report (partitions, alternatives, graph picture)");
  sub->add_option("--threads", o->threads, "Threads the plan is measured (and meant to run) with")
      ->capture_default_str();
  sub->add_option("--budget", o->budget,
                  "Wall-clock limit, e.g. 90s, 10m: the best plan found by then is written")
      ->capture_default_str();
  sub->add_option("--backends", o->backends, "Backends to consider (default: every available one)")->delimiter(',');
  sub->add_option("--cost-db", o->cost_db,
                  "Cost database file (default: $TESSERA_COST_DB or ~/.cache/tessera/costs.sqlite)");
  sub->add_flag("--no-cost-db", o->no_cost_db, "Measure everything afresh and store nothing");
  sub->add_flag("--retime", o->retime,
                "Time the whole-model contenders, refinement moves and finals again (a warm database recalls them; "
                "partition costs and which refinement moves lost are still recalled)");
  sub->add_flag("--no-transitions", o->no_transitions, "Do not charge transitions between backends");
  sub->add_flag("--mix-runtimes", o->mix_runtimes,
                "Also search plans mixing backends of different thread runtimes (such as OpenMP); off: "
                "each runtime is searched alone with tessera's own backends");
  sub->add_flag("--no-placements", o->no_placements,
                "Do not let single-backend placements (timed end to end) replace the searched plan when faster");
  sub->add_flag("--no-compare", o->no_compare, "Skip timing the single-backend placements at the end");
  sub->add_flag("--json", o->json, "Print the summary as JSON");
  sub->add_flag("-q,--quiet", o->quiet, "No progress bar");
  o->in.add_to(*sub);
  sub->callback([o, &exit_code] { exit_code = run_optimize(*o); });
}

}  // namespace tessera
