#include "ir/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

namespace tessera {
namespace {

struct NpyType {
  const char* descr;
  DType dtype;
};
constexpr NpyType kNpyTypes[] = {
    {"<f4", DType::kFloat32}, {"<f2", DType::kFloat16}, {"<f8", DType::kFloat64}, {"|i1", DType::kInt8},
    {"|u1", DType::kUint8},   {"<i2", DType::kInt16},   {"<u2", DType::kUint16},  {"<i4", DType::kInt32},
    {"<u4", DType::kUint32},  {"<i8", DType::kInt64},   {"<u8", DType::kUint64},  {"|b1", DType::kBool},
};

// Value of `key` in the header dict, e.g. 'descr': '<f4' -> <f4 ; 'shape': (1, 2) -> (1, 2)
Result<std::string> header_field(const std::string& header, const std::string& key) {
  auto k = header.find("'" + key + "'");
  if (k == std::string::npos) return invalid_argument("npy header has no '" + key + "'");
  auto colon = header.find(':', k);
  if (colon == std::string::npos) return invalid_argument("npy header is malformed");
  size_t i = colon + 1;
  while (i < header.size() && header[i] == ' ') ++i;
  if (i >= header.size()) return invalid_argument("npy header is malformed");
  if (header[i] == '\'') {
    auto end = header.find('\'', i + 1);
    if (end == std::string::npos) return invalid_argument("npy header is malformed");
    return header.substr(i + 1, end - i - 1);
  }
  if (header[i] == '(') {
    auto end = header.find(')', i);
    if (end == std::string::npos) return invalid_argument("npy header is malformed");
    return header.substr(i, end - i + 1);
  }
  auto end = header.find_first_of(",}", i);
  return header.substr(i, end == std::string::npos ? std::string::npos : end - i);
}

}  // namespace

Result<Tensor> parse_npy(const std::string& bytes) {
  if (bytes.size() < 10 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0) return invalid_argument("not an .npy file");
  int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len, offset;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return invalid_argument("truncated .npy header");
    uint32_t len;
    std::memcpy(&len, bytes.data() + 8, 4);
    header_len = len;
    offset = 12;
  } else {
    return unimplemented("npy format version " + std::to_string(major));
  }
  if (offset + header_len > bytes.size()) return invalid_argument("truncated .npy header");
  std::string header = bytes.substr(offset, header_len);
  TESSERA_ASSIGN_OR_RETURN(std::string descr, header_field(header, "descr"));
  TESSERA_ASSIGN_OR_RETURN(std::string order, header_field(header, "fortran_order"));
  TESSERA_ASSIGN_OR_RETURN(std::string shape, header_field(header, "shape"));
  if (order.find("True") != std::string::npos) return unimplemented("Fortran-order .npy arrays");
  DType dtype = DType::kUndefined;
  for (const auto& t : kNpyTypes)
    if (descr == t.descr || (descr.size() == 3 && descr[0] == '=' && descr.substr(1) == std::string(t.descr).substr(1)))
      dtype = t.dtype;
  if (dtype == DType::kUndefined) return unimplemented("npy dtype '" + descr + "'");
  if (shape.size() < 2 || shape.front() != '(' || shape.back() != ')') {
    return invalid_argument("npy shape '" + shape + "' is malformed");
  }
  std::vector<int64_t> dims;
  std::string inner = shape.substr(1, shape.size() - 2);
  std::stringstream ss(inner);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t a = item.find_first_not_of(' ');
    if (a == std::string::npos) continue;
    char* end = nullptr;
    long long d = std::strtoll(item.c_str() + a, &end, 10);
    if (d < 0 || end == item.c_str() + a) return invalid_argument("npy shape '" + shape + "' is malformed");
    dims.push_back(d);
  }
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d > 0 && n > (int64_t{1} << 40) / d) return invalid_argument("npy shape is absurdly large");
    n *= d;
  }
  size_t data_offset = offset + header_len;
  size_t need = static_cast<size_t>(n) * dtype_size(dtype);
  if (bytes.size() - data_offset < need) return invalid_argument("npy data is truncated");
  Tensor t(dtype, dims);
  if (need) std::memcpy(t.raw_data(), bytes.data() + data_offset, need);
  return t;
}

Result<Tensor> read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return not_found("cannot open '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  auto t = parse_npy(ss.str());
  if (!t.ok()) return t.status().with_context(path);
  return t;
}

std::string serialize_npy(const Tensor& t) {
  const char* descr = nullptr;
  for (const auto& e : kNpyTypes)
    if (e.dtype == t.dtype()) descr = e.descr;
  TESSERA_CHECK(descr != nullptr, "npy: unsupported dtype");
  std::string shape = "(";
  for (size_t i = 0; i < t.dims().size(); ++i) shape += std::to_string(t.dims()[i]) + (t.dims().size() == 1 ? "," : (i + 1 < t.dims().size() ? ", " : ""));
  shape += ")";
  std::string header = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  out += header;
  out.append(static_cast<const char*>(t.raw_data()), t.nbytes());
  return out;
}

Status write_npy(const std::string& path, const Tensor& t) {
  if (t.dtype() == DType::kString || t.dtype() == DType::kBFloat16) {
    return unimplemented(std::string("writing ") + dtype_name(t.dtype()) + " tensors as .npy");
  }
  std::ofstream f(path, std::ios::binary);
  if (!f) return io_error("cannot write '" + path + "'");
  std::string bytes = serialize_npy(t);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) return io_error("writing '" + path + "' failed");
  return Status();
}

}  // namespace tessera
