#include <unistd.h>

#include <cstdlib>

#include "tools/cli.h"

namespace {

// OpenMP (oneDNN's threads, GNU libgomp) keeps an idle worker spinning for 300000 pauses by
// default (several milliseconds here) after each parallel region. A plan that hands over from
// oneDNN to kernels on other threads (tessera's pool, XNNPACK's) then runs them with a core taken
// by the spinning worker, and on a machine with any other load every barrier waits for a
// descheduled spinning thread. The passive policy (no spinning) is no cure: oneDNN's rec placement
// ran 12.8 ms instead of 6.5 ms, each primitive waking its worker from sleep. A spin of 10000
// pauses (a few hundred microseconds) keeps oneDNN's back-to-back primitives as fast as the default
// (rec 6.4 ms, det within the run-to-run noise) and frees the core soon after a hand-over.
constexpr const char* kDefaultSpinCount = "10000";

// libgomp reads its settings once, in its constructor, from the environment the process started
// with: glibc's own start-up resets `environ` after an executable's preinit functions run, so a
// setenv() there is lost. So, unless the user chose a policy or spin count, tessera sets the spin
// count and executes itself once more. If that fails, it goes on with libgomp's defaults.
void restart_with_openmp_spin_count(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  if (setenv("GOMP_SPINCOUNT", kDefaultSpinCount, 0) != 0) return;
  execv("/proc/self/exe", argv);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 0) restart_with_openmp_spin_count(argv);
  return tessera::run_cli(argc, argv);
}
