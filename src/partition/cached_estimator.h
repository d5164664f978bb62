// A cost estimator in front of another, backed by the cost database: a candidate whose key
// (structural hash, backend and version, threads, CPU) is stored costs nothing; otherwise the
// inner estimator measures it and the result is stored. Unmeasured costs (a cap, a budget) are
// passed through and not stored. Database errors are reported once on stderr and then treated
// as "not known": a broken cache slows the optimizer down, it never stops it.
#pragma once

#include <string>

#include "partition/cost_db.h"
#include "partition/cost_estimator.h"

namespace tessera {

class CachedEstimator final : public CostEstimator {
 public:
  // `db` may be null (no persistence: every cost comes from `inner`).
  CachedEstimator(const Graph& g, CostDatabase* db, CostEstimator& inner, int threads,
                  std::string cpu = cpu_model());

  Cost cost(const Candidate& c) override;

  // The database key of `c`.
  CostKey key(const Candidate& c) const;
  int hits() const { return hits_; }      // answered from the database
  int misses() const { return misses_; }  // passed to the inner estimator
  int errors() const { return errors_; }  // database errors (lookups or stores)

 private:
  void report(const Status& st);

  const Graph& graph_;
  CostDatabase* db_;
  CostEstimator& inner_;
  int threads_;
  std::string cpu_;
  int hits_ = 0, misses_ = 0, errors_ = 0;
};

}  // namespace tessera
