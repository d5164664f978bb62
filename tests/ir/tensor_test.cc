// Tests of the tensor basics: Float16/BFloat16, Tensor::cast, .npy files, Status/Result.
#include "ir/tensor.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>

#include "ir/half.h"
#include "ir/npy.h"
#include "ir/status.h"

namespace tessera {
namespace {

bool half_is_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool bf16_is_nan(uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0; }

// The value of a binary16 bit pattern, computed independently of half.h.
double half_reference_value(uint16_t h) {
  int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v;
  if (exp == 0) {
    v = std::ldexp(mant, -24);
  } else if (exp == 31) {
    v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else {
    v = std::ldexp(1024 + mant, exp - 25);
  }
  return sign ? -v : v;
}

TEST(Float16, AllBitPatternsRoundTripThroughFloat) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    uint16_t h = static_cast<uint16_t>(bits);
    float f = half_bits_to_float(h);
    double ref = half_reference_value(h);
    if (std::isnan(ref)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << bits;
      uint16_t back = float_to_half_bits(f);
      ASSERT_TRUE(half_is_nan(back)) << std::hex << bits;
      ASSERT_EQ(back & 0x8000u, h & 0x8000u) << "NaN sign " << std::hex << bits;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), ref) << std::hex << bits;
    ASSERT_EQ(std::signbit(f), (h & 0x8000u) != 0) << std::hex << bits;
    ASSERT_EQ(float_to_half_bits(f), h) << std::hex << bits;
    ASSERT_EQ(Float16(f).bits, h);
    ASSERT_EQ(static_cast<float>(Float16::from_bits(h)), f);
  }
}

TEST(Float16, RoundsToNearestEven) {
  // Between every two adjacent finite halves (subnormals included): the midpoint goes to the even
  // one, anything above or below it to the nearer one. Midpoints are exact in float.
  for (uint16_t h = 0; h < 0x7bff; ++h) {
    for (uint16_t sign : {uint16_t{0}, uint16_t{0x8000}}) {
      uint16_t lo = static_cast<uint16_t>(h | sign), hi = static_cast<uint16_t>((h + 1) | sign);
      float a = half_bits_to_float(lo), b = half_bits_to_float(hi);
      float mid = (a + b) / 2;
      ASSERT_EQ(static_cast<double>(mid),
                (half_reference_value(lo) + half_reference_value(hi)) / 2);
      uint16_t even = (lo & 1u) ? hi : lo;
      ASSERT_EQ(float_to_half_bits(mid), even) << std::hex << lo;
      ASSERT_EQ(float_to_half_bits(std::nextafter(mid, a)), lo) << std::hex << lo;
      ASSERT_EQ(float_to_half_bits(std::nextafter(mid, b)), hi) << std::hex << lo;
    }
  }
}

TEST(Float16, OverflowInfNanAndSubnormals) {
  EXPECT_EQ(float_to_half_bits(65504.0f), 0x7bffu);  // the largest finite half
  EXPECT_EQ(float_to_half_bits(65519.99f), 0x7bffu);
  EXPECT_EQ(float_to_half_bits(65520.0f), 0x7c00u);  // the midpoint to 65536 ties to even: inf
  EXPECT_EQ(float_to_half_bits(1e10f), 0x7c00u);
  EXPECT_EQ(float_to_half_bits(-1e10f), 0xfc00u);
  EXPECT_EQ(float_to_half_bits(std::numeric_limits<float>::infinity()), 0x7c00u);
  EXPECT_EQ(float_to_half_bits(-std::numeric_limits<float>::infinity()), 0xfc00u);
  EXPECT_TRUE(half_is_nan(float_to_half_bits(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(half_is_nan(float_to_half_bits(bits_to_float(0x7f800001u))));  // low-payload NaN
  EXPECT_TRUE(half_is_nan(float_to_half_bits(bits_to_float(0xffc00000u))));
  EXPECT_TRUE(std::isinf(half_bits_to_float(0x7c00u)));
  EXPECT_TRUE(std::isnan(half_bits_to_float(0x7e00u)));

  const float tiny = std::ldexp(1.0f, -24);  // the smallest subnormal half
  EXPECT_EQ(float_to_half_bits(tiny), 0x0001u);
  EXPECT_EQ(float_to_half_bits(tiny / 2), 0x0000u);  // tie to even: 0
  EXPECT_EQ(float_to_half_bits(std::nextafter(tiny / 2, 1.0f)), 0x0001u);
  EXPECT_EQ(float_to_half_bits(3 * tiny / 2), 0x0002u);  // tie to even: 2
  EXPECT_EQ(float_to_half_bits(-tiny), 0x8001u);
  EXPECT_EQ(float_to_half_bits(-1e-30f), 0x8000u);                   // underflow keeps sign
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -14)), 0x0400u);     // smallest normal
  EXPECT_EQ(float_to_half_bits(std::ldexp(1023.5f, -24)), 0x0400u);  // rounds up into normals
  EXPECT_EQ(float_to_half_bits(bits_to_float(1)), 0x0000u);          // float subnormal
  EXPECT_EQ(float_to_half_bits(-0.0f), 0x8000u);
  EXPECT_EQ(float_to_half_bits(1.0f), 0x3c00u);
  EXPECT_EQ(Float16(0.1).bits, 0x2e66u);
}

TEST(BFloat16, AllBitPatternsRoundTripThroughFloat) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    uint16_t b = static_cast<uint16_t>(bits);
    float f = bfloat16_bits_to_float(b);
    ASSERT_EQ(float_to_bits(f), bits << 16);
    if (bf16_is_nan(b)) {
      uint16_t back = float_to_bfloat16_bits(f);
      ASSERT_TRUE(bf16_is_nan(back)) << std::hex << bits;
      ASSERT_EQ(back & 0x8000u, b & 0x8000u);
    } else {
      ASSERT_EQ(float_to_bfloat16_bits(f), b) << std::hex << bits;
      ASSERT_EQ(BFloat16(f).bits, b);
    }
  }
}

TEST(BFloat16, RoundsToNearestEvenAndKeepsNan) {
  for (uint32_t b = 0; b < 0x7f7f; ++b) {
    for (uint32_t sign : {0u, 0x8000u}) {
      uint32_t lo = b | sign, hi = (b + 1) | sign;
      float mid = bits_to_float((lo << 16) | 0x8000u);
      ASSERT_EQ(float_to_bfloat16_bits(mid), (lo & 1u) ? hi : lo) << std::hex << lo;
      ASSERT_EQ(float_to_bfloat16_bits(bits_to_float((lo << 16) | 0x7fffu)), lo);
      ASSERT_EQ(float_to_bfloat16_bits(bits_to_float((lo << 16) | 0x8001u)), hi);
    }
  }
  EXPECT_EQ(float_to_bfloat16_bits(std::numeric_limits<float>::max()), 0x7f80u);  // rounds to inf
  EXPECT_EQ(float_to_bfloat16_bits(-std::numeric_limits<float>::infinity()), 0xff80u);
  EXPECT_TRUE(bf16_is_nan(float_to_bfloat16_bits(bits_to_float(0x7f800001u))));
  EXPECT_TRUE(bf16_is_nan(float_to_bfloat16_bits(bits_to_float(0xffffffffu))));
  EXPECT_EQ(float_to_bfloat16_bits(bits_to_float(0xffffffffu)) & 0x8000u, 0x8000u);
  EXPECT_EQ(BFloat16(1.0).bits, 0x3f80u);
}

// ---- Tensor::cast ----

template <typename T>
std::vector<T> elements(const Tensor& t) {
  const T* p = t.data<T>();
  return std::vector<T>(p, p + t.numel());
}

Tensor cast_ok(const Tensor& t, DType to) {
  Result<Tensor> r = t.cast(to);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : Tensor();
}

TEST(TensorCast, FloatToIntTruncatesTowardZero) {
  Tensor f = Tensor::from_vector<float>({2, 3}, {1.9f, -1.9f, 0.5f, -0.5f, 2.5f, -0.0f});
  Tensor i = cast_ok(f, DType::kInt32);
  EXPECT_EQ(i.dims(), f.dims());
  EXPECT_EQ(elements<int32_t>(i), (std::vector<int32_t>{1, -1, 0, 0, 2, 0}));
  EXPECT_EQ(elements<int64_t>(cast_ok(f, DType::kInt64)),
            (std::vector<int64_t>{1, -1, 0, 0, 2, 0}));
  Tensor d = Tensor::from_vector<double>({2}, {123456789.99, -3.75});
  EXPECT_EQ(elements<int32_t>(cast_ok(d, DType::kInt32)), (std::vector<int32_t>{123456789, -3}));
}

TEST(TensorCast, FloatToIntSaturatesAndMapsNanToZero) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor f = Tensor::from_vector<float>({6}, {1e10f, -1e10f, 300.0f, -5.0f, inf, nan});
  EXPECT_EQ(elements<int32_t>(cast_ok(f, DType::kInt32)),
            (std::vector<int32_t>{INT32_MAX, INT32_MIN, 300, -5, INT32_MAX, 0}));
  EXPECT_EQ(elements<uint8_t>(cast_ok(f, DType::kUint8)),
            (std::vector<uint8_t>{255, 0, 255, 0, 255, 0}));
  EXPECT_EQ(elements<int8_t>(cast_ok(f, DType::kInt8)),
            (std::vector<int8_t>{127, -128, 127, -5, 127, 0}));
  EXPECT_EQ(elements<int64_t>(
                cast_ok(Tensor::from_vector<float>({3}, {1e30f, -1e30f, -inf}), DType::kInt64)),
            (std::vector<int64_t>{INT64_MAX, INT64_MIN, INT64_MIN}));
  EXPECT_EQ(
      elements<uint64_t>(cast_ok(Tensor::from_vector<double>({2}, {1e30, -1.0}), DType::kUint64)),
      (std::vector<uint64_t>{UINT64_MAX, 0}));
  Tensor h = Tensor::from_vector<Float16>({2}, {Float16(1000.0f), Float16(-1000.0f)});
  EXPECT_EQ(elements<int8_t>(cast_ok(h, DType::kInt8)), (std::vector<int8_t>{127, -128}));
}

TEST(TensorCast, Bool) {
  Tensor f = Tensor::from_vector<float>(
      {5}, {0.0f, -0.0f, 0.5f, -2.0f, std::numeric_limits<float>::quiet_NaN()});
  EXPECT_EQ(elements<bool>(cast_ok(f, DType::kBool)),
            (std::vector<bool>{false, false, true, true, true}));
  Tensor i = Tensor::from_vector<int64_t>({3}, {0, 7, -1});
  EXPECT_EQ(elements<bool>(cast_ok(i, DType::kBool)), (std::vector<bool>{false, true, true}));
  Tensor b = Tensor::from_vector<bool>({2}, {true, false});
  EXPECT_EQ(elements<float>(cast_ok(b, DType::kFloat32)), (std::vector<float>{1, 0}));
  EXPECT_EQ(elements<int32_t>(cast_ok(b, DType::kInt32)), (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(cast_ok(b, DType::kFloat16).data<Float16>()[0].bits, 0x3c00u);
}

TEST(TensorCast, BetweenFloatTypesAndIntegers) {
  Tensor f = Tensor::from_vector<float>({3}, {1.0f, 0.1f, 65504.0f});
  Tensor h = cast_ok(f, DType::kFloat16);
  EXPECT_EQ(h.data<Float16>()[0].bits, 0x3c00u);
  EXPECT_EQ(h.data<Float16>()[1].bits, 0x2e66u);
  EXPECT_EQ(h.data<Float16>()[2].bits, 0x7bffu);
  Tensor bf = cast_ok(h, DType::kBFloat16);
  EXPECT_EQ(bf.data<BFloat16>()[0].bits, 0x3f80u);
  EXPECT_EQ(elements<float>(cast_ok(bf, DType::kFloat32))[0], 1.0f);
  Tensor back = cast_ok(h, DType::kFloat32);
  EXPECT_EQ(elements<float>(back)[2], 65504.0f);
  EXPECT_EQ(elements<double>(cast_ok(f, DType::kFloat64))[1], static_cast<double>(0.1f));
  Tensor i = Tensor::from_vector<int64_t>({3}, {-3, 1 << 20, 300});
  EXPECT_EQ(elements<double>(cast_ok(i, DType::kFloat64)), (std::vector<double>{-3, 1 << 20, 300}));
  EXPECT_EQ(elements<int16_t>(cast_ok(i, DType::kInt16)), (std::vector<int16_t>{-3, 0, 300}));
  // Integer narrowing wraps (like NumPy and C++), it does not saturate.
  EXPECT_EQ(elements<uint8_t>(cast_ok(i, DType::kUint8)), (std::vector<uint8_t>{253, 0, 44}));
  EXPECT_EQ(cast_ok(i, DType::kFloat16).data<Float16>()[1].bits, 0x7c00u);  // 2^20 overflows
}

TEST(TensorCast, SameDtypeIsADeepCopyAndStringsAreUnimplemented) {
  Tensor f = Tensor::from_vector<float>({2}, {1, 2});
  Tensor copy = cast_ok(f, DType::kFloat32);
  copy.data<float>()[0] = 5;
  EXPECT_EQ(f.data<float>()[0], 1);
  Tensor s(DType::kString, {1});
  Result<Tensor> r = s.cast(DType::kFloat32);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(f.cast(DType::kString).status().code(), StatusCode::kUnimplemented);
  Tensor empty(DType::kFloat32, {0, 3});
  Tensor empty_int = cast_ok(empty, DType::kInt32);
  EXPECT_EQ(empty_int.dims(), (std::vector<int64_t>{0, 3}));
}

// ---- .npy ----

class TempDir {
 public:
  TempDir() {
    path_ =
        std::filesystem::temp_directory_path() / ("tessera_npy_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// A tensor of `dtype` and `dims` whose bytes are a deterministic pattern (valid for every dtype:
// bools are 0/1).
Tensor patterned(DType dtype, std::vector<int64_t> dims) {
  Tensor t(dtype, std::move(dims));
  auto* bytes = static_cast<uint8_t*>(t.raw_data());
  for (size_t i = 0; i < t.nbytes(); ++i) {
    bytes[i] = dtype == DType::kBool ? static_cast<uint8_t>(i % 3 == 0)
                                     : static_cast<uint8_t>(i * 37 + 11);
  }
  return t;
}

void expect_identical(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.dtype(), b.dtype());
  ASSERT_EQ(a.dims(), b.dims());
  ASSERT_EQ(a.nbytes(), b.nbytes());
  if (a.nbytes()) {
    EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()), 0);
  }
}

TEST(Npy, RoundTripsDtypesAndShapes) {
  TempDir dir;
  const DType dtypes[] = {DType::kFloat32, DType::kFloat16, DType::kFloat64, DType::kInt8,
                          DType::kUint8,   DType::kInt16,   DType::kUint16,  DType::kInt32,
                          DType::kUint32,  DType::kInt64,   DType::kUint64,  DType::kBool};
  const std::vector<std::vector<int64_t>> shapes = {{},     {0},       {1},         {7},
                                                    {2, 3}, {3, 0, 2}, {2, 3, 4, 5}};
  int n = 0;
  for (DType dtype : dtypes) {
    for (const auto& dims : shapes) {
      Tensor t = patterned(dtype, dims);
      SCOPED_TRACE(t.describe());
      std::string path = dir.file(std::to_string(n++) + ".npy");
      ASSERT_TRUE(write_npy(path, t).ok());
      Result<Tensor> back = read_npy(path);
      ASSERT_TRUE(back.ok()) << back.status().to_string();
      expect_identical(t, *back);
      // In memory, and the data starts 64-byte aligned as NumPy writes it.
      std::string bytes = serialize_npy(t);
      EXPECT_EQ((bytes.size() - t.nbytes()) % 64, 0u);
      Result<Tensor> parsed = parse_npy(bytes);
      ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
      expect_identical(t, *parsed);
    }
  }
}

TEST(Npy, ParsesNumPyHeaders) {
  // Written by numpy.save(np.arange(6, dtype='<i2').reshape(2, 3)), header padded to 64 bytes.
  std::string header = "{'descr': '<i2', 'fortran_order': False, 'shape': (2, 3), }";
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string bytes =
      std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) + '\0' + header;
  for (int16_t v = 0; v < 6; ++v) bytes.append(reinterpret_cast<const char*>(&v), 2);
  Result<Tensor> t = parse_npy(bytes);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->dtype(), DType::kInt16);
  EXPECT_EQ(t->dims(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t->as_int64(5), 5);
}

TEST(Npy, RejectsBadFilesWithStatus) {
  EXPECT_EQ(read_npy("/nonexistent/tessera.npy").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(parse_npy("hello").status().code(), StatusCode::kInvalidArgument);
  std::string good = serialize_npy(Tensor::from_vector<float>({4}, {1, 2, 3, 4}));
  EXPECT_FALSE(parse_npy(good.substr(0, good.size() - 1)).ok());  // truncated data
  EXPECT_FALSE(parse_npy(good.substr(0, 20)).ok());               // truncated header
  auto with_header = [](std::string header) {
    return std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) + '\0' + header;
  };
  EXPECT_EQ(parse_npy(with_header("{'descr': '>f4', 'fortran_order': False, 'shape': (), }"))
                .status()
                .code(),
            StatusCode::kUnimplemented);
  EXPECT_EQ(parse_npy(with_header("{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }"))
                .status()
                .code(),
            StatusCode::kUnimplemented);
  auto with_shape = [&](const std::string& shape) {
    return with_header("{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }");
  };
  EXPECT_FALSE(parse_npy(with_shape("(-1,)")).ok());
  EXPECT_FALSE(parse_npy(with_shape("")).ok());   // used to throw std::out_of_range
  EXPECT_FALSE(parse_npy(with_shape("3")).ok());  // used to be read as a scalar
  EXPECT_FALSE(parse_npy(with_shape("(99999999999, 99999999999)")).ok());
  EXPECT_FALSE(parse_npy(with_header("{'descr': '<f4', 'fortran_order': False}")).ok());
  EXPECT_EQ(write_npy("/tmp/unused.npy", Tensor(DType::kBFloat16, {1})).code(),
            StatusCode::kUnimplemented);
}

// ---- Status / Result ----

Status fails_if(bool fail) {
  if (fail) return invalid_argument("it failed");
  return Status();
}

Result<int> half_of(int x) {
  if (x % 2) return invalid_argument(std::to_string(x) + " is odd");
  return x / 2;
}

Result<int> quarter_of(int x) {
  TESSERA_ASSIGN_OR_RETURN(int half, half_of(x));
  TESSERA_ASSIGN_OR_RETURN(int quarter, half_of(half));
  return quarter;
}

Status check_both(bool a, bool b) {
  TESSERA_RETURN_IF_ERROR(fails_if(a));
  TESSERA_RETURN_IF_ERROR(fails_if(b).with_context("second"));
  return Status();
}

TEST(Status, Basics) {
  Status ok;
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.code(), StatusCode::kOk);
  EXPECT_EQ(ok.message(), "");
  EXPECT_EQ(ok.to_string(), "OK");
  EXPECT_TRUE(Status(StatusCode::kOk, "ignored").ok());
  EXPECT_TRUE(ok.with_context("ctx").ok());

  Status err = not_found("no such file");
  EXPECT_FALSE(err.ok());
  EXPECT_EQ(err.code(), StatusCode::kNotFound);
  EXPECT_EQ(err.message(), "no such file");
  EXPECT_EQ(err.to_string(), "NotFound: no such file");
  Status ctx = err.with_context("loading model");
  EXPECT_EQ(ctx.code(), StatusCode::kNotFound);
  EXPECT_EQ(ctx.message(), "loading model: no such file");
  EXPECT_EQ(err.message(), "no such file");  // the original is unchanged
  Status copy = err;
  EXPECT_EQ(copy.to_string(), err.to_string());

  EXPECT_EQ(unimplemented("x").code(), StatusCode::kUnimplemented);
  EXPECT_EQ(io_error("x").code(), StatusCode::kIoError);
  EXPECT_EQ(internal_error("x").code(), StatusCode::kInternal);
  EXPECT_STREQ(status_code_name(StatusCode::kInvalidArgument), "InvalidArgument");
}

TEST(Status, Macros) {
  EXPECT_TRUE(check_both(false, false).ok());
  EXPECT_EQ(check_both(true, false).message(), "it failed");
  EXPECT_EQ(check_both(false, true).message(), "second: it failed");
  Result<int> q = quarter_of(12);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(*q, 3);
  EXPECT_EQ(quarter_of(7).status().message(), "7 is odd");
  EXPECT_EQ(quarter_of(6).status().message(), "3 is odd");
}

TEST(Result, ValuesAndErrors) {
  Result<std::string> r = std::string("abc");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.status().ok());
  EXPECT_EQ(*r, "abc");
  EXPECT_EQ(r->size(), 3u);
  // (A Result of a class type here trips a GCC 12 -Wmaybe-uninitialized false positive inside
  // std::variant, so the error case uses int.)
  Result<int> e = invalid_argument("bad");
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
  // An ok Status is not a value: it becomes an internal error.
  Result<int> weird = Status();
  EXPECT_FALSE(weird.ok());
  EXPECT_EQ(weird.status().code(), StatusCode::kInternal);
  // Move-only values.
  Result<std::unique_ptr<int>> p = std::make_unique<int>(4);
  ASSERT_TRUE(p.ok());
  std::unique_ptr<int> owned = std::move(p).value();
  EXPECT_EQ(*owned, 4);
}

}  // namespace
}  // namespace tessera
