// safetensors (Hugging Face's weight file): a memory-mapped reader.
//
// Layout: an 8-byte little-endian header length N, N bytes of JSON
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ..., "__metadata__":
// {..}}, then the data; offsets count from the end of the header. open() checks every entry against
// the file (offsets inside the data, size = element count x dtype size) and refuses dtypes other
// than F32, F16 and BF16 by name. "__metadata__" is ignored.
//
// Thread safety: immutable after open(); const methods may run concurrently.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/quant_formats.h"
#include "ir/status.h"
#include "llm/gguf.h"

namespace tessera::llm {

class SafetensorsFile {
 public:
  struct Entry {
    std::string name;
    quant::QType type;           // kF32, kF16 or kBF16
    std::vector<int64_t> shape;  // row-major: shape.back() is contiguous
    uint64_t offset = 0;         // from the start of the data (after the header)
    int64_t nbytes = 0;
    int64_t numel() const;
  };

  static Result<std::unique_ptr<SafetensorsFile>> open(const std::string& path);

  const std::string& path() const { return file_->path(); }
  // In the header's order.
  const std::vector<Entry>& tensors() const { return tensors_; }
  const Entry* find(const std::string& name) const;
  // The entry's bytes inside the mapping.
  const uint8_t* data(const Entry& e) const;
  // Copies the entry's bytes to dst, then releases the mapped pages (MappedFile::copy_and_release).
  Status read(const Entry& e, void* dst) const;

 private:
  SafetensorsFile() = default;
  std::unique_ptr<MappedFile> file_;
  uint64_t data_offset_ = 0;
  std::vector<Entry> tensors_;
  std::map<std::string, size_t> index_;
};

// The safetensors files of a model: the file itself; or, for a directory, the shards that its
// model.safetensors.index.json names (in sorted order, each once), else its model.safetensors.
// A path ending in ".index.json" is read as an index. Errors name what is missing.
Result<std::vector<std::string>> safetensors_shards(const std::string& dir_or_file);

}  // namespace tessera::llm
