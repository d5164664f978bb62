#include "partition/rules.h"

#include <algorithm>
#include <sstream>

namespace tessera {
namespace {

class OpByKindRule final : public PartitionRule {
 public:
  explicit OpByKindRule(OpKind max_kind) : max_kind_(max_kind) {}
  std::vector<Candidate> candidates(const Graph& g, const Backend& backend) const override {
    std::vector<Candidate> out;
    for (int n = 0; n < g.num_nodes(); ++n) {
      if (node_kind(g, n) > max_kind_ || !backend.supports(g, n).ok()) continue;
      out.push_back({NodeSet::of(g.num_nodes(), {n}), &backend, "singleton"});
    }
    return out;
  }
  std::string to_string() const override {
    return std::string("op_by_kind(") + op_kind_name(max_kind_) + ")";
  }

 private:
  OpKind max_kind_;
};

class PatternRule final : public PartitionRule {
 public:
  PatternRule(std::string name, Pattern pattern, MatchFilter filter, MatchOptions options,
              bool nodes_supported)
      : name_(std::move(name)),
        pattern_(std::move(pattern)),
        filter_(std::move(filter)),
        options_(options),
        nodes_supported_(nodes_supported) {}
  std::vector<Candidate> candidates(const Graph& g, const Backend& backend) const override {
    std::vector<Candidate> out;
    for (const Match& m : match_all(g, pattern_, options_)) {
      bool supported = !nodes_supported_ || std::all_of(m.nodes.begin(), m.nodes.end(),
                                                        [&](int n) { return backend.supports(g, n).ok(); });
      if (!supported || (filter_ && !filter_(g, m))) continue;
      out.push_back({m.nodes, &backend, name_});
    }
    return dedupe_candidates(std::move(out));
  }
  std::string to_string() const override {
    return "pattern(" + name_ + ": " + pattern_.to_string() + ")";
  }

 private:
  std::string name_;
  Pattern pattern_;
  MatchFilter filter_;
  MatchOptions options_;
  bool nodes_supported_;
};

class HostRule final : public PartitionRule {
 public:
  std::vector<Candidate> candidates(const Graph& g, const Backend& backend) const override {
    std::vector<Candidate> out;
    for (int n = 0; n < g.num_nodes(); ++n)
      out.push_back({NodeSet::of(g.num_nodes(), {n}), &backend, "host"});
    return out;
  }
  std::string to_string() const override { return "host"; }
};

class UnionRule final : public PartitionRule {
 public:
  explicit UnionRule(std::vector<RulePtr> rules) : rules_(std::move(rules)) {}
  std::vector<Candidate> candidates(const Graph& g, const Backend& backend) const override {
    CandidateSet set;
    for (const RulePtr& r : rules_)
      for (Candidate& c : r->candidates(g, backend)) set.add(std::move(c));
    return std::move(set).take();
  }
  std::string to_string() const override {
    std::string s;
    for (const RulePtr& r : rules_) s += (s.empty() ? "" : " | ") + r->to_string();
    return "(" + s + ")";
  }

 private:
  std::vector<RulePtr> rules_;
};

class CompositeRule final : public PartitionRule {
 public:
  CompositeRule(std::string name, RulePtr sub) : name_(std::move(name)), sub_(std::move(sub)) {}
  std::vector<Candidate> candidates(const Graph& g, const Backend& backend) const override {
    std::vector<Candidate> out;
    for (Candidate& c : sub_->candidates(g, backend)) {
      if (!backend.accepts(SubGraph(g, c.nodes)).ok()) continue;
      c.rule_name = name_;
      out.push_back(std::move(c));
    }
    return out;
  }
  std::string to_string() const override {
    return "composite(" + name_ + ", " + sub_->to_string() + ")";
  }

 private:
  std::string name_;
  RulePtr sub_;
};

class OnlyValidRule final : public PartitionRule {
 public:
  OnlyValidRule(RulePtr sub, SubGraphConfig config) : sub_(std::move(sub)), config_(config) {}
  std::vector<Candidate> candidates(const Graph& g, const Backend& backend) const override {
    Reachability reach(g);
    std::vector<Candidate> out;
    for (Candidate& c : sub_->candidates(g, backend))
      if (check_subgraph(SubGraph(g, c.nodes), reach, config_).ok()) out.push_back(std::move(c));
    return out;
  }
  std::string to_string() const override {
    return "only_valid(" + sub_->to_string() + ", " + config_.to_string() + ")";
  }

 private:
  RulePtr sub_;
  SubGraphConfig config_;
};

class AcceptedRule final : public PartitionRule {
 public:
  explicit AcceptedRule(RulePtr sub) : sub_(std::move(sub)) {}
  std::vector<Candidate> candidates(const Graph& g, const Backend& backend) const override {
    std::vector<Candidate> out;
    for (Candidate& c : sub_->candidates(g, backend)) {
      bool supported = std::all_of(c.nodes.begin(), c.nodes.end(),
                                   [&](int n) { return backend.supports(g, n).ok(); });
      if (supported && backend.accepts(SubGraph(g, c.nodes)).ok()) out.push_back(std::move(c));
    }
    return out;
  }
  std::string to_string() const override { return "accepted(" + sub_->to_string() + ")"; }

 private:
  RulePtr sub_;
};

class CombineRule final : public PartitionRule {
 public:
  CombineRule(RulePtr sub, std::vector<CombinerPtr> combiners, CombineOptions options)
      : sub_(std::move(sub)), combiners_(std::move(combiners)), options_(options) {}
  std::vector<Candidate> candidates(const Graph& g, const Backend& backend) const override {
    Reachability reach(g);
    CombineContext ctx(g, backend, reach, options_.max_depth, options_.max_candidates);
    for (Candidate& c : sub_->candidates(g, backend)) ctx.add(std::move(c));
    while (ctx.next_round() && !ctx.full())
      for (const CombinerPtr& c : combiners_) c->append(ctx);
    return std::move(ctx).take();
  }
  std::string to_string() const override {
    std::string s = "combine(" + sub_->to_string();
    for (const CombinerPtr& c : combiners_) s += ", " + c->to_string();
    return s + ", depth<=" + std::to_string(options_.max_depth) + ")";
  }

 private:
  RulePtr sub_;
  std::vector<CombinerPtr> combiners_;
  CombineOptions options_;
};

bool is_ref(const Backend& b) { return &b == &ref_backend(); }

}  // namespace

RulePtr op_by_kind_rule(OpKind max_kind) { return std::make_shared<OpByKindRule>(max_kind); }
RulePtr pattern_rule(std::string name, Pattern pattern, MatchFilter filter, MatchOptions options,
                     bool nodes_supported) {
  return std::make_shared<PatternRule>(std::move(name), std::move(pattern), std::move(filter),
                                       options, nodes_supported);
}
RulePtr host_rule() { return std::make_shared<HostRule>(); }
RulePtr union_rule(std::vector<RulePtr> rules) {
  return std::make_shared<UnionRule>(std::move(rules));
}
RulePtr composite_rule(std::string name, RulePtr sub) {
  return std::make_shared<CompositeRule>(std::move(name), std::move(sub));
}
RulePtr only_valid_rule(RulePtr sub, SubGraphConfig config) {
  return std::make_shared<OnlyValidRule>(std::move(sub), config);
}
RulePtr accepted_rule(RulePtr sub) { return std::make_shared<AcceptedRule>(std::move(sub)); }
RulePtr combine_rule(RulePtr sub, std::vector<CombinerPtr> combiners, CombineOptions options) {
  return std::make_shared<CombineRule>(std::move(sub), std::move(combiners), options);
}

std::optional<Pattern> chain_pattern(const std::string& claimed) {
  std::vector<std::string> ops;
  std::stringstream ss(claimed);
  for (std::string op_type; std::getline(ss, op_type, '+');)
    if (!op_type.empty()) ops.push_back(op_type);
  if (ops.size() < 2) return std::nullopt;
  Pattern p = op(ops[0]);
  for (size_t i = 1; i < ops.size(); ++i) {
    // The chain enters at input 0; a tail may take one or two more operands (Add, Clip).
    p = op(ops[i], {p}) | op(ops[i], {p, wildcard()}) | op(ops[i], {p, wildcard(), wildcard()});
  }
  return p;
}

std::vector<CombinerPtr> tvm_combiners() {
  return {by_kind_combiner({{OpKind::kOutElementwiseFusable, OpKind::kBroadcast},
                            {OpKind::kBroadcast, OpKind::kReduction},
                            {OpKind::kInjective, OpKind::kInjective}}),
          accepted_pair_combiner(OpKind::kOutElementwiseFusable), tuple_arg_combiner(), multi_output_combiner(),
          constant_combiner()};
}

RulePtr rules_for(const Backend& backend, const RuleOptions& options) {
  if (is_ref(backend)) return host_rule();
  std::vector<RulePtr> base = {op_by_kind_rule(OpKind::kOpaque)};
  for (const std::string& claimed : backend.claimed_patterns()) {
    if (std::optional<Pattern> p = chain_pattern(claimed)) {
      MatchOptions internal;
      internal.internal_intermediates = true;  // a fused chain cannot expose its intermediates
      base.push_back(composite_rule(claimed, pattern_rule(claimed, *p, {}, internal)));
    }
  }
  RulePtr rule = base.size() == 1 ? base[0] : union_rule(std::move(base));
  const FusionStyle style = backend.fusion_style();
  if (style != FusionStyle::kNone) {
    const int cap = style == FusionStyle::kTvmLike ? options.max_tvm_like_depth : options.max_depth;
    int depth = std::max(1, std::min(backend.max_fusion_depth(), cap));
    std::vector<CombinerPtr> combiners =
        style == FusionStyle::kTvmLike
            ? tvm_combiners()
            : std::vector<CombinerPtr>{by_kind_combiner({{OpKind::kOpaque, OpKind::kOpaque}}),
                                       constant_combiner()};
    CombineOptions combine{depth, options.max_candidates};
    SubGraphConfig config;
    config.max_exits = 1;
    config.max_depth = depth;
    config.allow_taps = false;
    rule = only_valid_rule(combine_rule(std::move(rule), std::move(combiners), combine), config);
  }
  rule = accepted_rule(std::move(rule));
  // Fused patterns: their nodes need not run alone on the backend (a Squeeze inside an attention);
  // the composite asks accepts() of the whole group.
  std::vector<RulePtr> fused;
  for (const Backend::FusedPattern& f : backend.fused_patterns()) {
    MatchOptions internal;
    internal.internal_intermediates = true;
    fused.push_back(composite_rule(f.name, pattern_rule(f.name, f.pattern, {}, internal, false)));
  }
  if (fused.empty()) return rule;
  SubGraphConfig config;  // convex, one exit, no taps: any depth
  config.max_exits = 1;
  config.allow_taps = false;
  return union_rule({std::move(rule), only_valid_rule(union_rule(std::move(fused)), config)});
}

std::vector<Candidate> candidates_for(const Graph& g, const std::vector<const Backend*>& backends,
                                      const RuleOptions& options) {
  CandidateSet set;
  for (const Backend* b : backends) {
    if (is_ref(*b) || !b->available().ok()) continue;
    for (Candidate& c : rules_for(*b, options)->candidates(g, *b)) set.add(std::move(c));
  }
  for (Candidate& c : host_rule()->candidates(g, ref_backend())) set.add(std::move(c));
  return std::move(set).take();
}

}  // namespace tessera
