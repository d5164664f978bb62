#include <cstdlib>

#include "tools/cli.h"

namespace {

// OpenMP (oneDNN's threads, GNU libgomp) spins idle workers for a long while by default (about
// 300000 pauses). Two things suffer: a plan that hands over from oneDNN to kernels on other threads
// (tessera's pool, XNNPACK's) loses a core to the spinning worker, and on a machine with any other
// load, every barrier waits for a descheduled spinning thread: oneDNN's det placement went from
// 24-28 ms to 720 ms (median) while one compiler ran beside it, and to 37-49 ms with the passive
// policy (quiet: within the run-to-run noise of the active one). libgomp reads the policy once, in
// its own constructor, before main(); an executable's preinit functions run before any shared
// library's constructors, so the default is set there. A policy or spin count the user set wins.
void default_openmp_wait_policy(int, char**, char**) {
  if (std::getenv("OMP_WAIT_POLICY") == nullptr && std::getenv("GOMP_SPINCOUNT") == nullptr)
    setenv("OMP_WAIT_POLICY", "PASSIVE", 0);
}

__attribute__((section(".preinit_array"), used)) void (*const preinit_openmp)(int, char**, char**) =
    &default_openmp_wait_policy;

}  // namespace

int main(int argc, char** argv) { return tessera::run_cli(argc, argv); }
