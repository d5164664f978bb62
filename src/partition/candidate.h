// A candidate partition: a group of nodes one backend could compile as one kernel, and the rule
// that proposed it. Candidates of one graph may overlap; the search picks a disjoint covering.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "backends/backend.h"
#include "ir/node_set.h"

namespace tessera {

struct Candidate {
  NodeSet nodes;
  const Backend* backend = nullptr;
  std::string rule_name;  // which rule proposed it ("singleton", "combine:injective->injective")

  // "native:Conv+Relu {3,4}" for logs and reports.
  std::string describe(const Graph& g) const;
};

// Candidates of one graph without duplicates: a group of nodes for a backend appears once, under
// the name of the rule that proposed it first. Keeps insertion order (rules are deterministic,
// so candidate lists are too).
class CandidateSet {
 public:
  // Adds `c` unless the same nodes for the same backend are already in; returns whether it did.
  bool add(Candidate c);
  bool contains(const NodeSet& nodes, const Backend* backend) const;
  const std::vector<Candidate>& all() const { return all_; }
  std::vector<Candidate> take() && { return std::move(all_); }
  size_t size() const { return all_.size(); }
  const Candidate& operator[](size_t i) const { return all_[i]; }

 private:
  struct Key {
    NodeSet nodes;
    const Backend* backend;
    bool operator==(const Key& o) const { return backend == o.backend && nodes == o.nodes; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return k.nodes.hash() ^ (std::hash<const void*>()(k.backend) * 0x9e3779b97f4a7c15ull);
    }
  };
  std::vector<Candidate> all_;
  std::unordered_map<Key, size_t, KeyHash> index_;
};

// `cs` without later duplicates (same nodes and backend), order kept.
std::vector<Candidate> dedupe_candidates(std::vector<Candidate> cs);

}  // namespace tessera
