#include "llm/gguf.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "llm/gguf_writer.h"

namespace tessera::llm {
namespace {

using quant::QType;

std::string temp_path(const std::string& name) {
  return testing::TempDir() + "/gguf_" + std::to_string(::getpid()) + "_" + name;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes, size_t n) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(n));
}

// A GGUF file built byte by byte, for the malformed cases the writer cannot produce.
struct GgufBytes {
  std::vector<uint8_t> b;
  GgufBytes& u32(uint32_t v) { return raw(&v, 4); }
  GgufBytes& u64(uint64_t v) { return raw(&v, 8); }
  GgufBytes& str(const std::string& s) {
    u64(s.size());
    return raw(s.data(), s.size());
  }
  GgufBytes& raw(const void* p, size_t n) {
    const auto* c = static_cast<const uint8_t*>(p);
    b.insert(b.end(), c, c + n);
    return *this;
  }
  GgufBytes& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    raw("GGUF", 4);
    return u32(version).u64(n_tensors).u64(n_kv);
  }
  GgufBytes& tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type,
                    uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }
  GgufBytes& pad(size_t align, size_t extra = 0) {
    while (b.size() % align != 0) b.push_back(0);
    b.insert(b.end(), extra, 0);
    return *this;
  }
};

Result<std::unique_ptr<GgufFile>> open_bytes(const std::vector<uint8_t>& bytes,
                                             const std::string& name) {
  const std::string path = temp_path(name);
  write_bytes(path, bytes, bytes.size());
  return GgufFile::open(path);
}

void expect_error(const std::vector<uint8_t>& bytes, const std::string& name,
                  const std::string& fragment) {
  auto f = open_bytes(bytes, name);
  ASSERT_FALSE(f.ok()) << name;
  EXPECT_NE(f.status().message().find(fragment), std::string::npos) << f.status().message();
  EXPECT_NE(f.status().message().find(temp_path(name)), std::string::npos)
      << "the error names the file: " << f.status().message();
}

struct TestTensor {
  std::string name;
  QType type;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;
};

// Seeded random data, quantized row by row.
TestTensor make_tensor(const std::string& name, QType type, std::vector<int64_t> dims,
                       uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  int64_t rows = 1;
  for (size_t k = 1; k < dims.size(); ++k) rows *= dims[k];
  const int64_t rb = quant::row_bytes(type, dims[0]);
  TestTensor t{name, type, dims, std::vector<uint8_t>(rb * rows)};
  std::vector<float> row(dims[0]);
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = normal(rng);
    quant::quantize_row(type, row.data(), dims[0], t.bytes.data() + r * rb);
  }
  return t;
}

std::vector<TestTensor> all_type_tensors() {
  return {
      make_tensor("f32", QType::kF32, {8, 3}, 1),
      make_tensor("f16", QType::kF16, {16, 2}, 2),
      make_tensor("bf16", QType::kBF16, {5}, 3),
      make_tensor("q8_0", QType::kQ8_0, {64, 3}, 4),
      make_tensor("q4_0", QType::kQ4_0, {32, 2, 2}, 5),
      make_tensor("blk.0.q4_k", QType::kQ4_K, {256, 2}, 6),
      make_tensor("blk.0.q6_k", QType::kQ6_K, {512, 1, 1, 2}, 7),
  };
}

// Writes every metadata type and a tensor of every supported type.
std::string write_sample(const std::string& name, const std::vector<TestTensor>& tensors) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_uint32("llama.block_count", 2);
  w.set_int32("test.int32", -7);
  w.set_uint64("test.uint64", uint64_t{1} << 40);
  w.set_float32("test.float32", 1e-5f);
  w.set_bool("test.bool", true);
  w.set_uint8("test.uint8", 200);
  w.set_int8("test.int8", -100);
  w.set_uint16("test.uint16", 60000);
  w.set_int16("test.int16", -30000);
  w.set_int64("test.int64", -(int64_t{1} << 50));
  w.set_float64("test.float64", 0.1);
  w.set_string_array("tokenizer.ggml.tokens", {"<s>", "hello", "", "\xe2\x96\x81world"});
  w.set_float32_array("tokenizer.ggml.scores", {0.5f, -1.25f, 3.0f});
  w.set_int32_array("tokenizer.ggml.token_type", {1, -2, 3, 1 << 30});
  w.set_string("general.name", "first");
  w.set_string("general.name", "tiny");  // replaced in place, keeps its position
  for (const TestTensor& t : tensors) {
    w.add_tensor(t.name, t.type, t.dims, [&t](uint8_t* dst) {
      std::memcpy(dst, t.bytes.data(), t.bytes.size());
      return Status();
    });
  }
  const std::string path = temp_path(name);
  Status st = w.write(path);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return path;
}

TEST(GgufTest, WriteReadRoundTrip) {
  const std::vector<TestTensor> tensors = all_type_tensors();
  const std::string path = write_sample("round_trip.gguf", tensors);
  auto opened = GgufFile::open(path);
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  const GgufFile& f = **opened;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.data_offset() % 32, 0u);

  const std::vector<std::string> keys = {"general.architecture",
                                         "llama.block_count",
                                         "test.int32",
                                         "test.uint64",
                                         "test.float32",
                                         "test.bool",
                                         "test.uint8",
                                         "test.int8",
                                         "test.uint16",
                                         "test.int16",
                                         "test.int64",
                                         "test.float64",
                                         "tokenizer.ggml.tokens",
                                         "tokenizer.ggml.scores",
                                         "tokenizer.ggml.token_type",
                                         "general.name"};
  EXPECT_EQ(f.metadata_keys(), keys);
  EXPECT_EQ(f.get_string("general.architecture").value(), "llama");
  EXPECT_EQ(f.get_string("general.name").value(), "tiny");
  EXPECT_EQ(f.get_int("llama.block_count").value(), 2);
  EXPECT_EQ(f.find("llama.block_count")->type, GgufType::kUint32);
  EXPECT_EQ(f.get_int("test.int32").value(), -7);
  EXPECT_EQ(f.get_int("test.uint64").value(), int64_t{1} << 40);
  EXPECT_EQ(f.find("test.uint64")->u, uint64_t{1} << 40);
  EXPECT_FLOAT_EQ(static_cast<float>(f.get_float("test.float32").value()), 1e-5f);
  EXPECT_TRUE(f.get_bool_or("test.bool", false));
  EXPECT_EQ(f.get_int("test.uint8").value(), 200);
  EXPECT_EQ(f.get_int("test.int8").value(), -100);
  EXPECT_EQ(f.get_int("test.uint16").value(), 60000);
  EXPECT_EQ(f.get_int("test.int16").value(), -30000);
  EXPECT_EQ(f.get_int("test.int64").value(), -(int64_t{1} << 50));
  EXPECT_EQ(f.get_float("test.float64").value(), 0.1);
  EXPECT_EQ(f.get_float("test.int16").value(), -30000.0);  // integers read as floats too

  const GgufValue* tokens = f.find("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->type, GgufType::kArray);
  EXPECT_EQ(tokens->array_type, GgufType::kString);
  EXPECT_EQ(tokens->strings, (std::vector<std::string>{"<s>", "hello", "", "\xe2\x96\x81world"}));
  EXPECT_EQ(tokens->array_size(), 4u);
  const GgufValue* scores = f.find("tokenizer.ggml.scores");
  EXPECT_EQ(scores->array_type, GgufType::kFloat32);
  EXPECT_EQ(scores->floats, (std::vector<double>{0.5, -1.25, 3.0}));
  const GgufValue* types = f.find("tokenizer.ggml.token_type");
  EXPECT_EQ(types->ints, (std::vector<int64_t>{1, -2, 3, 1 << 30}));
  EXPECT_EQ(types->floats, (std::vector<double>{1, -2, 3, 1 << 30}));

  ASSERT_EQ(f.tensors().size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TestTensor& want = tensors[i];
    const GgufTensorInfo& got = f.tensors()[i];
    EXPECT_EQ(got.name, want.name);
    EXPECT_EQ(got.type, want.type);
    EXPECT_EQ(got.ggml_type, static_cast<uint32_t>(want.type));
    EXPECT_EQ(got.dims, want.dims);
    EXPECT_EQ(got.nbytes, static_cast<int64_t>(want.bytes.size()));
    EXPECT_EQ(got.offset % 32, 0u);
    EXPECT_EQ(f.find_tensor(want.name), &got);
    ASSERT_NE(f.tensor_data(got), nullptr);
    EXPECT_EQ(std::memcmp(f.tensor_data(got), want.bytes.data(), want.bytes.size()), 0)
        << want.name;
    std::vector<uint8_t> copy(got.nbytes);
    ASSERT_TRUE(f.read_tensor(got, copy.data()).ok());
    EXPECT_EQ(copy, want.bytes) << want.name;
    // After the pages are released, the mapping reads the file again.
    EXPECT_EQ(std::memcmp(f.tensor_data(got), want.bytes.data(), want.bytes.size()), 0)
        << want.name;
  }
  EXPECT_EQ(f.find_tensor("nope"), nullptr);
  EXPECT_EQ(f.tensors()[6].numel(), 1024);
}

TEST(GgufTest, GettersNameKeyAndType) {
  const std::string path = write_sample("getters.gguf", {});
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  Result<std::string> missing = (*f)->get_string("no.such.key");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("'no.such.key' is missing"), std::string::npos);
  Result<std::string> wrong = (*f)->get_string("llama.block_count");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("'llama.block_count' has type uint32, expected string"),
            std::string::npos)
      << wrong.status().message();
  Result<int64_t> not_int = (*f)->get_int("general.name");
  ASSERT_FALSE(not_int.ok());
  EXPECT_NE(not_int.status().message().find("has type string"), std::string::npos);
  Result<double> arr = (*f)->get_float("tokenizer.ggml.scores");
  ASSERT_FALSE(arr.ok());
  EXPECT_NE(arr.status().message().find("array of float32"), std::string::npos);
  EXPECT_EQ((*f)->get_int_or("general.name", 5), 5);
  EXPECT_EQ((*f)->get_int_or("llama.block_count", 5), 2);
  EXPECT_EQ((*f)->get_float_or("missing", 2.5), 2.5);
  EXPECT_EQ((*f)->get_string_or("llama.block_count", "x"), "x");
  EXPECT_EQ((*f)->get_string_or("general.name", "x"), "tiny");
  EXPECT_FALSE((*f)->get_bool_or("missing", false));
  EXPECT_TRUE((*f)->get_int("test.bool").ok());
}

TEST(GgufTest, CustomAlignment) {
  const TestTensor t = make_tensor("w", QType::kQ8_0, {32, 3}, 9);
  const TestTensor u = make_tensor("u", QType::kF32, {3}, 10);
  GgufWriter w;
  w.set_uint32("general.alignment", 64);
  for (const TestTensor* x : {&t, &u}) {
    w.add_tensor(x->name, x->type, x->dims, [x](uint8_t* dst) {
      std::memcpy(dst, x->bytes.data(), x->bytes.size());
      return Status();
    });
  }
  const std::string path = temp_path("align64.gguf");
  ASSERT_TRUE(w.write(path).ok());
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ((*f)->alignment(), 64u);
  EXPECT_EQ((*f)->data_offset() % 64, 0u);
  EXPECT_EQ((*f)->tensors()[1].offset, 128u);  // 102 bytes of Q8_0, padded to 64
  EXPECT_EQ(std::memcmp((*f)->tensor_data((*f)->tensors()[1]), u.bytes.data(), 12), 0);
}

TEST(GgufTest, WriterRefusesBadTensors) {
  GgufWriter w;
  w.add_tensor("bad", QType::kQ4_K, {100, 2}, [](uint8_t*) { return Status(); });
  Status st = w.write(temp_path("bad_tensor.gguf"));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'bad'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("block size 256"), std::string::npos) << st.message();

  GgufWriter fails;
  fails.add_tensor("w", QType::kF32, {4}, [](uint8_t*) { return io_error("disk on fire"); });
  const std::string path = temp_path("fill_fails.gguf");
  st = fails.write(path);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("disk on fire"), std::string::npos);
  EXPECT_FALSE(std::ifstream(path + ".tmp").good()) << "the temporary file is removed";
}

TEST(GgufTest, UnknownTensorTypeIsKept) {
  GgufBytes g;
  g.header(3, 2, 0).tensor("q4_1", {32}, 3, 0).tensor("f32", {4}, 0, 32).pad(32, 64);
  auto f = open_bytes(g.b, "unknown_type.gguf");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  const GgufTensorInfo* t = (*f)->find_tensor("q4_1");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type, std::nullopt);
  EXPECT_EQ(t->ggml_type, 3u);
  EXPECT_EQ(t->nbytes, -1);
  EXPECT_EQ((*f)->tensor_data(*t), nullptr);
  uint8_t dst[32];
  Status st = (*f)->read_tensor(*t, dst);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'q4_1' has ggml type 3"), std::string::npos) << st.message();
  EXPECT_EQ((*f)->find_tensor("f32")->nbytes, 16);
}

TEST(GgufTest, AcceptsVersion2AndHandBuiltArrays) {
  GgufBytes g;
  g.header(2, 0, 3);
  g.str("bools").u32(static_cast<uint32_t>(GgufType::kArray)).u32(7).u64(3);
  g.raw("\x01\x00\x01", 3);
  g.str("i64s")
      .u32(static_cast<uint32_t>(GgufType::kArray))
      .u32(11)
      .u64(2)
      .u64(uint64_t(-5))
      .u64(9);
  g.str("nested").u32(static_cast<uint32_t>(GgufType::kArray)).u32(9).u64(2);
  g.u32(4).u64(1).u32(77);   // [uint32: 77]
  g.u32(8).u64(1).str("x");  // [string: "x"]
  auto f = open_bytes(g.b, "v2.gguf");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ((*f)->version(), 2u);
  EXPECT_EQ((*f)->find("bools")->ints, (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ((*f)->find("i64s")->ints, (std::vector<int64_t>{-5, 9}));
  EXPECT_EQ((*f)->find("nested")->array_type, GgufType::kArray);  // skipped, kept empty
}

TEST(GgufTest, SpecificErrors) {
  {
    GgufBytes g;
    g.raw("GGML", 4).u32(3).u64(0).u64(0);
    expect_error(g.b, "bad_magic.gguf", "not a GGUF file");
  }
  {
    GgufBytes g;
    g.header(1, 0, 0);
    expect_error(g.b, "v1.gguf", "version 1");
  }
  {
    GgufBytes g;
    g.header(7, 0, 0);
    expect_error(g.b, "v7.gguf", "unknown GGUF version 7");
  }
  {
    GgufBytes g;
    g.header(3, 1, 0).tensor("big", {1024}, 0, 0).pad(32, 64);
    expect_error(g.b, "past_end.gguf", "'big' data [0, 4096) runs past the end");
  }
  {
    GgufBytes g;
    g.header(3, 1, 0).tensor("far", {4}, 0, uint64_t{1} << 62).pad(32, 64);
    expect_error(g.b, "offset_past_end.gguf", "past the end of the file");
  }
  {
    GgufBytes g;
    g.header(3, 1, 0).tensor("five", {1, 1, 1, 1, 1}, 0, 0).pad(32, 64);
    expect_error(g.b, "ndims5.gguf", "'five' has n_dims 5");
  }
  {
    GgufBytes g;
    g.header(3, 2, 0).tensor("w", {4}, 0, 0).tensor("w", {4}, 0, 32).pad(32, 64);
    expect_error(g.b, "dup_tensor.gguf", "duplicate tensor name 'w'");
  }
  {
    GgufBytes g;
    g.header(3, 1, 0).tensor("odd", {4}, 0, 4).pad(32, 64);
    expect_error(g.b, "misaligned.gguf", "'odd' has offset 4, not a multiple of the alignment 32");
  }
  {
    GgufBytes g;
    g.header(3, 0, 1).u64(uint64_t{1} << 40).raw("key, and some more bytes", 24);
    expect_error(g.b, "long_string.gguf", "is larger than the rest of the file");
  }
  {
    GgufBytes g;
    g.header(3, 0, 1).str("s").u32(8).u64(1000).raw("short", 5);
    expect_error(g.b, "long_value.gguf", "metadata 's'");
  }
  {
    GgufBytes g;
    g.header(3, uint64_t{1} << 62, uint64_t{1} << 63);
    expect_error(g.b, "huge_counts.gguf", "larger than the file can hold");
  }
  {
    GgufBytes g;
    g.header(3, 0, 1).str("a").u32(9).u32(0).u64(uint64_t{1} << 60);
    expect_error(g.b, "huge_array.gguf", "array of 1152921504606846976 uint8");
  }
  {
    GgufBytes g;
    g.header(3, 0, 1).str("t").u32(13).u32(0);
    expect_error(g.b, "bad_value_type.gguf", "unknown value type 13");
  }
  {
    GgufBytes g;
    g.header(3, 0, 2).str("k").u32(4).u32(1).str("k").u32(4).u32(2);
    expect_error(g.b, "dup_key.gguf", "duplicate metadata 'k'");
  }
  {
    GgufBytes g;
    g.header(3, 0, 1).str("general.alignment").u32(4).u32(48);
    expect_error(g.b, "bad_alignment.gguf", "power of two");
  }
  {
    GgufBytes g;
    g.header(3, 1, 0).tensor("q", {100}, static_cast<uint32_t>(QType::kQ8_0), 0).pad(32, 256);
    expect_error(g.b, "bad_block.gguf", "not a multiple of the block size 32");
  }
  {
    GgufBytes g;
    g.header(3, 1, 0).tensor("huge", {uint64_t{1} << 40, uint64_t{1} << 40}, 0, 0).pad(32, 64);
    expect_error(g.b, "overflow.gguf", "int64");
  }
  expect_error({}, "empty.gguf", "not a GGUF file");
  auto missing = GgufFile::open(temp_path("does_not_exist.gguf"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  auto dir = GgufFile::open(testing::TempDir());
  EXPECT_FALSE(dir.ok());
}

// Every cut inside the header and a sample across the data: open() fails with a message when the
// cut removes needed bytes, and succeeds (same tensors) when only trailing padding is gone.
TEST(GgufTest, TruncatedFilesFailCleanly) {
  const std::string path = write_sample("truncate_src.gguf", all_type_tensors());
  const std::vector<uint8_t> bytes = read_bytes(path);
  uint64_t data_offset = 0, data_end = 0;
  {
    auto f = GgufFile::open(path);
    ASSERT_TRUE(f.ok());
    data_offset = (*f)->data_offset();
    for (const GgufTensorInfo& t : (*f)->tensors()) {
      data_end = std::max<uint64_t>(data_end, t.offset + t.nbytes);
    }
  }
  const uint64_t needed = data_offset + data_end;
  ASSERT_LE(needed, bytes.size());
  std::vector<size_t> cuts;
  for (size_t n = 0; n <= data_offset; ++n) cuts.push_back(n);
  std::mt19937 rng(42);
  for (int k = 0; k < 64; ++k) cuts.push_back(data_offset + rng() % (bytes.size() - data_offset));
  cuts.push_back(needed - 1);
  cuts.push_back(needed);
  const std::string cut_path = temp_path("truncated.gguf");
  for (size_t n : cuts) {
    write_bytes(cut_path, bytes, n);
    auto f = GgufFile::open(cut_path);
    if (n < needed) {
      ASSERT_FALSE(f.ok()) << "cut at " << n;
      EXPECT_FALSE(f.status().message().empty());
    } else {
      ASSERT_TRUE(f.ok()) << "cut at " << n << ": " << f.status().to_string();
      EXPECT_EQ((*f)->tensors().size(), 7u);
    }
  }
}

// Random bytes written over the header: open() fails with a message or succeeds with every
// tensor inside the file (reading them all must stay in bounds; ASan checks).
TEST(GgufTest, CorruptedHeaderNeverCrashes) {
  const std::string path = write_sample("corrupt_src.gguf", all_type_tensors());
  const std::vector<uint8_t> bytes = read_bytes(path);
  uint64_t data_offset = 0;
  {
    auto f = GgufFile::open(path);
    ASSERT_TRUE(f.ok());
    data_offset = (*f)->data_offset();
  }
  std::mt19937 rng(1234);
  const std::string bad_path = temp_path("corrupt.gguf");
  int failures = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<uint8_t> b = bytes;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < flips; ++k) b[rng() % data_offset] = static_cast<uint8_t>(rng());
    write_bytes(bad_path, b, b.size());
    auto f = GgufFile::open(bad_path);
    if (!f.ok()) {
      ++failures;
      EXPECT_FALSE(f.status().message().empty());
      continue;
    }
    for (const GgufTensorInfo& t : (*f)->tensors()) {
      if (!t.type) continue;
      ASSERT_LE((*f)->data_offset() + t.offset + t.nbytes, b.size()) << t.name;
      std::vector<uint8_t> dst(t.nbytes);
      ASSERT_TRUE((*f)->read_tensor(t, dst.data()).ok());
    }
  }
  EXPECT_GT(failures, 0);  // the corruption does reach the parser
}

}  // namespace
}  // namespace tessera::llm
