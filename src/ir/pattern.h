// Dataflow patterns over a Graph, in the spirit of TVM's DFPattern.
//
//   Pattern conv = op("Conv", {wildcard(), constant(), constant()});
//   Pattern p = op("Relu", {op("Add", {conv, wildcard()})});
//   if (std::optional<Match> m = match(graph, node, p)) { ... m->nodes, m->bound_values ... }
//
// A pattern describes a value (an edge of the graph) and, through op patterns, the nodes that
// produce it:
//   op(name, inputs)   a value produced by a node whose op is `name` (or one of a set of names)
//                      and whose inputs, left to right, match `inputs`. The node must have exactly
//                      inputs.size() inputs after trailing omitted optional inputs are dropped; an
//                      omitted input (kNoValue) in between matches nothing. An empty input list
//                      means "any inputs, unchecked". A node in a non-default domain is named
//                      "domain.OpType". In an input position the value must be output 0 of the node
//                      (at_output(k) picks another output); at the root the node itself is matched.
//   wildcard()         any value; binds it.
//   constant()         a value with constant data (Value::constant, an initializer); binds it.
//                      A graph input never matches constant().
//   a | b              a if it matches, else b (left to right, the first that matches wins; once an
//                      alternative has matched, a later failure does not retry the next one).
//   p.where(pred)      p, and pred holds for what p matched.
//
// Inputs are matched in order: matching is not commutative, so Add(x, Conv(..)) does not match
// op("Add", {op("Conv", ...), wildcard()}); write both orders as alternatives where needed.
//
// Identity matters: one Pattern object used at several places must match the same value each
// time, so `Pattern x = wildcard(); op("Mul", {x, op("Sigmoid", {x})})` matches x * sigmoid(x)
// only. Call wildcard() / constant() again for independent values.
//
// Patterns are immutable and cheap to copy (they share their nodes).
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/attribute.h"
#include "ir/dtype.h"
#include "ir/graph.h"
#include "ir/node_set.h"

namespace tessera {

// What a pattern matched: a value and the node that produces it (-1 for graph inputs and
// constants). At the root of a match, node is the root node and value its output 0 (or the output
// picked by at_output; kNoValue if the node lacks it).
struct MatchSite {
  int value = kNoValue;
  int node = -1;
};

using MatchPredicate = std::function<bool(const Graph&, const MatchSite&)>;

class Pattern {
 public:
  struct Impl;

  // Matches if this pattern matches, else `other`.
  Pattern operator|(const Pattern& other) const;
  // This pattern, restricted to sites where `pred` holds. `description` shows in to_string().
  Pattern where(MatchPredicate pred, std::string description = "?") const;
  // For op patterns in an input position: the value must be output `index` of the node.
  Pattern at_output(int index) const;

  // "Relu(Add(Conv(*, const, const), *))"; predicates show as [description].
  std::string to_string() const;

  const Impl& impl() const { return *impl_; }

 private:
  friend Pattern make_pattern(Impl impl);
  explicit Pattern(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

Pattern op(std::string op_type, std::vector<Pattern> inputs = {});
Pattern op(std::initializer_list<std::string> op_types, std::vector<Pattern> inputs = {});
Pattern op(std::vector<std::string> op_types, std::vector<Pattern> inputs = {});
Pattern wildcard();
Pattern constant();

// Predicates for Pattern::where.
// The node's attribute `key` is present and equal to `value` (op defaults are not applied:
// for those write a predicate with Node::attr_int(key, default) and friends).
MatchPredicate attr_is(std::string key, Attribute value);
// The value's static dtype is `dtype`.
MatchPredicate dtype_is(DType dtype);
// The value has exactly one use by a node and is not a graph output.
MatchPredicate has_one_consumer();

// Deep equality of attributes (tensors by dtype, dims and contents; subgraphs by identity).
bool attributes_equal(const Attribute& a, const Attribute& b);

struct Match {
  NodeSet nodes;                  // every node matched by an op pattern
  std::vector<int> node_order;    // the same nodes in pattern order: the root first, then
                                  // depth-first through the inputs, left to right
  std::vector<int> bound_values;  // the value bound by each wildcard() / constant() that took
                                  // part in the match, in the same depth-first order (a pattern
                                  // object used several times binds once)
  int root() const { return node_order.front(); }
};

struct MatchOptions {
  // Reject matches whose intermediate nodes (all but the root) have outputs used outside the
  // match or that are graph outputs: such a match cannot be fused into one kernel.
  bool internal_intermediates = false;
};

// Matches `pattern` with its root at node `node`. The root must be matched by an op pattern.
std::optional<Match> match(const Graph& graph, int node, const Pattern& pattern,
                           const MatchOptions& options = {});
// The match at every node where there is one, by increasing root index. Matches may overlap.
std::vector<Match> match_all(const Graph& graph, const Pattern& pattern,
                             const MatchOptions& options = {});

// True if no output of a matched node other than the root is a graph output or is used by a
// node outside the match.
bool intermediates_are_internal(const Graph& graph, const Match& m);

}  // namespace tessera
