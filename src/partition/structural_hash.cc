#include "partition/structural_hash.h"

#include <charconv>
#include <cstdio>
#include <map>

namespace tessera {
namespace {

// Integer constants up to this many elements are part of the structure (shape-like operands).
constexpr int64_t kStructuralConstantElements = 64;

void put_float(std::string& out, double x) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, x);  // shortest round-trip, no locale
  out.append(buf, ec == std::errc() ? end : buf);
}

// Length-prefixed, so no string can fake a separator.
void put_string(std::string& out, const std::string& s) {
  out += std::to_string(s.size()) + ':' + s;
}

void put_tensor(std::string& out, const Tensor& t) {
  if (!t.defined()) {
    out += "tensor()";
    return;
  }
  out += "tensor(" + std::string(dtype_name(t.dtype())) + '[' + dims_to_string(t.dims()) + "] ";
  if (t.dtype() == DType::kString) {
    for (const std::string& s : t.strings()) put_string(out, s);
  } else if (t.raw_data() && t.nbytes() > 0) {
    char buf[20];
    std::snprintf(buf, sizeof buf, "%016llx",
                  static_cast<unsigned long long>(fnv1a64(t.raw_data(), t.nbytes())));
    out += buf;
  }
  out += ')';
}

void put_graph(std::string& out, const Graph& g);

void put_attribute(std::string& out, const Attribute& a) {
  using T = Attribute::Type;
  out += attribute_type_name(a.type);
  out += '=';
  switch (a.type) {
    case T::kInt: out += std::to_string(a.i); break;
    case T::kFloat: put_float(out, a.f); break;
    case T::kString: put_string(out, a.s); break;
    case T::kTensor: put_tensor(out, a.t); break;
    case T::kGraph:
      if (a.g) put_graph(out, *a.g);
      break;
    case T::kInts:
      for (int64_t x : a.ints) out += std::to_string(x) + ',';
      break;
    case T::kFloats:
      for (float x : a.floats) put_float(out, x), out += ',';
      break;
    case T::kStrings:
      for (const std::string& s : a.strings) put_string(out, s);
      break;
    case T::kTensors:
      for (const Tensor& t : a.tensors) put_tensor(out, t);
      break;
    case T::kGraphs:
      for (const auto& g : a.graphs)
        if (g) put_graph(out, *g);
      break;
    case T::kType: out += a.type_value.to_string(); break;
    case T::kUndefined: break;
  }
}

void put_node_head(std::string& out, const Node& node) {
  put_string(out, node.domain);
  put_string(out, node.op_type);
  out += " v" + std::to_string(node.opset) + " {";
  for (const auto& [key, a] : node.attrs) {  // std::map: sorted by key
    put_string(out, key);
    put_attribute(out, a);
    out += ';';
  }
  out += '}';
}

// A body graph (If/Loop/Scan): values named by order of first appearance.
void put_graph(std::string& out, const Graph& g) {
  std::map<int, int> ordinal;
  auto name = [&](int v) {
    if (v == kNoValue) return std::string("-");
    auto [it, fresh] = ordinal.emplace(v, static_cast<int>(ordinal.size()));
    std::string s = "%";  // (appending, not "%" + string: GCC 12 warns falsely on that)
    s += std::to_string(it->second);
    if (fresh) {
      s += ':' + g.value(v).type.to_string();
      if (g.value(v).constant) s += "=c";
    }
    return s;
  };
  out += "graph(in ";
  for (int v : g.inputs()) out += name(v) + ' ';
  for (const Node& node : g.nodes()) {
    out += "| ";
    put_node_head(out, node);
    for (int v : node.inputs) out += ' ' + name(v);
    for (int v : node.implicit_inputs) out += " ^" + name(v);
    out += " ->";
    for (int v : node.outputs) out += ' ' + name(v);
  }
  out += " | out";
  for (int v : g.outputs()) out += ' ' + name(v);
  out += ')';
}

}  // namespace

uint64_t fnv1a64(const void* bytes, size_t size, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(bytes);
  uint64_t h = seed;
  for (size_t i = 0; i < size; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string structural_signature(const SubGraph& sg) {
  const Graph& g = sg.graph();
  std::string out;
  std::map<int, std::string> ref;  // value -> how the signature names it
  for (size_t i = 0; i < sg.inputs().size(); ++i) {
    int v = sg.inputs()[i];
    ref[v] = 'i' + std::to_string(i);
    out += "input " + ref[v] + ' ' + g.value(v).type.to_string() + '\n';
  }
  for (size_t i = 0; i < sg.constants().size(); ++i) {
    int v = sg.constants()[i];
    ref[v] = 'c' + std::to_string(i);
    const Value& val = g.value(v);
    out += "constant " + ref[v] + ' ' + val.type.to_string();
    const Tensor& t = *val.constant;
    out += " [" + dims_to_string(t.dims()) + ']';
    if (dtype_is_integer(t.dtype()) && t.numel() <= kStructuralConstantElements) {
      out += " =";
      for (int64_t k = 0; k < t.numel(); ++k) out += ' ' + std::to_string(t.as_int64(k));
    }
    out += '\n';
  }
  int position = 0;
  for (int n : sg.nodes()) {
    const Node& node = g.node(n);
    out += "node " + std::to_string(position) + ' ';
    put_node_head(out, node);
    auto arg = [&](int v) {
      if (v == kNoValue) return std::string("-");
      auto it = ref.find(v);
      return it == ref.end() ? std::string("?") : it->second;
    };
    out += " (";
    for (int v : node.inputs) out += arg(v) + ',';
    for (int v : node.implicit_inputs) out += '^' + arg(v) + ',';
    out += ") ->";
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      int v = node.outputs[o];
      if (v == kNoValue) {
        out += " -";
        continue;
      }
      ref[v] = 'n' + std::to_string(position) + '.' + std::to_string(o);
      out += ' ' + g.value(v).type.to_string();
    }
    out += '\n';
    ++position;
  }
  out += "outputs";
  for (int v : sg.outputs()) out += ' ' + (ref.count(v) ? ref[v] : std::string("?"));
  out += '\n';
  return out;
}

uint64_t structural_hash(const SubGraph& sg) {
  std::string s = structural_signature(sg);
  return fnv1a64(s.data(), s.size());
}

std::string structural_hash_hex(const SubGraph& sg) {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(structural_hash(sg)));
  return buf;
}

}  // namespace tessera
