#include "ir/pattern.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace tessera {

struct Pattern::Impl {
  enum class Kind { kOp, kWildcard, kConstant, kAlternative };
  Kind kind = Kind::kWildcard;
  std::vector<std::string> op_types;  // kOp: any of these
  int output_index = 0;               // kOp: the output an input position must use
  std::vector<Pattern> children;      // kOp: inputs; kAlternative: the options, in order
  struct Condition {
    MatchPredicate pred;
    std::string description;
  };
  std::vector<Condition> conditions;
};

Pattern make_pattern(Pattern::Impl impl) {
  return Pattern(std::make_shared<const Pattern::Impl>(std::move(impl)));
}

namespace {

using Kind = Pattern::Impl::Kind;

Pattern make_op(std::vector<std::string> op_types, std::vector<Pattern> inputs) {
  TESSERA_CHECK(!op_types.empty(), "op pattern without op names");
  Pattern::Impl impl;
  impl.kind = Kind::kOp;
  impl.op_types = std::move(op_types);
  impl.children = std::move(inputs);
  return make_pattern(std::move(impl));
}

// `name` is "OpType" for the default domain and "domain.OpType" otherwise.
bool op_name_is(const Node& node, const std::string& name) {
  if (node.domain.empty() || node.domain == "ai.onnx") return name == node.op_type;
  const std::string& d = node.domain;
  return name.size() == d.size() + 1 + node.op_type.size() && name.compare(0, d.size(), d) == 0 &&
         name[d.size()] == '.' && name.compare(d.size() + 1, std::string::npos, node.op_type) == 0;
}

bool tensors_equal(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  if (a.dtype() != b.dtype() || a.dims() != b.dims()) return false;
  if (a.dtype() == DType::kString) return a.strings() == b.strings();
  return a.nbytes() == 0 || std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// Matches one pattern against the graph, depth-first. Everything recorded while trying a
// subpattern is undone if it fails, so alternatives start from a clean state.
class Matcher {
 public:
  explicit Matcher(const Graph& graph) : graph_(graph) {}

  bool match(const Pattern::Impl& p, const MatchSite& site, bool at_root) {
    for (const Seen& s : seen_) {
      if (s.pattern == &p) return s.site.value == site.value && s.site.node == site.node;
    }
    if (p.kind == Kind::kOp && !op_fits(p, site, at_root)) return false;  // cheap, so first
    for (const auto& c : p.conditions)
      if (!c.pred(graph_, site)) return false;
    Checkpoint cp = checkpoint();
    if (!match_kind(p, site, at_root)) {
      rollback(cp);
      return false;
    }
    seen_.push_back({&p, site});
    return true;
  }

  std::vector<int> node_order;
  std::vector<int> bound_values;

 private:
  struct Seen {
    const Pattern::Impl* pattern;
    MatchSite site;
  };
  struct Checkpoint {
    size_t nodes, bound, seen;
  };
  Checkpoint checkpoint() const { return {node_order.size(), bound_values.size(), seen_.size()}; }
  void rollback(const Checkpoint& cp) {
    node_order.resize(cp.nodes);
    bound_values.resize(cp.bound);
    seen_.resize(cp.seen);
  }

  bool match_kind(const Pattern::Impl& p, const MatchSite& site, bool at_root) {
    switch (p.kind) {
      case Kind::kWildcard:
        if (site.value == kNoValue) return false;
        bound_values.push_back(site.value);
        return true;
      case Kind::kConstant:
        if (site.value == kNoValue || !graph_.value(site.value).constant) return false;
        bound_values.push_back(site.value);
        return true;
      case Kind::kAlternative:
        for (const Pattern& option : p.children) {
          if (match(option.impl(), site, at_root)) return true;
        }
        return false;
      case Kind::kOp: return match_op(p, site);
    }
    return false;
  }

  // The site's node has the op pattern's op type, and the value is the pattern's output.
  bool op_fits(const Pattern::Impl& p, const MatchSite& site, bool at_root) const {
    if (site.node < 0) return false;
    if (!at_root && graph_.value(site.value).producer_output != p.output_index) return false;
    const Node& node = graph_.node(site.node);
    return std::any_of(p.op_types.begin(), p.op_types.end(),
                       [&](const std::string& name) { return op_name_is(node, name); });
  }

  // After op_fits: records the node and matches its inputs.
  bool match_op(const Pattern::Impl& p, const MatchSite& site) {
    const Node& node = graph_.node(site.node);
    // Two op patterns may match one node (Add(r, r) against Add(Relu(x), Relu(x))): record it once.
    if (std::find(node_order.begin(), node_order.end(), site.node) == node_order.end()) {
      node_order.push_back(site.node);
    }
    if (p.children.empty()) return true;
    size_t arity = node.inputs.size();
    while (arity > 0 && node.inputs[arity - 1] == kNoValue) --arity;
    if (arity != p.children.size()) return false;
    for (size_t i = 0; i < arity; ++i) {
      int v = node.inputs[i];
      if (v == kNoValue) return false;
      if (!match(p.children[i].impl(), {v, graph_.value(v).producer}, false)) return false;
    }
    return true;
  }

  const Graph& graph_;
  std::vector<Seen> seen_;  // the pattern nodes matched so far, and where
};

void describe(const Pattern::Impl& p, std::string& out) {
  switch (p.kind) {
    case Kind::kWildcard: out += "*"; break;
    case Kind::kConstant: out += "const"; break;
    case Kind::kAlternative:
      out += "(";
      for (size_t i = 0; i < p.children.size(); ++i) {
        if (i) out += " | ";
        describe(p.children[i].impl(), out);
      }
      out += ")";
      break;
    case Kind::kOp:
      if (p.op_types.size() == 1) {
        out += p.op_types[0];
      } else {
        out += "{";
        for (size_t i = 0; i < p.op_types.size(); ++i) {
          if (i) out += '|';
          out += p.op_types[i];
        }
        out += "}";
      }
      if (p.output_index != 0) {
        out += '#';
        out += std::to_string(p.output_index);
      }
      if (!p.children.empty()) {
        out += "(";
        for (size_t i = 0; i < p.children.size(); ++i) {
          if (i) out += ", ";
          describe(p.children[i].impl(), out);
        }
        out += ")";
      }
      break;
  }
  for (const auto& c : p.conditions) out += "[" + c.description + "]";
}

}  // namespace

Pattern Pattern::operator|(const Pattern& other) const {
  Impl impl;
  impl.kind = Kind::kAlternative;
  impl.children = {*this, other};
  return make_pattern(std::move(impl));
}

Pattern Pattern::where(MatchPredicate pred, std::string description) const {
  TESSERA_CHECK(pred != nullptr, "Pattern::where without a predicate");
  Impl impl = *impl_;
  impl.conditions.push_back({std::move(pred), std::move(description)});
  return make_pattern(std::move(impl));
}

Pattern Pattern::at_output(int index) const {
  TESSERA_CHECK(impl_->kind == Kind::kOp, "at_output on a pattern that is not an op pattern");
  TESSERA_CHECK(index >= 0, "at_output with a negative index");
  Impl impl = *impl_;
  impl.output_index = index;
  return make_pattern(std::move(impl));
}

std::string Pattern::to_string() const {
  std::string s;
  describe(*impl_, s);
  return s;
}

Pattern op(std::string op_type, std::vector<Pattern> inputs) {
  return make_op({std::move(op_type)}, std::move(inputs));
}

Pattern op(std::initializer_list<std::string> op_types, std::vector<Pattern> inputs) {
  return make_op(std::vector<std::string>(op_types), std::move(inputs));
}

Pattern op(std::vector<std::string> op_types, std::vector<Pattern> inputs) {
  return make_op(std::move(op_types), std::move(inputs));
}

Pattern wildcard() { return make_pattern(Pattern::Impl{}); }

Pattern constant() {
  Pattern::Impl impl;
  impl.kind = Kind::kConstant;
  return make_pattern(std::move(impl));
}

bool attributes_equal(const Attribute& a, const Attribute& b) {
  if (a.type != b.type) return false;
  using T = Attribute::Type;
  switch (a.type) {
    case T::kUndefined: return true;
    case T::kInt: return a.i == b.i;
    case T::kFloat: return a.f == b.f;
    case T::kString: return a.s == b.s;
    case T::kTensor: return tensors_equal(a.t, b.t);
    case T::kGraph: return a.g == b.g;
    case T::kInts: return a.ints == b.ints;
    case T::kFloats: return a.floats == b.floats;
    case T::kStrings: return a.strings == b.strings;
    case T::kTensors:
      return a.tensors.size() == b.tensors.size() &&
             std::equal(a.tensors.begin(), a.tensors.end(), b.tensors.begin(), tensors_equal);
    case T::kGraphs: return a.graphs == b.graphs;
    case T::kType: return a.type_value == b.type_value;
  }
  return false;
}

MatchPredicate attr_is(std::string key, Attribute value) {
  return [key = std::move(key), value = std::move(value)](const Graph& g, const MatchSite& s) {
    if (s.node < 0) return false;
    const Attribute* a = g.node(s.node).attr(key);
    return a != nullptr && attributes_equal(*a, value);
  };
}

MatchPredicate dtype_is(DType dtype) {
  return [dtype](const Graph& g, const MatchSite& s) {
    return s.value != kNoValue && g.value(s.value).type.dtype == dtype;
  };
}

MatchPredicate has_one_consumer() {
  return [](const Graph& g, const MatchSite& s) {
    if (s.value == kNoValue) return false;
    const Value& v = g.value(s.value);
    return v.consumers.size() == 1 && !v.is_graph_output;
  };
}

std::optional<Match> match(const Graph& graph, int node, const Pattern& pattern,
                           const MatchOptions& options) {
  TESSERA_CHECK(node >= 0 && node < graph.num_nodes(), "match: node index out of range");
  const Pattern::Impl& root = pattern.impl();
  const Node& n = graph.node(node);
  int out_index = root.kind == Kind::kOp ? root.output_index : 0;
  MatchSite site{
      static_cast<size_t>(out_index) < n.outputs.size() ? n.outputs[out_index] : kNoValue, node};
  Matcher matcher(graph);
  if (!matcher.match(root, site, true)) return std::nullopt;
  // A wildcard alternative at the root matches the value, not the node: no match of the node.
  if (matcher.node_order.empty() || matcher.node_order.front() != node) return std::nullopt;
  Match m;
  m.nodes = NodeSet::of(graph.num_nodes(), matcher.node_order);
  m.node_order = std::move(matcher.node_order);
  m.bound_values = std::move(matcher.bound_values);
  if (options.internal_intermediates && !intermediates_are_internal(graph, m)) return std::nullopt;
  return m;
}

std::vector<Match> match_all(const Graph& graph, const Pattern& pattern,
                             const MatchOptions& options) {
  std::vector<Match> matches;
  for (int n = 0; n < graph.num_nodes(); ++n) {
    if (std::optional<Match> m = match(graph, n, pattern, options))
      matches.push_back(std::move(*m));
  }
  return matches;
}

bool intermediates_are_internal(const Graph& graph, const Match& m) {
  for (int n : m.node_order) {
    if (n == m.root()) continue;
    for (int v : graph.node(n).outputs) {
      if (v == kNoValue) continue;
      const Value& value = graph.value(v);
      if (value.is_graph_output) return false;
      for (int consumer : value.consumers)
        if (!m.nodes.contains(consumer)) return false;
    }
  }
  return true;
}

}  // namespace tessera
