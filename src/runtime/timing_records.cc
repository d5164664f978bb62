#include "runtime/timing_records.h"

#include <cstdio>
#include <set>

#include "partition/plan.h"
#include "partition/structural_hash.h"

namespace tessera {

namespace {

std::string hex(uint64_t h) {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace

TimingRecords::TimingRecords(CostDatabase* db, const Graph& g, int threads, bool recall)
    : db_(db), g_(g), threads_(threads), recall_(recall), model_(db ? graph_hash(g) : ""), cpu_(db ? cpu_model() : "") {}

std::string TimingRecords::placement_id(const Result<std::vector<Partition>>& parts) const {
  if (!parts.ok()) {
    const std::string& why = parts.status().message();
    return "x" + hex(fnv1a64(why.data(), why.size()));
  }
  uint64_t h = fnv1a64(nullptr, 0);
  for (const Partition& p : *parts) {
    const std::string& name = p.backend->name();
    const std::vector<int> nodes = p.nodes.to_vector();
    h = fnv1a64(name.data(), name.size() + 1, h);  // with its terminating NUL: names stay apart
    const int count = static_cast<int>(nodes.size());
    h = fnv1a64(&count, sizeof count, h);
    h = fnv1a64(nodes.data(), nodes.size() * sizeof(int), h);
  }
  return hex(h);
}

std::string TimingRecords::versions(const std::vector<Result<std::vector<Partition>>>& placements) const {
  std::set<std::string> seen = {ref_backend().name() + " " + ref_backend().version()};
  for (const auto& parts : placements)
    if (parts.ok())
      for (const Partition& p : *parts) seen.insert(p.backend->name() + " " + p.backend->version());
  std::string out;
  for (const std::string& v : seen) out += (out.empty() ? "" : " | ") + v;
  return out;
}

CostKey TimingRecords::key(const std::string& what, const std::string& versions) const {
  return CostKey{"timing:" + model_ + ":" + what, "placement", versions, threads_, cpu_};
}

std::optional<Cost> TimingRecords::lookup(const CostKey& key) {
  if (!db_ || !recall_) return std::nullopt;
  auto stored = db_->lookup(key);
  if (!stored.ok() || !*stored) return std::nullopt;
  return **stored;
}

void TimingRecords::store(const CostKey& key, const Cost& cost) {
  if (db_) (void)db_->store(key, cost, "whole-model timing");
}

Result<PlanTiming> TimingRecords::time_partitions(const std::vector<Partition>& partitions,
                                                  const std::vector<Tensor>& inputs, const MeasureOptions& options,
                                                  const std::vector<int>& owner, int num_owners, bool retake) {
  last_recalled_ = false;
  // By the number of owners too: a timing kept without per-owner times is not replaced by one with.
  const std::string id = "e2e:" + placement_id(partitions) + ":" + std::to_string(num_owners) +
                        (options.layout == TensorLayout::kChannelsLast ? ":channels-last" : ""),
                    vers = versions({partitions});
  std::vector<int> on_ref;  // nodes no partition holds
  {
    std::vector<bool> held(g_.num_nodes(), false);
    for (const Partition& p : partitions)
      for (int n : p.nodes) held[n] = true;
    for (int n = 0; n < g_.num_nodes(); ++n)
      if (!held[n]) on_ref.push_back(n);
  }
  if (db_ && !retake) {
    if (std::optional<Cost> total = lookup(key(id + ":total", vers))) {
      if (!total->valid) {
        ++recalled_;
        last_recalled_ = true;
        return internal_error(total->reason);
      }
      PlanTiming t;
      t.total = *total;
      t.per_owner.assign(num_owners, 0.0);
      t.per_node.assign(g_.num_nodes(), 0.0);
      bool complete = true;
      for (int o = 0; complete && o < num_owners; ++o) {
        auto c = lookup(key(id + ":o" + std::to_string(o), vers));
        complete = c && c->valid;
        if (complete) t.per_owner[o] = c->seconds;
      }
      for (size_t i = 0; complete && i < on_ref.size(); ++i) {
        auto c = lookup(key(id + ":n" + std::to_string(on_ref[i]), vers));
        complete = c && c->valid;
        if (complete) t.per_node[on_ref[i]] = c->seconds;
      }
      if (complete) {
        ++recalled_;
        last_recalled_ = true;
        return t;
      }
    }
  }
  ++taken_;
  auto timed = tessera::time_partitions(g_, partitions, inputs, options, owner, num_owners);
  if (!timed.ok()) {
    store(key(id + ":total", vers), Cost::invalid(timed.status().message()));
    return timed;
  }
  store(key(id + ":total", vers), timed->total);
  for (int o = 0; o < num_owners; ++o) store(key(id + ":o" + std::to_string(o), vers), Cost::of(timed->per_owner[o]));
  for (int n : on_ref) store(key(id + ":n" + std::to_string(n), vers), Cost::of(timed->per_node[n]));
  return timed;
}

std::vector<Cost> TimingRecords::time_in_turns(const std::vector<Result<std::vector<Partition>>>& placements,
                                               const std::vector<Tensor>& inputs, const MeasureOptions& options,
                                               const std::string& purpose, const std::vector<TensorLayout>& layouts) {
  std::string ids = purpose;
  for (size_t i = 0; i < placements.size(); ++i) {
    ids += ":" + placement_id(placements[i]);
    if ((i < layouts.size() ? layouts[i] : options.layout) == TensorLayout::kChannelsLast) ids += ":channels-last";
  }
  // "turns2": timings in take_turns' short blocks; those of its first schedule (50 ms blocks,
  // which a neighbour's on-off cycle could skew) are taken again.
  const std::string round = "turns2:" + hex(fnv1a64(ids.data(), ids.size())), vers = versions(placements);
  if (db_) {
    std::vector<Cost> recalled;
    for (size_t i = 0; i < placements.size(); ++i) {
      std::optional<Cost> c = lookup(key(round + ":" + std::to_string(i), vers));
      if (!c) break;
      recalled.push_back(*c);
    }
    if (recalled.size() == placements.size()) {
      ++recalled_;
      last_recalled_ = true;
      return recalled;
    }
  }
  ++taken_;
  last_recalled_ = false;
  std::vector<Cost> costs = tessera::time_in_turns(g_, placements, inputs, options, layouts);
  for (size_t i = 0; i < costs.size(); ++i) store(key(round + ":" + std::to_string(i), vers), costs[i]);
  return costs;
}

}  // namespace tessera
