// Partition rules: which groups of nodes a backend could take, as a small algebra (Collage's
// PartitionRule). A rule proposes candidates for one backend; the search decides among them.
//
// Base rules
//   op_by_kind_rule(k)     one candidate per node the backend supports whose kind is <= k
//   pattern_rule(...)      one candidate per match of a dataflow pattern (ir/pattern.h) whose
//                          nodes the backend all supports and the predicate accepts
//   host_rule()            one candidate per node, whatever the backend says: the reference
//                          backend's rule, so that every node has at least one candidate
// Combinators
//   union_rule(rules)      every candidate of every rule
//   composite_rule(n, r)   r's candidates the backend accepts as one kernel, named n (a named
//                          fused pattern, e.g. "conv_relu")
//   only_valid_rule(r, c)  r's candidates that obey the SubGraphConfig c and are convex
//   accepted_rule(r)       r's candidates whose nodes the backend supports and whose group its
//                          accepts() takes
//   combine_rule(r, ...)   r's candidates, then unions of touching ones that combiner rules
//                          allow (combiner_rules.h), repeated to a fixed point
//
// Candidates of a rule have no duplicates but may overlap; intermediate sizes are kept (a chain
// a->b->c yields {a}, {b}, {c}, {a,b}, {b,c}, {a,b,c}).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "ir/pattern.h"
#include "partition/candidate.h"
#include "partition/combiner_rules.h"
#include "partition/subgraph_check.h"

namespace tessera {

class PartitionRule {
 public:
  virtual ~PartitionRule() = default;
  virtual std::vector<Candidate> candidates(const Graph& g, const Backend& backend) const = 0;
  // The rule tree, e.g. "accepted(only_valid(combine(op_by_kind(opaque), ...), exits<=1 ...))".
  virtual std::string to_string() const = 0;
};
using RulePtr = std::shared_ptr<const PartitionRule>;

using MatchFilter = std::function<bool(const Graph&, const Match&)>;

RulePtr op_by_kind_rule(OpKind max_kind = OpKind::kOpaque);
// nodes_supported false: the match's nodes need not be supported one by one (accepts() decides).
RulePtr pattern_rule(std::string name, Pattern pattern, MatchFilter filter = {},
                     MatchOptions options = {}, bool nodes_supported = true);
RulePtr host_rule();

RulePtr union_rule(std::vector<RulePtr> rules);
RulePtr composite_rule(std::string name, RulePtr sub);
RulePtr only_valid_rule(RulePtr sub, SubGraphConfig config);
RulePtr accepted_rule(RulePtr sub);

struct CombineOptions {
  int max_depth = 0;              // unions deeper than this are not formed (0: no limit)
  size_t max_candidates = 20000;  // stop growing the set here (a guard against blow-up)
};
RulePtr combine_rule(RulePtr sub, std::vector<CombinerPtr> combiners, CombineOptions options = {});

// The pattern for a claimed chain "A+B+C" (Backend::claimed_patterns): A's output feeds B's
// input 0, B's feeds C's input 0; each tail may take up to two more inputs. nullopt for a single
// op type (op_by_kind_rule covers those).
std::optional<Pattern> chain_pattern(const std::string& claimed);

// The combiner rules that mimic TVM's FuseOps: out-elementwise-fusable->broadcast,
// broadcast->reduction, injective->injective, tuple arguments, multi-output, constants.
std::vector<CombinerPtr> tvm_combiners();

struct RuleOptions {
  // Fused candidates are at most this deep even if the backend allows more: the candidate count
  // grows quickly with depth, and every candidate may be measured.
  int max_depth = 8;
  // The same for TVM-like fusion, whose rules only grow a convolution or product by the
  // elementwise chain after it (and native's separable pairs, two such groups): deeper candidates
  // stay few. rec's convolutions each have a chain of 8 (a scalar affine, HardSwish as 4 nodes,
  // another affine), so a whole block is 9 deep and a separable pair 18.
  int max_tvm_like_depth = 20;
  size_t max_candidates = 20000;
};

// The rule tree of a backend, from its fusion style, max_fusion_depth(), supports(), accepts()
// and claimed chain patterns:
//   ref          host_rule()
//   kNone        accepted(op_by_kind(opaque) | composites of claimed chains)
//   kTvmLike     accepted(only_valid(combine(..., tvm_combiners()), exits<=1, no taps, depth))
//   kArbitrary   accepted(only_valid(combine(..., any kind->any kind, constants), same config))
// each then | only_valid(composites of Backend::fused_patterns(), exits<=1, no taps) when the
// backend has any: a fused pattern's nodes need not run alone on the backend (the composite asks
// accepts() of the whole group).
RulePtr rules_for(const Backend& backend, const RuleOptions& options = {});

// Every candidate of every available backend in `backends`, plus the reference backend's host
// singletons (always, so every node is covered), without duplicates.
std::vector<Candidate> candidates_for(const Graph& g, const std::vector<const Backend*>& backends,
                                      const RuleOptions& options = {});

}  // namespace tessera
