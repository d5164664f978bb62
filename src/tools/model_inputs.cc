#include "tools/model_inputs.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <new>
#include <random>

#include "ir/npy.h"
#include "runtime/session.h"

namespace tessera {

void InputFlags::add_to(CLI::App& app) {
  app.add_option("--input", inputs, "NAME=FILE.npy: an input tensor (repeatable); others are random");
  app.add_option("--shape", shapes, "NAME=1x3x640x640: shape of a random input with dynamic dims (repeatable)");
  app.add_option("--seed", seed, "Seed for random inputs")->capture_default_str();
}

Result<std::pair<std::string, std::string>> split_assignment(const std::string& s, const char* flag) {
  auto eq = s.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == s.size()) {
    return invalid_argument(std::string(flag) + " expects NAME=VALUE, got '" + s + "'");
  }
  return std::make_pair(s.substr(0, eq), s.substr(eq + 1));
}

Result<std::vector<int64_t>> parse_dims(const std::string& s) {
  std::vector<int64_t> dims;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t x = s.find('x', pos);
    std::string part = s.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
    char* end = nullptr;
    long long d = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || d < 0 || d > (1LL << 31)) return invalid_argument("bad shape '" + s + "' (expected e.g. 1x3x640x640)");
    dims.push_back(d);
    if (x == std::string::npos) break;
    pos = x + 1;
  }
  return dims;
}

static Tensor random_tensor(DType dtype, const std::vector<int64_t>& dims, std::mt19937_64& rng) {
  Tensor t(dtype, dims);
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  std::uniform_int_distribution<int> small(0, 9);
  for (int64_t i = 0; i < t.numel(); ++i) {
    visit_numeric_dtype(dtype, [&](auto tag) {
      using T = decltype(tag);
      T* p = static_cast<T*>(t.raw_data());
      if constexpr (std::is_same_v<T, bool>) p[i] = small(rng) % 2;
      else if constexpr (std::is_integral_v<T>) p[i] = static_cast<T>(small(rng));
      else p[i] = T(static_cast<float>(uni(rng)));
    });
  }
  return t;
}

// The --input files that read, before the session is made (their dims fix the graph's input
// shapes); make_inputs reports the others, after checking the names.
std::map<std::string, Tensor> read_input_files(const InputFlags& o) {
  std::map<std::string, Tensor> inputs;
  for (const auto& a : o.inputs) {
    auto kv = split_assignment(a, "--input");
    if (!kv.ok()) continue;
    auto t = read_npy(kv->second);
    if (t.ok()) inputs[kv->first] = std::move(*t);
  }
  return inputs;
}

// --shape and the --input files' dims, to specialize the graph with.
Result<std::map<std::string, std::vector<int64_t>>> given_shapes(const InputFlags& o,
                                                                 const std::map<std::string, Tensor>& files) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& a : o.shapes) {
    TESSERA_ASSIGN_OR_RETURN(auto kv, split_assignment(a, "--shape"));
    TESSERA_ASSIGN_OR_RETURN(shapes[kv.first], parse_dims(kv.second));
  }
  for (const auto& [name, t] : files) shapes[name] = t.dims();
  return shapes;
}

Result<std::map<std::string, Tensor>> make_inputs(const Session& s, const InputFlags& o,
                                                  std::map<std::string, Tensor> inputs) {
  std::map<std::string, std::vector<int64_t>> shapes;
  auto decl = s.input_types();
  auto known = [&](const std::string& name) {
    return std::any_of(decl.begin(), decl.end(), [&](const auto& p) { return p.first == name; });
  };
  for (const auto& a : o.shapes) {
    TESSERA_ASSIGN_OR_RETURN(auto kv, split_assignment(a, "--shape"));
    if (!known(kv.first)) return invalid_argument("--shape: the model has no input named '" + kv.first + "'");
    TESSERA_ASSIGN_OR_RETURN(shapes[kv.first], parse_dims(kv.second));
  }
  for (const auto& a : o.inputs) {
    TESSERA_ASSIGN_OR_RETURN(auto kv, split_assignment(a, "--input"));
    if (!known(kv.first)) return invalid_argument("--input: the model has no input named '" + kv.first + "'");
    if (!inputs.count(kv.first)) {
      TESSERA_ASSIGN_OR_RETURN(inputs[kv.first], read_npy(kv.second));
    }
  }
  std::mt19937_64 rng(o.seed);
  for (const auto& [name, type] : decl) {
    if (inputs.count(name)) continue;
    std::vector<int64_t> dims;
    if (shapes.count(name)) {
      dims = shapes[name];
    } else if (type.is_static()) {
      dims = type.static_dims();
    } else {
      return invalid_argument("input '" + name + "' has dynamic shape " + type.to_string() + ": give --shape " + name +
                              "=... or --input " + name + "=FILE.npy");
    }
    if (type.dtype == DType::kString || type.dtype == DType::kUndefined) {
      return invalid_argument("input '" + name + "' of type " + type.to_string() + " needs --input");
    }
    try {
      inputs[name] = random_tensor(type.dtype, dims, rng);
    } catch (const std::bad_alloc&) {
      return invalid_argument("input '" + name + "' of shape " + dims_to_string(dims) + " does not fit in memory");
    }
  }
  return inputs;
}

}  // namespace tessera
