// The `tessera` command-line program: thin wrappers that parse flags and call the library.
#pragma once

#include <string>

#include "ir/status.h"

namespace CLI {
class App;
}

namespace tessera {

// Entry point of the `tessera` binary; returns the process exit code
// (0 success, 1 a user error such as a bad model or flag, 2 a failed check).
int run_cli(int argc, char** argv);

// Whether `path` can be written, checked by creating and removing it (or opening it for append
// when it exists): commands that write their result after minutes of work call this first, so a
// mistyped directory fails at once rather than after the work is done.
Status check_writable(const std::string& path, const std::string& what);

// Each subcommand adds itself to the app; when chosen, its callback stores its exit code.
void add_run_command(CLI::App& app, int& exit_code);
void add_info_command(CLI::App& app, int& exit_code);
void add_conformance_command(CLI::App& app, int& exit_code);
void add_backends_command(CLI::App& app, int& exit_code);
void add_optimize_command(CLI::App& app, int& exit_code);
void add_bench_command(CLI::App& app, int& exit_code);
void add_generate_command(CLI::App& app, int& exit_code);
void add_gguf_create_command(CLI::App& app, int& exit_code);
void add_serve_command(CLI::App& app, int& exit_code);
void add_bench_serve_command(CLI::App& app, int& exit_code);

}  // namespace tessera
