// GGUF (ggml's model file, versions 2 and 3): a memory-mapped reader.
//
// Layout (little-endian): "GGUF", version u32, tensor count u64, metadata count u64; the metadata
// key-value pairs; the tensor infos (name, n_dims u32, dims u64[n_dims], ggml type u32, offset
// u64); padding to general.alignment (default 32); the tensor data, each tensor at data start +
// offset.
//
// open() validates every count, length and offset against the file size, so a truncated or
// corrupted file gives an error that names the file and the key or tensor, never a crash.
// Tensors of a ggml type tessera does not read are kept (type = nullopt, nbytes = -1): the file
// opens, and whoever needs such a tensor reports it by name and type number.
//
// Thread safety: a GgufFile is immutable after open(); its const methods may run concurrently.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/quant_formats.h"
#include "ir/status.h"

namespace tessera::llm {

// A whole file mapped read-only (shared by the GGUF and safetensors readers).
class MappedFile {
 public:
  // Errors (not_found / io_error) name the path. An empty file maps to size 0, data nullptr.
  static Result<std::unique_ptr<MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  // Copies [offset, offset + nbytes) to dst (the range must lie inside the file), then drops the
  // whole pages of that range from the mapping (madvise MADV_DONTNEED) so the weights live once in
  // the process. A later access reads them from the file again.
  void copy_and_release(uint64_t offset, uint64_t nbytes, void* dst) const;

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

enum class GgufType : uint32_t {
  kUint8 = 0,
  kInt8,
  kUint16,
  kInt16,
  kUint32,
  kInt32,
  kFloat32,
  kBool,
  kString,
  kArray,
  kUint64,
  kInt64,
  kFloat64,
};
// "uint8", ..., "float64"; "type N" for a number outside the enum.
std::string gguf_type_name(GgufType t);

// A scalar or a one-level array (an array of arrays is refused by open()).
struct GgufValue {
  GgufType type = GgufType::kUint8;
  GgufType array_type = GgufType::kUint8;  // only for kArray
  // Scalars: integers set i, u (two's-complement bits of i for signed types) and f; bools set b,
  // i, u; floats set f; strings set s.
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0;
  bool b = false;
  std::string s;
  // Array elements by kind: integer and bool arrays fill ints and floats, float arrays floats,
  // string arrays strings. (A uint64 above INT64_MAX wraps in ints.)
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;
  uint64_t array_size() const;  // element count of an array, 0 for a scalar
};

struct GgufTensorInfo {
  std::string name;
  uint32_t ggml_type = 0;
  std::optional<quant::QType> type;  // nullopt: a ggml type tessera does not read
  std::vector<int64_t> dims;         // ggml order: dims[0] is contiguous
  uint64_t offset = 0;               // from the start of the data section
  int64_t nbytes = -1;               // -1 if the type is unknown
  int64_t numel() const;
};

class GgufFile {
 public:
  static Result<std::unique_ptr<GgufFile>> open(const std::string& path);
  ~GgufFile();

  const std::string& path() const;
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  int64_t file_size() const;
  uint64_t data_offset() const { return data_offset_; }  // where the data section starts

  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  // Metadata keys in file order.
  const std::vector<std::string>& metadata_keys() const { return metadata_keys_; }
  const GgufValue* find(const std::string& key) const;
  // Errors name the file and key and say "missing" or "has type X, expected string".
  Result<std::string> get_string(const std::string& key) const;
  Result<int64_t> get_int(const std::string& key) const;   // any integer type, or bool
  Result<double> get_float(const std::string& key) const;  // float or integer types
  int64_t get_int_or(const std::string& key, int64_t fallback) const;
  double get_float_or(const std::string& key, double fallback) const;
  std::string get_string_or(const std::string& key, const std::string& fallback) const;
  bool get_bool_or(const std::string& key, bool fallback) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(const std::string& name) const;
  // The tensor's bytes inside the mapping; nullptr for a tensor of unknown type.
  const uint8_t* tensor_data(const GgufTensorInfo& t) const;
  // Copies the tensor's nbytes to dst, then releases the mapped pages (see
  // MappedFile::copy_and_release). Unimplemented for a tensor of unknown type.
  Status read_tensor(const GgufTensorInfo& t, void* dst) const;

 private:
  class Parser;
  GgufFile() = default;
  std::unique_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::map<std::string, GgufValue> metadata_;
  std::vector<std::string> metadata_keys_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

}  // namespace tessera::llm
