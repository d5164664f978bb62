#include "partition/candidate.h"

namespace tessera {

std::string Candidate::describe(const Graph& g) const {
  std::string label;
  for (int n : nodes) label += (label.empty() ? "" : "+") + g.node(n).op_type;
  return (backend ? backend->name() : "?") + ":" + label + " " + nodes.to_string();
}

bool CandidateSet::add(Candidate c) {
  Key key{c.nodes, c.backend};
  if (index_.count(key)) return false;
  index_.emplace(std::move(key), all_.size());
  all_.push_back(std::move(c));
  return true;
}

bool CandidateSet::contains(const NodeSet& nodes, const Backend* backend) const {
  return index_.count(Key{nodes, backend}) != 0;
}

std::vector<Candidate> dedupe_candidates(std::vector<Candidate> cs) {
  CandidateSet set;
  for (Candidate& c : cs) set.add(std::move(c));
  return std::move(set).take();
}

}  // namespace tessera
