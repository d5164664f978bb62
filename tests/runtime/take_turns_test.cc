// take_turns, the schedule by which whole-model placements are timed side by side, on a virtual
// clock: contenders of known cost on a machine that slows down now and then.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <vector>

#include "runtime/optimizer.h"

namespace tessera {
namespace {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// A machine whose runs take `cost[i]` seconds, times `slowdown` while slow(now) holds; now moves
// on by each run. `fails_at`: contender i's run number at which it fails (-1: never).
struct VirtualMachine {
  std::vector<double> cost;
  std::function<bool(double)> slow;
  double slowdown = 2.0;
  double now = 0;
  std::vector<int> runs;
  std::vector<int> fails_at;

  std::optional<double> run(int i) {
    if (runs.empty()) runs.assign(cost.size(), 0), fails_at.resize(cost.size(), -1);
    if (runs[i]++ == fails_at[i]) return std::nullopt;
    const double seconds = cost[i] * (slow(now) ? slowdown : 1.0);
    now += seconds;
    return seconds;
  }
};

MeasureOptions one_second() {
  MeasureOptions o;
  o.warmup_runs = 1;
  o.min_runs = 5;
  o.min_total_seconds = 1.0;
  o.max_runs = 100000;
  return o;
}

// A neighbour that takes half the machine during part of every period: a placement whose turns
// kept falling into those parts would look up to 2x slower than an identical one.
TEST(TakeTurns, IdenticalContendersMeasureAlikeOnAMachineThatSlowsDownPeriodically) {
  for (double period : {0.1, 0.2, 0.25, 0.4, 1.0}) {
    for (double cost : {0.0004, 0.002, 0.008}) {
      VirtualMachine m;
      m.cost.assign(4, cost);
      m.slow = [period](double t) { return std::fmod(t, period) >= 0.6 * period; };  // slow 40%
      const auto times = take_turns(4, [&](int i) { return m.run(i); }, one_second());
      std::vector<double> medians;
      for (const auto& t : times) medians.push_back(median_of(t));
      const auto [lo, hi] = std::minmax_element(medians.begin(), medians.end());
      EXPECT_LE(*hi / *lo, 1.05) << "period " << period << " s, runs of " << cost * 1e3 << " ms";
    }
  }
}

// One long slow spell covering most of the time: every contender takes a like share of it, so
// one that is 10% slower is still measured slower than the others.
TEST(TakeTurns, ASlowerContenderStaysSlowerThroughASlowSpell) {
  for (double start : {0.5, 1.0, 2.0}) {
    VirtualMachine m;
    m.cost = {0.001, 0.001, 0.0011};
    m.slow = [start](double t) { return t >= start && t < start + 1.2; };
    const auto times = take_turns(3, [&](int i) { return m.run(i); }, one_second());
    const double a = median_of(times[0]), b = median_of(times[1]), slower = median_of(times[2]);
    EXPECT_GT(slower, 1.05 * std::max(a, b)) << "spell from " << start << " s";
    EXPECT_LE(std::max(a, b) / std::min(a, b), 1.05) << "spell from " << start << " s";
  }
}

TEST(TakeTurns, MeetsTheMinimumsInShortBlocksAndDropsAContenderThatFails) {
  VirtualMachine m;
  m.cost = {0.0005, 0.03, 0.0005, 0.1};
  m.slow = [](double) { return false; };
  m.fails_at = {-1, -1, 7, -1};  // its 8th run (after the warm-up and a few timed ones) fails
  std::vector<int> order;
  const auto times = take_turns(4, [&](int i) { order.push_back(i); return m.run(i); }, one_second());
  // Quick runs: at least a second of them; slow ones: the minimum time too.
  EXPECT_GE(times[0].size() * 0.0005, 1.0 - 1e-9);
  EXPECT_GE(times[1].size() * 0.03, 1.0 - 1e-9);
  EXPECT_LT(times[2].size(), 7u);  // nothing after the failure
  // Untimed runs: one per block of quick runs; for 100 ms runs only the first block has one.
  EXPECT_GT(m.runs[0], static_cast<int>(times[0].size()) + 1 + 20);
  EXPECT_EQ(m.runs[3], static_cast<int>(times[3].size()) + 2);  // the warm-up and one untimed run
  // Blocks stay short: contender 0 never runs more than about kMinBlockSeconds (plus its
  // untimed run) before another takes its turn, and a 30 ms contender runs at most
  // 1 + kRunsPerBlock times in a row (the last stretch, when the others are done, aside).
  int longest0 = 0, longest1 = 0;
  for (size_t k = 0; k < order.size();) {
    size_t e = k;
    while (e < order.size() && order[e] == order[k]) ++e;
    if (e == order.size()) break;
    const int len = static_cast<int>(e - k);
    if (order[k] == 0) longest0 = std::max(longest0, len);
    if (order[k] == 1) longest1 = std::max(longest1, len);
    k = e;
  }
  EXPECT_LE(longest0, static_cast<int>(kMinBlockSeconds / 0.0005) + 2);
  EXPECT_LE(longest1, 1 + static_cast<int>(kRunsPerBlock));
}

}  // namespace
}  // namespace tessera
