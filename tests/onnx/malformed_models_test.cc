// Runs the CLI (`tessera info` and `tessera run`) on every model of tests/data/malformed/ and
// checks that each fails cleanly: exit code 1, an "error: " line on stderr with the expected
// words (tests/data/malformed/expected_errors.txt), and no crash or sanitizer report.
//
// This is a gtest (label `unit`) rather than a plain CTest script so that it also runs in the
// sanitizer build, where the CLI it spawns is instrumented too, and so that expectations that
// depend on an op can ask the op registry whether that op exists yet.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ops/op_registry.h"

namespace tessera {
namespace {

const std::string kCorpusDir = std::string(TESSERA_SOURCE_DIR) + "/tests/data/malformed";

struct Expectation {
  std::string file;
  std::vector<std::string> needs_ops;
  std::vector<std::string> fragments;
};

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t");
  if (a == std::string::npos) return "";
  size_t b = s.find_last_not_of(" \t\r");
  return s.substr(a, b - a + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep)) {
    item = trim(item);
    if (!item.empty()) parts.push_back(item);
  }
  return parts;
}

std::vector<Expectation> load_expectations() {
  std::vector<Expectation> rows;
  std::ifstream f(kCorpusDir + "/expected_errors.txt");
  std::string line;
  while (std::getline(f, line)) {
    if (trim(line).empty() || trim(line)[0] == '#') continue;
    auto first = line.find('|');
    auto second = first == std::string::npos ? first : line.find('|', first + 1);
    if (second == std::string::npos) continue;  // malformed row: TableCoversCorpus reports it
    Expectation e;
    e.file = trim(line.substr(0, first));
    std::string ops = trim(line.substr(first + 1, second - first - 1));
    if (ops != "-") e.needs_ops = split(ops, ',');
    e.fragments = split(line.substr(second + 1), ';');
    rows.push_back(std::move(e));
  }
  return rows;
}

struct ProcessResult {
  bool exited = false;  // false: killed by a signal
  int exit_code = -1;
  int signal = 0;
  std::string stderr_text;
};

// Runs `argv` with stdout discarded and stderr captured.
ProcessResult run_process(const std::vector<std::string>& argv) {
  ProcessResult r;
  char path[] = "/tmp/tessera-malformed-stderr-XXXXXX";
  int err_fd = mkstemp(path);
  if (err_fd < 0) return r;
  pid_t pid = fork();
  if (pid == 0) {
    int null_fd = open("/dev/null", O_WRONLY);
    dup2(null_fd, STDOUT_FILENO);
    dup2(err_fd, STDERR_FILENO);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  if (pid > 0) waitpid(pid, &status, 0);
  close(err_fd);
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  r.stderr_text = ss.str();
  unlink(path);
  if (pid > 0 && WIFEXITED(status)) {
    r.exited = true;
    r.exit_code = WEXITSTATUS(status);
  } else if (pid > 0 && WIFSIGNALED(status)) {
    r.signal = WTERMSIG(status);
  }
  return r;
}

class MalformedModel : public ::testing::TestWithParam<Expectation> {};

TEST_P(MalformedModel, CliFailsCleanly) {
  const Expectation& e = GetParam();
  std::vector<std::string> fragments = e.fragments;
  for (const auto& op : e.needs_ops) {
    if (!OpRegistry::global().find("", op)) {
      fragments = {"unsupported op '" + op + "'"};
      break;
    }
  }
  const std::string model = kCorpusDir + "/" + e.file;
  ASSERT_TRUE(std::filesystem::exists(model)) << model << " is missing: run generate.sh";
  for (const char* command : {"info", "run"}) {
    SCOPED_TRACE(std::string("tessera ") + command + " " + e.file);
    ProcessResult r = run_process({TESSERA_BINARY, command, model});
    ASSERT_TRUE(r.exited) << "killed by signal " << r.signal << "\n" << r.stderr_text;
    EXPECT_EQ(r.exit_code, 1) << r.stderr_text;
    EXPECT_EQ(r.stderr_text.rfind("error: ", 0), 0u) << r.stderr_text;
    for (const char* crash_sign :
         {"Sanitizer", "runtime error:", "check failed", "terminate called"}) {
      EXPECT_EQ(r.stderr_text.find(crash_sign), std::string::npos) << r.stderr_text;
    }
    for (const auto& fragment : fragments) {
      EXPECT_NE(r.stderr_text.find(fragment), std::string::npos)
          << "expected '" << fragment << "' in:\n"
          << r.stderr_text;
    }
  }
}

std::string row_name(const ::testing::TestParamInfo<Expectation>& info) {
  std::string name = info.param.file.substr(0, info.param.file.rfind('.'));
  std::replace_if(
      name.begin(), name.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); },
      '_');
  return name;
}

INSTANTIATE_TEST_SUITE_P(Corpus, MalformedModel, ::testing::ValuesIn(load_expectations()),
                         row_name);

// Every corpus file has a row and every row names a corpus file.
TEST(MalformedCorpus, TableCoversCorpus) {
  auto rows = load_expectations();
  ASSERT_GE(rows.size(), 12u);
  std::set<std::string> in_table;
  for (const auto& e : rows) {
    EXPECT_TRUE(in_table.insert(e.file).second) << e.file << " has two rows";
    EXPECT_FALSE(e.fragments.empty()) << e.file << " has no expected fragment";
    EXPECT_TRUE(std::filesystem::exists(kCorpusDir + "/" + e.file)) << e.file;
  }
  for (const auto& entry : std::filesystem::directory_iterator(kCorpusDir)) {
    std::string name = entry.path().filename().string();
    if (entry.path().extension() != ".onnx" || name.rfind("valid_", 0) == 0) continue;
    EXPECT_TRUE(in_table.count(name)) << name << " has no row in expected_errors.txt";
  }
}

}  // namespace
}  // namespace tessera
