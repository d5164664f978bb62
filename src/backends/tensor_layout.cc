// Channels-last exchange: the layout conversions and the kernel wrapper of compile_in_layout().
#include <cstdint>
#include <cstring>

#include "backends/backend.h"

namespace tessera {

const char* layout_name(TensorLayout layout) {
  return layout == TensorLayout::kChannelsLast ? "channels-last" : "row-major";
}

Result<TensorLayout> parse_layout(const std::string& name) {
  if (name == "row-major") return TensorLayout::kRowMajor;
  if (name == "channels-last") return TensorLayout::kChannelsLast;
  return invalid_argument("unknown tensor layout '" + name + "' (row-major or channels-last)");
}

std::vector<int64_t> channels_last_dims(const std::vector<int64_t>& d) { return {d[0], d[2], d[3], d[1]}; }
std::vector<int64_t> row_major_dims(const std::vector<int64_t>& d) { return {d[0], d[3], d[1], d[2]}; }

namespace {

// dst[n][j][i] = src[n][i][j] for i < rows, j < cols, in tiles that stay in L1.
template <typename T>
void transpose_batches(const T* src, T* dst, int64_t batches, int64_t rows, int64_t cols) {
  constexpr int64_t kTile = 32;
  for (int64_t n = 0; n < batches; ++n) {
    const T* s = src + n * rows * cols;
    T* d = dst + n * rows * cols;
    for (int64_t i0 = 0; i0 < rows; i0 += kTile) {
      const int64_t i1 = std::min(rows, i0 + kTile);
      for (int64_t j0 = 0; j0 < cols; j0 += kTile) {
        const int64_t j1 = std::min(cols, j0 + kTile);
        for (int64_t i = i0; i < i1; ++i)
          for (int64_t j = j0; j < j1; ++j) d[j * rows + i] = s[i * cols + j];
      }
    }
  }
}

// Copies t with each batch's [rows, cols] matrix transposed, into a tensor of `dims`.
Tensor transposed(const Tensor& t, std::vector<int64_t> dims, int64_t rows, int64_t cols, TensorAllocator& alloc) {
  Tensor out = alloc.allocate_uninitialized(t.dtype(), std::move(dims));
  const int64_t batches = t.dim(0);
  const void* s = t.raw_data();
  void* d = out.raw_data();
  if (rows == 1 || cols == 1) {  // the same bytes in either layout
    std::memcpy(d, s, t.nbytes());
    return out;
  }
  switch (dtype_size(t.dtype())) {
    case 1: transpose_batches(static_cast<const uint8_t*>(s), static_cast<uint8_t*>(d), batches, rows, cols); break;
    case 2: transpose_batches(static_cast<const uint16_t*>(s), static_cast<uint16_t*>(d), batches, rows, cols); break;
    case 4: transpose_batches(static_cast<const uint32_t*>(s), static_cast<uint32_t*>(d), batches, rows, cols); break;
    default: transpose_batches(static_cast<const uint64_t*>(s), static_cast<uint64_t*>(d), batches, rows, cols); break;
  }
  return out;
}

bool convertible(const Tensor& t) {
  if (!t.defined() || t.rank() != 4) return false;
  const size_t size = dtype_size(t.dtype());
  return t.dtype() != DType::kString && (size == 1 || size == 2 || size == 4 || size == 8);
}

}  // namespace

Tensor to_channels_last(const Tensor& t, TensorAllocator& alloc) {
  if (!convertible(t)) return t;
  const auto& d = t.dims();
  return transposed(t, channels_last_dims(d), d[1], d[2] * d[3], alloc);
}

Tensor to_row_major(const Tensor& t, TensorAllocator& alloc) {
  if (!convertible(t)) return t;
  const auto& d = t.dims();
  return transposed(t, row_major_dims(d), d[1] * d[2], d[3], alloc);
}

namespace {

// A row-major kernel in a channels-last plan: its rank-4 inputs converted to row-major before
// it runs, its rank-4 outputs to channels-last after.
class RowMajorInside final : public Kernel {
 public:
  explicit RowMajorInside(std::unique_ptr<Kernel> inner) : inner_(std::move(inner)) {}

  Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs,
             KernelRunContext& ctx) override {
    std::vector<Tensor> converted(inputs.size());
    std::vector<const Tensor*> in(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      in[i] = inputs[i];
      if (inputs[i] && convertible(*inputs[i])) {
        converted[i] = to_row_major(*inputs[i], ctx.alloc);
        in[i] = &converted[i];
      }
    }
    std::vector<Tensor> row_major(outputs.size());
    TESSERA_RETURN_IF_ERROR(inner_->run(in, row_major, ctx));
    outputs.resize(row_major.size());
    for (size_t o = 0; o < row_major.size(); ++o) {
      outputs[o] = to_channels_last(row_major[o], ctx.alloc);
      if (outputs[o].raw_data() != row_major[o].raw_data()) ctx.alloc.release(row_major[o]);
    }
    for (Tensor& t : converted)
      if (t.defined()) ctx.alloc.release(t);
    return Status();
  }

 private:
  std::unique_ptr<Kernel> inner_;
};

}  // namespace

Result<std::unique_ptr<Kernel>> compile_in_layout(const Backend& b, const SubGraph& sg, const CompileOptions& opts) {
  if (opts.layout == TensorLayout::kRowMajor || b.takes_channels_last(sg)) return b.compile(sg, opts);
  CompileOptions row_major = opts;
  row_major.layout = TensorLayout::kRowMajor;
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> kernel, b.compile(sg, row_major));
  return std::unique_ptr<Kernel>(std::make_unique<RowMajorInside>(std::move(kernel)));
}

}  // namespace tessera
