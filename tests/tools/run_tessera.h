// Runs the `tessera` binary (TESSERA_BINARY) with arguments through the shell: exit code and
// stdout + stderr, for the end-to-end CLI tests.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace tessera::testing {

struct CliOutput {
  int exit_code;
  std::string text;  // stdout + stderr
};

// `env`: a prefix for the command line, such as "env -u NAME OTHER=value" ("" for none).
inline CliOutput run_tessera(const std::string& args, const std::string& env = "") {
  const std::string cmd = (env.empty() ? "" : env + " ") + std::string(TESSERA_BINARY) + " " + args + " 2>&1";
  CliOutput o{-1, ""};
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return o;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) o.text.append(buf, n);
  const int st = pclose(p);
  o.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return o;
}

}  // namespace tessera::testing
