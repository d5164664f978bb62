// Type-level elementwise kernels: Cast, CastLike, IsNaN, IsInf, Identity, Dropout (inference).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "backends/ref/elementwise_kernels.h"

namespace tessera::ref {
namespace {

// Cast-1..5 name the target type with a string ("FLOAT", "INT64", ...).
DType dtype_from_onnx_name(const std::string& name) {
  static const std::pair<const char*, int> kNames[] = {
      {"FLOAT", 1},   {"UINT8", 2},   {"INT8", 3},    {"UINT16", 4},   {"INT16", 5},
      {"INT32", 6},   {"INT64", 7},   {"STRING", 8},  {"BOOL", 9},     {"FLOAT16", 10},
      {"DOUBLE", 11}, {"UINT32", 12}, {"UINT64", 13}, {"BFLOAT16", 16}};
  for (const auto& [n, code] : kNames) {
    if (name == n) return dtype_from_onnx_code(code);
  }
  return DType::kUndefined;
}

// A number as text: the shortest string that parses back to the same value (numpy's str for
// floats; "NaN", "INF", "-INF" for the special values, as ONNX's tests spell them).
template <typename T>
std::string number_to_string(T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "1" : "0";
  } else if constexpr (std::is_integral_v<T>) {
    return std::to_string(v);
  } else {
    auto c = to_compute(v);
    if (std::isnan(c)) return "NaN";
    if (std::isinf(c)) return c > 0 ? "INF" : "-INF";
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof buf, c);
    return std::string(buf, res.ptr);
  }
}

// Text -> number: strtod/strtoll semantics (accepts "NaN", "INF", "+INF", "-inf", exponents).
template <typename T>
bool string_to_number(const std::string& s, T* out) {
  const char* begin = s.c_str();
  char* end = nullptr;
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    long long v = std::strtoll(begin, &end, 10);
    *out = static_cast<T>(
        std::clamp<long long>(v, std::numeric_limits<T>::lowest(), std::numeric_limits<T>::max()));
  } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    unsigned long long v = std::strtoull(begin, &end, 10);
    *out = static_cast<T>(std::min<unsigned long long>(v, std::numeric_limits<T>::max()));
  } else {
    *out = from_compute<T>(std::strtod(begin, &end));
  }
  return end != begin && *end == '\0';
}

// Output 0 = input 0 converted to `to`.
Status cast_to(RefKernelContext& ctx, const Tensor& x, DType to) {
  if (to == DType::kUndefined) return ctx.unsupported("cast to an unsupported dtype");
  if (to == x.dtype()) {
    ctx.set_output(0, x);
    return Status();
  }
  Tensor& y = ctx.output(0, to, x.dims());
  bool ok = false;
  if (x.dtype() == DType::kString) {
    const auto& src = x.strings();
    Status st;
    ok = visit_dtypes<kSetAll>(to, [&](auto tag) {
      using To = decltype(tag);
      To* dst = y.data<To>();
      for (int64_t i = 0, n = x.numel(); i < n && st.ok(); ++i) {
        if (!string_to_number(src[i], &dst[i])) {
          st = ctx.error("cannot parse '" + src[i] + "' as " + dtype_name(to));
        }
      }
    });
    if (ok) return st;
  } else if (to == DType::kString) {
    auto& dst = y.strings();
    ok = visit_dtypes<kSetAll>(x.dtype(), [&](auto tag) {
      using From = decltype(tag);
      const From* src = x.data<From>();
      for (int64_t i = 0, n = x.numel(); i < n; ++i) dst[i] = number_to_string(src[i]);
    });
  } else {
    ok = visit_dtypes<kSetAll>(x.dtype(),
                               [&](auto from_tag) {
                                 using From = decltype(from_tag);
                                 ok = visit_dtypes<kSetAll>(to, [&](auto to_tag) {
                                   using To = decltype(to_tag);
                                   map_elements<From, To>(
                                       ctx, x, y, [](From v) { return convert_element<To>(v); });
                                 });
                               }) &&
         ok;
  }
  if (!ok) {
    return ctx.unsupported(std::string("cast from ") + dtype_name(x.dtype()) + " to " +
                           dtype_name(to));
  }
  return Status();
}

Status cast_kernel(RefKernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  if (!x) return ctx.error("missing input 0");
  const Node& node = ctx.node();
  const Attribute* to = node.attr("to");
  if (!to) return ctx.error("missing attribute 'to'");
  DType target =
      to->type == Attribute::Type::kString ? dtype_from_onnx_name(to->s) : dtype_from_onnx_code(to->i);
  return cast_to(ctx, *x, target);
}

Status cast_like_kernel(RefKernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  const Tensor* like = ctx.input(1);
  if (!x || !like) return ctx.error("expects two inputs");
  return cast_to(ctx, *x, like->dtype());
}

Status identity_kernel(RefKernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  if (!x) return ctx.error("missing input 0");
  ctx.set_output(0, *x);  // shares the buffer; the pool only reuses unshared buffers
  return Status();
}

// Dropout at inference: output = input, mask all true. Training with a non-zero ratio would need
// random numbers and is unsupported.
Status dropout_kernel(RefKernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  if (!x) return ctx.error("missing input 0");
  const Node& node = ctx.node();
  if (node.opset >= 12) {
    double ratio = 0.5;
    if (ctx.has_input(1)) {
      const Tensor* r = ctx.input(1);
      if (r->numel() != 1 || !dtype_is_float(r->dtype()))
        return ctx.error("ratio must be a float scalar");
      ratio = r->as_double(0);
    }
    bool training = false;
    if (ctx.has_input(2)) {
      const Tensor* m = ctx.input(2);
      if (m->numel() != 1 || m->dtype() != DType::kBool)
        return ctx.error("training_mode must be a bool scalar");
      training = m->data<bool>()[0];
    }
    if (ratio < 0.0 || ratio >= 1.0) return ctx.error("ratio must be in [0, 1)");
    if (training && ratio > 0.0) return ctx.unsupported("training mode with ratio > 0");
  }
  ctx.set_output(0, *x);
  if (ctx.wants_output(1)) {
    // Opset 10 made the mask bool; before it had the input's dtype.
    DType mask_dtype = node.opset >= 10 ? DType::kBool : x->dtype();
    Tensor& mask = ctx.output(1, mask_dtype, x->dims());
    bool ok = visit_dtypes<kSetAll>(mask_dtype, [&](auto tag) {
      using T = decltype(tag);
      T* p = mask.data<T>();
      for (int64_t i = 0, n = mask.numel(); i < n; ++i) p[i] = from_compute<T>(1.0f);
    });
    if (!ok) return ctx.unsupported(std::string("mask dtype ") + dtype_name(mask_dtype));
  }
  return Status();
}

Status isinf_kernel(RefKernelContext& ctx) {
  bool negative = ctx.node().attr_int("detect_negative", 1) != 0;
  bool positive = ctx.node().attr_int("detect_positive", 1) != 0;
  return unary_predicate_kernel<kSetFloat>(
      ctx, [negative, positive](auto x) { return std::isinf(x) && (x > 0 ? positive : negative); });
}

}  // namespace

void register_elementwise_cast_kernels(RefKernelTable& t) {
  t.add("Cast", cast_kernel);
  t.add("CastLike", cast_like_kernel);
  t.add("Identity", identity_kernel);
  t.add("Dropout", dropout_kernel);
  t.add("IsNaN", [](RefKernelContext& ctx) {
    return unary_predicate_kernel<kSetFloat>(ctx, [](auto x) { return std::isnan(x); });
  });
  t.add("IsInf", isinf_kernel);
}

}  // namespace tessera::ref
