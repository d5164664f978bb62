// Writes GGUF v3 files (the layout gguf.h reads), streaming one tensor at a time.
//
// Metadata keys keep their insertion order in the file (setting a key again replaces its value in
// place). Tensor data is aligned to 32 bytes, or to general.alignment when set_uint32 sets it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backends/quant_formats.h"
#include "ir/status.h"
#include "llm/gguf.h"

namespace tessera::llm {

class GgufWriter {
 public:
  void set_string(const std::string& key, std::string v);
  void set_uint32(const std::string& key, uint32_t v);
  void set_int32(const std::string& key, int32_t v);
  void set_uint64(const std::string& key, uint64_t v);
  void set_float32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_uint8(const std::string& key, uint8_t v);
  void set_int8(const std::string& key, int8_t v);
  void set_uint16(const std::string& key, uint16_t v);
  void set_int16(const std::string& key, int16_t v);
  void set_int64(const std::string& key, int64_t v);
  void set_float64(const std::string& key, double v);
  void set_string_array(const std::string& key, std::vector<std::string> v);
  void set_float32_array(const std::string& key, std::vector<float> v);
  void set_int32_array(const std::string& key, std::vector<int32_t> v);

  // dims in ggml order (dims[0] contiguous, a multiple of the type's block size; 1 to 4 dims).
  // fill writes exactly row_bytes(type, dims[0]) * (product of the rest) bytes to dst. It is
  // called once, during write(), so a large model streams instead of living in memory.
  void add_tensor(std::string name, quant::QType type, std::vector<int64_t> dims,
                  std::function<Status(uint8_t* dst)> fill);

  // Writes path + ".tmp", then renames it to path (a reader never sees half a file). Errors name
  // the path, or the tensor whose dims are invalid or whose fill failed.
  Status write(const std::string& path) const;

 private:
  struct Metadata {
    std::string key;
    GgufType type;
    std::vector<uint8_t> value;  // the encoded value, as it goes in the file after the type
  };
  struct Tensor {
    std::string name;
    quant::QType type;
    std::vector<int64_t> dims;
    std::function<Status(uint8_t*)> fill;
  };
  void set(const std::string& key, GgufType type, std::vector<uint8_t> value);

  std::vector<Metadata> metadata_;
  std::vector<Tensor> tensors_;
  uint32_t alignment_ = 32;
};

}  // namespace tessera::llm
