// Static types of graph values: a dtype and a shape whose dims may be symbolic or unknown.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace tessera {

// One dimension: a known size, a named symbol ("batch"), or unknown (neither).
struct Dim {
  int64_t value = -1;  // >= 0 when known
  std::string symbol;  // non-empty for a symbolic dim

  Dim() = default;
  Dim(int64_t v) : value(v) {}  // NOLINT(google-explicit-constructor)
  static Dim symbolic(std::string name) {
    Dim d;
    d.symbol = std::move(name);
    return d;
  }
  bool known() const { return value >= 0; }
  bool operator==(const Dim& o) const { return value == o.value && symbol == o.symbol; }
  std::string to_string() const { return known() ? std::to_string(value) : (symbol.empty() ? "?" : symbol); }
};

struct TensorType {
  DType dtype = DType::kUndefined;
  std::optional<std::vector<Dim>> shape;  // nullopt: rank unknown

  bool has_rank() const { return shape.has_value(); }
  int rank() const { return shape ? static_cast<int>(shape->size()) : -1; }
  // All dims known.
  bool is_static() const;
  // Concrete dims; only when is_static().
  std::vector<int64_t> static_dims() const;
  static TensorType of(DType dtype, const std::vector<int64_t>& dims);
  std::string to_string() const;  // "float32[1x3x?xN]"
  bool operator==(const TensorType& o) const { return dtype == o.dtype && shape == o.shape; }
};

}  // namespace tessera
