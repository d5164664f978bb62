#include "backends/ref/ref_util.h"

#include "ops/op_registry.h"

#include <algorithm>

namespace tessera::ref {

Result<int> normalize_axis(int64_t axis, int rank) {
  // A scalar accepts axis 0 (kernels treat it as one element).
  if (rank == 0 && axis == 0) return 0;
  return tessera::normalize_axis(axis, rank);
}

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

Result<std::vector<int64_t>> broadcast_shapes(const std::vector<std::vector<int64_t>>& shapes) {
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  std::vector<int64_t> out(rank, 1);
  for (const auto& s : shapes) {
    size_t off = rank - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[off + i];
      if (s[i] == o || s[i] == 1) continue;
      if (o == 1) {
        o = s[i];
      } else {
        return invalid_argument("shapes " + dims_to_string(shapes[0]) + " and " + dims_to_string(s) +
                                " cannot broadcast");
      }
    }
  }
  return out;
}

std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  std::vector<int64_t> s(out.size(), 0);
  std::vector<int64_t> in_strides = row_major_strides(in);
  size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) s[off + i] = in[i] == 1 ? 0 : in_strides[i];
  return s;
}

}  // namespace tessera::ref
