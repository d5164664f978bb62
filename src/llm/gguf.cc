#include "llm/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>

namespace tessera::llm {

static_assert(std::endian::native == std::endian::little, "GGUF is read as little-endian");

// ---------------------------------------------------------------------------------------------
// MappedFile

Result<std::unique_ptr<MappedFile>> MappedFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    std::string msg = path + ": cannot open: " + std::strerror(err);
    return err == ENOENT ? not_found(msg) : io_error(msg);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return io_error(path + ": cannot stat: " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return invalid_argument(path + ": not a regular file");
  }
  std::unique_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  file->size_ = static_cast<uint64_t>(st.st_size);
  if (file->size_ > 0) {
    void* p = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return io_error(path + ": cannot mmap: " + std::strerror(err));
    }
    file->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);  // the mapping keeps the file
  return file;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

void MappedFile::copy_and_release(uint64_t offset, uint64_t nbytes, void* dst) const {
  TESSERA_CHECK(offset <= size_ && nbytes <= size_ - offset, "copy outside the mapped file");
  if (nbytes == 0) return;
  std::memcpy(dst, data_ + offset, nbytes);
  // Only whole pages inside the range: a page shared with a neighbour tensor stays mapped.
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t begin = (offset + page - 1) / page * page;
  const uint64_t end = (offset + nbytes) / page * page;
  if (end > begin) ::madvise(const_cast<uint8_t*>(data_) + begin, end - begin, MADV_DONTNEED);
}

// ---------------------------------------------------------------------------------------------
// Types and values

std::string gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::kUint8: return "uint8";
    case GgufType::kInt8: return "int8";
    case GgufType::kUint16: return "uint16";
    case GgufType::kInt16: return "int16";
    case GgufType::kUint32: return "uint32";
    case GgufType::kInt32: return "int32";
    case GgufType::kFloat32: return "float32";
    case GgufType::kBool: return "bool";
    case GgufType::kString: return "string";
    case GgufType::kArray: return "array";
    case GgufType::kUint64: return "uint64";
    case GgufType::kInt64: return "int64";
    case GgufType::kFloat64: return "float64";
  }
  return "type " + std::to_string(static_cast<uint32_t>(t));
}

namespace {

bool is_integer(GgufType t) {
  switch (t) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kUint16:
    case GgufType::kInt16:
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kUint64:
    case GgufType::kInt64: return true;
    default: return false;
  }
}

bool is_float(GgufType t) { return t == GgufType::kFloat32 || t == GgufType::kFloat64; }

// Bytes of one scalar of type t (strings: the smallest, an empty one); 0 for kArray.
uint64_t min_value_bytes(GgufType t) {
  switch (t) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool: return 1;
    case GgufType::kUint16:
    case GgufType::kInt16: return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32: return 4;
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64:
    case GgufType::kString: return 8;
    case GgufType::kArray: return 12;  // element type + count
  }
  return 1;
}

constexpr int kMaxArrayNesting = 8;

}  // namespace

uint64_t GgufValue::array_size() const {
  if (type != GgufType::kArray) return 0;
  if (array_type == GgufType::kString) return strings.size();
  if (is_float(array_type)) return floats.size();
  return ints.size();
}

int64_t GgufTensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;  // open() checked the product fits
  return n;
}

// ---------------------------------------------------------------------------------------------
// Parser: a cursor over the mapping; every read checks the bytes are there.

class GgufFile::Parser {
 public:
  explicit Parser(GgufFile* out)
      : out_(out), data_(out->file_->data()), size_(out->file_->size()) {}

  Status parse();

 private:
  Status error(const std::string& msg) const { return invalid_argument(out_->path() + ": " + msg); }
  Status truncated(const std::string& what) const {
    return error("truncated: " + what + " at byte " + std::to_string(pos_) + " runs past the end " +
                 "of the file (" + std::to_string(size_) + " bytes)");
  }
  uint64_t remaining() const { return size_ - pos_; }

  template <typename T>
  Status read(T* v, const std::string& what) {
    if (remaining() < sizeof(T)) return truncated(what);
    std::memcpy(v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status();
  }
  Status read_string(std::string* s, const std::string& what);
  Status read_type(GgufType* t, const std::string& what);
  Status read_scalar(GgufType t, GgufValue* v, const std::string& what);
  Status read_array(GgufValue* v, const std::string& what, int depth);
  Status read_tensor_info(GgufTensorInfo* t, uint64_t index);
  Status check_tensor(GgufTensorInfo* t);

  GgufFile* out_;
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

Status GgufFile::Parser::read_string(std::string* s, const std::string& what) {
  uint64_t len = 0;
  TESSERA_RETURN_IF_ERROR(read(&len, what + " length"));
  if (len > remaining()) {
    return error(what + ": string length " + std::to_string(len) + " at byte " +
                 std::to_string(pos_ - 8) + " is larger than the rest of the file (" +
                 std::to_string(remaining()) + " bytes)");
  }
  s->assign(reinterpret_cast<const char*>(data_ + pos_), len);
  pos_ += len;
  return Status();
}

Status GgufFile::Parser::read_type(GgufType* t, const std::string& what) {
  uint32_t raw = 0;
  TESSERA_RETURN_IF_ERROR(read(&raw, what + " type"));
  if (raw > static_cast<uint32_t>(GgufType::kFloat64)) {
    return error(what + " has unknown value type " + std::to_string(raw));
  }
  *t = static_cast<GgufType>(raw);
  return Status();
}

Status GgufFile::Parser::read_scalar(GgufType t, GgufValue* v, const std::string& what) {
  auto set_int = [v](int64_t i) {
    v->i = i;
    v->u = static_cast<uint64_t>(i);
    v->f = static_cast<double>(i);
  };
  switch (t) {
    case GgufType::kUint8: {
      uint8_t x = 0;
      TESSERA_RETURN_IF_ERROR(read(&x, what));
      set_int(x);
      return Status();
    }
    case GgufType::kInt8: {
      int8_t x = 0;
      TESSERA_RETURN_IF_ERROR(read(&x, what));
      set_int(x);
      return Status();
    }
    case GgufType::kUint16: {
      uint16_t x = 0;
      TESSERA_RETURN_IF_ERROR(read(&x, what));
      set_int(x);
      return Status();
    }
    case GgufType::kInt16: {
      int16_t x = 0;
      TESSERA_RETURN_IF_ERROR(read(&x, what));
      set_int(x);
      return Status();
    }
    case GgufType::kUint32: {
      uint32_t x = 0;
      TESSERA_RETURN_IF_ERROR(read(&x, what));
      set_int(x);
      return Status();
    }
    case GgufType::kInt32: {
      int32_t x = 0;
      TESSERA_RETURN_IF_ERROR(read(&x, what));
      set_int(x);
      return Status();
    }
    case GgufType::kUint64: {
      uint64_t x = 0;
      TESSERA_RETURN_IF_ERROR(read(&x, what));
      v->u = x;
      v->i = static_cast<int64_t>(x);
      v->f = static_cast<double>(x);
      return Status();
    }
    case GgufType::kInt64: {
      int64_t x = 0;
      TESSERA_RETURN_IF_ERROR(read(&x, what));
      set_int(x);
      return Status();
    }
    case GgufType::kBool: {
      uint8_t x = 0;
      TESSERA_RETURN_IF_ERROR(read(&x, what));
      v->b = x != 0;
      set_int(v->b ? 1 : 0);
      return Status();
    }
    case GgufType::kFloat32: {
      float x = 0;
      TESSERA_RETURN_IF_ERROR(read(&x, what));
      v->f = x;
      return Status();
    }
    case GgufType::kFloat64: {
      double x = 0;
      TESSERA_RETURN_IF_ERROR(read(&x, what));
      v->f = x;
      return Status();
    }
    case GgufType::kString: return read_string(&v->s, what);
    case GgufType::kArray: break;
  }
  return error(what + ": an array is not a scalar");
}

// Arrays of arrays are skipped (kept as an empty array of element type kArray): tessera reads none.
Status GgufFile::Parser::read_array(GgufValue* v, const std::string& what, int depth) {
  if (depth > kMaxArrayNesting) return error(what + ": arrays nested deeper than 8 levels");
  TESSERA_RETURN_IF_ERROR(read_type(&v->array_type, what + " element"));
  uint64_t n = 0;
  TESSERA_RETURN_IF_ERROR(read(&n, what + " element count"));
  // Bound the count by the bytes left before anything is allocated.
  if (n > remaining() / min_value_bytes(v->array_type)) {
    return error(what + ": array of " + std::to_string(n) + " " + gguf_type_name(v->array_type) +
                 " elements is larger than the rest of the file");
  }
  const GgufType et = v->array_type;
  if (et == GgufType::kArray) {
    for (uint64_t k = 0; k < n; ++k) {
      GgufValue inner;
      TESSERA_RETURN_IF_ERROR(read_array(&inner, what, depth + 1));
    }
    return Status();
  }
  if (et == GgufType::kString) {
    v->strings.reserve(n);
  } else {
    v->floats.reserve(n);
    if (!is_float(et)) v->ints.reserve(n);
  }
  for (uint64_t k = 0; k < n; ++k) {
    GgufValue e;
    TESSERA_RETURN_IF_ERROR(read_scalar(et, &e, what));
    if (et == GgufType::kString) {
      v->strings.push_back(std::move(e.s));
    } else {
      v->floats.push_back(e.f);
      if (!is_float(et)) v->ints.push_back(e.i);
    }
  }
  return Status();
}

Status GgufFile::Parser::read_tensor_info(GgufTensorInfo* t, uint64_t index) {
  const std::string what = "tensor info " + std::to_string(index);
  TESSERA_RETURN_IF_ERROR(read_string(&t->name, what + " name"));
  const std::string named = "tensor '" + t->name + "'";
  uint32_t n_dims = 0;
  TESSERA_RETURN_IF_ERROR(read(&n_dims, named + " n_dims"));
  if (n_dims > 4) {
    return error(named + " has n_dims " + std::to_string(n_dims) + "; GGUF allows at most 4");
  }
  for (uint32_t k = 0; k < n_dims; ++k) {
    uint64_t d = 0;
    TESSERA_RETURN_IF_ERROR(read(&d, named + " dims"));
    if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return error(named + " has dim " + std::to_string(d) + ", past int64");
    }
    t->dims.push_back(static_cast<int64_t>(d));
  }
  TESSERA_RETURN_IF_ERROR(read(&t->ggml_type, named + " type"));
  TESSERA_RETURN_IF_ERROR(read(&t->offset, named + " offset"));
  return Status();
}

// After the data section's start is known: element count, byte size, alignment, and range.
Status GgufFile::Parser::check_tensor(GgufTensorInfo* t) {
  const std::string named = "tensor '" + t->name + "'";
  int64_t numel = 1;
  for (int64_t d : t->dims) {
    if (d != 0 && numel > std::numeric_limits<int64_t>::max() / d) {
      return error(named + " has more elements than fit in int64");
    }
    numel *= d;
  }
  if (t->offset % out_->alignment_ != 0) {
    return error(named + " has offset " + std::to_string(t->offset) +
                 ", not a multiple of the alignment " + std::to_string(out_->alignment_));
  }
  const uint64_t data_size = size_ >= out_->data_offset_ ? size_ - out_->data_offset_ : 0;
  if (t->offset > data_size) {
    return error(named + " starts at data offset " + std::to_string(t->offset) +
                 ", past the end of the file (data section is " + std::to_string(data_size) +
                 " bytes)");
  }
  t->type = quant::qtype_from_ggml(t->ggml_type);
  if (!t->type) return Status();  // kept; its size is not known
  const int64_t row_elements = t->dims.empty() ? 1 : t->dims[0];
  const int64_t block = quant::block_elements(*t->type);
  if (row_elements % block != 0) {
    return error(named + " of type " + quant::qtype_name(*t->type) +
                 " has dims[0] = " + std::to_string(row_elements) +
                 ", not a multiple of the block size " + std::to_string(block));
  }
  const int64_t rows = row_elements == 0 ? 0 : numel / row_elements;
  const int64_t row_bytes = quant::row_bytes(*t->type, row_elements);
  if (row_bytes != 0 && rows > std::numeric_limits<int64_t>::max() / row_bytes) {
    return error(named + " has more bytes than fit in int64");
  }
  t->nbytes = rows * row_bytes;
  if (static_cast<uint64_t>(t->nbytes) > data_size - t->offset) {
    return error(named + " data [" + std::to_string(t->offset) + ", " +
                 std::to_string(t->offset + static_cast<uint64_t>(t->nbytes)) +
                 ") runs past the end of the file (data section is " + std::to_string(data_size) +
                 " bytes)");
  }
  return Status();
}

Status GgufFile::Parser::parse() {
  if (size_ < 4 || std::memcmp(data_, "GGUF", 4) != 0) {
    return error("not a GGUF file (the first 4 bytes are not \"GGUF\")");
  }
  pos_ = 4;
  TESSERA_RETURN_IF_ERROR(read(&out_->version_, "version"));
  if (out_->version_ == 1) {
    return unimplemented(out_->path() + ": GGUF version 1 is not supported (only 2 and 3)");
  }
  if (out_->version_ != 2 && out_->version_ != 3) {
    return error("unknown GGUF version " + std::to_string(out_->version_) +
                 " (tessera reads 2, 3)");
  }
  uint64_t n_tensors = 0, n_kv = 0;
  TESSERA_RETURN_IF_ERROR(read(&n_tensors, "tensor count"));
  TESSERA_RETURN_IF_ERROR(read(&n_kv, "metadata count"));
  // Smallest key-value: key length (8) + type (4) + a 1-byte value. Smallest tensor info: name
  // length (8) + n_dims (4) + type (4) + offset (8).
  if (n_kv > remaining() / 13) {
    return error("metadata count " + std::to_string(n_kv) + " is larger than the file can hold");
  }
  if (n_tensors > remaining() / 24) {
    return error("tensor count " + std::to_string(n_tensors) + " is larger than the file can hold");
  }
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key;
    TESSERA_RETURN_IF_ERROR(read_string(&key, "metadata key " + std::to_string(k)));
    const std::string what = "metadata '" + key + "'";
    if (out_->metadata_.count(key) != 0) return error("duplicate " + what);
    GgufValue v;
    TESSERA_RETURN_IF_ERROR(read_type(&v.type, what));
    if (v.type == GgufType::kArray) {
      TESSERA_RETURN_IF_ERROR(read_array(&v, what, 1));
    } else {
      TESSERA_RETURN_IF_ERROR(read_scalar(v.type, &v, what));
    }
    out_->metadata_.emplace(key, std::move(v));
    out_->metadata_keys_.push_back(std::move(key));
  }
  if (const GgufValue* a = out_->find("general.alignment")) {
    if (!is_integer(a->type) || a->i <= 0 || a->i > (1 << 30) || !std::has_single_bit(a->u)) {
      return error("general.alignment must be a power of two, not " +
                   (is_integer(a->type) ? std::to_string(a->i) : gguf_type_name(a->type)));
    }
    out_->alignment_ = static_cast<uint32_t>(a->i);
  }
  out_->tensors_.reserve(n_tensors);
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensorInfo t;
    TESSERA_RETURN_IF_ERROR(read_tensor_info(&t, k));
    if (!out_->tensor_index_.emplace(t.name, out_->tensors_.size()).second) {
      return error("duplicate tensor name '" + t.name + "'");
    }
    out_->tensors_.push_back(std::move(t));
  }
  const uint64_t align = out_->alignment_;
  out_->data_offset_ = (pos_ + align - 1) / align * align;  // pos_ <= size_ < 2^63: no overflow
  if (!out_->tensors_.empty() && out_->data_offset_ > size_) {
    return error("the data section would start at byte " + std::to_string(out_->data_offset_) +
                 ", past the end of the file (" + std::to_string(size_) + " bytes)");
  }
  for (GgufTensorInfo& t : out_->tensors_) TESSERA_RETURN_IF_ERROR(check_tensor(&t));
  return Status();
}

// ---------------------------------------------------------------------------------------------
// GgufFile

Result<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  TESSERA_ASSIGN_OR_RETURN(f->file_, MappedFile::open(path));
  Parser parser(f.get());
  TESSERA_RETURN_IF_ERROR(parser.parse());
  return f;
}

GgufFile::~GgufFile() = default;

const std::string& GgufFile::path() const { return file_->path(); }
int64_t GgufFile::file_size() const { return static_cast<int64_t>(file_->size()); }

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

namespace {

Status missing_key(const std::string& path, const std::string& key) {
  return not_found(path + ": metadata key '" + key + "' is missing");
}
Status wrong_type(const std::string& path, const std::string& key, const GgufValue& v,
                  const char* expected) {
  std::string type = gguf_type_name(v.type);
  if (v.type == GgufType::kArray) type = "array of " + gguf_type_name(v.array_type);
  return invalid_argument(path + ": metadata key '" + key + "' has type " + type + ", expected " +
                          expected);
}

}  // namespace

Result<std::string> GgufFile::get_string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return missing_key(path(), key);
  if (v->type != GgufType::kString) return wrong_type(path(), key, *v, "string");
  return v->s;
}

Result<int64_t> GgufFile::get_int(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return missing_key(path(), key);
  if (!is_integer(v->type) && v->type != GgufType::kBool) {
    return wrong_type(path(), key, *v, "an integer");
  }
  if (v->type == GgufType::kUint64 && v->u > static_cast<uint64_t>(INT64_MAX)) {
    return invalid_argument(path() + ": metadata key '" + key + "' = " + std::to_string(v->u) +
                            " does not fit in int64");
  }
  return v->i;
}

Result<double> GgufFile::get_float(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return missing_key(path(), key);
  if (!is_integer(v->type) && !is_float(v->type)) return wrong_type(path(), key, *v, "a number");
  return v->f;
}

int64_t GgufFile::get_int_or(const std::string& key, int64_t fallback) const {
  Result<int64_t> r = get_int(key);
  return r.ok() ? *r : fallback;
}

double GgufFile::get_float_or(const std::string& key, double fallback) const {
  Result<double> r = get_float(key);
  return r.ok() ? *r : fallback;
}

std::string GgufFile::get_string_or(const std::string& key, const std::string& fallback) const {
  const GgufValue* v = find(key);
  return v != nullptr && v->type == GgufType::kString ? v->s : fallback;
}

bool GgufFile::get_bool_or(const std::string& key, bool fallback) const {
  const GgufValue* v = find(key);
  return v != nullptr && v->type == GgufType::kBool ? v->b : fallback;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const uint8_t* GgufFile::tensor_data(const GgufTensorInfo& t) const {
  if (!t.type || t.nbytes < 0) return nullptr;
  return file_->data() + data_offset_ + t.offset;
}

Status GgufFile::read_tensor(const GgufTensorInfo& t, void* dst) const {
  if (!t.type || t.nbytes < 0) {
    return unimplemented(path() + ": tensor '" + t.name + "' has ggml type " +
                         std::to_string(t.ggml_type) + ", which tessera does not read");
  }
  const uint64_t data_size = file_->size() >= data_offset_ ? file_->size() - data_offset_ : 0;
  if (t.offset > data_size || static_cast<uint64_t>(t.nbytes) > data_size - t.offset) {
    return invalid_argument(path() + ": tensor '" + t.name + "' lies outside the file");
  }
  file_->copy_and_release(data_offset_ + t.offset, static_cast<uint64_t>(t.nbytes), dst);
  return Status();
}

}  // namespace tessera::llm
