// `tessera run MODEL.onnx`: run a model on given or random inputs; print shapes, stats, timing.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "ir/npy.h"
#include "runtime/session.h"
#include "tools/cli.h"

namespace tessera {
namespace {

struct RunOptions {
  std::string model;
  std::vector<std::string> inputs;  // NAME=FILE.npy
  std::vector<std::string> shapes;  // NAME=1x3x640x640
  std::string output_dir;
  int threads = 1;
  std::string backend = "ref";
  int repeat = 1;
  int warmup = 1;
  uint64_t seed = 0;
  bool json = false;
};

Result<std::pair<std::string, std::string>> split_assignment(const std::string& s, const char* flag) {
  auto eq = s.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == s.size()) {
    return invalid_argument(std::string(flag) + " expects NAME=VALUE, got '" + s + "'");
  }
  return std::make_pair(s.substr(0, eq), s.substr(eq + 1));
}

Result<std::vector<int64_t>> parse_dims(const std::string& s) {
  std::vector<int64_t> dims;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t x = s.find('x', pos);
    std::string part = s.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
    char* end = nullptr;
    long long d = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || d < 0 || d > (1LL << 31)) return invalid_argument("bad shape '" + s + "' (expected e.g. 1x3x640x640)");
    dims.push_back(d);
    if (x == std::string::npos) break;
    pos = x + 1;
  }
  return dims;
}

Tensor random_tensor(DType dtype, const std::vector<int64_t>& dims, std::mt19937_64& rng) {
  Tensor t(dtype, dims);
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  std::uniform_int_distribution<int> small(0, 9);
  for (int64_t i = 0; i < t.numel(); ++i) {
    visit_numeric_dtype(dtype, [&](auto tag) {
      using T = decltype(tag);
      T* p = static_cast<T*>(t.raw_data());
      if constexpr (std::is_same_v<T, bool>) p[i] = small(rng) % 2;
      else if constexpr (std::is_integral_v<T>) p[i] = static_cast<T>(small(rng));
      else p[i] = T(static_cast<float>(uni(rng)));
    });
  }
  return t;
}

// The --input files that read, before the session is made (their dims fix the graph's input
// shapes); make_inputs reports the others, after checking the names.
std::map<std::string, Tensor> read_input_files(const RunOptions& o) {
  std::map<std::string, Tensor> inputs;
  for (const auto& a : o.inputs) {
    auto kv = split_assignment(a, "--input");
    if (!kv.ok()) continue;
    auto t = read_npy(kv->second);
    if (t.ok()) inputs[kv->first] = std::move(*t);
  }
  return inputs;
}

// --shape and the --input files' dims, to specialize the graph with.
Result<std::map<std::string, std::vector<int64_t>>> given_shapes(const RunOptions& o,
                                                                 const std::map<std::string, Tensor>& files) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& a : o.shapes) {
    TESSERA_ASSIGN_OR_RETURN(auto kv, split_assignment(a, "--shape"));
    TESSERA_ASSIGN_OR_RETURN(shapes[kv.first], parse_dims(kv.second));
  }
  for (const auto& [name, t] : files) shapes[name] = t.dims();
  return shapes;
}

Result<std::map<std::string, Tensor>> make_inputs(const Session& s, const RunOptions& o,
                                                  std::map<std::string, Tensor> inputs) {
  std::map<std::string, std::vector<int64_t>> shapes;
  auto decl = s.input_types();
  auto known = [&](const std::string& name) {
    return std::any_of(decl.begin(), decl.end(), [&](const auto& p) { return p.first == name; });
  };
  for (const auto& a : o.shapes) {
    TESSERA_ASSIGN_OR_RETURN(auto kv, split_assignment(a, "--shape"));
    if (!known(kv.first)) return invalid_argument("--shape: the model has no input named '" + kv.first + "'");
    TESSERA_ASSIGN_OR_RETURN(shapes[kv.first], parse_dims(kv.second));
  }
  for (const auto& a : o.inputs) {
    TESSERA_ASSIGN_OR_RETURN(auto kv, split_assignment(a, "--input"));
    if (!known(kv.first)) return invalid_argument("--input: the model has no input named '" + kv.first + "'");
    if (!inputs.count(kv.first)) {
      TESSERA_ASSIGN_OR_RETURN(inputs[kv.first], read_npy(kv.second));
    }
  }
  std::mt19937_64 rng(o.seed);
  for (const auto& [name, type] : decl) {
    if (inputs.count(name)) continue;
    std::vector<int64_t> dims;
    if (shapes.count(name)) {
      dims = shapes[name];
    } else if (type.is_static()) {
      dims = type.static_dims();
    } else {
      return invalid_argument("input '" + name + "' has dynamic shape " + type.to_string() + ": give --shape " + name +
                              "=... or --input " + name + "=FILE.npy");
    }
    if (type.dtype == DType::kString || type.dtype == DType::kUndefined) {
      return invalid_argument("input '" + name + "' of type " + type.to_string() + " needs --input");
    }
    try {
      inputs[name] = random_tensor(type.dtype, dims, rng);
    } catch (const std::bad_alloc&) {
      return invalid_argument("input '" + name + "' of shape " + dims_to_string(dims) + " does not fit in memory");
    }
  }
  return inputs;
}

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
  std::map<std::string, Tensor> files = read_input_files(o);
  // The given input dims become static in the graph, so that backends can take its nodes.
  auto shapes = given_shapes(o, files);
  if (!shapes.ok()) return fail(shapes.status());
  so.input_shapes = *shapes;
  auto session = Session::load(o.model, so);
  if (!session.ok()) return fail(session.status());
  auto inputs = make_inputs(**session, o, std::move(files));
  if (!inputs.ok()) return fail(inputs.status());

  std::vector<double> times_ms;
  Result<std::map<std::string, Tensor>> out = Status(internal_error("not run"));
  for (int i = 0; i < o.warmup + o.repeat; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    out = (*session)->run(*inputs);
    auto t1 = std::chrono::steady_clock::now();
    if (!out.ok()) return fail(out.status());
    if (i >= o.warmup) times_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
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
  j["backend"] = o.backend;
  j["steps_per_backend"] = (*session)->steps_per_backend();
  j["repeat"] = o.repeat;
  j["latency_ms"] = {{"min", min_ms}, {"median", median_ms}, {"all", times_ms}};
  j["peak_intermediate_bytes"] = rs.peak_bytes;
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
  return 0;
}

}  // namespace

void add_run_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* sub = app.add_subcommand("run", "Run a model on given (.npy) or random inputs and time it");
  sub->add_option("model", o->model, "ONNX model file")->required();
  sub->add_option("--input", o->inputs, "NAME=FILE.npy: an input tensor (repeatable); others are random");
  sub->add_option("--shape", o->shapes, "NAME=1x3x640x640: shape of a random input with dynamic dims (repeatable)");
  sub->add_option("--output-dir", o->output_dir, "Write each output as DIR/<output name>.npy");
  sub->add_option("--threads", o->threads, "Threads for kernels")->capture_default_str();
  sub->add_option("--backend", o->backend,
                  "Run every node this backend supports on it, the rest on ref (see `tessera backends`)")
      ->capture_default_str();
  sub->add_option("--repeat", o->repeat, "Timed runs (min and median are reported)")->capture_default_str();
  sub->add_option("--warmup", o->warmup, "Untimed runs before timing")->capture_default_str();
  sub->add_option("--seed", o->seed, "Seed for random inputs")->capture_default_str();
  sub->add_flag("--json", o->json, "Print a machine-readable summary");
  sub->callback([o, &exit_code] { exit_code = run_model(*o); });
}

}  // namespace tessera
