#include "llm/safetensors.h"

#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace tessera::llm {

static_assert(std::endian::native == std::endian::little, "safetensors is read as little-endian");

namespace {

using Json = nlohmann::ordered_json;

// The header may not be larger than this (the reference implementation's limit is 100 MB).
constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;
constexpr size_t kMaxRank = 8;

Result<quant::QType> dtype_of(const std::string& dtype, const std::string& where) {
  if (dtype == "F32") return quant::QType::kF32;
  if (dtype == "F16") return quant::QType::kF16;
  if (dtype == "BF16") return quant::QType::kBF16;
  return unimplemented(where + " has dtype " + dtype + "; tessera reads F32, F16 and BF16");
}

int64_t dtype_bytes(quant::QType t) { return t == quant::QType::kF32 ? 4 : 2; }

}  // namespace

int64_t SafetensorsFile::Entry::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // open() checked the product fits
  return n;
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  TESSERA_ASSIGN_OR_RETURN(f->file_, MappedFile::open(path));
  const uint8_t* bytes = f->file_->data();
  const uint64_t size = f->file_->size();
  auto error = [&](const std::string& msg) { return invalid_argument(path + ": " + msg); };
  if (size < 8) return error("truncated: " + std::to_string(size) + " bytes, no header length");
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes, 8);
  if (header_len > size - 8) {
    return error("header length " + std::to_string(header_len) +
                 " runs past the end of the file (" + std::to_string(size) + " bytes)");
  }
  if (header_len > kMaxHeaderBytes) {
    return error("header length " + std::to_string(header_len) + " is over the 100 MB limit");
  }
  f->data_offset_ = 8 + header_len;
  const uint64_t data_size = size - f->data_offset_;
  const char* text = reinterpret_cast<const char*>(bytes + 8);
  Json header = Json::parse(text, text + header_len, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) return error("the header is not valid JSON");
  if (!header.is_object()) return error("the header is not a JSON object");

  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string where = "tensor '" + name + "'";
    if (!value.is_object()) return error(where + " is not a JSON object");
    auto dtype_it = value.find("dtype");
    auto shape_it = value.find("shape");
    auto offsets_it = value.find("data_offsets");
    if (dtype_it == value.end() || !dtype_it->is_string()) {
      return error(where + " has no string \"dtype\"");
    }
    if (shape_it == value.end() || !shape_it->is_array()) {
      return error(where + " has no array \"shape\"");
    }
    if (offsets_it == value.end() || !offsets_it->is_array() || offsets_it->size() != 2 ||
        !(*offsets_it)[0].is_number_unsigned() || !(*offsets_it)[1].is_number_unsigned()) {
      return error(where + " has no \"data_offsets\" [begin, end] of non-negative integers");
    }
    Entry e;
    e.name = name;
    Result<quant::QType> type = dtype_of(dtype_it->get<std::string>(), path + ": " + where);
    if (!type.ok()) return type.status();
    e.type = *type;
    if (shape_it->size() > kMaxRank) {
      return error(where + " has rank " + std::to_string(shape_it->size()) + ", over " +
                   std::to_string(kMaxRank));
    }
    int64_t numel = 1;
    for (const Json& d : *shape_it) {
      if (!d.is_number_unsigned()) return error(where + " has a shape entry that is not a size");
      const uint64_t dim = d.get<uint64_t>();
      if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          (dim != 0 &&
           numel > std::numeric_limits<int64_t>::max() / 8 / static_cast<int64_t>(dim))) {
        return error(where + " has more elements than fit in int64");
      }
      numel *= static_cast<int64_t>(dim);
      e.shape.push_back(static_cast<int64_t>(dim));
    }
    const uint64_t begin = (*offsets_it)[0].get<uint64_t>();
    const uint64_t end = (*offsets_it)[1].get<uint64_t>();
    if (begin > end || end > data_size) {
      return error(where + " data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                   "] are not inside the data (" + std::to_string(data_size) + " bytes)");
    }
    e.offset = begin;
    e.nbytes = numel * dtype_bytes(e.type);
    if (end - begin != static_cast<uint64_t>(e.nbytes)) {
      return error(where + " has " + std::to_string(end - begin) + " bytes of data, but shape x " +
                   quant::qtype_name(e.type) + " needs " + std::to_string(e.nbytes));
    }
    f->index_.emplace(name, f->tensors_.size());  // JSON keys are unique after parsing
    f->tensors_.push_back(std::move(e));
  }
  return f;
}

const SafetensorsFile::Entry* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const uint8_t* SafetensorsFile::data(const Entry& e) const {
  return file_->data() + data_offset_ + e.offset;
}

Status SafetensorsFile::read(const Entry& e, void* dst) const {
  const uint64_t data_size = file_->size() - data_offset_;
  if (e.nbytes < 0 || e.offset > data_size ||
      static_cast<uint64_t>(e.nbytes) > data_size - e.offset) {
    return invalid_argument(path() + ": tensor '" + e.name + "' lies outside the file");
  }
  file_->copy_and_release(data_offset_ + e.offset, static_cast<uint64_t>(e.nbytes), dst);
  return Status();
}

namespace {

Result<std::vector<std::string>> shards_from_index(const std::filesystem::path& index) {
  const std::string where = index.string();
  std::ifstream in(index, std::ios::binary);
  if (!in) return not_found(where + ": cannot open");
  std::stringstream text;
  text << in.rdbuf();
  Json j = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return invalid_argument(where + ": not a JSON object");
  auto map = j.find("weight_map");
  if (map == j.end() || !map->is_object()) {
    return invalid_argument(where + ": no \"weight_map\" object");
  }
  std::set<std::string> files;
  for (const auto& [tensor, file] : map->items()) {
    if (!file.is_string()) {
      return invalid_argument(where + ": weight_map entry '" + tensor + "' is not a file name");
    }
    const std::string name = file.get<std::string>();
    if (name.empty() || name.find("..") != std::string::npos || name.front() == '/') {
      return invalid_argument(where + ": weight_map names the file '" + name +
                              "' outside the model's folder");
    }
    files.insert(name);
  }
  if (files.empty()) return invalid_argument(where + ": weight_map is empty");
  std::vector<std::string> out;
  for (const std::string& name : files) {
    const std::filesystem::path shard = index.parent_path() / name;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(shard, ec)) {
      return not_found(where + ": shard " + shard.string() + " does not exist");
    }
    out.push_back(shard.string());
  }
  return out;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Result<std::vector<std::string>> safetensors_shards(const std::string& dir_or_file) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path path(dir_or_file);
  if (fs::is_regular_file(path, ec)) {
    if (ends_with(dir_or_file, ".index.json")) return shards_from_index(path);
    return std::vector<std::string>{dir_or_file};
  }
  if (!fs::is_directory(path, ec)) return not_found(dir_or_file + ": no such file or directory");
  const fs::path index = path / "model.safetensors.index.json";
  if (fs::is_regular_file(index, ec)) return shards_from_index(index);
  const fs::path single = path / "model.safetensors";
  if (fs::is_regular_file(single, ec)) return std::vector<std::string>{single.string()};
  return not_found(dir_or_file +
                   ": neither model.safetensors nor model.safetensors.index.json is there");
}

}  // namespace tessera::llm
