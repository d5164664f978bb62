#include "llm/gguf_writer.h"

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

namespace tessera::llm {

namespace {

// resize + memcpy rather than insert: GCC 12 warns falsely (-Wstringop-overflow) on the insert.
void append_bytes(std::vector<uint8_t>* out, const void* p, size_t n) {
  if (n == 0) return;
  const size_t at = out->size();
  out->resize(at + n);
  std::memcpy(out->data() + at, p, n);
}

template <typename T>
void append(std::vector<uint8_t>* out, const T& v) {
  append_bytes(out, &v, sizeof(T));
}

void append_string(std::vector<uint8_t>* out, const std::string& s) {
  append(out, static_cast<uint64_t>(s.size()));
  append_bytes(out, s.data(), s.size());
}

template <typename T>
std::vector<uint8_t> scalar(const T& v) {
  std::vector<uint8_t> out;
  append(&out, v);
  return out;
}

template <typename T>
std::vector<uint8_t> array(GgufType element_type, const std::vector<T>& v) {
  std::vector<uint8_t> out;
  append(&out, static_cast<uint32_t>(element_type));
  append(&out, static_cast<uint64_t>(v.size()));
  for (const T& x : v) append(&out, x);
  return out;
}

uint64_t align_up(uint64_t n, uint64_t align) { return (n + align - 1) / align * align; }

// A FILE* that closes itself; write errors are remembered and reported once.
class OutputFile {
 public:
  explicit OutputFile(const std::string& path) : path_(path), f_(std::fopen(path.c_str(), "wb")) {}
  ~OutputFile() {
    if (f_ != nullptr) std::fclose(f_);
  }
  bool is_open() const { return f_ != nullptr; }
  void write(const void* p, size_t n) {
    if (ok_ && n > 0 && std::fwrite(p, 1, n, f_) != n) ok_ = false;
    pos_ += n;
  }
  void pad_to(uint64_t align) {
    static const uint8_t kZeros[64] = {};
    uint64_t n = align_up(pos_, align) - pos_;
    while (n > 0) {
      const size_t k = std::min<uint64_t>(n, sizeof(kZeros));
      write(kZeros, k);
      n -= k;
    }
  }
  Status close() {
    const int rc = std::fclose(f_);
    f_ = nullptr;
    if (!ok_ || rc != 0) return io_error(path_ + ": write failed: " + std::strerror(errno));
    return Status();
  }

 private:
  std::string path_;
  std::FILE* f_;
  bool ok_ = true;
  uint64_t pos_ = 0;
};

}  // namespace

void GgufWriter::set(const std::string& key, GgufType type, std::vector<uint8_t> value) {
  for (Metadata& m : metadata_) {
    if (m.key == key) {
      m.type = type;
      m.value = std::move(value);
      return;
    }
  }
  metadata_.push_back({key, type, std::move(value)});
}

void GgufWriter::set_string(const std::string& key, std::string v) {
  std::vector<uint8_t> out;
  append_string(&out, v);
  set(key, GgufType::kString, std::move(out));
}
void GgufWriter::set_uint32(const std::string& key, uint32_t v) {
  if (key == "general.alignment") alignment_ = v;
  set(key, GgufType::kUint32, scalar(v));
}
void GgufWriter::set_int32(const std::string& key, int32_t v) {
  set(key, GgufType::kInt32, scalar(v));
}
void GgufWriter::set_uint64(const std::string& key, uint64_t v) {
  set(key, GgufType::kUint64, scalar(v));
}
void GgufWriter::set_float32(const std::string& key, float v) {
  set(key, GgufType::kFloat32, scalar(v));
}
void GgufWriter::set_bool(const std::string& key, bool v) {
  set(key, GgufType::kBool, scalar(static_cast<uint8_t>(v ? 1 : 0)));
}
void GgufWriter::set_uint8(const std::string& key, uint8_t v) {
  set(key, GgufType::kUint8, scalar(v));
}
void GgufWriter::set_int8(const std::string& key, int8_t v) {
  set(key, GgufType::kInt8, scalar(v));
}
void GgufWriter::set_uint16(const std::string& key, uint16_t v) {
  set(key, GgufType::kUint16, scalar(v));
}
void GgufWriter::set_int16(const std::string& key, int16_t v) {
  set(key, GgufType::kInt16, scalar(v));
}
void GgufWriter::set_int64(const std::string& key, int64_t v) {
  set(key, GgufType::kInt64, scalar(v));
}
void GgufWriter::set_float64(const std::string& key, double v) {
  set(key, GgufType::kFloat64, scalar(v));
}
void GgufWriter::set_string_array(const std::string& key, std::vector<std::string> v) {
  std::vector<uint8_t> out;
  append(&out, static_cast<uint32_t>(GgufType::kString));
  append(&out, static_cast<uint64_t>(v.size()));
  for (const std::string& s : v) append_string(&out, s);
  set(key, GgufType::kArray, std::move(out));
}
void GgufWriter::set_float32_array(const std::string& key, std::vector<float> v) {
  set(key, GgufType::kArray, array(GgufType::kFloat32, v));
}
void GgufWriter::set_int32_array(const std::string& key, std::vector<int32_t> v) {
  set(key, GgufType::kArray, array(GgufType::kInt32, v));
}

void GgufWriter::add_tensor(std::string name, quant::QType type, std::vector<int64_t> dims,
                            std::function<Status(uint8_t* dst)> fill) {
  tensors_.push_back({std::move(name), type, std::move(dims), std::move(fill)});
}

Status GgufWriter::write(const std::string& path) const {
  if (alignment_ == 0 || !std::has_single_bit(alignment_)) {
    return invalid_argument(path + ": general.alignment " + std::to_string(alignment_) +
                            " is not a power of two");
  }
  // Sizes and offsets first: a bad tensor is reported before anything is written.
  std::vector<uint64_t> nbytes, offsets;
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    const std::string named = path + ": tensor '" + t.name + "'";
    if (!names.insert(t.name).second) return invalid_argument(named + " is added twice");
    if (t.dims.empty() || t.dims.size() > 4) {
      return invalid_argument(named + " has " + std::to_string(t.dims.size()) +
                              " dims; GGUF takes 1 to 4");
    }
    int64_t rows = 1;
    for (size_t k = 0; k < t.dims.size(); ++k) {
      if (t.dims[k] < 0 || t.dims[k] > (int64_t{1} << 40)) {
        return invalid_argument(named + " has dim " + std::to_string(t.dims[k]));
      }
      if (k == 0) continue;
      if (t.dims[k] != 0 && rows > (int64_t{1} << 40) / t.dims[k]) {
        return invalid_argument(named + " is too large");
      }
      rows *= t.dims[k];
    }
    if (t.dims[0] % quant::block_elements(t.type) != 0) {
      return invalid_argument(named + " of type " + quant::qtype_name(t.type) + " has dims[0] " +
                              std::to_string(t.dims[0]) + ", not a multiple of the block size " +
                              std::to_string(quant::block_elements(t.type)));
    }
    offsets.push_back(offset);
    nbytes.push_back(static_cast<uint64_t>(quant::row_bytes(t.type, t.dims[0]) * rows));
    offset = align_up(offset + nbytes.back(), alignment_);
  }

  const std::string tmp = path + ".tmp";
  Status st = [&]() -> Status {
    OutputFile out(tmp);
    if (!out.is_open()) return io_error(tmp + ": cannot create: " + std::strerror(errno));
    std::vector<uint8_t> head;
    append_bytes(&head, "GGUF", 4);
    append(&head, uint32_t{3});
    append(&head, static_cast<uint64_t>(tensors_.size()));
    append(&head, static_cast<uint64_t>(metadata_.size()));
    for (const Metadata& m : metadata_) {
      append_string(&head, m.key);
      append(&head, static_cast<uint32_t>(m.type));
      append_bytes(&head, m.value.data(), m.value.size());
    }
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const Tensor& t = tensors_[i];
      append_string(&head, t.name);
      append(&head, static_cast<uint32_t>(t.dims.size()));
      for (int64_t d : t.dims) append(&head, static_cast<uint64_t>(d));
      append(&head, static_cast<uint32_t>(t.type));
      append(&head, offsets[i]);
    }
    out.write(head.data(), head.size());
    out.pad_to(alignment_);
    std::vector<uint8_t> buffer;
    for (size_t i = 0; i < tensors_.size(); ++i) {
      buffer.assign(nbytes[i], 0);
      Status fill = tensors_[i].fill(buffer.data());
      if (!fill.ok()) return fill.with_context(path + ": tensor '" + tensors_[i].name + "'");
      out.write(buffer.data(), buffer.size());
      out.pad_to(alignment_);
    }
    return out.close();
  }();
  if (!st.ok()) {
    std::remove(tmp.c_str());
    return st;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return io_error(path + ": cannot rename " + tmp + ": " + std::strerror(err));
  }
  return Status();
}

}  // namespace tessera::llm
