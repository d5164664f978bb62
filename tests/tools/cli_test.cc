// End-to-end tests of the `tessera` binary: flags, .npy in and out, JSON, exit codes.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "ir/npy.h"
#include "tools/run_tessera.h"
#include "onnx/onnx_pb.h"
#include <google/protobuf/text_format.h>

namespace tessera {
namespace {
namespace fs = std::filesystem;

const char* kAddModel = "/usr/share/libonnx-testdata/data/node/test_add/model.onnx";  // x + y, 3x4x5

using testing::run_tessera;
using Output = testing::CliOutput;

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("tessera_cli_test_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

TEST(Cli, RunReadsNpyAndWritesOutputs) {
  fs::path dir = temp_dir("run");
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-3, 3);
  Tensor x(DType::kFloat32, {3, 4, 5}), y(DType::kFloat32, {3, 4, 5});
  for (int i = 0; i < 60; ++i) x.data<float>()[i] = u(rng), y.data<float>()[i] = u(rng);
  ASSERT_TRUE(write_npy((dir / "x.npy").string(), x).ok());
  ASSERT_TRUE(write_npy((dir / "y.npy").string(), y).ok());
  Output o = run_tessera(std::string("run ") + kAddModel + " --input x=" + (dir / "x.npy").string() +
                         " --input y=" + (dir / "y.npy").string() + " --output-dir " + (dir / "out").string() +
                         " --repeat 3 --json");
  ASSERT_EQ(o.exit_code, 0) << o.text;
  auto j = nlohmann::json::parse(o.text);
  EXPECT_EQ(j["repeat"], 3);
  EXPECT_LE(j["latency_ms"]["min"].get<double>(), j["latency_ms"]["median"].get<double>());
  EXPECT_EQ(j["outputs"]["sum"]["shape"], nlohmann::json::array({3, 4, 5}));
  auto sum = read_npy((dir / "out" / "sum.npy").string());
  ASSERT_TRUE(sum.ok()) << sum.status().to_string();
  for (int i = 0; i < 60; ++i) ASSERT_EQ(sum->data<float>()[i], x.data<float>()[i] + y.data<float>()[i]);
  fs::remove_all(dir);
}

TEST(Cli, RunMakesRandomInputsAndPrintsTable) {
  Output o = run_tessera(std::string("run ") + kAddModel + " --threads 2");
  ASSERT_EQ(o.exit_code, 0) << o.text;
  EXPECT_NE(o.text.find("sum"), std::string::npos);
  EXPECT_NE(o.text.find("3x4x5"), std::string::npos);
  EXPECT_NE(o.text.find("latency: min"), std::string::npos);
}

TEST(Cli, UserErrorsExitWithCodeOne) {
  EXPECT_EQ(run_tessera("run /nonexistent/model.onnx").exit_code, 1);
  Output bad_input = run_tessera(std::string("run ") + kAddModel + " --input nosuch=a.npy");
  EXPECT_EQ(bad_input.exit_code, 1);
  EXPECT_NE(bad_input.text.find("no input named 'nosuch'"), std::string::npos) << bad_input.text;
  Output bad_shape = run_tessera(std::string("run ") + kAddModel + " --shape x=3xAx5");
  EXPECT_EQ(bad_shape.exit_code, 1);
  EXPECT_NE(bad_shape.text.find("bad shape"), std::string::npos) << bad_shape.text;
  EXPECT_EQ(run_tessera("run --no-such-flag").exit_code, 1);
  EXPECT_EQ(run_tessera("").exit_code, 1);
}

// A model that is valid but whose declared input (1e6 x 1e6 floats, 4 TB) cannot be made.
TEST(Cli, RunRefusesInputsThatDoNotFitInMemory) {
  fs::path dir = temp_dir("huge");
  onnx::ModelProto m;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
    ir_version: 8
    opset_import { domain: "" version: 13 }
    graph {
      name: "huge"
      node { op_type: "Relu" input: "x" output: "y" }
      input { name: "x" type { tensor_type { elem_type: 1 shape { dim { dim_value: 1000000 } dim { dim_value: 1000000 } } } } }
      output { name: "y" type { tensor_type { elem_type: 1 shape { dim { dim_value: 1000000 } dim { dim_value: 1000000 } } } } }
    })pb", &m));
  std::string path = (dir / "huge.onnx").string();
  std::ofstream(path, std::ios::binary) << m.SerializeAsString();
  EXPECT_EQ(run_tessera("info " + path).exit_code, 0);
  Output o = run_tessera("run " + path);
  EXPECT_EQ(o.exit_code, 1) << o.text;
  EXPECT_NE(o.text.find("does not fit in memory"), std::string::npos) << o.text;
  fs::remove_all(dir);
}

TEST(Cli, HelpOnEveryCommand) {
  for (const char* cmd : {"", "run ", "info ", "conformance ", "backends ", "optimize ", "bench "}) {
    Output o = run_tessera(std::string(cmd) + "--help");
    EXPECT_EQ(o.exit_code, 0) << cmd;
    EXPECT_NE(o.text.find("Usage"), std::string::npos) << cmd;
  }
}

TEST(Cli, BackendsListsEveryBackendWithVersionAndPatterns) {
  Output o = run_tessera("backends --json");
  ASSERT_EQ(o.exit_code, 0) << o.text;
  auto j = nlohmann::json::parse(o.text);
  ASSERT_GE(j["backends"].size(), 1u);
  EXPECT_EQ(j["backends"][0]["name"], "ref");
  EXPECT_EQ(j["backends"][0]["available"], true);
  for (const auto& b : j["backends"]) {
    EXPECT_FALSE(b["version"].get<std::string>().empty()) << b["name"];
    EXPECT_TRUE(b["patterns"].is_array()) << b["name"];
  }
  Output table = run_tessera("backends");
  ASSERT_EQ(table.exit_code, 0);
  EXPECT_NE(table.text.find("pattern"), std::string::npos) << table.text;
}

// libgomp reads its spin count once, from the environment the process started with: `tessera`
// restarts itself with GOMP_SPINCOUNT set unless the user chose a policy or a count. libgomp's own
// display of what it parsed (OMP_DISPLAY_ENV, printed by the last process) is the evidence.
TEST(Cli, OpenMpGetsTheSpinCountUnlessTheUserChoseOne) {
  auto parsed_spin_count = [](const std::string& text) {
    const std::string key = "GOMP_SPINCOUNT = '";
    const size_t at = text.rfind(key);
    if (at == std::string::npos) return std::string("(not displayed)");
    return text.substr(at + key.size(), text.find('\'', at + key.size()) - at - key.size());
  };
  const std::string clean = "env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY OMP_DISPLAY_ENV=VERBOSE";
  Output set = run_tessera("backends", clean);
  ASSERT_EQ(set.exit_code, 0) << set.text;
  EXPECT_EQ(parsed_spin_count(set.text), "10000") << set.text;
  Output user = run_tessera("backends", clean + " GOMP_SPINCOUNT=777");
  ASSERT_EQ(user.exit_code, 0) << user.text;
  EXPECT_EQ(parsed_spin_count(user.text), "777") << user.text;
  Output active = run_tessera("backends", clean + " OMP_WAIT_POLICY=ACTIVE");
  ASSERT_EQ(active.exit_code, 0) << active.text;
  EXPECT_NE(parsed_spin_count(active.text), "10000") << active.text;
  // oneDNN's version (a cost database key) names the settings its costs were measured under.
  if (set.text.find("oneDNN") != std::string::npos) {
    EXPECT_NE(set.text.find("GOMP_SPINCOUNT=10000"), std::string::npos) << set.text;
    EXPECT_NE(user.text.find("GOMP_SPINCOUNT=777"), std::string::npos) << user.text;
  }
}

TEST(Cli, RunWithBackend) {
  Output ref = run_tessera(std::string("run --json --backend ref ") + kAddModel);
  ASSERT_EQ(ref.exit_code, 0) << ref.text;
  EXPECT_EQ(nlohmann::json::parse(ref.text)["steps_per_backend"]["ref"], 1);
  Output unknown = run_tessera(std::string("run --backend nosuch ") + kAddModel);
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.text.find("unknown backend 'nosuch'"), std::string::npos) << unknown.text;
}

// optimize -> plan.json + report; run --plan replays it; a second optimize measures nothing.
TEST(Cli, OptimizeWritesAPlanThatRunReplays) {
  const std::string model = "/usr/share/libonnx-testdata/data/pytorch-operator/test_operator_basic/model.onnx";
  fs::path dir = temp_dir("optimize");
  std::string common = model + " --threads 1 --budget 60s --no-compare --cost-db " + (dir / "costs.sqlite").string() +
                       " -o " + (dir / "plan.json").string();
  Output first = run_tessera("optimize " + common + " --report " + (dir / "report.html").string());
  ASSERT_EQ(first.exit_code, 0) << first.text;
  EXPECT_NE(first.text.find("predicted"), std::string::npos) << first.text;
  EXPECT_NE(first.text.find("measured"), std::string::npos) << first.text;
  auto plan = nlohmann::json::parse(std::ifstream(dir / "plan.json"));
  EXPECT_EQ(plan["format"], 1);
  EXPECT_FALSE(plan["partitions"].empty());
  std::ifstream report(dir / "report.html");
  std::string html((std::istreambuf_iterator<char>(report)), std::istreambuf_iterator<char>());
  EXPECT_NE(html.find("Partitions"), std::string::npos);
  if (std::system("command -v dot >/dev/null 2>&1") == 0) {
    EXPECT_NE(html.find("<svg"), std::string::npos);
  }

  Output second = run_tessera("optimize --json " + common);
  ASSERT_EQ(second.exit_code, 0) << second.text;
  auto j = nlohmann::json::parse(second.text);
  EXPECT_EQ(j["measured_now"], 0) << second.text;
  EXPECT_GT(j["cache_hits"].get<int>(), 0);

  Output run = run_tessera("run --json " + model + " --plan " + (dir / "plan.json").string());
  ASSERT_EQ(run.exit_code, 0) << run.text;
  EXPECT_EQ(nlohmann::json::parse(run.text)["backend"], "plan");
  // A plan for another model is refused with a clear error.
  Output other = run_tessera(std::string("run ") + kAddModel + " --plan " + (dir / "plan.json").string());
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_NE(other.text.find("another model"), std::string::npos) << other.text;
  Output bad_budget = run_tessera("optimize " + model + " --budget soon");
  EXPECT_EQ(bad_budget.exit_code, 1);
  EXPECT_NE(bad_budget.text.find("bad duration"), std::string::npos) << bad_budget.text;
}

// The compute floor: the Conv's multiply-adds counted exactly (1x1x7x5 input, 3x3 kernel, stride 2,
// pad 1: 4x3 outputs of 9 taps each), at a measured peak the plan cannot beat.
TEST(Cli, OptimizeReportsTheComputeFloor) {
  const std::string model = "/usr/share/libonnx-testdata/data/node/test_conv_with_strides_padding/model.onnx";
  fs::path dir = temp_dir("optimize_floor");
  Output out = run_tessera("optimize --json --threads 1 --budget 30s --no-compare --no-cost-db " + model + " -o " +
                           (dir / "plan.json").string());
  ASSERT_EQ(out.exit_code, 0) << out.text;
  auto j = nlohmann::json::parse(out.text);
  EXPECT_DOUBLE_EQ(j["gflop"].get<double>(), 2.0 * 12 * 9 * 1e-9);
  double partitions_gflop = 0;
  for (const auto& p : j["partitions"]) partitions_gflop += p["gflop"].get<double>();
  EXPECT_DOUBLE_EQ(partitions_gflop, j["gflop"].get<double>());
  ASSERT_TRUE(j.contains("floor_ms")) << out.text;
  EXPECT_GT(j["peak_gflops"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(j["floor_ms"].get<double>(), j["gflop"].get<double>() / j["peak_gflops"].get<double>() * 1e3);
  EXPECT_GE(j["plan_over_floor"].get<double>(), 1.0) << out.text;
}

// --profile times every step and counts its Conv work (the same 216 flops as above) once.
TEST(Cli, RunProfileListsEveryStepWithItsWork) {
  const std::string model = "/usr/share/libonnx-testdata/data/node/test_conv_with_strides_padding/model.onnx";
  Output out = run_tessera("run --json --profile --repeat 3 " + model);
  ASSERT_EQ(out.exit_code, 0) << out.text;
  auto j = nlohmann::json::parse(out.text);
  ASSERT_EQ(j["profile"].size(), 1u) << out.text;
  EXPECT_EQ(j["profile"][0]["label"], "Conv");
  EXPECT_DOUBLE_EQ(j["profile"][0]["gflop"].get<double>(), 2.0 * 12 * 9 * 1e-9);
  EXPECT_GT(j["profile"][0]["median_ms"].get<double>(), 0);
}

// Unwritable outputs fail before any measuring (the cost database is never opened), and the
// check leaves existing files as they were.
TEST(Cli, OptimizeRefusesAnUnwritableOutputBeforeMeasuring) {
  const std::string model = "/usr/share/libonnx-testdata/data/pytorch-operator/test_operator_basic/model.onnx";
  fs::path dir = temp_dir("optimize_unwritable");
  const fs::path db = dir / "costs.sqlite", report = dir / "report.html";
  { std::ofstream(report) << "an earlier report"; }
  Output out = run_tessera("optimize " + model + " --budget 60s --cost-db " + db.string() + " --report " +
                           report.string() + " -o " + (dir / "missing" / "plan.json").string());
  EXPECT_EQ(out.exit_code, 1);
  EXPECT_NE(out.text.find("cannot write the plan"), std::string::npos) << out.text;
  EXPECT_FALSE(fs::exists(db)) << "measured before checking the output";
  std::ifstream in(report);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()), "an earlier report");
  Output bad_report = run_tessera("optimize " + model + " --cost-db " + db.string() + " -o " +
                                  (dir / "plan.json").string() + " --report " + (dir / "no" / "r.html").string());
  EXPECT_EQ(bad_report.exit_code, 1);
  EXPECT_NE(bad_report.text.find("cannot write the report"), std::string::npos) << bad_report.text;
  EXPECT_FALSE(fs::exists(dir / "plan.json"));
  EXPECT_FALSE(fs::exists(db));
}

TEST(Cli, BenchComparesThePlanWithEverySingleBackend) {
  const std::string model = "/usr/share/libonnx-testdata/data/pytorch-operator/test_operator_basic/model.onnx";
  fs::path dir = temp_dir("bench");
  Output opt = run_tessera("optimize -q --no-compare " + model + " --cost-db " + (dir / "c.sqlite").string() + " -o " +
                           (dir / "plan.json").string());
  ASSERT_EQ(opt.exit_code, 0) << opt.text;
  Output o = run_tessera("bench --json --no-ort --min-time 0.05 " + model + " --plan " + (dir / "plan.json").string());
  ASSERT_EQ(o.exit_code, 0) << o.text;
  auto j = nlohmann::json::parse(o.text.substr(o.text.find('{')));
  ASSERT_GE(j["rows"].size(), 2u);
  EXPECT_EQ(j["rows"][0]["name"], "plan");
  EXPECT_DOUBLE_EQ(j["rows"][0]["ratio_to_plan"].get<double>(), 1.0);
  bool has_ref = false;
  for (const auto& r : j["rows"]) has_ref |= r["name"] == "ref" && r["valid"] == true;
  EXPECT_TRUE(has_ref) << o.text;
}

TEST(Cli, InfoReportsOpsAndTypes) {
  Output o = run_tessera(std::string("info --json ") + kAddModel);
  ASSERT_EQ(o.exit_code, 0) << o.text;
  auto j = nlohmann::json::parse(o.text);
  EXPECT_EQ(j["ops"]["Add"], 1);
  EXPECT_EQ(j["inputs"][0]["type"], "float32[3x4x5]");
  EXPECT_EQ(j["parameters"], 0);
}

TEST(Cli, ConformanceSummaryLine) {
  Output o = run_tessera("conformance --folders node --filter 'node/test_add$'");
  ASSERT_EQ(o.exit_code, 0) << o.text;
  EXPECT_NE(o.text.find("node: 1 passed, 0 failed, 0 unsupported"), std::string::npos) << o.text;
}

}  // namespace
}  // namespace tessera
