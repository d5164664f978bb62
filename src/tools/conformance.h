// The ONNX backend test-data runner behind `tessera conformance`.
#pragma once

#include <string>
#include <vector>

#include "ir/status.h"

namespace tessera {

struct ConformanceOptions {
  std::string root = "/usr/share/libonnx-testdata/data";
  std::vector<std::string> folders = {"node", "pytorch-converted", "pytorch-operator", "simple"};
  std::string filter;          // regex on "folder/test_name"; empty runs all
  double rtol = 1e-3, atol = 1e-7;
  int timeout_seconds = 120;   // per case
  bool isolate = true;         // run each case in a child process (a crash fails only that case)
};

struct ConformanceCase {
  std::string folder;
  std::string name;    // test_add
  std::string result;  // "pass", "fail", "unsupported"
  std::string detail;  // why it failed or is unsupported
};

Result<std::vector<ConformanceCase>> run_conformance(const ConformanceOptions& opts,
                                                     void (*progress)(const ConformanceCase&) = nullptr);

// Runs one case (a folder holding model.onnx and test_data_set_*) in this process.
ConformanceCase run_conformance_case(const std::string& dir, const ConformanceOptions& opts);

}  // namespace tessera
