// Multi-head self-attention from one packed QKV projection, as PaddlePaddle exports ViT and SVTR
// blocks (PP-OCR rec's neck) without an attention op:
//
//   t = Transpose(Reshape(qkv [B, N, 3*H*D], [B, N, 3, H, D]), perm 2,0,3,1,4)   [3, B, H, N, D]
//   q, k, v = Squeeze(Slice(t, axis 0, i .. i+1), axis 0) for i = 0, 1, 2         [B, H, N, D]
//   p = Softmax(MatMul(Mul(q, scale), Transpose(k, perm 0,1,3,2)), last axis)     [B, H, N, N]
//   y = Reshape(Transpose(MatMul(p, v), perm 0,2,1,3), [B, N, H*D])
//
// (Mul by a scalar constant, either operand order, or none.) Fifteen nodes, each of them a kernel
// and a tensor otherwise; the native backend runs them as one kernel that reads q, k and v in place
// from the projection and writes y.
#pragma once

#include <cstdint>

#include "backends/backend.h"
#include "backends/native/isa.h"
#include "ir/pattern.h"

namespace tessera::native {

struct PackedAttention {
  int qkv = kNoValue;  // [B, N, 3*H*D]
  int64_t batch = 0, tokens = 0, heads = 0, head_dim = 0;
  float scale = 1;
};

// The nodes of sg are exactly one such attention, float32 with static shapes, only y leaving it:
// its parts, or why not.
Result<PackedAttention> match_packed_attention(const SubGraph& sg);

// Candidates: the forms above, rooted at the last Reshape (checked in full by the matcher).
Pattern packed_attention_pattern();

Result<std::unique_ptr<Kernel>> compile_packed_attention(const SubGraph& sg, const IsaKernels& isa,
                                                         const PackedAttention& a);

}  // namespace tessera::native
