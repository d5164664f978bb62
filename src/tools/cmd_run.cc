// `tessera run MODEL.onnx`: run a model on given or random inputs; print shapes, stats, timing.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "ir/node_flops.h"
#include "ir/npy.h"
#include "ir/subgraph.h"
#include "runtime/session.h"
#include "tools/cli.h"
#include "tools/model_inputs.h"

namespace tessera {
namespace {

struct RunOptions {
  std::string model;
  InputFlags in;
  std::string output_dir;
  int threads = 1;
  std::string backend = "ref";
  std::string plan;  // a plan from `tessera optimize`
  std::string layout;  // "" (the plan's, else row-major), "row-major", "channels-last"
  int repeat = 1;
  int warmup = 1;
  bool json = false;
  bool profile = false;
};

struct Stats {
  double min = 0, max = 0, mean = 0, stddev = 0;
  int64_t nan = 0;
};

Stats summarize(const Tensor& t) {
  Stats s;
  if (t.dtype() == DType::kString || t.numel() == 0) return s;
  double sum = 0, sq = 0;
  int64_t n = 0;
  s.min = INFINITY;
  s.max = -INFINITY;
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = t.as_double(i);
    if (std::isnan(v)) { ++s.nan; continue; }
    s.min = std::min(s.min, v);
    s.max = std::max(s.max, v);
    sum += v;
    sq += v * v;
    ++n;
  }
  if (n) {
    s.mean = sum / n;
    s.stddev = std::sqrt(std::max(0.0, sq / n - s.mean * s.mean));
  }
  return s;
}

int run_model(const RunOptions& o) {
  auto fail = [](const Status& st) {
    std::fprintf(stderr, "error: %s\n", st.to_string().c_str());
    return 1;
  };
  if (o.threads < 1 || o.repeat < 1 || o.warmup < 0) return fail(invalid_argument("--threads and --repeat must be >= 1"));
  SessionOptions so;
  so.threads = o.threads;
  so.backend = o.backend;
  if (!o.layout.empty()) {
    auto layout = parse_layout(o.layout);
    if (!layout.ok()) return fail(layout.status());
    so.layout = *layout;
  }
  if (!o.plan.empty()) {
    if (o.backend != "ref") return fail(invalid_argument("give either --plan or --backend, not both"));
    auto plan = read_plan(o.plan);
    if (!plan.ok()) return fail(plan.status());
    if (plan->threads != o.threads) {
      std::fprintf(stderr, "note: %s was measured with %d thread(s); running with %d\n", o.plan.c_str(), plan->threads,
                   o.threads);
    }
    if (!o.layout.empty() && o.layout != plan->layout)
      return fail(invalid_argument(o.plan + " passes tensors " + plan->layout + ", not " + o.layout));
    so.plan = std::move(*plan);
    so.backend.clear();
  }
  std::map<std::string, Tensor> files = read_input_files(o.in);
  // The given input dims become static in the graph, so that backends can take its nodes.
  auto shapes = given_shapes(o.in, files);
  if (!shapes.ok()) return fail(shapes.status());
  so.input_shapes = *shapes;
  auto session = Session::load(o.model, so);
  if (!session.ok()) return fail(session.status());
  auto inputs = make_inputs(**session, o.in, std::move(files));
  if (!inputs.ok()) return fail(inputs.status());

  std::vector<double> times_ms;
  (*session)->set_profile(o.profile);
  std::vector<std::vector<double>> step_ms((*session)->num_steps());
  Result<std::map<std::string, Tensor>> out = Status(internal_error("not run"));
  for (int i = 0; i < o.warmup + o.repeat; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    out = (*session)->run(*inputs);
    auto t1 = std::chrono::steady_clock::now();
    if (!out.ok()) return fail(out.status());
    if (i < o.warmup) continue;
    times_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    const std::vector<double>& steps = (*session)->last_run_stats().step_seconds;
    for (size_t s = 0; s < steps.size() && s < step_ms.size(); ++s) step_ms[s].push_back(steps[s] * 1e3);
  }
  std::vector<double> sorted = times_ms;
  std::sort(sorted.begin(), sorted.end());
  double min_ms = sorted.front(), median_ms = sorted[sorted.size() / 2];
  const RunStats& rs = (*session)->last_run_stats();

  if (!o.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.output_dir, ec);
    if (ec) return fail(io_error("cannot create '" + o.output_dir + "': " + ec.message()));
    for (const auto& [name, t] : *out) {
      std::string safe = name;
      std::replace(safe.begin(), safe.end(), '/', '_');
      Status st = write_npy(o.output_dir + "/" + safe + ".npy", t);
      if (!st.ok()) return fail(st);
    }
  }

  nlohmann::json j;
  j["model"] = o.model;
  j["threads"] = o.threads;
  j["backend"] = o.plan.empty() ? o.backend : "plan";
  if (!o.plan.empty()) j["plan"] = o.plan;
  j["steps_per_backend"] = (*session)->steps_per_backend();
  j["repeat"] = o.repeat;
  j["latency_ms"] = {{"min", min_ms}, {"median", median_ms}, {"all", times_ms}};
  j["peak_intermediate_bytes"] = rs.peak_bytes;
  // Per step: its backend, nodes and median time over the timed runs, slowest first.
  struct StepTime {
    int step;
    std::string backend, label;
    double median_ms;
    double flops;  // its Conv / MatMul work (ir/node_flops.h)
  };
  std::vector<StepTime> profile;
  double profile_total = 0;
  for (int s = 0; o.profile && s < static_cast<int>(step_ms.size()); ++s) {
    std::vector<double>& t = step_ms[s];
    std::sort(t.begin(), t.end());
    const Graph& g = (*session)->graph();
    std::vector<int> nodes = (*session)->step_nodes(s);
    profile.push_back({s, (*session)->step_backend(s), SubGraph(g, NodeSet::of(g.num_nodes(), nodes)).label(),
                       t.empty() ? 0.0 : t[t.size() / 2], nodes_flops(g, nodes)});
    profile_total += profile.back().median_ms;
    j["profile"].push_back({{"step", s}, {"backend", profile.back().backend}, {"nodes", nodes},
                            {"label", profile.back().label}, {"median_ms", profile.back().median_ms},
                            {"gflop", profile.back().flops * 1e-9}});
  }
  std::stable_sort(profile.begin(), profile.end(),
                   [](const StepTime& a, const StepTime& b) { return a.median_ms > b.median_ms; });
  for (const auto& [name, t] : *out) {
    Stats s = summarize(t);
    j["outputs"][name] = {{"dtype", dtype_name(t.dtype())}, {"shape", t.dims()}, {"min", s.min}, {"max", s.max},
                          {"mean", s.mean}, {"std", s.stddev}, {"nan", s.nan}};
  }
  if (o.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("%-28s %-10s %-18s %12s %12s %12s %12s\n", "output", "dtype", "shape", "min", "max", "mean", "std");
  for (const auto& [name, t] : *out) {
    Stats s = summarize(t);
    std::printf("%-28s %-10s %-18s %12.5g %12.5g %12.5g %12.5g\n", name.c_str(), dtype_name(t.dtype()),
                dims_to_string(t.dims()).c_str(), s.min, s.max, s.mean, s.stddev);
  }
  std::printf("latency: min %.3f ms, median %.3f ms over %d run(s), %d thread(s)\n", min_ms, median_ms, o.repeat, o.threads);
  std::string steps;
  for (const auto& [b, n] : (*session)->steps_per_backend()) steps += (steps.empty() ? "" : ", ") + b + " " + std::to_string(n);
  std::printf("steps: %s\n", steps.c_str());
  std::printf("peak intermediate memory: %.2f MiB\n", rs.peak_bytes / 1048576.0);
  if (o.profile) {
    std::printf("profile: %zu steps, medians add up to %.3f ms (slowest first)\n", profile.size(), profile_total);
    std::printf("  %5s  %-8s %-48s %10s %7s %9s\n", "step", "backend", "nodes", "median", "share", "GFLOP/s");
    for (const StepTime& p : profile) {
      std::string label = p.label.size() > 48 ? p.label.substr(0, 45) + "..." : p.label;
      char rate[32] = "-";
      if (p.flops > 0 && p.median_ms > 0) std::snprintf(rate, sizeof rate, "%.1f", p.flops / p.median_ms * 1e-6);
      std::printf("  %5d  %-8s %-48s %7.3f ms %6.1f%% %9s\n", p.step, p.backend.c_str(), label.c_str(), p.median_ms,
                  profile_total > 0 ? 100.0 * p.median_ms / profile_total : 0.0, rate);
    }
  }
  return 0;
}

}  // namespace

void add_run_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* sub = app.add_subcommand("run", "Run a model on given (.npy) or random inputs and time it");
  sub->add_option("model", o->model, "ONNX model file")->required();
  o->in.add_to(*sub);
  sub->add_option("--output-dir", o->output_dir, "Write each output as DIR/<output name>.npy");
  sub->add_option("--threads", o->threads, "Threads for kernels")->capture_default_str();
  sub->add_option("--backend", o->backend,
                  "Run every node this backend supports on it, the rest on ref (see `tessera backends`)")
      ->capture_default_str();
  sub->add_option("--plan", o->plan, "Run the partitions of a plan from `tessera optimize` (PLAN.json)");
  sub->add_option("--layout", o->layout,
                  "How 4-D tensors pass between steps: row-major (NCHW, as ONNX has them) or channels-last "
                  "(NHWC, as oneDNN's convolutions and XNNPACK keep them); default: the plan's, else row-major")
      ->check(CLI::IsMember({"row-major", "channels-last"}));
  sub->add_option("--repeat", o->repeat, "Timed runs (min and median are reported)")->capture_default_str();
  sub->add_option("--warmup", o->warmup, "Untimed runs before timing")->capture_default_str();
  sub->add_flag("--json", o->json, "Print a machine-readable summary");
  sub->add_flag("--profile", o->profile,
                "Time every step (a backend's partition or a reference node) and list them, slowest first");
  sub->callback([o, &exit_code] { exit_code = run_model(*o); });
}

}  // namespace tessera
