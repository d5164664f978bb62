// Schemas of the language-model ops (domain "tessera"): the forward pass of a decoder-only model
// as a tessera graph. Row dims (tokens in one step) are usually symbolic; feature dims are known.
//
//   Embedding(ids int32[T], table)            -> float[T, dim]       attrs qtype, dim
//   RMSNorm(x[T, D], weight[D])               -> float[T, D]         attr epsilon
//   QMatMul(x[T, k], w, bias?, residual?)     -> float[T, n]         attrs qtype, n, k
//   RoPE(x[T, H*hd], positions int32[T], inv_freq[hd/2]) -> float[T, H*hd]  attr head_dim
//   SiluMul(gate[T, F], up[T, F])             -> float[T, F]
//   SiluMul(gate_up[T, 2F])                   -> float[T, F]         (each row: gate, then up)
//   LayerNorm(x[T, D], weight[D], bias[D])    -> float[T, D]         attr epsilon
//   Gelu(x[T, F])                             -> float[T, F]         (tanh approximation)
//   PagedAttention(q[T, Hq*hd], k[T, Hkv*hd], v[T, Hkv*hd], k_cache, v_cache,
//                  token_seq int32[T], positions int32[T], block_tables int32[S, B])
//                                             -> float[T, Hq*hd]     attrs num_heads, num_kv_heads,
//                                                                    head_dim, block_size, scale
//
// Quantized weights (qtype "q8_0", "q4_0", "q4_k", "q6_k", "f16", "bf16") are uint8 tensors
// [rows, row bytes] in ggml's block layout (backends/quant_formats.h); "f32" weights are float
// [rows, cols]. A matrix's rows are its output features (n rows of k elements).
//
// PagedAttention writes k and v of every token into the caches (graph inputs that hold state
// across steps; k_cache float[blocks, Hkv, hd, block_size], each block's keys transposed; v_cache
// float[blocks, Hkv, block_size, hd]) at its sequence's position, then each token attends
// causally to positions 0..its own of its sequence, read through block_tables.
#include "backends/quant_formats.h"
#include "ops/op_registry.h"

namespace tessera {
namespace {

Dim row_dim(const TensorType& t) { return t.shape && !t.shape->empty() ? (*t.shape)[0] : Dim(); }

Status check_rank(const TensorType& t, int rank, const char* what) {
  if (t.shape && static_cast<int>(t.shape->size()) != rank) {
    return invalid_argument(std::string(what) + " must have rank " + std::to_string(rank) + ", got " + t.to_string());
  }
  return Status();
}

Status check_last_dim(const TensorType& t, int64_t want, const char* what) {
  if (t.shape && !t.shape->empty() && t.shape->back().known() && t.shape->back().value != want) {
    return invalid_argument(std::string(what) + " has " + std::to_string(t.shape->back().value) +
                            " features, expected " + std::to_string(want));
  }
  return Status();
}

Result<quant::QType> weight_qtype(const Node& n) {
  const std::string name = n.attr_string("qtype", "f32");
  auto t = quant::qtype_from_name(name);
  if (!t) return invalid_argument("unknown qtype '" + name + "'");
  return *t;
}

// A weight of `rows` x `cols` elements in qtype: float[rows, cols] for f32, else uint8 bytes.
Status check_weight(const TensorType& w, quant::QType qt, int64_t rows, int64_t cols, const char* what) {
  if (cols % quant::block_elements(qt) != 0) {
    return invalid_argument(std::string(what) + ": " + std::to_string(cols) + " columns are not whole " +
                            quant::qtype_name(qt) + " blocks");
  }
  if (quant::is_panel_type(qt) && rows % quant::kPanelRows != 0) {
    return invalid_argument(std::string(what) + ": " + std::to_string(rows) + " rows are not whole " +
                            quant::qtype_name(qt) + " panels of " +
                            std::to_string(quant::kPanelRows));
  }
  const bool is_f32 = qt == quant::QType::kF32;
  const DType want = is_f32 ? DType::kFloat32 : DType::kUint8;
  const int64_t want_cols = is_f32 ? cols : quant::row_bytes(qt, cols);
  if (w.dtype != want || (w.shape && *w.shape != std::vector<Dim>{Dim(rows), Dim(want_cols)})) {
    return invalid_argument(std::string(what) + " must be " + dtype_name(want) + "[" + std::to_string(rows) + "x" +
                            std::to_string(want_cols) + "] for qtype " + quant::qtype_name(qt) + ", got " +
                            w.to_string());
  }
  return Status();
}

TensorType float_rows(Dim rows, int64_t cols) {
  TensorType t;
  t.dtype = DType::kFloat32;
  t.shape = std::vector<Dim>{rows, Dim(cols)};
  return t;
}

Status infer_embedding(InferContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(quant::QType qt, weight_qtype(ctx.node));
  const int64_t dim = ctx.node.attr_int("dim", 0);
  if (dim <= 0) return invalid_argument("Embedding needs a positive `dim`");
  TESSERA_RETURN_IF_ERROR(check_rank(ctx.inputs[0], 1, "ids"));
  if (ctx.inputs[0].dtype != DType::kInt32) return invalid_argument("ids must be int32");
  const TensorType& table = ctx.inputs[1];
  if (!table.shape || table.shape->size() != 2 || !(*table.shape)[0].known()) {
    return invalid_argument("the embedding table must be a 2-D constant");
  }
  TESSERA_RETURN_IF_ERROR(check_weight(table, qt, (*table.shape)[0].value, dim, "embedding table"));
  ctx.outputs[0] = float_rows(row_dim(ctx.inputs[0]), dim);
  return Status();
}

Status infer_rms_norm(InferContext& ctx) {
  TESSERA_RETURN_IF_ERROR(check_rank(ctx.inputs[0], 2, "x"));
  TESSERA_RETURN_IF_ERROR(check_rank(ctx.inputs[1], 1, "weight"));
  if (ctx.inputs[1].shape && (*ctx.inputs[1].shape)[0].known()) {
    TESSERA_RETURN_IF_ERROR(check_last_dim(ctx.inputs[0], (*ctx.inputs[1].shape)[0].value, "x"));
  }
  ctx.outputs[0] = ctx.inputs[0];
  return Status();
}

Status infer_qmatmul(InferContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(quant::QType qt, weight_qtype(ctx.node));
  const int64_t n = ctx.node.attr_int("n", 0), k = ctx.node.attr_int("k", 0);
  if (n <= 0 || k <= 0) return invalid_argument("QMatMul needs positive `n` and `k`");
  TESSERA_RETURN_IF_ERROR(check_rank(ctx.inputs[0], 2, "x"));
  TESSERA_RETURN_IF_ERROR(check_last_dim(ctx.inputs[0], k, "x"));
  TESSERA_RETURN_IF_ERROR(check_weight(ctx.inputs[1], qt, n, k, "weight"));
  if (ctx.has_input(2)) TESSERA_RETURN_IF_ERROR(check_last_dim(ctx.inputs[2], n, "bias"));
  if (ctx.has_input(3)) TESSERA_RETURN_IF_ERROR(check_last_dim(ctx.inputs[3], n, "residual"));
  ctx.outputs[0] = float_rows(row_dim(ctx.inputs[0]), n);
  return Status();
}

Status infer_rope(InferContext& ctx) {
  const int64_t hd = ctx.node.attr_int("head_dim", 0);
  if (hd <= 0 || hd % 2 != 0) return invalid_argument("RoPE needs an even positive `head_dim`");
  TESSERA_RETURN_IF_ERROR(check_rank(ctx.inputs[0], 2, "x"));
  const TensorType& x = ctx.inputs[0];
  if (x.shape && (*x.shape)[1].known() && (*x.shape)[1].value % hd != 0) {
    return invalid_argument("x's features are not whole heads of " + std::to_string(hd));
  }
  if (ctx.inputs[1].dtype != DType::kInt32) return invalid_argument("positions must be int32");
  TESSERA_RETURN_IF_ERROR(check_last_dim(ctx.inputs[2], hd / 2, "inv_freq"));
  ctx.outputs[0] = x;
  return Status();
}

Status infer_silu_mul(InferContext& ctx) {
  if (ctx.inputs.size() == 1) {
    const TensorType& x = ctx.inputs[0];
    TESSERA_RETURN_IF_ERROR(check_rank(x, 2, "gate_up"));
    ctx.outputs[0] = x;
    if (x.shape && (*x.shape)[1].known()) {
      if ((*x.shape)[1].value % 2 != 0) return invalid_argument("gate_up must have an even number of features");
      ctx.outputs[0] = float_rows(row_dim(x), (*x.shape)[1].value / 2);
    }
    return Status();
  }
  TESSERA_RETURN_IF_ERROR(check_rank(ctx.inputs[0], 2, "gate"));
  TESSERA_RETURN_IF_ERROR(check_rank(ctx.inputs[1], 2, "up"));
  ctx.outputs[0] = ctx.inputs[0];
  return Status();
}

Status infer_layer_norm(InferContext& ctx) {
  TESSERA_RETURN_IF_ERROR(check_rank(ctx.inputs[0], 2, "x"));
  for (int i : {1, 2}) {
    TESSERA_RETURN_IF_ERROR(check_rank(ctx.inputs[i], 1, i == 1 ? "weight" : "bias"));
    if (ctx.inputs[i].shape && (*ctx.inputs[i].shape)[0].known()) {
      TESSERA_RETURN_IF_ERROR(check_last_dim(ctx.inputs[0], (*ctx.inputs[i].shape)[0].value, "x"));
    }
  }
  ctx.outputs[0] = ctx.inputs[0];
  return Status();
}

Status infer_paged_attention(InferContext& ctx) {
  const Node& n = ctx.node;
  const int64_t hq = n.attr_int("num_heads", 0), hkv = n.attr_int("num_kv_heads", 0);
  const int64_t hd = n.attr_int("head_dim", 0), bs = n.attr_int("block_size", 0);
  if (hq <= 0 || hkv <= 0 || hd <= 0 || bs <= 0 || hq % hkv != 0) {
    return invalid_argument("PagedAttention needs positive num_heads (a multiple of num_kv_heads), head_dim, block_size");
  }
  TESSERA_RETURN_IF_ERROR(check_last_dim(ctx.inputs[0], hq * hd, "q"));
  TESSERA_RETURN_IF_ERROR(check_last_dim(ctx.inputs[1], hkv * hd, "k"));
  TESSERA_RETURN_IF_ERROR(check_last_dim(ctx.inputs[2], hkv * hd, "v"));
  for (int i : {3, 4}) {
    const TensorType& c = ctx.inputs[i];
    const int64_t d2 = i == 3 ? hd : bs, d3 = i == 3 ? bs : hd;  // K blocks are transposed
    if (c.dtype != DType::kFloat32 || !c.shape || c.shape->size() != 4 || (*c.shape)[1] != Dim(hkv) ||
        (*c.shape)[2] != Dim(d2) || (*c.shape)[3] != Dim(d3)) {
      return invalid_argument(std::string(i == 3 ? "the K cache" : "the V cache") + " must be float32[blocks x " +
                              std::to_string(hkv) + " x " + std::to_string(d2) + " x " + std::to_string(d3) +
                              "], got " + c.to_string());
    }
  }
  for (int i : {5, 6, 7}) {
    if (ctx.inputs[i].dtype != DType::kInt32) return invalid_argument("token_seq, positions and block_tables must be int32");
  }
  TESSERA_RETURN_IF_ERROR(check_rank(ctx.inputs[7], 2, "block_tables"));
  ctx.outputs[0] = float_rows(row_dim(ctx.inputs[0]), hq * hd);
  return Status();
}

}  // namespace

void register_llm_ops(OpRegistry& r) {
  const std::string d = "tessera";
  r.add("Embedding", OpKind::kOpaque, d).set_inputs(2, 2).set_infer(infer_embedding);
  r.add("RMSNorm", OpKind::kOpaque, d).set_inputs(2, 2).set_infer(infer_rms_norm);
  r.add("QMatMul", OpKind::kOutElementwiseFusable, d).set_inputs(2, 4).set_infer(infer_qmatmul);
  r.add("RoPE", OpKind::kOpaque, d).set_inputs(3, 3).set_infer(infer_rope);
  // Not elementwise in its one-input form (an output reads two elements of the row).
  r.add("SiluMul", OpKind::kOpaque, d).set_inputs(1, 2).set_infer(infer_silu_mul);
  r.add("LayerNorm", OpKind::kOpaque, d).set_inputs(3, 3).set_infer(infer_layer_norm);
  r.add("Gelu", OpKind::kElementwise, d).set_inputs(1, 1).set_infer(infer_same_as_input0);
  r.add("PagedAttention", OpKind::kOpaque, d).set_inputs(8, 8).set_infer(infer_paged_attention);
}

}  // namespace tessera
