// Whole-model timings kept in the cost database, like candidates' costs.
//
// The optimizer times its contenders end to end (each searched plan, each backend's placement, the
// refined placements), judges refinement moves in paired timings, and holds the finals side by
// side. Each is a measurement, so the cost database keeps it: a second optimization of the same
// model recalls them instead of timing again, and so makes the same choices. Before, a warm det
// optimization took 9.5 s, 5 of them in these timings, and its choice moved with the machine's
// noise from run to run.
//
// A timing is keyed by the model's hash, the partitions timed (their backends and nodes, in order),
// what the timing was for (the finals, a move's first or second paired timing), the versions of
// the backends involved, the thread count and the CPU, as costs are (cost_db.h). Without a
// database every timing is taken.
#pragma once

#include <string>
#include <vector>

#include "partition/cost_db.h"
#include "runtime/optimizer.h"

namespace tessera {

class TimingRecords {
 public:
  // recall false: every timing is taken again, and replaces what the database held.
  TimingRecords(CostDatabase* db, const Graph& g, int threads, bool recall = true);

  // time_partitions (optimizer.h) through the database. A recalled timing carries the total, the
  // per-owner times and the per-node times of the nodes no partition holds (those on ref); the
  // other per-node times are 0.
  // retake: timed again (and stored in place of what the database held).
  Result<PlanTiming> time_partitions(const std::vector<Partition>& partitions, const std::vector<Tensor>& inputs,
                                     const MeasureOptions& options, const std::vector<int>& owner, int num_owners,
                                     bool retake = false);
  // time_in_turns (optimizer.h) through the database: recalled when these placements were timed
  // in turns for the same `purpose` before, all of them in one round.
  std::vector<Cost> time_in_turns(const std::vector<Result<std::vector<Partition>>>& placements,
                                  const std::vector<Tensor>& inputs, const MeasureOptions& options,
                                  const std::string& purpose, const std::vector<TensorLayout>& layouts = {});

  int recalled() const { return recalled_; }  // timings answered from the database
  bool last_recalled() const { return last_recalled_; }  // the latest timing asked for was
  int taken() const { return taken_; }        // timings taken (and stored)

 private:
  // The hex hash of a placement (or of a placement that could not be made: its error).
  std::string placement_id(const Result<std::vector<Partition>>& parts) const;
  std::string versions(const std::vector<Result<std::vector<Partition>>>& placements) const;
  CostKey key(const std::string& what, const std::string& versions) const;
  std::optional<Cost> lookup(const CostKey& key);
  void store(const CostKey& key, const Cost& cost);

  CostDatabase* db_;
  const Graph& g_;
  int threads_;
  bool recall_;
  std::string model_, cpu_;
  int recalled_ = 0, taken_ = 0;
  bool last_recalled_ = false;
};

}  // namespace tessera
