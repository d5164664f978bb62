// `tessera bench MODEL.onnx`: the optimized plan, every single-backend placement and ONNX Runtime,
// side by side in one run, on the same inputs and thread count.
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "ir/node_flops.h"
#include "ir/npy.h"
#include "runtime/optimizer.h"
#include "runtime/session.h"
#include "tools/cli.h"
#include "tools/model_inputs.h"
#include "tools/report.h"

namespace tessera {
namespace {

struct BenchFlags {
  std::string model;
  std::string plan;  // a plan file; otherwise `optimize` runs first (fast with a warm cost database)
  std::string budget = "10m";
  InputFlags in;
  int threads = 1;
  double min_seconds = 1.0;
  bool no_ort = false;
  bool json = false;
};

// ONNX Runtime through tests/models/ort_run.mjs (onnxruntime-node from scripts/fetch-models.sh),
// on the same input tensors (written as .npy files).
Cost time_onnxruntime(const std::string& model, const std::map<std::string, Tensor>& inputs, int threads, int repeat,
                      std::string& version) {
  const char* env = std::getenv("TESSERA_ORT_SCRIPT");
  std::string script = env ? env : std::string(TESSERA_SOURCE_DIR) + "/tests/models/ort_run.mjs";
  if (!std::filesystem::exists(script)) return Cost::invalid("no " + script + " (set TESSERA_ORT_SCRIPT)");
  if (std::system("command -v node >/dev/null 2>&1") != 0) return Cost::invalid("node is not installed");
  char dir_template[] = "/tmp/tessera-bench-XXXXXX";
  if (!mkdtemp(dir_template)) return Cost::invalid("cannot create a temporary folder");
  std::string dir = dir_template;
  std::string cmd = "node '" + script + "' --model '" + model + "' --threads " + std::to_string(threads) +
                    " --warmup 3 --repeat " + std::to_string(repeat) + " --json";
  for (const auto& [name, t] : inputs) {
    std::string file = dir + "/input" + std::to_string(cmd.size()) + ".npy";
    if (!write_npy(file, t).ok()) return Cost::invalid("cannot write " + file);
    cmd += " --input '" + name + "=" + file + "'";
  }
  cmd += " 2>&1";
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    int rc = pclose(p);
    std::filesystem::remove_all(dir);
    if (rc != 0) return Cost::invalid("onnxruntime run failed: " + out.substr(0, 300));
  } else {
    std::filesystem::remove_all(dir);
    return Cost::invalid("cannot start node");
  }
  auto start = out.find('{');
  nlohmann::json j = nlohmann::json::parse(start == std::string::npos ? "" : out.substr(start), nullptr, false);
  if (j.is_discarded() || !j.contains("latency_ms")) return Cost::invalid("unexpected onnxruntime output: " + out.substr(0, 300));
  version = j.value("ort_version", "");
  std::vector<double> all = j["latency_ms"]["all"].get<std::vector<double>>();
  std::sort(all.begin(), all.end());
  double q1 = all[all.size() / 4], q3 = all[(3 * all.size()) / 4];
  return Cost::of(j["latency_ms"]["median"].get<double>() * 1e-3, (q3 - q1) * 1e-3);
}

int run_bench(const BenchFlags& o) {
  auto fail = [](const Status& st) {
    std::fprintf(stderr, "error: %s\n", st.to_string().c_str());
    return 1;
  };
  if (o.threads < 1 || o.min_seconds <= 0) return fail(invalid_argument("--threads and --min-time must be positive"));
  auto budget = parse_duration(o.budget);
  if (!budget.ok()) return fail(budget.status());
  std::map<std::string, Tensor> files = read_input_files(o.in);
  auto shapes = given_shapes(o.in, files);
  if (!shapes.ok()) return fail(shapes.status());
  std::optional<Plan> plan;
  if (!o.plan.empty()) {
    auto p = read_plan(o.plan);
    if (!p.ok()) return fail(p.status());
    plan = std::move(*p);
    if (shapes->empty()) *shapes = plan->input_shapes;
  }
  SessionOptions so;
  so.threads = o.threads;
  so.input_shapes = *shapes;
  auto session = Session::load(o.model, so);
  if (!session.ok()) return fail(session.status());
  auto inputs = make_inputs(**session, o.in, std::move(files));
  if (!inputs.ok()) return fail(inputs.status());
  const Graph& g = (*session)->graph();
  if (!plan) {
    std::fprintf(stderr, "bench: optimizing first (give --plan to skip; a warm cost database makes this quick)\n");
    OptimizeOptions opts;
    opts.threads = o.threads;
    opts.budget_seconds = *budget;
    opts.inputs = *inputs;
    opts.model_name = o.model;
    opts.input_shapes = *shapes;
    auto r = optimize_graph(g, opts);
    if (!r.ok()) return fail(r.status());
    plan = r->plan;
  } else if (Status st = check_plan_matches(*plan, g); !st.ok()) {
    return fail(st);
  }
  MeasureOptions m;
  m.threads = o.threads;
  m.min_total_seconds = o.min_seconds;
  m.warmup_runs = 3;
  m.min_runs = 10;
  std::fprintf(stderr, "bench: timing the plan and each single-backend placement (%d thread(s))...\n", o.threads);
  std::vector<PlacementTiming> rows = time_placements(g, &*plan, *inputs, m);
  std::string ort_version;
  if (!o.no_ort) {
    std::fprintf(stderr, "bench: timing onnxruntime...\n");
    double plan_s = rows.front().cost.valid ? rows.front().cost.seconds : 0.05;
    int repeat = std::clamp(static_cast<int>(o.min_seconds / std::max(plan_s, 1e-4)), 10, 1000);
    rows.push_back({"onnxruntime", time_onnxruntime(o.model, *inputs, o.threads, repeat, ort_version)});
  }
  const double plan_s = rows.front().cost.valid ? rows.front().cost.seconds : 0;
  // The compute floor: the model's Conv / MatMul work at this machine's fp32 FMA peak.
  const double flops = graph_flops(g);
  const FmaPeak peak = measure_fma_peak(o.threads);
  const double floor_s = peak.gflops_nt > 0 ? flops / (peak.gflops_nt * 1e9) : 0;
  nlohmann::json j;
  j["model"] = o.model;
  j["threads"] = o.threads;
  j["gflop"] = flops * 1e-9;
  j["peak_gflops"] = peak.gflops_nt;
  j["floor_ms"] = floor_s * 1e3;
  if (!ort_version.empty()) j["onnxruntime_version"] = ort_version;
  for (const PlacementTiming& r : rows) {
    nlohmann::json row = {{"name", r.name}, {"valid", r.cost.valid}};
    if (r.cost.valid) {
      row["median_ms"] = r.cost.seconds * 1e3;
      row["iqr_ms"] = r.cost.noise * 1e3;
      if (plan_s > 0) row["ratio_to_plan"] = r.cost.seconds / plan_s;
      if (floor_s > 0) row["ratio_to_floor"] = r.cost.seconds / floor_s;
    } else {
      row["reason"] = r.cost.reason;
    }
    j["rows"].push_back(row);
  }
  if (o.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("%s, %d thread(s): median latency (same inputs, same process)\n", o.model.c_str(), o.threads);
  std::printf("  %-14s %12s %10s %14s %10s\n", "placement", "median ms", "IQR ms", "x plan time", "x floor");
  for (const PlacementTiming& r : rows) {
    std::string name = r.name == "onnxruntime" && !ort_version.empty() ? "ort " + ort_version : r.name;
    if (!r.cost.valid) {
      std::printf("  %-14s %s\n", name.c_str(), ("unavailable: " + r.cost.reason.substr(0, 100)).c_str());
      continue;
    }
    std::printf("  %-14s %12.3f %10.3f %14.2f %10.2f\n", name.c_str(), r.cost.seconds * 1e3, r.cost.noise * 1e3,
                plan_s > 0 ? r.cost.seconds / plan_s : 0.0, floor_s > 0 ? r.cost.seconds / floor_s : 0.0);
  }
  if (floor_s > 0)
    std::printf("compute floor: %.3f GFLOP of Conv/MatMul/Gemm work at the measured fp32 FMA peak (%.0f GFLOP/s, %d "
                "thread(s), %s): %.3f ms\n",
                flops * 1e-9, peak.gflops_nt, peak.threads, peak.isa.c_str(), floor_s * 1e3);
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<BenchFlags>();
  CLI::App* sub = app.add_subcommand(
      "bench", "Time a model's optimized plan against every single backend and ONNX Runtime, side by side");
  sub->add_option("model", o->model, "ONNX model file")->required();
  sub->add_option("--plan", o->plan, "The plan to time (default: run `optimize` first, using the cost database)");
  sub->add_option("--budget", o->budget, "Budget of that optimization")->capture_default_str();
  sub->add_option("--threads", o->threads, "Threads for every engine")->capture_default_str();
  sub->add_option("--min-time", o->min_seconds, "Seconds of timed runs per placement (at least 10 runs)")
      ->capture_default_str();
  sub->add_flag("--no-ort", o->no_ort, "Skip ONNX Runtime");
  sub->add_flag("--json", o->json, "Print JSON");
  o->in.add_to(*sub);
  sub->callback([o, &exit_code] { exit_code = run_bench(*o); });
}

}  // namespace tessera
