// The elementwise program interpreter over an ISA policy S: one tile of output elements at a
// time, one tight vector loop per instruction (see eltwise_program.h for the model).
//
// Only templates, included by the ISA files after their target pragma (see simd_math.h).
#pragma once

namespace tessera::native::simd {

// min(max(x, lo), hi) exactly as std::max then std::min choose (NaN stays NaN). S::max(a, b)
// is a > b ? a : b and S::min(a, b) a < b ? a : b, so the operand order makes the choices
// std::max(x, lo) = x < lo ? lo : x and std::min(t, hi) = hi < t ? hi : t.
template <class S>
typename S::V clip(typename S::V x, typename S::V lo, typename S::V hi) {
  return S::min(hi, S::max(lo, x));
}
// std::max(0, std::min(1, x)): HardSigmoid's clamp (NaN becomes 1, as in ref).
template <class S>
typename S::V clip01(typename S::V x) {
  return S::max(S::min(x, S::set1(1.0f)), S::zero());
}

// Where a value lives for the current tile: n floats at p, or one float s broadcast.
struct Loc {
  const float* p;
  float s;
};

// `nt`: whole vectors go out with non-temporal stores (dst aligned to them).
template <class S, class F>
void map_unary(float* dst, Loc a, int64_t n, F f, bool nt = false) {
  constexpr int W = S::W;
  int64_t i = 0;
  if (nt)
    for (; i + W <= n; i += W) S::stream(dst + i, f(S::load(a.p + i)));
  else
    for (; i + W <= n; i += W) S::store(dst + i, f(S::load(a.p + i)));
  if (i < n) {
    const int r = static_cast<int>(n - i);
    S::store_n(dst + i, f(S::load_n(a.p + i, r)), r);
  }
}

// At most one of a, b is a broadcast float (the caller folds two of them to a broadcast).
template <class S, class F>
void map_binary(float* dst, Loc a, Loc b, int64_t n, F f, bool nt = false) {
  constexpr int W = S::W;
  int64_t i = 0;
  if (a.p && b.p) {
    if (nt)
      for (; i + W <= n; i += W) S::stream(dst + i, f(S::load(a.p + i), S::load(b.p + i)));
    else
      for (; i + W <= n; i += W) S::store(dst + i, f(S::load(a.p + i), S::load(b.p + i)));
    if (i < n) {
      const int r = static_cast<int>(n - i);
      S::store_n(dst + i, f(S::load_n(a.p + i, r), S::load_n(b.p + i, r)), r);
    }
  } else if (a.p) {
    const typename S::V bs = S::set1(b.s);
    if (nt)
      for (; i + W <= n; i += W) S::stream(dst + i, f(S::load(a.p + i), bs));
    else
      for (; i + W <= n; i += W) S::store(dst + i, f(S::load(a.p + i), bs));
    if (i < n) {
      const int r = static_cast<int>(n - i);
      S::store_n(dst + i, f(S::load_n(a.p + i, r), bs), r);
    }
  } else {
    const typename S::V as = S::set1(a.s);
    if (nt)
      for (; i + W <= n; i += W) S::stream(dst + i, f(as, S::load(b.p + i)));
    else
      for (; i + W <= n; i += W) S::store(dst + i, f(as, S::load(b.p + i)));
    if (i < n) {
      const int r = static_cast<int>(n - i);
      S::store_n(dst + i, f(as, S::load_n(b.p + i, r)), r);
    }
  }
}

template <class S>
void fill(float* dst, float v, int64_t n) {
  constexpr int W = S::W;
  const typename S::V x = S::set1(v);
  int64_t i = 0;
  for (; i + W <= n; i += W) S::store(dst + i, x);
  if (i < n) S::store_n(dst + i, x, static_cast<int>(n - i));
}

template <class S>
using Vec = typename S::V;

// The operations as function objects (GCC compiles lambdas in these templates for the baseline
// ISA, whatever the target pragma says; function objects get the pragma's target).
template <class S>
struct Identity {
  Vec<S> operator()(Vec<S> x) const { return x; }
};

template <class S>
void copy(float* dst, const float* src, int64_t n) {
  map_unary<S>(dst, Loc{src, 0}, n, Identity<S>{});
}

// dst[0, n) = src (n floats, or one broadcast float) with non-temporal stores over dst's whole
// 64-byte lines; plain stores for the partial lines at either end.
template <class S>
void stream_out(float* dst, Loc src, int64_t n) {
  constexpr int64_t kLine = 64 / sizeof(float);
  const int64_t misaligned = static_cast<int64_t>(reinterpret_cast<uintptr_t>(dst) % 64);
  int64_t head = misaligned == 0 ? 0 : (64 - misaligned) / static_cast<int64_t>(sizeof(float));
  if (head > n) head = n;
  const int64_t body_end = head + (n - head) / kLine * kLine;
  if (src.p) {
    copy<S>(dst, src.p, head);
    for (int64_t i = head; i < body_end; i += S::W) S::stream(dst + i, S::load(src.p + i));
    copy<S>(dst + body_end, src.p + body_end, n - body_end);
  } else {
    fill<S>(dst, src.s, head);
    const typename S::V x = S::set1(src.s);
    for (int64_t i = head; i < body_end; i += S::W) S::stream(dst + i, x);
    fill<S>(dst + body_end, src.s, n - body_end);
  }
}

#define TESSERA_EW_BINARY(Name, expr)                            \
  template <class S>                                             \
  struct Name {                                                  \
    Vec<S> operator()(Vec<S> x, Vec<S> y) const { return expr; } \
  };
#define TESSERA_EW_UNARY(Name, expr)                   \
  template <class S>                                   \
  struct Name {                                        \
    Vec<S> p0, p1;                                     \
    Vec<S> operator()(Vec<S> x) const { return expr; } \
  };

TESSERA_EW_BINARY(AddOp, S::add(x, y))
TESSERA_EW_BINARY(SubOp, S::sub(x, y))
TESSERA_EW_BINARY(MulOp, S::mul(x, y))
TESSERA_EW_BINARY(DivOp, S::div(x, y))
// Max / Min: NaN if either is NaN, else x < y ? y : x (std::max's choice among equals).
TESSERA_EW_BINARY(MaxOp, S::select(S::mor(S::lt(x, y), S::isnan(y)), y, x))
TESSERA_EW_BINARY(MinOp, S::select(S::mor(S::lt(y, x), S::isnan(y)), y, x))
TESSERA_EW_BINARY(PowOp, (pow<S>(x, y)))
TESSERA_EW_BINARY(PReluOp, S::select(S::lt(x, S::zero()), S::mul(x, y), x))
TESSERA_EW_UNARY(ReluOp, S::max(S::zero(), x))  // keeps NaN and -0 like x < 0 ? 0 : x
// min(max(x, lo), hi) the way std::max / std::min choose (NaN stays NaN).
TESSERA_EW_UNARY(ClipOp, clip<S>(x, p0, p1))
TESSERA_EW_UNARY(HardSigmoidOp, (clip01<S>(S::add(S::mul(p0, x), p1))))
TESSERA_EW_UNARY(HardSwishOp,
                 (S::mul(x, clip01<S>(S::add(S::div(x, S::set1(6.0f)), S::set1(0.5f))))))
TESSERA_EW_UNARY(SigmoidOp, sigmoid<S>(x))
TESSERA_EW_UNARY(TanhOp, tanh<S>(x))
TESSERA_EW_UNARY(LeakyReluOp, S::select(S::lt(x, S::zero()), S::mul(p0, x), x))
TESSERA_EW_UNARY(EluOp, S::select(S::lt(x, S::zero()), S::mul(p0, expm1<S>(x)), x))
TESSERA_EW_UNARY(ExpOp, exp<S>(x))
TESSERA_EW_UNARY(Expm1Op, expm1<S>(x))
TESSERA_EW_UNARY(LogOp, log<S>(x))
TESSERA_EW_UNARY(SqrtOp, S::sqrt(x))
TESSERA_EW_UNARY(AbsOp, S::abs(x))
TESSERA_EW_UNARY(NegOp, S::neg(x))
TESSERA_EW_UNARY(ErfOp, erf<S>(x))
TESSERA_EW_UNARY(SquareOp, S::mul(x, x))
TESSERA_EW_UNARY(CubeOp, S::mul(S::mul(x, x), x))
TESSERA_EW_UNARY(ReciprocalOp, S::div(S::set1(1.0f), x))
#undef TESSERA_EW_BINARY
#undef TESSERA_EW_UNARY

// Binary f, then (EwInstr::post) g with a broadcast scalar: g(f(x, y), s).
template <class S, class F, class G>
struct Posted {
  Vec<S> s;
  Vec<S> operator()(Vec<S> x, Vec<S> y) const { return G{}(F{}(x, y), s); }
};
// Binary f whose result is clipped to [lo, hi] (EwInstr::clamp).
template <class S, class F>
struct Clamped {
  F f;
  Vec<S> lo, hi;
  Vec<S> operator()(Vec<S> x, Vec<S> y) const { return clip<S>(f(x, y), lo, hi); }
};

template <class S, class F>
void map_clamped(const EwInstr& in, Loc a, Loc b, float* dst, int64_t n, bool nt, F f) {
  if (in.clamp)
    map_binary<S>(dst, a, b, n, Clamped<S, F>{f, S::set1(in.p0), S::set1(in.p1)}, nt);
  else
    map_binary<S>(dst, a, b, n, f, nt);
}

// Add / Sub / Mul / Div with the instruction's post operation (by scalar `post`) and clamp.
template <class S, class F>
void map_arith(const EwInstr& in, Loc a, Loc b, float* dst, int64_t n, bool nt, float post) {
  const Vec<S> s = S::set1(post);
  switch (in.post) {
    case EwOp::kAdd: return map_clamped<S>(in, a, b, dst, n, nt, Posted<S, F, AddOp<S>>{s});
    case EwOp::kSub: return map_clamped<S>(in, a, b, dst, n, nt, Posted<S, F, SubOp<S>>{s});
    case EwOp::kMul: return map_clamped<S>(in, a, b, dst, n, nt, Posted<S, F, MulOp<S>>{s});
    case EwOp::kDiv: return map_clamped<S>(in, a, b, dst, n, nt, Posted<S, F, DivOp<S>>{s});
    default: return map_clamped<S>(in, a, b, dst, n, nt, F{});
  }
}

// dst[0, n) = instruction applied to a (and b). Matches the reference kernels' formulas (and
// their NaN behaviour) except for the rounding of the transcendental functions. `nt`: see
// map_unary. `post`: the value of the scalar operand of in.post.
template <class S>
void run_instr(const EwInstr& in, Loc a, Loc b, float* dst, int64_t n, bool nt = false,
               float post = 0) {
  const Vec<S> p0 = S::set1(in.p0), p1 = S::set1(in.p1);
  switch (in.op) {
    case EwOp::kAdd: return map_arith<S, AddOp<S>>(in, a, b, dst, n, nt, post);
    case EwOp::kSub: return map_arith<S, SubOp<S>>(in, a, b, dst, n, nt, post);
    case EwOp::kMul: return map_arith<S, MulOp<S>>(in, a, b, dst, n, nt, post);
    case EwOp::kDiv: return map_arith<S, DivOp<S>>(in, a, b, dst, n, nt, post);
    case EwOp::kMax: return map_binary<S>(dst, a, b, n, MaxOp<S>{}, nt);
    case EwOp::kMin: return map_binary<S>(dst, a, b, n, MinOp<S>{}, nt);
    case EwOp::kPow: return map_binary<S>(dst, a, b, n, PowOp<S>{}, nt);
    case EwOp::kPRelu: return map_binary<S>(dst, a, b, n, PReluOp<S>{}, nt);
    case EwOp::kRelu: return map_unary<S>(dst, a, n, ReluOp<S>{p0, p1}, nt);
    case EwOp::kClip: return map_unary<S>(dst, a, n, ClipOp<S>{p0, p1}, nt);
    case EwOp::kHardSigmoid: return map_unary<S>(dst, a, n, HardSigmoidOp<S>{p0, p1}, nt);
    case EwOp::kHardSwish: return map_unary<S>(dst, a, n, HardSwishOp<S>{p0, p1}, nt);
    case EwOp::kSigmoid: return map_unary<S>(dst, a, n, SigmoidOp<S>{p0, p1}, nt);
    case EwOp::kTanh: return map_unary<S>(dst, a, n, TanhOp<S>{p0, p1}, nt);
    case EwOp::kLeakyRelu: return map_unary<S>(dst, a, n, LeakyReluOp<S>{p0, p1}, nt);
    case EwOp::kElu: return map_unary<S>(dst, a, n, EluOp<S>{p0, p1}, nt);
    case EwOp::kExp: return map_unary<S>(dst, a, n, ExpOp<S>{p0, p1}, nt);
    case EwOp::kLog: return map_unary<S>(dst, a, n, LogOp<S>{p0, p1}, nt);
    case EwOp::kSqrt: return map_unary<S>(dst, a, n, SqrtOp<S>{p0, p1}, nt);
    case EwOp::kAbs: return map_unary<S>(dst, a, n, AbsOp<S>{p0, p1}, nt);
    case EwOp::kNeg: return map_unary<S>(dst, a, n, NegOp<S>{p0, p1}, nt);
    case EwOp::kErf: return map_unary<S>(dst, a, n, ErfOp<S>{p0, p1}, nt);
    case EwOp::kSquare: return map_unary<S>(dst, a, n, SquareOp<S>{p0, p1}, nt);
    case EwOp::kCube: return map_unary<S>(dst, a, n, CubeOp<S>{p0, p1}, nt);
    case EwOp::kReciprocal: return map_unary<S>(dst, a, n, ReciprocalOp<S>{p0, p1}, nt);
    case EwOp::kCopy: return map_unary<S>(dst, a, n, Identity<S>{}, nt);
    case EwOp::kFill: return fill<S>(dst, in.p0, n);
  }
}

// The output position of flattened element e: per-dim indices.
// (A template like everything here: a plain inline function would be one symbol shared by the
// ISA files, compiled for whichever ISA the linker keeps.)
template <class S>
void unflatten(const EltwiseProgram& p, int64_t e, int64_t* idx) {
  for (int d = p.rank - 1; d >= 0; --d) {
    idx[d] = e % p.dims[d];
    e /= p.dims[d];
  }
}

// Fills g[0, n) with input `in` over output elements starting at index idx (which may span
// rows): row pieces are copied, or filled where the input broadcasts along the row.
template <class S>
void gather(const EltwiseProgram& p, const EwInput& in, const float* base, const int64_t* start,
            int64_t n, float* g) {
  const int last = p.rank - 1;
  int64_t idx[kMaxEltwiseRank];
  for (int d = 0; d < p.rank; ++d) idx[d] = start[d];
  int64_t pos = 0;
  while (pos < n) {
    int64_t off = 0;
    for (int d = 0; d < p.rank; ++d) off += idx[d] * in.strides[d];
    const int64_t seg = p.dims[last] - idx[last] < n - pos ? p.dims[last] - idx[last] : n - pos;
    if (in.strides[last] == 0) {
      fill<S>(g + pos, base[off], seg);
    } else if (in.strides[last] == 1) {
      copy<S>(g + pos, base + off, seg);
    } else {  // an input in another layout than the output (a constant in a channels-last plan)
      for (int64_t i = 0; i < seg; ++i) g[pos + i] = base[off + i * in.strides[last]];
    }
    pos += seg;
    idx[last] = 0;
    for (int d = last - 1; d >= 0; --d) {
      if (++idx[d] < p.dims[d]) break;
      idx[d] = 0;
    }
  }
}

template <class S>
void eltwise_run(const EltwiseProgram& p, const EltwiseBuffers& buf, int64_t begin, int64_t end,
                 float* scratch) {
  const int64_t tile = p.tile;
  const int64_t stride = tile + 16;  // per slot, keeps every slot 64-byte aligned
  const int n_in = p.num_inputs();
  const EwInput* inputs = p.inputs.data();
  const EwInstr* code = p.code.data();
  const int n_code = static_cast<int>(p.code.size());
  const int* slot = p.slot.data();
  const int* outs = p.outputs.data();
  const int n_out = static_cast<int>(p.outputs.size());
  float* slots = scratch;
  float* gathered = scratch + p.num_slots * stride;
  float* staging = gathered + n_in * stride;  // per output, with streaming
  const bool stream = p.streaming;
  const int last = p.rank - 1;
  const int64_t row = p.dims[last];
  Loc loc[kMaxEltwiseValues];
  float* out_ptr[kMaxEltwiseValues];  // per value: where it is written in place, or null
  // Per value: read by an instruction. A streamed output that is not goes straight out with
  // non-temporal stores where its tile starts on a cache line; the others are staged in scratch
  // (read back from L1, not from memory) and streamed out after the tile.
  bool read[kMaxEltwiseValues];
  bool direct[kMaxEltwiseValues];
  for (int v = 0; v < p.num_values(); ++v) out_ptr[v] = nullptr, read[v] = direct[v] = false;
  // Inputs that are one row broadcast down the others (a per-channel scale over a channels-last
  // tensor): with tiles of whole rows, their gathered tile is the same every time, so it is
  // gathered once (`row_vector_ready`: elements of it gathered from a row's start).
  bool row_vector[kMaxEltwiseValues];
  int64_t row_vector_ready[kMaxEltwiseValues];
  for (int k = 0; k < n_in; ++k) {
    row_vector[k] = p.rank >= 2 && inputs[k].strides[last] == 1 && row < tile;
    for (int d = 0; d < last && row_vector[k]; ++d) row_vector[k] = inputs[k].strides[d] == 0;
    row_vector_ready[k] = 0;
  }
  for (int i = 0; i < n_code; ++i) {
    if (code[i].op == EwOp::kFill) continue;
    read[code[i].a] = true;
    if (code[i].b >= 0) read[code[i].b] = true;
  }
  int64_t e = begin;
  while (e < end) {
    int64_t idx[kMaxEltwiseRank];
    unflatten<S>(p, e, idx);
    int64_t n = end - e < tile ? end - e : tile;
    bool one_row = idx[last] + n <= row;
    if (!one_row && row >= p.row_split) {
      n = row - idx[last];  // stop at the row's end rather than gather across rows
      one_row = true;
    } else if (!one_row && n == tile) {
      n = row - idx[last] + (tile - (row - idx[last])) / row * row;  // whole rows after this one
    }
    for (int k = 0; k < n_in; ++k) {
      const EwInput& in = inputs[k];
      const float* base = buf.inputs[k];
      if (in.scalar) {
        loc[k] = Loc{nullptr, base[0]};
      } else if (in.contiguous) {
        loc[k] = Loc{base + e, 0};
        // The next tile's lines, requested now so that memory stays busy while this tile
        // computes (the hardware prefetcher alone leaves gaps between tiles).
        // Streamed (far larger than the caches) inputs are prefetched non-temporally: read once,
        // they need not displace anything in L2 / L3.
        const float* next = base + e + n;
        const int64_t ahead = end - e - n < n ? end - e - n : n;
        if (stream)
          for (int64_t i = 0; i < ahead; i += 16) __builtin_prefetch(next + i, 0, 0);
        else
          for (int64_t i = 0; i < ahead; i += 16) __builtin_prefetch(next + i, 0, 3);
      } else if (one_row && in.strides[last] <= 1) {
        int64_t off = 0;
        for (int d = 0; d < p.rank; ++d) off += idx[d] * in.strides[d];
        loc[k] = in.strides[last] == 0 ? Loc{nullptr, base[off]} : Loc{base + off, 0};
      } else if (row_vector[k] && idx[last] == 0 && row_vector_ready[k] >= n) {
        loc[k] = Loc{gathered + k * stride, 0};
      } else {
        float* g = gathered + k * stride;
        gather<S>(p, in, base, idx, n, g);
        loc[k] = Loc{g, 0};
        if (row_vector[k]) row_vector_ready[k] = idx[last] == 0 ? n : 0;
      }
    }
    for (int o = 0; o < n_out; ++o) {
      float* dst = buf.outputs[o] + e;
      const int v = outs[o];
      direct[v] = stream && !read[v] && reinterpret_cast<uintptr_t>(dst) % 64 == 0;
      out_ptr[v] = stream && !direct[v] ? staging + o * stride : dst;
    }
    for (int i = 0; i < n_code; ++i) {
      const EwInstr& in = code[i];
      if (in.op == EwOp::kFill) {
        loc[in.dst] = Loc{nullptr, in.p0};
        continue;
      }
      const Loc a = loc[in.a];
      const Loc b = in.b >= 0 ? loc[in.b] : Loc{nullptr, 0};
      const float post = in.post_b >= 0 ? loc[in.post_b].s : 0.0f;  // a scalar program input
      if (!a.p && (in.b < 0 || !b.p)) {
        // Every operand is one float over the tile: so is the result.
        float r = 0;
        const float as = a.s, bs = b.s;
        run_instr<S>(in, Loc{&as, 0}, Loc{&bs, 0}, &r, 1, false, post);
        loc[in.dst] = Loc{nullptr, r};
        continue;
      }
      float* dst = out_ptr[in.dst] ? out_ptr[in.dst] : slots + slot[in.dst] * stride;
      run_instr<S>(in, a, b, dst, n, direct[in.dst], post);
      loc[in.dst] = Loc{dst, 0};
    }
    for (int o = 0; o < n_out; ++o) {
      const Loc l = loc[outs[o]];
      if (stream && !(direct[outs[o]] && l.p))
        stream_out<S>(buf.outputs[o] + e, l, n);
      else if (!l.p)
        fill<S>(buf.outputs[o] + e, l.s, n);
    }
    e += n;
  }
  if (stream) S::fence();
}

// One math function over an array (for accuracy tests and direct use).
template <class S>
void math_run(MathFn fn, const float* x, float* y, int64_t n) {
  const Loc a{x, 0};
  const Vec<S> z = S::zero();
  switch (fn) {
    case MathFn::kExp: return map_unary<S>(y, a, n, ExpOp<S>{z, z});
    case MathFn::kLog: return map_unary<S>(y, a, n, LogOp<S>{z, z});
    case MathFn::kTanh: return map_unary<S>(y, a, n, TanhOp<S>{z, z});
    case MathFn::kSigmoid: return map_unary<S>(y, a, n, SigmoidOp<S>{z, z});
    case MathFn::kErf: return map_unary<S>(y, a, n, ErfOp<S>{z, z});
    case MathFn::kExpm1: return map_unary<S>(y, a, n, Expm1Op<S>{z, z});
  }
}

}  // namespace tessera::native::simd
