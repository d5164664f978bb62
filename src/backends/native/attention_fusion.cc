#include "backends/native/attention_fusion.h"

#include <optional>

#include "backends/native/kernel_io.h"

namespace tessera::native {
namespace {

// Input i of a node as constant integers (nullopt: absent or not constant).
std::optional<std::vector<int64_t>> constant_ints(const Graph& g, const Node& n, size_t i) {
  if (i >= n.inputs.size() || n.inputs[i] == kNoValue) return std::nullopt;
  const std::optional<Tensor>& c = g.value(n.inputs[i]).constant;
  if (!c || !dtype_is_integer(c->dtype())) return std::nullopt;
  return c->to_int64_vector();
}

bool has_perm(const Node* n, const std::vector<int64_t>& perm) {
  return n && n->inputs.size() == 1 && n->attr_ints("perm") == perm;
}

// For Squeeze(Slice(t, axis 0, s .. s+1), axis 0) producing v: s, and t through `t`.
std::optional<int64_t> part_of(const SubGraph& sg, int v, int& t) {
  const Graph& g = sg.graph();
  const Node* squeeze = producer_in(sg, v, "Squeeze");
  if (!squeeze || squeeze->inputs.empty()) return std::nullopt;
  const std::vector<int64_t> squeezed =
      squeeze->opset < 13 ? squeeze->attr_ints("axes") : constant_ints(g, *squeeze, 1).value_or(std::vector<int64_t>{});
  if (squeezed != std::vector<int64_t>{0}) return std::nullopt;
  const Node* slice = producer_in(sg, squeeze->inputs[0], "Slice");
  if (!slice || slice->inputs.empty()) return std::nullopt;
  std::vector<int64_t> starts, ends, axes, steps;
  if (slice->opset < 10) {
    starts = slice->attr_ints("starts"), ends = slice->attr_ints("ends"), axes = slice->attr_ints("axes");
  } else {
    starts = constant_ints(g, *slice, 1).value_or(std::vector<int64_t>{});
    ends = constant_ints(g, *slice, 2).value_or(std::vector<int64_t>{});
    axes = constant_ints(g, *slice, 3).value_or(std::vector<int64_t>{0});
    steps = constant_ints(g, *slice, 4).value_or(std::vector<int64_t>{1});
    if (slice->inputs.size() > 3 && slice->inputs[3] != kNoValue && !constant_ints(g, *slice, 3)) return std::nullopt;
    if (slice->inputs.size() > 4 && slice->inputs[4] != kNoValue && !constant_ints(g, *slice, 4)) return std::nullopt;
  }
  if (axes.empty()) axes = {0};
  if (steps.empty()) steps = {1};
  if (starts.size() != 1 || ends.size() != 1 || axes != std::vector<int64_t>{0} || steps != std::vector<int64_t>{1})
    return std::nullopt;
  if (starts[0] < 0 || ends[0] != starts[0] + 1) return std::nullopt;
  t = slice->inputs[0];
  return starts[0];
}

class PackedAttentionKernel final : public Kernel {
 public:
  PackedAttentionKernel(const IsaKernels& isa, const PackedAttention& a, ValueSource qkv)
      : isa_(isa), a_(a), qkv_(std::move(qkv)) {}

  Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs,
             KernelRunContext& ctx) override {
    TESSERA_ASSIGN_OR_RETURN(const float* qkv, resolve_float(qkv_, inputs));
    const int64_t n = a_.tokens, h_count = a_.heads, d = a_.head_dim, width = h_count * d;
    const int64_t row = 3 * width;  // one token's q, k and v of every head
    Tensor y = ctx.alloc.allocate_uninitialized(DType::kFloat32, {a_.batch, n, width});
    float* out = y.data<float>();
    const IsaKernels& isa = isa_;
    const float scale = a_.scale;
    // One task per (batch, head): K transposed and V gathered into rows, then the scores, their
    // softmax and the weighted values, all in cache.
    parallel(ctx.pool, a_.batch * h_count, 1, [&](int64_t t0, int64_t t1) {
      ScratchBuffer kt(d * n), v(n * d), scores(n * n);
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t b = t / h_count, h = t % h_count;
        const float* q = qkv + b * n * row + h * d;  // token i's q at q + i * row
        for (int64_t j = 0; j < n; ++j) {
          const float* kj = q + j * row + width;
          const float* vj = q + j * row + 2 * width;
          for (int64_t e = 0; e < d; ++e) kt.data()[e * n + j] = kj[e];
          for (int64_t e = 0; e < d; ++e) v.data()[j * d + e] = vj[e];
        }
        const float* kb = kt.data();
        const float* vb = v.data();
        isa.attention_scores(q, row, n, d, &kb, n, n, scale, scores.data(), n);
        for (int64_t i = 0; i < n; ++i) isa.softmax_row(scores.data() + i * n, n, scores.data() + i * n);
        isa.attention_values(scores.data(), n, n, n, &vb, n, d, out + b * n * width + h * d, width);
      }
    });
    outputs.resize(1);
    outputs[0] = std::move(y);
    return Status();
  }

 private:
  const IsaKernels& isa_;
  PackedAttention a_;
  ValueSource qkv_;
};

}  // namespace

Result<PackedAttention> match_packed_attention(const SubGraph& sg) {
  const Graph& g = sg.graph();
  auto no = [](const std::string& why) { return unimplemented("not a packed-QKV attention: " + why); };
  if (sg.outputs().size() != 1) return no("more than one output");
  const int y = sg.outputs()[0];
  const Node* merge = producer_in(sg, y, "Reshape");
  if (merge && merge->inputs.empty()) merge = nullptr;
  const Node* heads_back = merge ? producer_in(sg, merge->inputs[0], "Transpose") : nullptr;
  if (!has_perm(heads_back, {0, 2, 1, 3})) return no("the output is not a Reshape of the heads transposed back");
  const Node* weighted = producer_in(sg, heads_back->inputs[0], "MatMul");
  const Node* softmax = weighted ? producer_in(sg, weighted->inputs[0], "Softmax") : nullptr;
  if (!softmax || softmax->inputs.empty() || weighted->inputs.size() != 2)
    return no("no MatMul of a Softmax by the values");
  const Node* scores = producer_in(sg, softmax->inputs[0], "MatMul");
  if (!scores || scores->inputs.size() != 2) return no("the Softmax is not of a MatMul");
  const Node* keys_t = producer_in(sg, scores->inputs[1], "Transpose");
  if (!has_perm(keys_t, {0, 1, 3, 2})) return no("the scores do not multiply by the keys transposed");
  PackedAttention a;
  int q = scores->inputs[0], walked = 6;  // Reshape, Transpose, MatMul, Softmax, MatMul, Transpose
  if (const Node* mul = producer_in(sg, q, "Mul"); mul && mul->inputs.size() == 2) {
    const int c = g.value(mul->inputs[1]).constant ? 1 : 0;
    const std::optional<Tensor>& s = g.value(mul->inputs[c]).constant;
    if (!s || s->numel() != 1 || !dtype_is_float(s->dtype())) return no("the queries are scaled by other than a constant");
    a.scale = static_cast<float>(s->to_double_vector()[0]);
    q = mul->inputs[1 - c];
    ++walked;
  }
  int tq = kNoValue, tk = kNoValue, tv = kNoValue;
  if (part_of(sg, q, tq) != 0 || part_of(sg, keys_t->inputs[0], tk) != 1 ||
      part_of(sg, weighted->inputs[1], tv) != 2 || tq != tk || tq != tv)
    return no("q, k and v are not slices 0, 1 and 2 of one tensor");
  walked += 6;  // three Slices and three Squeezes
  const Node* split = producer_in(sg, tq, "Transpose");
  if (!has_perm(split, {2, 0, 3, 1, 4})) return no("the slices are not of the split projection transposed");
  const Node* unpack = producer_in(sg, split->inputs[0], "Reshape");
  if (!unpack || unpack->inputs.empty()) return no("the projection is not reshaped into q, k and v");
  walked += 2;
  if (walked != sg.size()) return no("the group holds other nodes");
  const int softmax_rank = g.value(softmax->inputs[0]).type.rank();
  const int64_t axis = softmax->attr_int("axis", softmax->opset < 13 ? 1 : -1);
  if (axis != softmax_rank - 1 && axis != -1) return no("the Softmax is not over the keys");
  a.qkv = unpack->inputs[0];
  for (int v : {a.qkv, split->inputs[0], y}) TESSERA_RETURN_IF_ERROR(check_float_value(g, v));
  const std::vector<int64_t> packed = g.value(split->inputs[0]).type.static_dims();  // [B, N, 3, H, D]
  if (packed.size() != 5 || packed[2] != 3) return no("the projection is not reshaped to [B, N, 3, H, D]");
  a.batch = packed[0], a.tokens = packed[1], a.heads = packed[3], a.head_dim = packed[4];
  const int64_t width = a.heads * a.head_dim;
  if (g.value(a.qkv).type.static_dims() != std::vector<int64_t>{a.batch, a.tokens, 3 * width})
    return no("the projection is not [B, N, 3*H*D]");
  if (g.value(y).type.static_dims() != std::vector<int64_t>{a.batch, a.tokens, width})
    return no("the output is not [B, N, H*D]");
  return a;
}

Pattern packed_attention_pattern() {
  Pattern t = op("Transpose", {op("Reshape", {wildcard(), wildcard()})});
  auto part = [&t]() {
    Pattern slice = op("Slice", {t}) | op("Slice", {t, constant(), constant()}) |
                    op("Slice", {t, constant(), constant(), constant()}) |
                    op("Slice", {t, constant(), constant(), constant(), constant()});
    return op("Squeeze", {slice}) | op("Squeeze", {slice, constant()});
  };
  Pattern q = part(), k = part(), v = part();
  Pattern scaled_q = op("Mul", {q, constant()}) | op("Mul", {constant(), q}) | q;
  Pattern scores = op("MatMul", {scaled_q, op("Transpose", {k})});
  Pattern weighted = op("MatMul", {op("Softmax", {scores}), v});
  return op("Reshape", {op("Transpose", {weighted}), wildcard()});
}

Result<std::unique_ptr<Kernel>> compile_packed_attention(const SubGraph& sg, const IsaKernels& isa,
                                                         const PackedAttention& a) {
  TESSERA_ASSIGN_OR_RETURN(ValueSource qkv, source_of(sg, a.qkv));
  return std::unique_ptr<Kernel>(new PackedAttentionKernel(isa, a, std::move(qkv)));
}

}  // namespace tessera::native
