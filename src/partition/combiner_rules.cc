#include "partition/combiner_rules.h"

#include <algorithm>

namespace tessera {

CombineContext::CombineContext(const Graph& g, const Backend& backend, const Reachability& reach,
                               int max_depth, size_t max_candidates)
    : graph_(&g),
      backend_(&backend),
      reach_(&reach),
      max_depth_(max_depth),
      max_candidates_(max_candidates),
      constant_node_(g.num_nodes(), 0) {
  // Post-DFS order: producers come first, so one forward pass settles constness.
  for (int n = 0; n < g.num_nodes(); ++n) {
    const Node& node = g.node(n);
    bool any_input = false, all_constant = node.implicit_inputs.empty();
    for (int v : node.inputs) {
      if (v == kNoValue) continue;
      any_input = true;
      const Value& val = g.value(v);
      all_constant &=
          val.constant.has_value() || (val.producer >= 0 && constant_node_[val.producer]);
    }
    // A node without inputs (RandomNormal, ...) is not a constant.
    constant_node_[n] = any_input && all_constant;
  }
}

bool CombineContext::add(Candidate c) {
  if (full()) return false;
  SubGraph sg(*graph_, c.nodes);
  if (!set_.add(std::move(c))) return false;
  kinds_.push_back(subgraph_kind(sg));
  subgraphs_.push_back(std::move(sg));
  return true;
}

bool CombineContext::add_union(const std::vector<size_t>& parts, const NodeSet& extra,
                               const std::string& rule_name) {
  if (full()) return false;
  NodeSet nodes = extra;
  for (size_t p : parts) nodes |= set_[p].nodes;
  if (set_.contains(nodes, backend_)) return false;
  if (!reach_->is_convex(nodes)) return false;
  SubGraph sg(*graph_, nodes);
  if (max_depth_ > 0 && sg.depth() > max_depth_) return false;
  set_.add(Candidate{std::move(nodes), backend_, rule_name});
  kinds_.push_back(subgraph_kind(sg));
  subgraphs_.push_back(std::move(sg));
  return true;
}

bool CombineContext::next_round() {
  if (set_.size() == round_start_) return false;
  first_new_ = round_start_;
  round_start_ = set_.size();
  return true;
}

namespace {

// Candidates in [0, limit) by the nodes they have as entries (or exits).
std::vector<std::vector<size_t>> index_by(const CombineContext& ctx, size_t limit, bool entries) {
  std::vector<std::vector<size_t>> by_node(ctx.graph().num_nodes());
  for (size_t i = 0; i < limit; ++i) {
    const SubGraph& sg = ctx.subgraph(i);
    for (int n : entries ? sg.entry_nodes() : sg.exit_nodes()) by_node[n].push_back(i);
  }
  return by_node;
}

// Adds the union of `base` with one candidate from each of `options` (one list per node to
// absorb), for every such choice with pairwise disjoint parts and at least one part from the
// last round. At most kMaxChoices choices are tried per base: variadic nodes with many producer
// candidates would otherwise multiply without bound.
void add_products(CombineContext& ctx, size_t base, const std::vector<std::vector<size_t>>& options,
                  const std::string& rule_name) {
  constexpr int kMaxChoices = 64;
  std::vector<size_t> pick(options.size(), 0);
  for (int tried = 0; tried < kMaxChoices; ++tried) {
    std::vector<size_t> parts = {base};
    NodeSet covered = ctx.candidate(base).nodes;
    bool disjoint = true, any_new = base >= ctx.first_new();
    for (size_t f = 0; f < options.size() && disjoint; ++f) {
      size_t c = options[f][pick[f]];
      if (std::find(parts.begin(), parts.end(), c) != parts.end()) continue;  // covers 2 fields
      disjoint = !ctx.candidate(c).nodes.intersects(covered);
      covered |= ctx.candidate(c).nodes;
      parts.push_back(c);
      any_new |= c >= ctx.first_new();
    }
    if (disjoint && any_new && parts.size() >= 2)
      ctx.add_union(parts, NodeSet(ctx.graph().num_nodes()), rule_name);
    // Next choice, like an odometer.
    size_t f = 0;
    while (f < options.size() && ++pick[f] == options[f].size()) pick[f++] = 0;
    if (f == options.size()) return;
  }
}

// With `exact_and_accepted`: only candidates of exactly the pair's kinds, and unions the backend
// accepts (accepted_pair_combiner).
class ByKindCombiner final : public CombinerRule {
 public:
  explicit ByKindCombiner(std::vector<std::pair<OpKind, OpKind>> pairs, bool exact_and_accepted = false)
      : pairs_(std::move(pairs)), exact_and_accepted_(exact_and_accepted) {}

  void append(CombineContext& ctx) const override {
    const Graph& g = ctx.graph();
    const size_t limit = ctx.size();
    auto by_entry = index_by(ctx, limit, /*entries=*/true);
    std::vector<char> marked(limit, 0);
    for (size_t up = 0; up < limit; ++up) {
      const NodeSet up_nodes = ctx.candidate(up).nodes;  // a copy: adding reallocates the set
      // Downstream candidates this one feeds: those with an entry among its outside consumers.
      std::vector<size_t> downs;
      for (int v : ctx.subgraph(up).outputs())
        for (int c : g.value(v).consumers) {
          if (up_nodes.contains(c)) continue;
          for (size_t d : by_entry[c])
            if (!marked[d]) marked[d] = 1, downs.push_back(d);
        }
      std::sort(downs.begin(), downs.end());
      for (size_t down : downs) {
        marked[down] = 0;
        if (up < ctx.first_new() && down < ctx.first_new()) continue;  // tried in an earlier round
        if (ctx.candidate(down).nodes.intersects(up_nodes)) continue;
        for (const auto& [up_kind, down_kind] : pairs_) {
          if (ctx.kind(up) > up_kind || ctx.kind(down) > down_kind) continue;
          if (exact_and_accepted_ &&
              (ctx.kind(up) != up_kind || ctx.kind(down) != down_kind ||
               !ctx.backend().accepts(SubGraph(g, up_nodes | ctx.candidate(down).nodes)).ok()))
            continue;
          ctx.add_union(
              {up, down}, NodeSet(g.num_nodes()),
              std::string("combine:") + op_kind_name(up_kind) + "->" + op_kind_name(down_kind));
          break;
        }
      }
    }
  }

  std::string to_string() const override {
    std::string s = exact_and_accepted_ ? "accepted_pair(" : "by_kind(";
    for (size_t i = 0; i < pairs_.size(); ++i)
      s += (i ? ", " : "") + std::string(op_kind_name(pairs_[i].first)) + "->" +
           op_kind_name(pairs_[i].second);
    return s + ")";
  }

 private:
  std::vector<std::pair<OpKind, OpKind>> pairs_;
  bool exact_and_accepted_;
};

bool is_variadic(const Graph& g, int n) {
  const Node& node = g.node(n);
  const OpSchema* schema = OpRegistry::global().find(node.domain, node.op_type);
  return schema && schema->max_inputs >= (1 << 20);  // registered as "any number of inputs"
}

class TupleArgCombiner final : public CombinerRule {
 public:
  void append(CombineContext& ctx) const override {
    const Graph& g = ctx.graph();
    const size_t limit = ctx.size();
    auto by_exit = index_by(ctx, limit, /*entries=*/false);
    for (size_t i = 0; i < limit; ++i) {
      if (ctx.kind(i) > OpKind::kInjective) continue;
      const NodeSet inside = ctx.candidate(i).nodes;  // a copy: adding reallocates the set
      for (int n : inside) {
        if (!is_variadic(g, n)) continue;
        std::vector<int> producers;  // distinct, outside, non-constant
        for (int v : g.node(n).inputs) {
          if (v == kNoValue) continue;
          int p = g.value(v).producer;
          if (p < 0 || inside.contains(p)) continue;
          if (std::find(producers.begin(), producers.end(), p) == producers.end())
            producers.push_back(p);
        }
        if (producers.size() < 2) continue;
        std::vector<std::vector<size_t>> options;
        for (int p : producers) {
          std::vector<size_t> opts;
          for (size_t j : by_exit[p])
            if (j != i && ctx.kind(j) <= OpKind::kInjective) opts.push_back(j);
          if (opts.empty()) break;
          options.push_back(std::move(opts));
        }
        if (options.size() == producers.size()) add_products(ctx, i, options, "tuple");
      }
    }
  }
  std::string to_string() const override { return "tuple_args"; }
};

class MultiOutputCombiner final : public CombinerRule {
 public:
  void append(CombineContext& ctx) const override {
    const Graph& g = ctx.graph();
    const size_t limit = ctx.size();
    auto by_entry = index_by(ctx, limit, /*entries=*/true);
    for (size_t i = 0; i < limit; ++i) {
      const NodeSet inside = ctx.candidate(i).nodes;  // copies: adding reallocates the set
      const NodeSet exits = ctx.subgraph(i).exit_nodes();
      for (int n : exits) {
        int used_outputs = 0;
        std::vector<int> consumers;  // distinct, outside
        for (int v : g.node(n).outputs) {
          if (v == kNoValue || g.value(v).consumers.empty()) continue;
          ++used_outputs;
          for (int c : g.value(v).consumers)
            if (!inside.contains(c) &&
                std::find(consumers.begin(), consumers.end(), c) == consumers.end())
              consumers.push_back(c);
        }
        if (used_outputs < 2 || consumers.size() < 2) continue;
        std::vector<std::vector<size_t>> options;
        for (int c : consumers) {
          std::vector<size_t> opts;
          for (size_t j : by_entry[c])
            if (j != i && ctx.kind(j) <= OpKind::kInjective) opts.push_back(j);
          if (opts.empty()) break;
          options.push_back(std::move(opts));
        }
        if (options.size() == consumers.size()) add_products(ctx, i, options, "multi_output");
      }
    }
  }
  std::string to_string() const override { return "multi_output"; }
};

class ConstantCombiner final : public CombinerRule {
 public:
  void append(CombineContext& ctx) const override {
    const Graph& g = ctx.graph();
    const size_t limit = ctx.size();
    // Only new candidates: the constant producers of old ones were absorbed in earlier rounds.
    for (size_t i = ctx.first_new(); i < limit; ++i) {
      NodeSet constants(g.num_nodes());
      for (int v : ctx.subgraph(i).inputs()) {
        int p = g.value(v).producer;
        if (p >= 0 && ctx.computes_constant(p)) constants.add(p);
      }
      if (!constants.empty()) ctx.add_union({i}, constants, "constant");
    }
  }
  std::string to_string() const override { return "constants"; }
};

}  // namespace

CombinerPtr by_kind_combiner(std::vector<std::pair<OpKind, OpKind>> pairs) {
  return std::make_shared<ByKindCombiner>(std::move(pairs));
}
CombinerPtr tuple_arg_combiner() { return std::make_shared<TupleArgCombiner>(); }
CombinerPtr multi_output_combiner() { return std::make_shared<MultiOutputCombiner>(); }
CombinerPtr accepted_pair_combiner(OpKind kind) {
  return std::make_shared<ByKindCombiner>(std::vector<std::pair<OpKind, OpKind>>{{kind, kind}}, true);
}
CombinerPtr constant_combiner() { return std::make_shared<ConstantCombiner>(); }

}  // namespace tessera
