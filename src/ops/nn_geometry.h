// Window geometry shared by Conv, ConvTranspose and the pools: output sizes and pads from the
// ONNX attributes (kernel, strides, dilations, pads, auto_pad, ceil_mode). Used by shape inference
// (ops/nn_ops.cc) and by the reference kernels.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/status.h"

namespace tessera::nn {

enum class AutoPad { kNotSet, kSameUpper, kSameLower, kValid };

inline Result<AutoPad> parse_auto_pad(const Node& node) {
  std::string s = node.attr_string("auto_pad", "NOTSET");
  if (s == "NOTSET" || s.empty()) return AutoPad::kNotSet;
  if (s == "SAME_UPPER") return AutoPad::kSameUpper;
  if (s == "SAME_LOWER") return AutoPad::kSameLower;
  if (s == "VALID") return AutoPad::kValid;
  return invalid_argument("unknown auto_pad '" + s + "'");
}

inline int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
inline int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

// The resolved geometry of a sliding window over `rank` spatial dims.
struct WindowGeometry {
  std::vector<int64_t> kernel, strides, dilations;
  std::vector<int64_t> pads_begin, pads_end;
  std::vector<int64_t> out;  // output spatial sizes
};

// Reads kernel (given), strides, dilations, pads and auto_pad for a forward window op (Conv or a
// pool) and resolves pads and output sizes for input spatial sizes `in`. ceil_mode only for pools.
inline Result<WindowGeometry> forward_window(const Node& node, const std::vector<int64_t>& in,
                                             std::vector<int64_t> kernel, bool ceil_mode) {
  const size_t rank = in.size();
  WindowGeometry g;
  g.kernel = std::move(kernel);
  g.strides = node.attr_ints("strides", std::vector<int64_t>(rank, 1));
  g.dilations = node.attr_ints("dilations", std::vector<int64_t>(rank, 1));
  std::vector<int64_t> pads = node.attr_ints("pads", std::vector<int64_t>(2 * rank, 0));
  if (g.kernel.size() != rank || g.strides.size() != rank || g.dilations.size() != rank ||
      pads.size() != 2 * rank) {
    return invalid_argument("kernel_shape/strides/dilations/pads do not match " +
                            std::to_string(rank) + " spatial dims");
  }
  TESSERA_ASSIGN_OR_RETURN(AutoPad auto_pad, parse_auto_pad(node));
  g.pads_begin.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(rank));
  g.pads_end.assign(pads.begin() + static_cast<std::ptrdiff_t>(rank), pads.end());
  g.out.resize(rank);
  for (size_t i = 0; i < rank; ++i) {
    if (g.kernel[i] < 1 || g.strides[i] < 1 || g.dilations[i] < 1) {
      return invalid_argument("kernel, strides and dilations must be positive");
    }
    if (g.pads_begin[i] < 0 || g.pads_end[i] < 0) return invalid_argument("negative pads");
    const int64_t extent = (g.kernel[i] - 1) * g.dilations[i] + 1;
    if (auto_pad == AutoPad::kSameUpper || auto_pad == AutoPad::kSameLower) {
      g.out[i] = ceil_div(in[i], g.strides[i]);
      int64_t total = std::max<int64_t>(0, (g.out[i] - 1) * g.strides[i] + extent - in[i]);
      int64_t small = total / 2, large = total - total / 2;
      g.pads_begin[i] = auto_pad == AutoPad::kSameUpper ? small : large;
      g.pads_end[i] = auto_pad == AutoPad::kSameUpper ? large : small;
      continue;
    }
    if (auto_pad == AutoPad::kValid) g.pads_begin[i] = g.pads_end[i] = 0;
    const int64_t span = in[i] + g.pads_begin[i] + g.pads_end[i] - extent;
    if (span < 0) return invalid_argument("window larger than the padded input");
    if (ceil_mode) {
      g.out[i] = ceil_div(span, g.strides[i]) + 1;
      // The last window must start inside the input or its leading padding.
      if ((g.out[i] - 1) * g.strides[i] >= in[i] + g.pads_begin[i]) --g.out[i];
    } else {
      g.out[i] = span / g.strides[i] + 1;
    }
  }
  return g;
}

// ConvTranspose: resolves pads and output sizes for input spatial sizes `in`. Pads may come out
// negative at the end when output_shape asks for more than the full transposed extent.
inline Result<WindowGeometry> transposed_window(const Node& node, const std::vector<int64_t>& in,
                                                std::vector<int64_t> kernel) {
  const size_t rank = in.size();
  WindowGeometry g;
  g.kernel = std::move(kernel);
  g.strides = node.attr_ints("strides", std::vector<int64_t>(rank, 1));
  g.dilations = node.attr_ints("dilations", std::vector<int64_t>(rank, 1));
  std::vector<int64_t> pads = node.attr_ints("pads", std::vector<int64_t>(2 * rank, 0));
  std::vector<int64_t> output_padding =
      node.attr_ints("output_padding", std::vector<int64_t>(rank, 0));
  std::vector<int64_t> output_shape = node.attr_ints("output_shape");
  if (output_shape.size() > rank) {
    output_shape.erase(output_shape.begin(),
                       output_shape.begin() + static_cast<std::ptrdiff_t>(output_shape.size() - rank));
  }
  if (g.kernel.size() != rank || g.strides.size() != rank || g.dilations.size() != rank ||
      pads.size() != 2 * rank || output_padding.size() != rank ||
      (!output_shape.empty() && output_shape.size() != rank)) {
    return invalid_argument("kernel_shape/strides/dilations/pads/output_padding/output_shape do "
                            "not match " + std::to_string(rank) + " spatial dims");
  }
  TESSERA_ASSIGN_OR_RETURN(AutoPad auto_pad, parse_auto_pad(node));
  g.pads_begin.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(rank));
  g.pads_end.assign(pads.begin() + static_cast<std::ptrdiff_t>(rank), pads.end());
  g.out.resize(rank);
  for (size_t i = 0; i < rank; ++i) {
    if (g.kernel[i] < 1 || g.strides[i] < 1 || g.dilations[i] < 1) {
      return invalid_argument("kernel, strides and dilations must be positive");
    }
    if (output_padding[i] < 0) return invalid_argument("negative output_padding");
    const int64_t full = g.strides[i] * (in[i] - 1) + output_padding[i] +
                         (g.kernel[i] - 1) * g.dilations[i] + 1;
    int64_t target = -1;
    if (!output_shape.empty()) {
      target = output_shape[i];
    } else if (auto_pad == AutoPad::kSameUpper || auto_pad == AutoPad::kSameLower) {
      target = in[i] * g.strides[i];
    }
    if (target >= 0) {
      const int64_t total = full - target;
      const int64_t half = floor_div(total, 2);
      if (auto_pad == AutoPad::kSameUpper) {
        g.pads_begin[i] = half;
        g.pads_end[i] = total - half;
      } else {
        g.pads_begin[i] = total - half;
        g.pads_end[i] = half;
      }
      g.out[i] = target;
    } else {
      if (auto_pad == AutoPad::kValid) g.pads_begin[i] = g.pads_end[i] = 0;
      g.out[i] = full - g.pads_begin[i] - g.pads_end[i];
    }
    if (g.out[i] < 0) return invalid_argument("negative ConvTranspose output size");
  }
  return g;
}

}  // namespace tessera::nn
