// A fused elementwise chain as a small program over tiles of the output.
//
// A group of elementwise / broadcast nodes with one output shape compiles (eltwise_compile.cc)
// into an EltwiseProgram: a list of instructions over values (program inputs first, then one
// value per instruction). It runs in one pass over memory: per tile of output elements, inputs
// are addressed in place (same shape), read as one broadcast float (scalar over the tile) or
// gathered into a small buffer (other broadcasting); instructions go through tile-sized
// temporaries that stay in L1; outputs are written once. Dispatching per tile, not per element,
// keeps the interpreter's cost out of the inner loops.
//
// Dims are collapsed before compiling: adjacent output dims merge where every input steps
// through them alike, so the common cases (same shape, per-channel, scalar) become 1-3 dims.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera::native {

inline constexpr int kMaxEltwiseRank = 8;
inline constexpr int kMaxEltwiseValues = 256;

enum class EwOp : uint8_t {
  // Binary: dst = f(a, b).
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMax,
  kMin,
  kPow,
  kPRelu,
  // Unary: dst = f(a), parameters in p0, p1.
  kRelu,
  kClip,
  kHardSigmoid,
  kHardSwish,
  kSigmoid,
  kTanh,
  kLeakyRelu,
  kElu,
  kExp,
  kLog,
  kSqrt,
  kAbs,
  kNeg,
  kErf,
  kSquare,
  kCube,
  kReciprocal,
  kCopy,
  kFill,
};
inline bool ew_is_binary(EwOp op) { return op <= EwOp::kPRelu; }

struct EwInstr {
  EwOp op;
  int dst;     // value id written (num_inputs + index of the instruction)
  int a = -1;  // value ids read; b only for binary ops
  int b = -1;
  float p0 = 0, p1 = 0;  // Clip lo/hi, HardSigmoid alpha/beta, LeakyRelu/Elu alpha, Fill value
  // Add / Sub / Mul / Div only, each a pass over the tile fewer with the same float operations:
  // `post`, when not kCopy, is an Add / Sub / Mul / Div of the result by the scalar program input
  // `post_b` (result op scalar), then `clamp` clips it to [p0, p1] as Clip does (the instructions
  // that alone read the result, fused).
  EwOp post = EwOp::kCopy;
  int post_b = -1;
  bool clamp = false;
};

// How one program input lies over the (collapsed) output dims.
struct EwInput {
  int64_t strides[kMaxEltwiseRank] = {};  // elements per output index step; 0 where broadcast
  bool contiguous = false;                // same shape as the output: element i is at offset i
  bool scalar = false;                    // one element for the whole output
};

struct EltwiseProgram {
  int rank = 1;
  int64_t dims[kMaxEltwiseRank] = {1};  // collapsed output dims
  int64_t total = 1;                    // output elements
  std::vector<EwInput> inputs;
  std::vector<EwInstr> code;
  std::vector<int> outputs;  // value ids written to the output buffers, in output order
  // Per value: the scratch tile it lives in (-1: a program input, or an output written in place).
  std::vector<int> slot;
  int num_slots = 0;
  int64_t tile = 512;       // output elements per tile (a multiple of 16)
  int64_t row_split = 256;  // rows at least this long are never merged into one tile
  // For data far larger than the caches: outputs are written with non-temporal stores (no
  // read-for-ownership of each line; see eltwise_run for when they are staged in scratch first),
  // inputs are prefetched non-temporally.
  bool streaming = false;

  int num_inputs() const { return static_cast<int>(inputs.size()); }
  int num_values() const { return num_inputs() + static_cast<int>(code.size()); }
  // Floats of per-thread scratch the ISA kernel needs (slots, gather and staging buffers, padded).
  int64_t scratch_floats() const {
    return (num_slots + num_inputs() + static_cast<int64_t>(outputs.size()) + 1) * (tile + 16) + 16;
  }
};

// Run-time pointers of one execution: per program input and per program output.
struct EltwiseBuffers {
  const float* const* inputs;
  float* const* outputs;
};

}  // namespace tessera::native
