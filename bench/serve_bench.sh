#!/usr/bin/env bash
# The serving benchmark of `tessera serve` (issue: serve goals), with `tessera bench-serve` as the
# client, on a TinyLlama-shaped Q4_0 model at 2 threads:
#   1. shared prefix: 4 groups x 8 prompts, 512-token shared prefix, 32-token questions, 32 output
#      tokens, all sent at once; throughput with the prefix cache vs a server without it;
#   2. time to first token of a request whose 512-token prefix is cached vs the same-shaped request
#      right after the cache is flushed (idle server, one request at a time);
#   3. decode throughput with 8 concurrent requests vs one request, and the same ratio for the
#      model alone (bench/batch_decode_bench: batch 8 vs batch 1, no HTTP), when it is built.
# Results: $BUILD/bench/results/serve.json and a table on stdout.
#
# Usage: bench/serve_bench.sh [BUILD_DIR]   (env: SERVE_BENCH_MODEL, SERVE_BENCH_THREADS, SERVE_BENCH_PORT)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
TESSERA="$BUILD/tessera"
THREADS=${SERVE_BENCH_THREADS:-2}
PORT=${SERVE_BENCH_PORT:-18555}
MODELS_DIR="$BUILD/bench/models"
MODEL=${SERVE_BENCH_MODEL:-$MODELS_DIR/tinyllama-1.1b-q4_0.gguf}
OUT_DIR="$BUILD/bench/results"
WORK=$(mktemp -d)
mkdir -p "$OUT_DIR" "$MODELS_DIR"
[[ -x "$TESSERA" ]] || { echo "serve_bench: $TESSERA not built (make build)" >&2; exit 1; }
if [[ ! -f "$MODEL" ]]; then
  echo "serve_bench: writing $MODEL (random weights)" >&2
  "$TESSERA" gguf-create --preset tinyllama-1.1b --type q4_0 --seed 1 -o "$MODEL.part" >&2 && mv "$MODEL.part" "$MODEL"
fi

server_pid=""
stop_server() {
  if [[ -n "$server_pid" ]]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
  fi
}
trap 'stop_server; rm -rf "$WORK"' EXIT

# start_server NAME [serve flags...]
start_server() {
  local name=$1
  shift
  "$TESSERA" serve "$MODEL" --port "$PORT" --threads "$THREADS" --kv-cache-size 20000 "$@" >"$WORK/$name.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 600); do
    if curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1; then return 0; fi
    kill -0 "$server_pid" 2>/dev/null || { cat "$WORK/$name.log" >&2; echo "serve_bench: the server died" >&2; exit 1; }
    sleep 0.2
  done
  echo "serve_bench: the server did not come up" >&2
  exit 1
}

bench() {  # bench NAME [bench-serve flags...]
  local name=$1
  shift
  echo "serve_bench: $name" >&2
  "$TESSERA" bench-serve --port "$PORT" --seed 7 --output-file "$WORK/$name.json" "$@" >"$WORK/$name.txt" 2>"$WORK/$name.err" ||
    { cat "$WORK/$name.err" "$WORK/$name.txt" >&2; exit 1; }
}

GSP=(--dataset generated-shared-prefix --gsp-num-groups 4 --gsp-prompts-per-group 8 --gsp-system-prompt-len 512
     --gsp-question-len 32 --gsp-output-len 32 --request-rate inf)

start_server with_cache
bench warmup --dataset random --num-prompts 2 --random-input-len 64 --random-output-len 8 --random-range-ratio 0
bench shared_prefix_cached "${GSP[@]}" --flush-cache
# TTFT: one group of 2, one at a time: the first misses (cache flushed), the second finds the prefix.
bench ttft --dataset generated-shared-prefix --gsp-num-groups 1 --gsp-prompts-per-group 2 --gsp-system-prompt-len 512 \
  --gsp-question-len 32 --gsp-output-len 1 --max-concurrency 1 --gsp-order grouped --flush-cache --output-details
bench decode_1 --dataset random --num-prompts 2 --random-input-len 32 --random-output-len 128 --random-range-ratio 0 \
  --max-concurrency 1 --flush-cache
bench decode_8 --dataset random --num-prompts 8 --random-input-len 32 --random-output-len 128 --random-range-ratio 0 \
  --max-concurrency 8 --flush-cache
stop_server
start_server no_cache --no-prefix-cache
bench shared_prefix_uncached "${GSP[@]}"
stop_server
if [[ -x "$BUILD/bench/batch_decode_bench" ]]; then
  echo "serve_bench: model alone, batch 8 vs 1" >&2
  "$BUILD/bench/batch_decode_bench" "$MODEL" --batch 8 --threads "$THREADS" --prompt-tokens 32 --steps 128 --rounds 2 \
    --json "$WORK/batch_decode.json" >"$WORK/batch_decode.txt" 2>&1 || { cat "$WORK/batch_decode.txt" >&2; exit 1; }
fi

python3 - "$WORK" "$OUT_DIR/serve.json" "$MODEL" "$THREADS" <<'EOF'
import json, sys, os
work, out, model, threads = sys.argv[1:]
r = {n: json.load(open(os.path.join(work, n + ".json"))) for n in
     ["shared_prefix_cached", "shared_prefix_uncached", "ttft", "decode_1", "decode_8"]}
m = {n: v["metrics"] for n, v in r.items()}
reqs = r["ttft"]["requests"]
cold, warm = reqs[0]["ttft"], reqs[1]["ttft"]
res = {
  "model": model, "threads": int(threads),
  "shared_prefix": {
    "cached_request_throughput": m["shared_prefix_cached"]["request_throughput"],
    "uncached_request_throughput": m["shared_prefix_uncached"]["request_throughput"],
    "cached_total_token_throughput": m["shared_prefix_cached"]["total_token_throughput"],
    "uncached_total_token_throughput": m["shared_prefix_uncached"]["total_token_throughput"],
    "cache_hit_rate": m["shared_prefix_cached"]["cache_hit_rate"],
    "speedup": m["shared_prefix_cached"]["request_throughput"] / m["shared_prefix_uncached"]["request_throughput"],
    "goal": ">= 3"},
  "ttft_cached_prefix": {"flushed_s": cold, "cached_s": warm, "cached_tokens": reqs[1]["cached_tokens"],
                          "ratio": warm / cold, "goal": "<= 0.2"},
  "decode_concurrency": {
    "single_output_tok_s": m["decode_1"]["output_token_throughput"],
    "eight_output_tok_s": m["decode_8"]["output_token_throughput"],
    "single_tpot_ms": m["decode_1"]["tpot"]["mean_ms"], "eight_tpot_ms": m["decode_8"]["tpot"]["mean_ms"],
    "speedup": m["decode_8"]["output_token_throughput"] / m["decode_1"]["output_token_throughput"],
    "speedup_by_tpot": 8 * m["decode_1"]["tpot"]["mean_ms"] / m["decode_8"]["tpot"]["mean_ms"],
    "goal": ">= 3"},
  "runs": r,
}
bd = os.path.join(work, "batch_decode.json")
if os.path.exists(bd):
  res["decode_concurrency"]["model_alone"] = json.load(open(bd))
json.dump(res, open(out, "w"), indent=2)
sp, tt, dc = res["shared_prefix"], res["ttft_cached_prefix"], res["decode_concurrency"]
print(json.dumps({k: res[k] for k in ["shared_prefix", "ttft_cached_prefix", "decode_concurrency"]}, indent=2))
print(f"{'benchmark':<42} {'value':>12} {'goal':>8}")
print(f"{'shared prefix: req/s cached / uncached':<42} {sp['speedup']:>11.2f}x {'>= 3':>8}   ({sp['cached_request_throughput']:.3f} vs {sp['uncached_request_throughput']:.3f} req/s, hit rate {100*sp['cache_hit_rate']:.1f}%)")
print(f"{'TTFT cached prefix / flushed':<42} {tt['ratio']:>12.3f} {'<= 0.2':>8}   ({1e3*tt['cached_s']:.0f} ms vs {1e3*tt['flushed_s']:.0f} ms)")
print(f"{'decode tok/s, 8 concurrent / 1':<42} {dc['speedup']:>11.2f}x {'>= 3':>8}   ({dc['eight_output_tok_s']:.1f} vs {dc['single_output_tok_s']:.1f} tok/s; by TPOT {dc['speedup_by_tpot']:.2f}x)")
if "model_alone" in dc:
  ma = dc["model_alone"]
  print(f"{'  the model alone, batch 8 / batch 1':<42} {ma['ratio']:>11.2f}x {'':>8}   ({ma['batch_tok_s']:.1f} vs {ma['single_tok_s']:.1f} tok/s, no HTTP)")
EOF
