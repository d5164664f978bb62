#include "tools/cli.h"

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace tessera {

int run_cli(int argc, char** argv) {
  CLI::App app{"tessera: an inference engine that compiles models by measurement and serves them"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "tessera 0.1.0");
  int exit_code = 0;
  add_run_command(app, exit_code);
  add_info_command(app, exit_code);
  add_conformance_command(app, exit_code);
  add_backends_command(app, exit_code);
  add_optimize_command(app, exit_code);
  add_bench_command(app, exit_code);
  add_generate_command(app, exit_code);
  add_gguf_create_command(app, exit_code);
  add_serve_command(app, exit_code);
  add_bench_serve_command(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;
  }
  return exit_code;
}

Status check_writable(const std::string& path, const std::string& what) {
  if (path.empty() || path == "-") return Status();
  std::error_code ec;  // exists() rather than opening for reading: an unreadable file still exists
  const bool existed = std::filesystem::exists(path, ec) || ec;
  std::FILE* f = std::fopen(path.c_str(), "a");  // never truncates an existing file
  if (f == nullptr) {
    return io_error("cannot write the " + what + " '" + path + "': " + std::strerror(errno));
  }
  std::fclose(f);
  if (!existed) std::remove(path.c_str());
  return Status();
}

}  // namespace tessera
