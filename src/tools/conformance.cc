#include "tools/conformance.h"

#include "ir/tensor_compare.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <map>
#include <regex>
#include <thread>

#include "onnx/onnx_import.h"
#include "runtime/session.h"

namespace tessera {
namespace fs = std::filesystem;

namespace {

// Cases whose stored outputs need a looser bound than rtol 1e-3 / atol 1e-7, and why.
struct Tolerance {
  const char* name;
  double rtol, atol;
  const char* why;
};
constexpr Tolerance kLooser[] = {
    {"test_layer_normalization", 1e-3, 1e-5, "float32 mean/variance over small values: absolute error near zero"},
    {"test_gelu_tanh", 1e-3, 1e-6, "tanh approximation evaluated in float32"},
};

std::vector<std::string> sorted_files(const fs::path& dir, const std::string& prefix) {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) == 0) files.push_back(e.path().string());
  }
  // input_10.pb after input_9.pb
  std::sort(files.begin(), files.end(), [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  });
  return files;
}

// ONNX 1.12's test data stores bfloat16 tensors as uint16 bit patterns: view them as bfloat16
// where the model declares bfloat16.
Tensor as_declared(Tensor t, DType declared) {
  if (declared == DType::kBFloat16 && t.dtype() == DType::kUint16) return Tensor(DType::kBFloat16, t.dims(), t.storage());
  return t;
}

ConformanceCase classify(ConformanceCase c, const Status& st, const std::string& stage) {
  c.result = st.code() == StatusCode::kUnimplemented ? "unsupported" : "fail";
  c.detail = stage + ": " + st.to_string();
  return c;
}

}  // namespace

ConformanceCase run_conformance_case(const std::string& dir, const ConformanceOptions& opts) {
  ConformanceCase c;
  fs::path p(dir);
  c.name = p.filename().string();
  c.folder = p.parent_path().filename().string();
  double rtol = opts.rtol, atol = opts.atol;
  for (const auto& t : kLooser)
    if (c.name == t.name) rtol = t.rtol, atol = t.atol;

  SessionOptions so;
  auto session = Session::load((p / "model.onnx").string(), so);
  if (!session.ok()) return classify(c, session.status(), "load");
  auto& s = **session;
  std::vector<std::string> sets;
  for (const auto& e : fs::directory_iterator(p))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path().string());
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return classify(c, unimplemented("no test_data_set folders"), "data");

  auto inputs_decl = s.input_types();
  auto outputs_decl = s.output_types();
  for (const auto& set : sets) {
    std::map<std::string, Tensor> inputs;
    auto in_files = sorted_files(set, "input_");
    // Input files come in graph-input order (which tells a sequence or optional file apart);
    // they bind by the proto's name when it has one, else by position.
    for (size_t i = 0; i < in_files.size(); ++i) {
      if (i >= inputs_decl.size()) return classify(c, invalid_argument("more input files than graph inputs"), "input");
      auto named = read_value_proto_file(in_files[i], inputs_decl[i].second.dtype);
      if (!named.ok()) return classify(c, named.status(), "input");
      std::string key = named->first.empty() ? inputs_decl[i].first : named->first;
      DType declared = DType::kUndefined;
      for (const auto& [n, type] : inputs_decl)
        if (n == key) declared = type.dtype;
      inputs[key] = as_declared(std::move(named->second), declared);
    }
    auto out = s.run(inputs);
    if (!out.ok()) return classify(c, out.status(), "run");
    auto out_files = sorted_files(set, "output_");
    if (out_files.size() != outputs_decl.size()) {
      return classify(c, invalid_argument("test has " + std::to_string(out_files.size()) + " outputs, model " +
                                          std::to_string(outputs_decl.size())), "compare");
    }
    for (size_t i = 0; i < out_files.size(); ++i) {
      auto want = read_value_proto_file(out_files[i], outputs_decl[i].second.dtype);
      if (!want.ok()) return classify(c, want.status(), "expected output");
      const std::string& name = outputs_decl[i].first;
      Status st = compare_tensors(out->at(name), as_declared(want->second, outputs_decl[i].second.dtype), rtol, atol);
      if (!st.ok()) {
        c.result = "fail";
        c.detail = "output '" + name + "' (" + fs::path(set).filename().string() + "): " + st.message();
        return c;
      }
    }
  }
  c.result = "pass";
  return c;
}

namespace {

// Runs a case in a child process; the child writes "result\tdetail" to a pipe.
ConformanceCase run_isolated(const std::string& dir, const ConformanceOptions& opts) {
  ConformanceCase c;
  fs::path p(dir);
  c.name = p.filename().string();
  c.folder = p.parent_path().filename().string();
  int fds[2];
  if (pipe(fds) != 0) return run_conformance_case(dir, opts);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return run_conformance_case(dir, opts);
  }
  if (pid == 0) {
    close(fds[0]);
    alarm(static_cast<unsigned>(opts.timeout_seconds));
    ConformanceCase r = run_conformance_case(dir, opts);
    std::string msg = r.result + "\t" + r.detail;
    ssize_t off = 0;
    while (off < static_cast<ssize_t>(msg.size())) {
      ssize_t w = write(fds[1], msg.data() + off, msg.size() - off);
      if (w <= 0) break;
      off += w;
    }
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  char buf[4096];
  ssize_t r;
  while ((r = read(fds[0], buf, sizeof buf)) > 0) msg.append(buf, static_cast<size_t>(r));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  auto tab = msg.find('\t');
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && tab != std::string::npos) {
    c.result = msg.substr(0, tab);
    c.detail = msg.substr(tab + 1);
  } else if (WIFSIGNALED(status)) {
    c.result = "fail";
    c.detail = WTERMSIG(status) == SIGALRM ? "timed out" : std::string("crashed: ") + strsignal(WTERMSIG(status));
  } else {
    c.result = "fail";
    c.detail = "child process failed";
  }
  return c;
}

}  // namespace

Result<std::vector<ConformanceCase>> run_conformance(const ConformanceOptions& opts,
                                                     void (*progress)(const ConformanceCase&)) {
  std::error_code ec;
  if (!fs::is_directory(opts.root, ec)) return not_found("test data folder '" + opts.root + "' does not exist");
  std::optional<std::regex> re;
  if (!opts.filter.empty()) {
    try {
      re.emplace(opts.filter);
    } catch (const std::regex_error& e) {
      return invalid_argument("bad --filter regex: " + std::string(e.what()));
    }
  }
  std::vector<ConformanceCase> results;
  for (const auto& folder : opts.folders) {
    fs::path dir = fs::path(opts.root) / folder;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<std::string> cases;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_directory() && fs::exists(e.path() / "model.onnx")) cases.push_back(e.path().string());
    std::sort(cases.begin(), cases.end());
    for (const auto& c : cases) {
      std::string key = folder + "/" + fs::path(c).filename().string();
      if (re && !std::regex_search(key, *re)) continue;
      ConformanceCase r = opts.isolate ? run_isolated(c, opts) : run_conformance_case(c, opts);
      if (progress) progress(r);
      results.push_back(std::move(r));
    }
  }
  return results;
}

}  // namespace tessera
