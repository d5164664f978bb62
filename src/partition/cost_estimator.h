// Cost estimation: how long a candidate takes when it runs as one kernel on its backend.
//
// One interface for every estimator: the measuring one (compiles and times a candidate on real
// intermediate tensors), the cost database in front of it (cached_estimator.h), and the mock one
// the tests use (mock_estimator.h). An estimator never fails: a candidate that does not build,
// computes wrong results or was not measured comes back as an invalid Cost with the reason, which
// the search skips and the report lists.
#pragma once

#include <string>

#include "partition/candidate.h"

namespace tessera {

struct Cost {
  double seconds = 0;  // the typical (median) run time of the kernel
  double noise = 0;    // spread of the measurements, in seconds (0 when not measured repeatedly)
  bool valid = true;
  std::string reason;  // why not valid
  // False when the estimator declined to measure (a measurement cap or budget): the cost is
  // unknown rather than wrong, so it is never stored in the cost database.
  bool measured = true;

  static Cost of(double seconds, double noise = 0) { return Cost{seconds, noise, true, {}, true}; }
  static Cost invalid(std::string reason) { return Cost{0, 0, false, std::move(reason), true}; }
  static Cost unmeasured(std::string reason) { return Cost{0, 0, false, std::move(reason), false}; }
  // "1.234 ms +- 0.010" or "invalid: reason".
  std::string to_string() const;
};

class CostEstimator {
 public:
  virtual ~CostEstimator() = default;
  // The cost of `c` (nodes of the graph the estimator was made for) on c.backend.
  virtual Cost cost(const Candidate& c) = 0;
};

}  // namespace tessera
