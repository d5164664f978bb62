#include "llm/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace tessera::llm {
namespace {

using quant::QType;

std::string temp_path(const std::string& name) {
  return testing::TempDir() + "/st_" + std::to_string(::getpid()) + "_" + name;
}

// A safetensors file by hand: the 8-byte header length, the JSON header, then the data.
std::vector<uint8_t> safetensors_bytes(const std::string& header, const std::vector<uint8_t>& data,
                                       int64_t header_len = -1) {
  const uint64_t n = header_len >= 0 ? static_cast<uint64_t>(header_len) : header.size();
  // Sized once (GCC 12 reports a false -Warray-bounds on insert() after an 8-byte vector).
  std::vector<uint8_t> b(8 + header.size() + data.size());
  std::memcpy(b.data(), &n, 8);
  std::copy(header.begin(), header.end(), b.begin() + 8);
  std::copy(data.begin(), data.end(), b.begin() + 8 + static_cast<std::ptrdiff_t>(header.size()));
  return b;
}

std::string write_file(const std::string& name, const std::vector<uint8_t>& bytes) {
  const std::string path = temp_path(name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  return path;
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(n);
  for (uint8_t& x : b) x = static_cast<uint8_t>(rng());
  return b;
}

TEST(SafetensorsTest, ReadsHandWrittenFile) {
  // a: F32 [2, 3] = 24 bytes at 0; b: F16 [4] = 8 bytes at 24; c: BF16 scalar at 32; d: empty.
  const std::string header =
      R"({"__metadata__": {"format": "pt"},)"
      R"( "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},)"
      R"( "b": {"dtype": "F16", "shape": [4], "data_offsets": [24, 32]},)"
      R"( "c": {"dtype": "BF16", "shape": [], "data_offsets": [32, 34]},)"
      R"( "d": {"dtype": "F32", "shape": [0, 5], "data_offsets": [34, 34]}})";
  const std::vector<uint8_t> data = random_bytes(34, 5);
  const std::string path = write_file("good.safetensors", safetensors_bytes(header, data));
  auto opened = SafetensorsFile::open(path);
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  const SafetensorsFile& f = **opened;
  ASSERT_EQ(f.tensors().size(), 4u);
  EXPECT_EQ(f.tensors()[0].name, "a");  // header order
  const SafetensorsFile::Entry* a = f.find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->type, QType::kF32);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a->nbytes, 24);
  EXPECT_EQ(a->numel(), 6);
  EXPECT_EQ(std::memcmp(f.data(*a), data.data(), 24), 0);
  const SafetensorsFile::Entry* b = f.find("b");
  EXPECT_EQ(b->type, QType::kF16);
  EXPECT_EQ(b->offset, 24u);
  std::vector<uint8_t> copy(8);
  ASSERT_TRUE(f.read(*b, copy.data()).ok());
  EXPECT_EQ(copy, std::vector<uint8_t>(data.begin() + 24, data.begin() + 32));
  const SafetensorsFile::Entry* c = f.find("c");
  EXPECT_EQ(c->type, QType::kBF16);
  EXPECT_TRUE(c->shape.empty());
  EXPECT_EQ(c->numel(), 1);
  EXPECT_EQ(f.find("d")->nbytes, 0);
  EXPECT_EQ(f.find("__metadata__"), nullptr);
  EXPECT_EQ(f.find("e"), nullptr);
}

void expect_error(const std::string& name, const std::vector<uint8_t>& bytes,
                  const std::string& fragment) {
  const std::string path = write_file(name, bytes);
  auto f = SafetensorsFile::open(path);
  ASSERT_FALSE(f.ok()) << name;
  EXPECT_NE(f.status().message().find(fragment), std::string::npos) << f.status().message();
  EXPECT_NE(f.status().message().find(path), std::string::npos) << f.status().message();
}

TEST(SafetensorsTest, MalformedFiles) {
  const std::vector<uint8_t> data(16, 0);
  expect_error("short", {1, 2, 3}, "no header length");
  expect_error("long_header", safetensors_bytes("{}", {}, 1000), "runs past the end");
  expect_error("huge_header", safetensors_bytes("{}", {}, int64_t{1} << 62), "runs past the end");
  expect_error("not_json", safetensors_bytes("{\"a\": ", data), "not valid JSON");
  expect_error("not_object", safetensors_bytes("[1, 2]", data), "not a JSON object");
  expect_error("entry_not_object", safetensors_bytes(R"({"a": 3})", data),
               "tensor 'a' is not a JSON object");
  expect_error("i64",
               safetensors_bytes(
                   R"({"ids": {"dtype": "I64", "shape": [2], "data_offsets": [0, 16]}})", data),
               "tensor 'ids' has dtype I64");
  expect_error("no_dtype",
               safetensors_bytes(R"({"a": {"shape": [2], "data_offsets": [0, 8]}})", data),
               "'a' has no string \"dtype\"");
  expect_error(
      "bad_shape",
      safetensors_bytes(R"({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", data),
      "not a size");
  expect_error(
      "past_end",
      safetensors_bytes(R"({"a": {"dtype": "F32", "shape": [8], "data_offsets": [0, 32]}})", data),
      "are not inside the data (16 bytes)");
  expect_error(
      "reversed",
      safetensors_bytes(R"({"a": {"dtype": "F32", "shape": [0], "data_offsets": [8, 4]}})", data),
      "not inside the data");
  expect_error(
      "size_mismatch",
      safetensors_bytes(R"({"a": {"dtype": "F16", "shape": [3], "data_offsets": [0, 8]}})", data),
      "has 8 bytes of data, but shape x f16 needs 6");
  expect_error(
      "bad_offsets",
      safetensors_bytes(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", data),
      "data_offsets");
  expect_error(
      "overflow",
      safetensors_bytes(
          R"({"a": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]}})",
          data),
      "int64");
  auto missing = SafetensorsFile::open(temp_path("missing.safetensors"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

// Every cut of a good file either fails with a message or (the full file) opens.
TEST(SafetensorsTest, TruncatedFilesFailCleanly) {
  const std::string header = R"({"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}})";
  const std::vector<uint8_t> bytes = safetensors_bytes(header, random_bytes(16, 9));
  for (size_t n = 0; n < bytes.size(); ++n) {
    const std::string path =
        write_file("cut", std::vector<uint8_t>(bytes.begin(), bytes.begin() + n));
    auto f = SafetensorsFile::open(path);
    ASSERT_FALSE(f.ok()) << "cut at " << n;
    EXPECT_FALSE(f.status().message().empty());
  }
  EXPECT_TRUE(SafetensorsFile::open(write_file("uncut", bytes)).ok());
}

TEST(SafetensorsTest, Shards) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(testing::TempDir()) / ("st_shards_" + std::to_string(::getpid()));
  fs::remove_all(root);
  const std::vector<uint8_t> empty = safetensors_bytes("{}", {});

  // A single file.
  const fs::path single_dir = root / "single";
  fs::create_directories(single_dir);
  const std::string single = write_file("single_file", empty);
  auto one = safetensors_shards(single);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(*one, std::vector<std::string>{single});

  // A directory with model.safetensors.
  std::ofstream((single_dir / "model.safetensors").string()) << "x";
  auto in_dir = safetensors_shards(single_dir.string());
  ASSERT_TRUE(in_dir.ok()) << in_dir.status().to_string();
  EXPECT_EQ(*in_dir, std::vector<std::string>{(single_dir / "model.safetensors").string()});

  // A directory with an index: each shard once, sorted.
  const fs::path sharded = root / "sharded";
  fs::create_directories(sharded);
  std::ofstream((sharded / "model-00002-of-00002.safetensors").string()) << "x";
  std::ofstream((sharded / "model-00001-of-00002.safetensors").string()) << "x";
  std::ofstream((sharded / "model.safetensors.index.json").string())
      << R"({"metadata": {"total_size": 4}, "weight_map": {)"
      << R"("b": "model-00002-of-00002.safetensors", "a": "model-00001-of-00002.safetensors",)"
      << R"("c": "model-00002-of-00002.safetensors"}})";
  auto shards = safetensors_shards(sharded.string());
  ASSERT_TRUE(shards.ok()) << shards.status().to_string();
  EXPECT_EQ(*shards,
            (std::vector<std::string>{(sharded / "model-00001-of-00002.safetensors").string(),
                                      (sharded / "model-00002-of-00002.safetensors").string()}));
  auto via_index = safetensors_shards((sharded / "model.safetensors.index.json").string());
  ASSERT_TRUE(via_index.ok());
  EXPECT_EQ(*via_index, *shards);

  // An index naming a missing shard.
  const fs::path broken = root / "broken";
  fs::create_directories(broken);
  std::ofstream((broken / "model.safetensors.index.json").string())
      << R"({"weight_map": {"a": "gone.safetensors"}})";
  auto gone = safetensors_shards(broken.string());
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.status().message().find("gone.safetensors"), std::string::npos);

  // Bad index JSON, an empty directory, a missing path.
  const fs::path bad = root / "bad";
  fs::create_directories(bad);
  std::ofstream((bad / "model.safetensors.index.json").string()) << "{not json";
  EXPECT_FALSE(safetensors_shards(bad.string()).ok());
  const fs::path empty_dir = root / "empty";
  fs::create_directories(empty_dir);
  auto none = safetensors_shards(empty_dir.string());
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("model.safetensors"), std::string::npos);
  EXPECT_FALSE(safetensors_shards((root / "nope").string()).ok());
}

}  // namespace
}  // namespace tessera::llm
