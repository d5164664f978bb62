#include "partition/cached_estimator.h"

#include <cstdio>

#include "partition/structural_hash.h"

namespace tessera {

CachedEstimator::CachedEstimator(const Graph& g, CostDatabase* db, CostEstimator& inner,
                                 int threads, std::string cpu)
    : graph_(g), db_(db), inner_(inner), threads_(threads), cpu_(std::move(cpu)) {}

CostKey CachedEstimator::key(const Candidate& c) const {
  CostKey k;
  k.subgraph_hash = structural_hash_hex(SubGraph(graph_, c.nodes));
  k.backend = c.backend ? c.backend->name() : "";
  k.backend_version = c.backend ? c.backend->version() : "";
  k.threads = threads_;
  k.cpu = cpu_;
  return k;
}

void CachedEstimator::report(const Status& st) {
  if (errors_++ == 0) {
    std::fprintf(stderr, "tessera: warning: %s; measuring without the cost database\n",
                 st.to_string().c_str());
  }
}

Cost CachedEstimator::cost(const Candidate& c) {
  if (!db_) {
    ++misses_;
    return inner_.cost(c);
  }
  CostKey k = key(c);
  auto stored = db_->lookup(k);
  if (stored.ok() && stored->has_value()) {
    ++hits_;
    return **stored;
  }
  if (!stored.ok()) report(stored.status());
  ++misses_;
  Cost cost = inner_.cost(c);
  if (cost.measured) {
    Status st = db_->store(k, cost, SubGraph(graph_, c.nodes).label());
    if (!st.ok()) report(st);
  }
  return cost;
}

}  // namespace tessera
