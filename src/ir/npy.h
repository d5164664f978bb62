// Reading and writing NumPy .npy files (format versions 1-3, little-endian, C order).
#pragma once

#include <string>

#include "ir/status.h"
#include "ir/tensor.h"

namespace tessera {

Result<Tensor> read_npy(const std::string& path);
Result<Tensor> parse_npy(const std::string& bytes);
Status write_npy(const std::string& path, const Tensor& t);
std::string serialize_npy(const Tensor& t);

}  // namespace tessera
