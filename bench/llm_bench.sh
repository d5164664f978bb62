#!/usr/bin/env bash
# tessera's language-model speed against llama.cpp's own llama-bench, side by side, on seeded
# random llama models of a real model's shapes (default: the tinyllama-1.1b preset: 22 layers,
# hidden 2048, FFN 5632, 32 heads / 4 KV heads, vocab 32000) in q4_0, q8_0 and f16:
#   - decode at batch 1: `tessera generate --max-tokens 64 --ignore-eos` (decode_tokens_per_second)
#     and llama-bench's tg64;
#   - prefill of a 512-token prompt: `tessera generate` on a prompt calibrated to exactly 512
#     tokens with BOS (checked in its JSON), prompt_tokens_per_second; llama-bench's pp512;
#   - tessera's peak resident memory (/usr/bin/time -v, Maximum resident set size) in both runs;
#   - this machine's streaming read bandwidth (a small probe compiled here: best of 30 passes over
#     1 GiB at the same thread count, at the start and at the end), and decode as a fraction of the roofline
#     bandwidth / (weight bytes read per token). The bandwidth left to us moves by tens of percent
#     within minutes on a shared machine, so decode is also given against the bandwidth measured
#     next to it ("paired": a short probe, best of 5 passes, right before and right after each
#     tessera decode run and around the llama-bench run; the higher of the two): tessera's paired
#     fraction is the median over its runs of (run's tokens/s x weight bytes per token / that
#     run's bandwidth), llama.cpp's its best repetition against its own pair. Weight bytes per token = all tensor data in the
#     GGUF minus the token embedding table (one row of it is read per token), taken from the GGUF's
#     tensor table; when the output projection is tied to the embedding (no output.weight), the
#     table is read whole and not subtracted. KV-cache and activation traffic are left out
#     (small at these context lengths), so the fraction slightly understates.
# The runs go in --reps rounds, each with one tessera decode and prefill run and one llama-bench tg
# and pp run (odd rounds tessera first, even rounds llama.cpp first), so that the bandwidth and
# cores a shared machine leaves us, which move by tens of percent within minutes, shift both
# engines alike; the "ratio" columns are tessera / llama.cpp within a round, median of the rounds.
# Each speed figure is the best of the rounds (means and samples are in the JSON): on a shared
# machine the slow runs are the ones another process got in the way of.
# llama.cpp's thread pool spins while it waits, so a single busy core can cut its speed several
# fold (seen here: q8_0 decode at 2-4 tokens/s instead of ~20); the load average is reported,
# and a warning printed when the machine was not idle.
# Models are written once into build/bench/models/ and reused. Prints a table and writes
# build/bench/results/llm.json.
#
# Usage: bench/llm_bench.sh [--types "q4_0 q8_0 f16"] [--preset NAME] [--threads N]
#          [--decode-tokens 64] [--prompt-tokens 512] [--reps N (default 3: rounds of both
#          engines; best of N runs each)]
#          [--no-llama-cpp] [--no-tessera] [--json FILE]
# Env: TESSERA (default build/tessera), LLAMA_BENCH (path of llama-bench; default
#      .cache/llama.cpp-build/bin/llama-bench, else .cache/llama.cpp-prebuilt-bench/bin/llama-bench,
#      from scripts/fetch-llama-cpp.sh --build or --link-prebuilt; skipped with a note if absent),
#      LLM_BENCH_VOCAB (gguf-create --vocab; default: gguf-create's own default).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TESSERA="${TESSERA:-$ROOT/build/tessera}"
PRESET=tinyllama-1.1b
TYPES="q4_0 q8_0 f16"
THREADS=2
DECODE_TOKENS=64
PROMPT_TOKENS=512
REPS=3
SEED=1
RUN_LLAMA=1
RUN_TESSERA=1
OUT_JSON="$ROOT/build/bench/results/llm.json"
MODELS_DIR="$ROOT/build/bench/models"
WORK_DIR="$ROOT/build/bench/llm-work"
DECODE_PROMPT="Once upon a time"

die() {
  echo "llm_bench: error: $*" >&2
  exit 1
}
log() { echo "llm_bench: $*" >&2; }
while (($#)); do
  case "$1" in
    --types) TYPES="$2"; shift ;;
    --preset) PRESET="$2"; shift ;;
    --threads) THREADS="$2"; shift ;;
    --decode-tokens) DECODE_TOKENS="$2"; shift ;;
    --prompt-tokens) PROMPT_TOKENS="$2"; shift ;;
    --reps) REPS="$2"; shift ;;
    --no-llama-cpp) RUN_LLAMA=0 ;;
    --no-tessera) RUN_TESSERA=0 ;;
    --json) OUT_JSON="$2"; shift ;;
    -h | --help) sed -n '2,41p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done

command -v node >/dev/null 2>&1 || die "node is not installed (run 'make deps')"
command -v g++ >/dev/null 2>&1 || die "g++ is not installed (run 'make deps')"
[[ -x "$TESSERA" ]] || die "tessera binary '$TESSERA' not found (build it, or set TESSERA=PATH)"
TIME_BIN=/usr/bin/time
[[ -x "$TIME_BIN" ]] || { log "note: /usr/bin/time is missing (Debian package 'time'): no peak memory"; TIME_BIN=""; }
mkdir -p "$MODELS_DIR" "$WORK_DIR" "$(dirname "$OUT_JSON")" || die "cannot create build/bench folders"

LLAMA_BENCH_NOTE=""
if ((RUN_LLAMA)); then
  if [[ -z "${LLAMA_BENCH:-}" ]]; then
    for c in "$ROOT/.cache/llama.cpp-build/bin/llama-bench" "$ROOT/.cache/llama.cpp-prebuilt-bench/bin/llama-bench"; do
      if [[ -x "$c" ]]; then LLAMA_BENCH="$c"; break; fi
    done
  fi
  if [[ -z "${LLAMA_BENCH:-}" || ! -x "${LLAMA_BENCH:-}" ]]; then
    LLAMA_BENCH_NOTE="llama-bench not found${LLAMA_BENCH:+ at $LLAMA_BENCH} (scripts/fetch-llama-cpp.sh --build, or --link-prebuilt; or set LLAMA_BENCH=PATH): llama.cpp skipped"
    log "note: $LLAMA_BENCH_NOTE"
    RUN_LLAMA=0
    LLAMA_BENCH=""
  fi
else
  LLAMA_BENCH_NOTE="llama.cpp skipped (--no-llama-cpp)"
  LLAMA_BENCH=""
fi

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
LOAD_START=$(loadavg)
log "load average at start: $LOAD_START ($(nproc) CPUs)"

# --- memory bandwidth ------------------------------------------------------------------------
BW_SRC="$WORK_DIR/read_bw.cc"
BW_BIN="$WORK_DIR/read_bw"
cat >"$BW_SRC.new" <<'EOF_CC'
// Streaming read bandwidth: T threads each sum their share of a buffer far larger than the caches
// (first touched by the thread that reads it); best of several passes. Each 4 KiB page is touched
// once 12 KiB ahead (the hardware prefetchers stop at page boundaries; tessera's decode kernels do
// the same): without it a plain loop read 20-25% less on the Zen 5 machine we measure, which would
// have made the roofline too low.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>
int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  const size_t mib = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1024;
  const int passes = argc > 3 ? std::atoi(argv[3]) : 8;
  const size_t n = mib * 1024 * 1024 / sizeof(uint64_t);
  uint64_t* buf = static_cast<uint64_t*>(std::aligned_alloc(4096, n * sizeof(uint64_t)));
  if (!buf) return 1;
  const size_t per = n / threads / 64 * 64;
  std::vector<uint64_t> sink(threads * 8);
  auto run = [&](bool init) {
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        uint64_t* p = buf + t * per;
        if (init) {
          for (size_t i = 0; i < per; ++i) p[i] = i * 0x9E3779B97F4A7C15ull + t;
          return;
        }
        uint64_t a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (size_t i = 0; i < per; i += 8) {
          if (i % 512 == 0) __builtin_prefetch(p + i + 1536, 0, 3);  // 12 KiB on (prefetches never fault)
          for (int k = 0; k < 8; ++k) a[k] += p[i + k];
        }
        for (int k = 0; k < 8; ++k) sink[t * 8 + k] = a[k];
      });
    for (auto& th : ts) th.join();
  };
  run(true);
  double best = 1e30;
  for (int i = 0; i < passes; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    run(false);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s < best) best = s;
  }
  uint64_t x = 0;
  for (uint64_t v : sink) x ^= v;
  std::printf("{\"read_gbps\": %.3f, \"threads\": %d, \"buffer_mib\": %zu, \"passes\": %d, \"check\": %llu}\n",
              per * threads * sizeof(uint64_t) / best / 1e9, threads, mib, passes,
              static_cast<unsigned long long>(x & 0xff));
  std::free(buf);
  return 0;
}
EOF_CC
if [[ ! -x "$BW_BIN" ]] || ! cmp -s "$BW_SRC.new" "$BW_SRC"; then
  mv -f "$BW_SRC.new" "$BW_SRC"
  g++ -O3 -march=native -std=c++17 -pthread "$BW_SRC" -o "$BW_BIN" || die "compiling the bandwidth probe failed"
else
  rm -f "$BW_SRC.new"
fi
# Measured at the start and again at the end, the best kept: on a shared machine one pass in which
# another process took a core reads at half speed, so many short passes, best of all.
BW_START=$("$BW_BIN" "$THREADS" 1024 30) || die "the bandwidth probe failed"
log "read bandwidth at start: $BW_START"

# --- GGUF tensor sizes -----------------------------------------------------------------------
cat >"$WORK_DIR/gguf_sizes.mjs" <<'EOF_JS'
// Prints {"file_bytes", "data_bytes", "token_embd_bytes", "output_tied", "tensors"} from a GGUF
// header: each tensor's size is the distance to the next tensor's offset (padding included).
import fs from "node:fs";
const file = process.argv[2];
const fd = fs.openSync(file, "r");
const fileBytes = fs.fstatSync(fd).size;
let buf = Buffer.alloc(Math.min(fileBytes, 64 << 20));
fs.readSync(fd, buf, 0, buf.length, 0);
let pos = 0;
const u32 = () => { const v = buf.readUInt32LE(pos); pos += 4; return v; };
const u64 = () => { const v = buf.readBigUInt64LE(pos); pos += 8; return Number(v); };
const str = () => { const n = u64(); const s = buf.toString("utf8", pos, pos + n); pos += n; return s; };
const scalarSize = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8};
const value = (t) => {
  if (t === 8) return str();
  if (t === 9) {
    const et = u32(), n = u64();
    if (et in scalarSize) { pos += n * scalarSize[et]; return null; }
    for (let i = 0; i < n; i++) value(et);
    return null;
  }
  if (t === 4) return u32();
  if (!(t in scalarSize)) throw new Error(`unknown GGUF value type ${t}`);
  pos += scalarSize[t];
  return null;
};
if (buf.toString("latin1", 0, 4) !== "GGUF") throw new Error(`${file} is not a GGUF file`);
pos = 4;
u32();  // version
const nTensors = u64(), nKv = u64();
let alignment = 32;
for (let i = 0; i < nKv; i++) {
  const key = str(), t = u32();
  const v = value(t);
  if (key === "general.alignment" && typeof v === "number") alignment = v;
}
const tensors = [];
for (let i = 0; i < nTensors; i++) {
  const name = str(), nd = u32();
  const dims = [];
  for (let d = 0; d < nd; d++) dims.push(u64());
  const type = u32(), offset = u64();
  tensors.push({name, dims, type, offset});
}
const dataStart = Math.ceil(pos / alignment) * alignment;
const sorted = [...tensors].sort((a, b) => a.offset - b.offset);
sorted.forEach((t, i) => { t.bytes = (i + 1 < sorted.length ? sorted[i + 1].offset : fileBytes - dataStart) - t.offset; });
const dataBytes = fileBytes - dataStart;
const embd = tensors.find((t) => t.name === "token_embd.weight");
const tied = !tensors.some((t) => t.name === "output.weight");
const types = {};
for (const t of tensors) types[t.type] = (types[t.type] || 0) + t.bytes;
console.log(JSON.stringify({file_bytes: fileBytes, data_bytes: dataBytes, tensors: tensors.length,
                            token_embd_bytes: embd ? embd.bytes : 0, token_embd_type: embd ? embd.type : null,
                            output_tied: tied, bytes_by_ggml_type: types,
                            weight_bytes_per_token: dataBytes - (embd && !tied ? embd.bytes : 0)}));
EOF_JS

# --- models -----------------------------------------------------------------------------------
vocab_args=()
[[ -n "${LLM_BENCH_VOCAB:-}" ]] && vocab_args=(--vocab "$LLM_BENCH_VOCAB")
make_model() { # preset type file
  local preset=$1 type=$2 file=$3
  local want="gguf-create --preset $preset --type $type --seed $SEED ${vocab_args[*]}"
  if [[ -s "$file" && -f "$file.args" && "$(cat "$file.args")" == "$want" ]]; then
    return 0
  fi
  log "writing $file ($want)"
  rm -f "$file" "$file.args"
  "$TESSERA" gguf-create --preset "$preset" --type "$type" --seed "$SEED" "${vocab_args[@]}" -o "$file.part" \
    >"$WORK_DIR/create.log" 2>&1 || { cat "$WORK_DIR/create.log" >&2; die "tessera $want failed"; }
  mv -f "$file.part" "$file"
  echo "$want" >"$file.args"
}

# --- the 512-token prompt: calibrated on a tiny model with the same vocabulary -------------------
make_model llama-tiny f16 "$MODELS_DIR/llama-tiny-f16.gguf"
PARAGRAPH="The quick brown fox jumps over the lazy dog while the old farmer watches from the porch, \
counting the clouds that drift across a pale autumn sky. In the distance, a train whistles twice \
and the river carries fallen leaves toward the sleeping town, where lamps flicker on one by one."
read -r -a WORDS <<<"$PARAGRAPH"
prompt_of() { # n words -> text
  local n=$1 out="" i
  for ((i = 0; i < n; i++)); do out+="${out:+ }${WORDS[i % ${#WORDS[@]}]}"; done
  printf '%s' "$out"
}
count_tokens() { # text -> number of prompt tokens (BOS included)
  "$TESSERA" generate "$MODELS_DIR/llama-tiny-f16.gguf" --prompt "$1" --max-tokens 0 --ctx-size 4096 --threads 1 --json 2>/dev/null |
    node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).prompt_tokens))'
}
n_words=$((PROMPT_TOKENS * 3 / 4))
LONG_PROMPT=""
prompt_count=0
for _ in 1 2 3 4 5 6 7 8 9 10 11 12; do
  LONG_PROMPT=$(prompt_of "$n_words")
  prompt_count=$(count_tokens "$LONG_PROMPT") || die "counting prompt tokens failed"
  ((prompt_count == PROMPT_TOKENS)) && break
  if ((prompt_count < PROMPT_TOKENS)); then
    step=$(((PROMPT_TOKENS - prompt_count) * n_words / prompt_count)); ((step < 1)) && step=1
    n_words=$((n_words + step))
  else
    step=$(((prompt_count - PROMPT_TOKENS) * n_words / prompt_count)); ((step < 1)) && step=1
    n_words=$((n_words - step))
  fi
done
# When whole words cannot hit the count exactly, trim characters off the end.
while ((prompt_count > PROMPT_TOKENS)); do
  LONG_PROMPT=${LONG_PROMPT%?}
  prompt_count=$(count_tokens "$LONG_PROMPT") || die "counting prompt tokens failed"
done
log "prefill prompt: $prompt_count tokens (BOS included), ${#LONG_PROMPT} characters"

# --- runs -------------------------------------------------------------------------------------
# time_run OUT_JSON OUT_TIME cmd...: runs under /usr/bin/time -v when present.
time_run() {
  local out=$1 tlog=$2
  shift 2
  if [[ -n "$TIME_BIN" ]]; then
    "$TIME_BIN" -v -o "$tlog" "$@" >"$out" 2>"$out.err"
  else
    : >"$tlog"
    "$@" >"$out" 2>"$out.err"
  fi
}
# The short bandwidth probe of the paired roofline (GB/s).
probe_gbps() {
  "$BW_BIN" "$THREADS" 1024 5 | node -e 'process.stdout.write(String(JSON.parse(require("fs").readFileSync(0)).read_gbps))'
}
max_of() { node -e 'console.log(Math.max(...process.argv.slice(1).map(Number)))' "$@"; }
rss_kib() { grep -E "Maximum resident set size" "$1" 2>/dev/null | awk '{print $NF}'; }
# tessera_best PREFIX METRIC generate ARGS...: runs `tessera generate ARGS --json` REPS times and
# keeps the run with the highest METRIC in PREFIX.json (the best of REPS: on a shared machine the
# slower runs are the ones other processes got in the way of), the highest peak RSS in PREFIX.rss
# and each run's METRIC in PREFIX.samples. `generate --json` can fail on output that is not
# valid UTF-8 (random weights, byte tokens); then the run is repeated without --json and the
# figures are read from its summary line on stderr. With PAIRED_PROBE=1, each run's paired
# bandwidth (probe_gbps before and after, the higher) goes to PREFIX.bw and the JSON's bw_samples.
tessera_best() {
  local prefix=$1 metric=$2 rep best="" best_rss=0 rss out bw_before=""
  shift 2
  : >"$prefix.samples"
  : >"$prefix.bw"
  for ((rep = 1; rep <= REPS; rep++)); do
    out="$prefix.run$rep"
    if ((PAIRED_PROBE)); then bw_before=$(probe_gbps) || die "the bandwidth probe failed"; fi
    if ! time_run "$out.json" "$out.time" "$TESSERA" "$@" --json; then
      if grep -q "invalid UTF-8" "$out.json.err"; then
        log "  tessera --json failed on invalid UTF-8 in the output; reading the summary line instead"
        if ! time_run "$out.txt" "$out.time" "$TESSERA" "$@"; then
          log "  tessera failed: $(tail -n 3 "$out.txt.err")"
          return 1
        fi
        node -e '
          const fs = require("fs");
          const m = fs.readFileSync(process.argv[1], "utf8").match(
              /prompt: (\d+) tokens in ([\d.]+) s \(([\d.]+) tokens\/s\); decode: (\d+) tokens in ([\d.]+) s \(([\d.]+) tokens\/s\); stop: (\S+)/);
          if (!m) process.exit(1);
          console.log(JSON.stringify({prompt_tokens: +m[1], prompt_seconds: +m[2], prompt_tokens_per_second: +m[3],
                                      output_tokens: +m[4], decode_seconds: +m[5], decode_tokens_per_second: +m[6],
                                      stop_reason: m[7], from_summary_line: true}));
        ' "$out.txt.err" >"$out.json" || { log "  cannot read tessera's summary line"; return 1; }
      else
        log "  tessera failed: $(tail -n 3 "$out.json.err")"
        return 1
      fi
    fi
    if ((PAIRED_PROBE)); then max_of "$bw_before" "$(probe_gbps)" >>"$prefix.bw" || die "the bandwidth probe failed"; fi
    rss=$(rss_kib "$out.time")
    [[ -n "$rss" ]] && ((rss > best_rss)) && best_rss=$rss
    node -e 'process.stdout.write(String(JSON.parse(require("fs").readFileSync(process.argv[1])).'"$metric"'))' "$out.json" >>"$prefix.samples"
    echo >>"$prefix.samples"
    if [[ -z "$best" ]] || node -e '
        const r = (f) => JSON.parse(require("fs").readFileSync(f))[process.argv[3]];
        process.exit(r(process.argv[1]) > r(process.argv[2]) ? 0 : 1)' "$out.json" "$best" "$metric"; then
      best="$out.json"
    fi
  done
  node -e '
    const fs = require("fs");
    const j = JSON.parse(fs.readFileSync(process.argv[1]));
    j.samples = fs.readFileSync(process.argv[2], "utf8").trim().split("\n").map(Number);
    const bw = fs.readFileSync(process.argv[3], "utf8").trim();
    if (bw) j.bw_samples = bw.split("\n").map(Number);
    console.log(JSON.stringify(j));' "$best" "$prefix.samples" "$prefix.bw" >"$prefix.json"
  if ((best_rss > 0)); then echo "$best_rss" >"$prefix.rss"; else : >"$prefix.rss"; fi
}

RESULTS="$WORK_DIR/results.jsonl"
: >"$RESULTS"
for type in $TYPES; do
  model="$MODELS_DIR/$PRESET-$type.gguf"
  make_model "$PRESET" "$type" "$model"
  sizes=$(node "$WORK_DIR/gguf_sizes.mjs" "$model") || die "reading the tensor table of $model failed"
  t_dec="{}" t_pre="{}" t_dec_rss="" t_pre_rss="" l_json="[]" l_bw=""
  rm -f "$WORK_DIR"/t-dec-"$type".r* "$WORK_DIR"/t-pre-"$type".r* "$WORK_DIR"/l-tg-"$type".r* "$WORK_DIR"/l-pp-"$type".r*
  # Rounds: each runs tessera's decode and prefill once and llama-bench's tg and pp once (odd
  # rounds tessera first, even rounds llama.cpp first), so that the machine's drift shifts both
  # engines alike; each round's tessera / llama.cpp ratio is kept, and the best of the rounds
  # per engine as before.
  log "$type: $REPS rounds of tessera decode ($DECODE_TOKENS tokens) and prefill ($prompt_count-token prompt), llama-bench tg$DECODE_TOKENS and pp$PROMPT_TOKENS ($THREADS threads)"
  : >"$WORK_DIR/l-$type.rounds"
  t_ok=1 l_ok=1
  for ((round = 1; round <= REPS; round++)); do
    for side in $( ((round % 2)) && echo "tessera llama" || echo "llama tessera"); do
      if [[ $side == tessera ]] && ((RUN_TESSERA && t_ok)); then
        REPS=1 PAIRED_PROBE=1 tessera_best "$WORK_DIR/t-dec-$type.r$round" decode_tokens_per_second generate "$model" \
          --prompt "$DECODE_PROMPT" --max-tokens "$DECODE_TOKENS" --ignore-eos --temperature 0 --threads "$THREADS" &&
          REPS=1 PAIRED_PROBE=0 tessera_best "$WORK_DIR/t-pre-$type.r$round" prompt_tokens_per_second generate "$model" \
            --prompt "$LONG_PROMPT" --max-tokens 1 --temperature 0 --threads "$THREADS" || t_ok=0
      elif [[ $side == llama ]] && ((RUN_LLAMA && l_ok)); then
        bw_before=$(probe_gbps) || die "the bandwidth probe failed"
        if "$LLAMA_BENCH" -m "$model" -t "$THREADS" -p 0 -n "$DECODE_TOKENS" -r 1 -o json >"$WORK_DIR/l-tg-$type.r$round.json" \
             2>"$WORK_DIR/l-$type.err" &&
           bw=$(max_of "$bw_before" "$(probe_gbps)") &&
           "$LLAMA_BENCH" -m "$model" -t "$THREADS" -p "$PROMPT_TOKENS" -n 0 -r 1 -o json >"$WORK_DIR/l-pp-$type.r$round.json" \
             2>>"$WORK_DIR/l-$type.err"; then
          echo "$WORK_DIR/l-tg-$type.r$round.json $WORK_DIR/l-pp-$type.r$round.json $bw" >>"$WORK_DIR/l-$type.rounds"
        else
          log "$type: llama-bench failed: $(tail -n 3 "$WORK_DIR/l-$type.err")"
          l_ok=0
        fi
      fi
    done
  done
  # The rounds merged: the best run per engine and metric (with every round's figures as samples),
  # and each round's ratio.
  if ((RUN_TESSERA && t_ok)); then
    merge_tessera() { # PREFIX -> merged JSON on stdout, highest peak RSS in PREFIX.rss
      local prefix=$1
      cat "$prefix".r*.rss 2>/dev/null | sort -n | tail -n 1 >"$prefix.rss"
      node -e '
        const fs = require("fs"), [metric, ...files] = process.argv.slice(1);
        const runs = files.map((f) => JSON.parse(fs.readFileSync(f)));
        const best = runs.reduce((a, b) => (b[metric] > a[metric] ? b : a));
        best.samples = runs.map((r) => r[metric]);
        if (runs.every((r) => r.bw_samples)) best.bw_samples = runs.map((r) => r.bw_samples[0]);
        console.log(JSON.stringify(best));' "$2" $(for ((r = 1; r <= REPS; r++)); do echo "$prefix.r$r.json"; done)
    }
    t_dec=$(merge_tessera "$WORK_DIR/t-dec-$type" decode_tokens_per_second)
    t_dec_rss=$(cat "$WORK_DIR/t-dec-$type.rss")
    t_pre=$(merge_tessera "$WORK_DIR/t-pre-$type" prompt_tokens_per_second)
    t_pre_rss=$(cat "$WORK_DIR/t-pre-$type.rss")
  fi
  if ((RUN_LLAMA && l_ok)) && [[ -s "$WORK_DIR/l-$type.rounds" ]]; then
    # One tg and one pp record, as `llama-bench -r N` would write them, plus the paired bandwidth
    # of the best tg round.
    merged=$(node -e '
      const fs = require("fs");
      const rounds = fs.readFileSync(process.argv[1], "utf8").trim().split("\n").map((l) => l.split(" "));
      const rec = (f) => JSON.parse(fs.readFileSync(f))[0];
      const merge = (recs) => {
        const s = recs.map((r) => r.avg_ts), mean = s.reduce((a, b) => a + b, 0) / s.length;
        return {...recs[0], samples_ts: s, avg_ts: mean,
                stddev_ts: Math.sqrt(s.reduce((a, x) => a + (x - mean) ** 2, 0) / Math.max(1, s.length - 1))};
      };
      const tg = rounds.map((r) => rec(r[0])), pp = rounds.map((r) => rec(r[1]));
      const bestTg = tg.reduce((bi, r, i) => (r.avg_ts > tg[bi].avg_ts ? i : bi), 0);
      console.log(JSON.stringify({records: [merge(pp), merge(tg)], bw: Number(rounds[bestTg][2])}));
    ' "$WORK_DIR/l-$type.rounds") || die "merging the llama-bench rounds of $type failed"
    l_json=$(node -e 'console.log(JSON.stringify(JSON.parse(process.argv[1]).records))' "$merged")
    l_bw=$(node -e 'console.log(JSON.parse(process.argv[1]).bw)' "$merged")
  fi
  node -e '
    const [type, file, sizes, tdec, tpre, tdecRss, tpreRss, ljson, lbw] = process.argv.slice(1);
    const o = {type, file, gguf: JSON.parse(sizes), tessera: null, llama_cpp: null};
    const td = JSON.parse(tdec), tp = JSON.parse(tpre);
    if (td.decode_tokens_per_second !== undefined || tp.prompt_tokens_per_second !== undefined)
      o.tessera = {decode_tokens_per_second: td.decode_tokens_per_second ?? null, decode_tokens: td.output_tokens ?? null,
                   decode_samples: td.samples ?? null, decode_paired_read_gbps: td.bw_samples ?? null,
                   prefill_tokens_per_second: tp.prompt_tokens_per_second ?? null, prefill_tokens: tp.prompt_tokens ?? null,
                   prefill_samples: tp.samples ?? null,
                   peak_rss_mib_decode: tdecRss ? Number(tdecRss) / 1024 : null,
                   peak_rss_mib_prefill: tpreRss ? Number(tpreRss) / 1024 : null};
    const l = JSON.parse(ljson);
    if (l.length) {
      const pp = l.find((r) => r.n_prompt > 0 && r.n_gen === 0), tg = l.find((r) => r.n_gen > 0 && r.n_prompt === 0);
      // The best repetition, as for tessera (the mean and its spread are kept too).
      const best = (r) => r ? Math.max(...(r.samples_ts || [r.avg_ts])) : null;
      o.llama_cpp = {decode_tokens_per_second: best(tg), decode_mean: tg ? tg.avg_ts : null, decode_stddev: tg ? tg.stddev_ts : null,
                     decode_samples: tg ? tg.samples_ts : null,
                     prefill_tokens_per_second: best(pp), prefill_mean: pp ? pp.avg_ts : null, prefill_stddev: pp ? pp.stddev_ts : null,
                     prefill_samples: pp ? pp.samples_ts : null,
                     build_commit: l[0].build_commit, cpu_info: l[0].cpu_info, backends: l[0].backends,
                     n_threads: l[0].n_threads, repetitions: (tg || pp || {}).samples_ts?.length ?? null,
                     decode_paired_read_gbps: lbw ? Number(lbw) : null};
      // Round by round (the same round of both engines), tessera / llama.cpp, and the median.
      const ratios = (t, l) => t && l && t.length === l.length ? t.map((x, i) => x / l[i]) : null;
      const median = (v) => v ? [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)] : null;
      if (o.tessera) {
        const dr = ratios(o.tessera.decode_samples, o.llama_cpp.decode_samples);
        const pr = ratios(o.tessera.prefill_samples, o.llama_cpp.prefill_samples);
        o.rounds = {decode_ratios: dr, decode_ratio_median: median(dr), prefill_ratios: pr, prefill_ratio_median: median(pr)};
      }
    }
    console.log(JSON.stringify(o));
  ' "$type" "$model" "$sizes" "$t_dec" "$t_pre" "$t_dec_rss" "$t_pre_rss" "$l_json" "$l_bw" >>"$RESULTS" ||
    die "collecting the results of $type failed"
done
LOAD_END=$(loadavg)
log "load average at end: $LOAD_END"
BW_END=$("$BW_BIN" "$THREADS" 1024 30) || die "the bandwidth probe failed"
log "read bandwidth at end: $BW_END"
BW_JSON=$(node -e '
  const [a, b] = process.argv.slice(1).map((x) => JSON.parse(x));
  console.log(JSON.stringify({read_gbps: Math.max(a.read_gbps, b.read_gbps), threads: a.threads, buffer_mib: a.buffer_mib,
                              passes: a.passes, start_gbps: a.read_gbps, end_gbps: b.read_gbps}));' "$BW_START" "$BW_END")

# --- report -----------------------------------------------------------------------------------
# shellcheck disable=SC2016 # JavaScript template literals, not shell expansions
node -e '
  const fs = require("fs");
  const [resultsFile, outJson, bw, loadStart, loadEnd, preset, threads, llamaBench, note, tessera, promptTokens, decodeTokens] =
      process.argv.slice(1);
  const bandwidth = JSON.parse(bw);
  const models = fs.readFileSync(resultsFile, "utf8").trim().split("\n").filter(Boolean).map((l) => JSON.parse(l));
  const gbps = bandwidth.read_gbps;
  for (const m of models) {
    const perTok = m.gguf.weight_bytes_per_token;
    m.roofline_decode_tokens_per_second = gbps * 1e9 / perTok;
    for (const e of [m.tessera, m.llama_cpp])
      if (e && e.decode_tokens_per_second) e.decode_fraction_of_roofline = e.decode_tokens_per_second / m.roofline_decode_tokens_per_second;
    // Paired: each tessera run against the bandwidth measured around it (median over runs);
    // llama.cpp best repetition against the bandwidth measured around its run.
    const t = m.tessera, l = m.llama_cpp;
    if (t && t.decode_samples && t.decode_paired_read_gbps && t.decode_samples.length === t.decode_paired_read_gbps.length) {
      const f = t.decode_samples.map((tps, i) => tps * perTok / (t.decode_paired_read_gbps[i] * 1e9)).sort((a, b) => a - b);
      t.decode_fractions_of_paired_roofline = f;
      t.decode_fraction_of_paired_roofline = f[Math.floor(f.length / 2)];
    }
    if (l && l.decode_tokens_per_second && l.decode_paired_read_gbps)
      l.decode_fraction_of_paired_roofline = l.decode_tokens_per_second * perTok / (l.decode_paired_read_gbps * 1e9);
  }
  const out = {
    preset, threads: Number(threads), prompt_tokens: Number(promptTokens), decode_tokens: Number(decodeTokens),
    machine: {cpus: require("os").cpus().length, cpu: require("os").cpus()[0]?.model, load_average_start: loadStart,
              load_average_end: loadEnd, read_bandwidth_gbps: gbps, bandwidth_probe: bandwidth},
    roofline_note: "decode roofline = read bandwidth / weight bytes per token; weight bytes per token = GGUF tensor data " +
                   "minus the token embedding table (kept when the output projection is tied to it); KV cache and activations left out",
    tessera: tessera, llama_bench: llamaBench || null, llama_cpp_note: note || null, models};
  fs.writeFileSync(outJson, JSON.stringify(out, null, 2) + "\n");
  const f = (x, d = 1) => x === null || x === undefined ? "-" : x.toFixed(d);
  const pct = (x) => x === null || x === undefined ? "-" : (100 * x).toFixed(0) + "%";
  const rows = [["type", "weights/token", "roofline", "tessera tg", "llama.cpp tg", "tessera tg/roof", "llama.cpp tg/roof",
                 "tessera tg/roof paired", "llama.cpp tg/roof paired",
                 `tessera pp${promptTokens}`, `llama.cpp pp${promptTokens}`, "tg ratio", "pp ratio", "tessera peak RSS"]];
  for (const m of models) {
    const t = m.tessera || {}, l = m.llama_cpp || {};
    const rss = Math.max(t.peak_rss_mib_decode ?? 0, t.peak_rss_mib_prefill ?? 0);
    rows.push([m.type, (m.gguf.weight_bytes_per_token / 1048576).toFixed(0) + " MiB", f(m.roofline_decode_tokens_per_second),
               f(t.decode_tokens_per_second), f(l.decode_tokens_per_second), pct(t.decode_fraction_of_roofline),
               pct(l.decode_fraction_of_roofline), pct(t.decode_fraction_of_paired_roofline),
               pct(l.decode_fraction_of_paired_roofline), f(t.prefill_tokens_per_second), f(l.prefill_tokens_per_second),
               f(m.rounds?.decode_ratio_median, 2), f(m.rounds?.prefill_ratio_median, 2), rss ? rss.toFixed(0) + " MiB" : "-"]);
  }
  const w = rows[0].map((_, c) => Math.max(...rows.map((r) => String(r[c]).length)));
  console.log(`\n${preset}, ${threads} threads; tokens/s (tg: decode at batch 1, ${decodeTokens} tokens; pp: prefill of ${promptTokens} tokens); ` +
              `read bandwidth ${gbps.toFixed(1)} GB/s; load average ${loadStart} -> ${loadEnd}; ` +
              "ratio: tessera / llama.cpp in the same round, median of the rounds");
  for (const r of rows) console.log(r.map((c, i) => String(c).padStart(w[i])).join("  "));
  if (note) console.log(`note: ${note}`);
  const busy = Math.max(Number(loadStart.split(" ")[0]), Number(loadEnd.split(" ")[0]));
  if (busy > 0.5) {
    out.warning = `the machine was busy (1-minute load average up to ${busy} on ${out.machine.cpus} CPUs): ` +
                  "the figures understate both engines, llama.cpp the most (its thread pool spins)";
    fs.writeFileSync(outJson, JSON.stringify(out, null, 2) + "\n");
    console.log(`warning: ${out.warning}`);
  }
  console.log(`wrote ${outJson}`);
' "$RESULTS" "$OUT_JSON" "$BW_JSON" "$LOAD_START" "$LOAD_END" "$PRESET" "$THREADS" "$LLAMA_BENCH" "$LLAMA_BENCH_NOTE" \
  "$TESSERA" "$prompt_count" "$DECODE_TOKENS" || die "writing the report failed"
