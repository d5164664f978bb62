#include "partition/cost_estimator.h"

#include <cstdio>

namespace tessera {

std::string Cost::to_string() const {
  if (!valid) return (measured ? "invalid: " : "not measured: ") + reason;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f ms +- %.3f", seconds * 1e3, noise * 1e3);
  return buf;
}

}  // namespace tessera
