// Combiner rules: how combine_rule (rules.h) grows candidates into larger ones (Collage's
// CombinerRule). Each round, every combiner looks at the current candidates and adds unions; the
// rounds repeat until a round adds nothing.
//
//   by_kind_combiner({(up, down), ...})  unions an upstream candidate with a downstream one it
//        feeds when up's kind <= `up` and down's kind <= `down` for one of the pairs (TVM's
//        FuseOps: out-elementwise-fusable->broadcast, broadcast->reduction,
//        injective->injective)
//   tuple_arg_combiner()   a variadic node (Concat, Sum, ...) of an injective-or-less candidate
//        together with one injective-or-less producer candidate per input, all at once
//   multi_output_combiner()  a node with several used outputs (Split, TopK, ...) together with
//        one injective-or-less consumer candidate per consumer, all at once
//   accepted_pair_combiner(kind)  unions an upstream candidate of exactly `kind` with a
//        downstream one of that kind it feeds, when the backend accepts the union as one kernel
//        (native's depthwise group followed by its 1x1 group: two convolutions TVM's rules never
//        fuse)
//   constant_combiner()    absorbs the producers of a candidate's inputs that compute from
//        constants only (a Reshape or DequantizeLinear of a weight)
//
// Unions are only formed from disjoint, touching candidates; a union that is not convex or is
// deeper than the depth limit is dropped at once (it cannot become a valid partition by itself,
// and keeping it would let the set blow up). Exits and taps are left to only_valid_rule, since a
// group with two exits may still grow into one with a single exit.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ir/subgraph.h"
#include "partition/candidate.h"
#include "partition/subgraph_check.h"

namespace tessera {

// The growing candidate set of one combine_rule run, with what combiners need to know about each
// candidate.
class CombineContext {
 public:
  CombineContext(const Graph& g, const Backend& backend, const Reachability& reach, int max_depth,
                 size_t max_candidates);

  const Graph& graph() const { return *graph_; }
  const Backend& backend() const { return *backend_; }
  size_t size() const { return set_.size(); }
  const Candidate& candidate(size_t i) const { return set_[i]; }
  const SubGraph& subgraph(size_t i) const { return subgraphs_[i]; }
  OpKind kind(size_t i) const { return kinds_[i]; }
  // Candidates at or above this index were added in the previous round; pairs of older ones
  // have all been tried already.
  size_t first_new() const { return first_new_; }
  // Whether node n computes from constants only (all its inputs are constants or such nodes).
  bool computes_constant(int n) const { return constant_node_[n] != 0; }
  bool full() const { return set_.size() >= max_candidates_; }

  // Adds a candidate as is (the combine rule's starting set).
  bool add(Candidate c);
  // Adds the union of the candidates `parts` plus `extra` nodes, named `rule_name`, unless it is
  // already there, not convex, too deep, or the set is full.
  bool add_union(const std::vector<size_t>& parts, const NodeSet& extra,
                 const std::string& rule_name);

  // Starts the next round; returns false when the last round added nothing.
  bool next_round();
  std::vector<Candidate> take() && { return std::move(set_).take(); }

 private:
  const Graph* graph_;
  const Backend* backend_;
  const Reachability* reach_;
  int max_depth_;
  size_t max_candidates_;
  CandidateSet set_;
  std::vector<SubGraph> subgraphs_;
  std::vector<OpKind> kinds_;
  std::vector<char> constant_node_;
  size_t first_new_ = 0, round_start_ = 0;
};

class CombinerRule {
 public:
  virtual ~CombinerRule() = default;
  // Adds the unions this rule allows among ctx's candidates (see first_new()).
  virtual void append(CombineContext& ctx) const = 0;
  virtual std::string to_string() const = 0;
};
using CombinerPtr = std::shared_ptr<const CombinerRule>;

CombinerPtr by_kind_combiner(std::vector<std::pair<OpKind, OpKind>> pairs);
CombinerPtr tuple_arg_combiner();
CombinerPtr multi_output_combiner();
CombinerPtr accepted_pair_combiner(OpKind kind);
CombinerPtr constant_combiner();

}  // namespace tessera
