// Signal ops of opset 17: DFT, STFT, HannWindow, HammingWindow, BlackmanWindow, MelWeightMatrix.
// Complex tensors carry a trailing dimension of 2 (real, imaginary). Computed in double with a
// plain O(n^2) DFT.
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "backends/ref/misc_kernels.h"
#include "backends/ref/ref_util.h"

namespace tessera {
namespace {

constexpr double kPi = std::numbers::pi;

// The numeric ONNX element types that the output_datatype attributes may name.
bool dtype_from_onnx_enum(int64_t e, DType* out) {
  DType dt = dtype_from_onnx_code(e);
  if (dt == DType::kUndefined || dt == DType::kString || dt == DType::kBool) return false;
  *out = dt;
  return true;
}

// Writes `values` (row-major, numel values) into a new output of `dtype`.
Status write_output(RefKernelContext& ctx, int i, DType dtype, std::vector<int64_t> dims,
                    const std::vector<double>& values) {
  Tensor& out = ctx.output(i, dtype, std::move(dims));
  bool ok = visit_numeric_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = out.data<T>();
    for (size_t k = 0; k < values.size(); ++k) p[k] = static_cast<T>(values[k]);
  });
  if (!ok) return ctx.unsupported(std::string("output dtype ") + dtype_name(dtype));
  return Status();
}

Result<int64_t> scalar_int(RefKernelContext& ctx, int i, const char* what) {
  const Tensor* t = ctx.input(i);
  if (!t || t->numel() != 1) return ctx.error(std::string(what) + " must be a scalar");
  if (!dtype_is_integer(t->dtype())) return ctx.error(std::string(what) + " must be an integer");
  return t->as_int64(0);
}

// One DFT of n_in complex samples (zero-padded / truncated to n), keeping the first n_out bins.
void dft_1d(const std::vector<double>& re, const std::vector<double>& im, int64_t n, int64_t n_out,
            bool inverse, std::vector<double>* out_re, std::vector<double>* out_im) {
  out_re->assign(n_out, 0.0);
  out_im->assign(n_out, 0.0);
  const double sign = inverse ? 1.0 : -1.0;
  const int64_t n_in = std::min<int64_t>(n, static_cast<int64_t>(re.size()));
  for (int64_t k = 0; k < n_out; ++k) {
    double sr = 0, si = 0;
    for (int64_t t = 0; t < n_in; ++t) {
      // Reduce k*t mod n first so the angle stays exact for long signals.
      double angle = sign * 2 * kPi * static_cast<double>((k * t) % n) / static_cast<double>(n);
      double c = std::cos(angle), s = std::sin(angle);
      sr += re[t] * c - im[t] * s;
      si += re[t] * s + im[t] * c;
    }
    if (inverse) {
      sr /= static_cast<double>(n);
      si /= static_cast<double>(n);
    }
    (*out_re)[k] = sr;
    (*out_im)[k] = si;
  }
}

Status dft_kernel(RefKernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  if (!x) return ctx.error("missing input");
  if (!dtype_is_float(x->dtype())) return ctx.error("input must be a float tensor");
  const int rank = x->rank();
  if (rank < 2 || (x->dim(-1) != 1 && x->dim(-1) != 2)) {
    return ctx.error("input must end in a dimension of 1 (real) or 2 (complex)");
  }
  const Node& n = ctx.node();
  int64_t axis_attr = n.attr_int("axis", 1);
  TESSERA_ASSIGN_OR_RETURN(int axis, ref::normalize_axis(axis_attr, rank));
  if (axis == rank - 1) return ctx.error("axis cannot be the last (complex) dimension");
  const bool inverse = n.attr_int("inverse", 0) != 0;
  const bool onesided = n.attr_int("onesided", 0) != 0;
  const bool complex_in = x->dim(-1) == 2;
  if (onesided && inverse) return ctx.unsupported("onesided inverse DFT");
  int64_t length = x->dim(axis);
  if (ctx.has_input(1)) {
    TESSERA_ASSIGN_OR_RETURN(length, scalar_int(ctx, 1, "dft_length"));
    if (length <= 0 || length > (1 << 24)) return ctx.error("dft_length must be in [1, 2^24]");
  }
  if (length <= 0) return ctx.error("the DFT axis is empty");
  const int64_t bins = onesided ? length / 2 + 1 : length;
  std::vector<int64_t> out_dims = x->dims();
  out_dims[axis] = bins;
  out_dims[rank - 1] = 2;
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= x->dim(d);
  for (int d = axis + 1; d < rank - 1; ++d) inner *= x->dim(d);
  const int64_t in_len = x->dim(axis), comps = x->dim(-1);
  std::vector<double> xv = x->to_double_vector();
  std::vector<double> result(outer * bins * inner * 2, 0.0);
  std::vector<double> re, im, ore, oim;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      re.assign(in_len, 0.0);
      im.assign(in_len, 0.0);
      for (int64_t t = 0; t < in_len; ++t) {
        int64_t off = ((o * in_len + t) * inner + i) * comps;
        re[t] = xv[off];
        if (complex_in) im[t] = xv[off + 1];
      }
      dft_1d(re, im, length, bins, inverse, &ore, &oim);
      for (int64_t k = 0; k < bins; ++k) {
        int64_t off = ((o * bins + k) * inner + i) * 2;
        result[off] = ore[k];
        result[off + 1] = oim[k];
      }
    }
  }
  return write_output(ctx, 0, x->dtype(), out_dims, result);
}

Status stft_kernel(RefKernelContext& ctx) {
  const Tensor* signal = ctx.input(0);
  if (!signal) return ctx.error("missing signal");
  if (!dtype_is_float(signal->dtype())) return ctx.error("signal must be a float tensor");
  if (signal->rank() != 3 || (signal->dim(2) != 1 && signal->dim(2) != 2)) {
    return ctx.error("signal must be [batch, length, 1 or 2]");
  }
  TESSERA_ASSIGN_OR_RETURN(int64_t step, scalar_int(ctx, 1, "frame_step"));
  if (step <= 0) return ctx.error("frame_step must be positive");
  const Tensor* window = ctx.input(2);
  int64_t frame_length = -1;
  if (ctx.has_input(3)) {
    TESSERA_ASSIGN_OR_RETURN(frame_length, scalar_int(ctx, 3, "frame_length"));
  }
  if (window) {
    if (window->rank() != 1) return ctx.error("window must be 1-D");
    if (frame_length >= 0 && frame_length != window->dim(0)) {
      return ctx.error("frame_length does not match the window length");
    }
    frame_length = window->dim(0);
  }
  if (frame_length <= 0) return ctx.error("needs a window or a positive frame_length");
  if (frame_length > (1 << 24)) return ctx.error("frame_length too large");
  const int64_t batch = signal->dim(0), len = signal->dim(1), comps = signal->dim(2);
  if (frame_length > len) return ctx.error("frame_length is longer than the signal");
  const bool onesided = ctx.node().attr_int("onesided", 1) != 0;
  if (onesided && comps == 2) return ctx.error("onesided needs a real signal");
  const int64_t frames = (len - frame_length) / step + 1;
  const int64_t bins = onesided ? frame_length / 2 + 1 : frame_length;
  std::vector<double> sv = signal->to_double_vector();
  std::vector<double> wv = window ? window->to_double_vector() : std::vector<double>(frame_length, 1.0);
  std::vector<double> result(batch * frames * bins * 2, 0.0);
  std::vector<double> re(frame_length), im(frame_length), ore, oim;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t f = 0; f < frames; ++f) {
      for (int64_t t = 0; t < frame_length; ++t) {
        int64_t off = (b * len + f * step + t) * comps;
        re[t] = sv[off] * wv[t];
        im[t] = comps == 2 ? sv[off + 1] * wv[t] : 0.0;
      }
      dft_1d(re, im, frame_length, bins, false, &ore, &oim);
      for (int64_t k = 0; k < bins; ++k) {
        int64_t off = ((b * frames + f) * bins + k) * 2;
        result[off] = ore[k];
        result[off + 1] = oim[k];
      }
    }
  }
  return write_output(ctx, 0, signal->dtype(), {batch, frames, bins, 2}, result);
}

enum class Window { kHann, kHamming, kBlackman };

Status window_kernel(RefKernelContext& ctx, Window kind) {
  TESSERA_ASSIGN_OR_RETURN(int64_t size, scalar_int(ctx, 0, "size"));
  if (size < 0 || size > (int64_t{1} << 28)) return ctx.error("size out of range");
  DType dtype;
  if (!dtype_from_onnx_enum(ctx.node().attr_int("output_datatype", 1), &dtype)) {
    return ctx.error("unsupported output_datatype");
  }
  const bool periodic = ctx.node().attr_int("periodic", 1) != 0;
  const double denom = static_cast<double>(periodic ? size : size - 1);
  std::vector<double> w(size, 0.0);
  for (int64_t i = 0; i < size; ++i) {
    double a = denom > 0 ? 2 * kPi * static_cast<double>(i) / denom : 0.0;
    switch (kind) {
      case Window::kHann: w[i] = 0.5 - 0.5 * std::cos(a); break;
      case Window::kHamming: w[i] = 25.0 / 46.0 - (21.0 / 46.0) * std::cos(a); break;
      case Window::kBlackman: w[i] = 0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2 * a); break;
    }
  }
  return write_output(ctx, 0, dtype, {size}, w);
}

Status mel_weight_matrix_kernel(RefKernelContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(int64_t num_mel_bins, scalar_int(ctx, 0, "num_mel_bins"));
  TESSERA_ASSIGN_OR_RETURN(int64_t dft_length, scalar_int(ctx, 1, "dft_length"));
  TESSERA_ASSIGN_OR_RETURN(int64_t sample_rate, scalar_int(ctx, 2, "sample_rate"));
  const Tensor* lower = ctx.input(3);
  const Tensor* upper = ctx.input(4);
  if (!lower || lower->numel() != 1 || !upper || upper->numel() != 1) {
    return ctx.error("lower_edge_hertz and upper_edge_hertz must be scalars");
  }
  if (num_mel_bins <= 0 || dft_length <= 0 || sample_rate <= 0) {
    return ctx.error("num_mel_bins, dft_length and sample_rate must be positive");
  }
  if (num_mel_bins > (1 << 20) || dft_length > (1 << 24)) return ctx.error("sizes too large");
  DType dtype;
  if (!dtype_from_onnx_enum(ctx.node().attr_int("output_datatype", 1), &dtype)) {
    return ctx.error("unsupported output_datatype");
  }
  const double low_hz = lower->as_double(0), high_hz = upper->as_double(0);
  const int64_t spectrogram_bins = dft_length / 2 + 1;
  // As the ONNX reference: num_mel_bins + 2 points spaced evenly in mel (step over the point
  // count), mapped back to Hz and to DFT bins with floor division.
  const int64_t points = num_mel_bins + 2;
  const double low_mel = 2595 * std::log10(1 + low_hz / 700);
  const double high_mel = 2595 * std::log10(1 + high_hz / 700);
  const double mel_step = (high_mel - low_mel) / static_cast<double>(points);
  std::vector<int64_t> bin(points);
  for (int64_t i = 0; i < points; ++i) {
    double hz = 700 * (std::pow(10.0, (static_cast<double>(i) * mel_step + low_mel) / 2595) - 1);
    bin[i] = static_cast<int64_t>(std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(sample_rate)));
    if (bin[i] < 0 || bin[i] >= spectrogram_bins) return ctx.error("mel band edge outside the spectrum");
  }
  std::vector<double> out(spectrogram_bins * num_mel_bins, 0.0);
  for (int64_t m = 0; m < num_mel_bins; ++m) {
    const int64_t lo = bin[m], center = bin[m + 1], hi = bin[m + 2];
    if (center == lo) {
      out[center * num_mel_bins + m] = 1;
    } else {
      for (int64_t j = lo; j <= center; ++j) {
        out[j * num_mel_bins + m] = static_cast<double>(j - lo) / static_cast<double>(center - lo);
      }
    }
    if (hi > center) {
      for (int64_t j = center; j < hi; ++j) {
        out[j * num_mel_bins + m] = static_cast<double>(hi - j) / static_cast<double>(hi - center);
      }
    }
  }
  return write_output(ctx, 0, dtype, {spectrogram_bins, num_mel_bins}, out);
}

}  // namespace

void register_misc_signal_kernels(RefKernelTable& t) {
  t.add("DFT", dft_kernel);
  t.add("STFT", stft_kernel);
  t.add("HannWindow", [](RefKernelContext& ctx) { return window_kernel(ctx, Window::kHann); });
  t.add("HammingWindow", [](RefKernelContext& ctx) { return window_kernel(ctx, Window::kHamming); });
  t.add("BlackmanWindow", [](RefKernelContext& ctx) { return window_kernel(ctx, Window::kBlackman); });
  t.add("MelWeightMatrix", mel_weight_matrix_kernel);
}

}  // namespace tessera
