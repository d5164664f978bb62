// `tessera conformance [DIR]`: run the ONNX backend test data and report pass/fail/unsupported.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "tools/cli.h"
#include "tools/conformance.h"

namespace tessera {
namespace {

struct ConformanceCliOptions {
  ConformanceOptions run;
  bool json = false;
  bool verbose = false;
  std::string expect_file;  // fail if any case listed here does not pass
  std::string write_expect;  // write the passing cases here
};

bool g_verbose = false;
void print_progress(const ConformanceCase& c) {
  if (g_verbose || c.result == "fail") {
    std::fprintf(stderr, "%-12s %s/%s%s%s\n", c.result.c_str(), c.folder.c_str(), c.name.c_str(),
                 c.detail.empty() ? "" : "  ", c.detail.c_str());
  }
}

int run(ConformanceCliOptions& o) {
  g_verbose = o.verbose;
  auto results = run_conformance(o.run, o.json ? nullptr : print_progress);
  if (!results.ok()) {
    std::fprintf(stderr, "error: %s\n", results.status().to_string().c_str());
    return 1;
  }
  std::map<std::string, std::array<int, 3>> counts;  // folder -> pass, fail, unsupported
  std::set<std::string> passed;
  for (const auto& c : *results) {
    auto& k = counts[c.folder];
    if (c.result == "pass") {
      ++k[0];
      passed.insert(c.folder + "/" + c.name);
    } else if (c.result == "fail") {
      ++k[1];
    } else {
      ++k[2];
    }
  }
  int exit_code = 0;
  std::vector<std::string> regressions;
  if (!o.expect_file.empty()) {
    std::ifstream f(o.expect_file);
    if (!f) {
      std::fprintf(stderr, "error: cannot read expected-pass list '%s'\n", o.expect_file.c_str());
      return 1;
    }
    std::set<std::string> ran;
    for (const auto& c : *results) ran.insert(c.folder + "/" + c.name);
    std::string line;
    while (std::getline(f, line)) {
      if (line.empty() || line[0] == '#') continue;
      if (ran.count(line) && !passed.count(line)) regressions.push_back(line);
      if (!ran.count(line) && o.run.filter.empty()) regressions.push_back(line + " (missing)");
    }
    if (!regressions.empty()) exit_code = 2;
  }
  if (!o.write_expect.empty()) {
    std::ofstream f(o.write_expect);
    f << "# ONNX backend test cases that must keep passing (tessera conformance --expect).\n"
         "# The list may only grow.\n";
    for (const auto& p : passed) f << p << "\n";
  }
  if (o.json) {
    nlohmann::json j;
    for (const auto& c : *results) j["cases"].push_back({{"folder", c.folder}, {"name", c.name}, {"result", c.result}, {"detail", c.detail}});
    for (const auto& [folder, k] : counts) j["summary"][folder] = {{"passed", k[0]}, {"failed", k[1]}, {"unsupported", k[2]}};
    j["regressions"] = regressions;
    std::printf("%s\n", j.dump(2).c_str());
    return exit_code;
  }
  for (const auto& r : regressions) std::printf("REGRESSION %s\n", r.c_str());
  for (const auto& [folder, k] : counts) {
    std::printf("%s: %d passed, %d failed, %d unsupported\n", folder.c_str(), k[0], k[1], k[2]);
  }
  return exit_code;
}

}  // namespace

void add_conformance_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<ConformanceCliOptions>();
  CLI::App* sub = app.add_subcommand("conformance", "Run the ONNX backend test data and compare with its stored outputs");
  sub->add_option("dir", o->run.root, "Test data root holding node/, simple/, ...")->capture_default_str();
  sub->add_option("--folders", o->run.folders, "Which folders to run")->capture_default_str();
  sub->add_option("--filter", o->run.filter, "Regex on FOLDER/TEST_NAME: run only matching cases");
  sub->add_option("--rtol", o->run.rtol, "Relative tolerance")->capture_default_str();
  sub->add_option("--atol", o->run.atol, "Absolute tolerance")->capture_default_str();
  sub->add_option("--timeout", o->run.timeout_seconds, "Seconds per case")->capture_default_str();
  sub->add_option("--expect", o->expect_file, "Expected-pass list: exit 2 if any of its cases no longer passes");
  sub->add_option("--write-expect", o->write_expect, "Write the passing cases to this file");
  sub->add_flag("--json", o->json, "Print per-case details as JSON");
  sub->add_flag("-v,--verbose", o->verbose, "Print every case, not only failures");
  sub->callback([o, &exit_code] { exit_code = run(*o); });
}

}  // namespace tessera
