#!/usr/bin/env bash
# Benchmarks (what `make bench` runs):
#   bench/run.sh BUILD_DIR
# Suites (BENCH_SUITES, default "ocr backends llm serve"):
#   ocr       OCR model latency: tessera (each backend in BENCH_OCR_BACKENDS, default all, with
#             `tessera run --backend NAME`) next to ONNX Runtime (CPU) at the same
#             thread count. Writes bench/results/ocr-<time>.json and prints a table with the ratio
#             tessera/ORT. Environment: BENCH_THREADS (default "1 2"), BENCH_REPEAT (timed runs,
#             median reported; default 5), BENCH_WARMUP (default 1), BENCH_MODELS (subset of "det rec cls").
#   backends  every backend side by side on GEMM, the det model's Conv layers, depthwise conv and
#             elementwise chains, as a fraction of this machine's measured peak (tessera_backend_bench).
#             Writes BUILD_DIR/bench/results/backends.json. Environment: BENCH_BACKEND_THREADS
#             (default 2), BENCH_BACKEND_ARGS (more flags, e.g. "--quick --filter matmul").
#   llm       TinyLlama-shaped random-weight models (q4_0, q8_0, f16): decode and 512-token prefill
#             next to llama.cpp's llama-bench, decode as a fraction of the memory roofline, peak
#             memory (bench/llm_bench.sh; BENCH_LLM_ARGS for its flags). Writes
#             BUILD_DIR/bench/results/llm.json.
#   serve     `tessera serve` on the TinyLlama-shaped q4_0 model driven by `tessera bench-serve`: shared
#             prefix with and without the prefix cache, TTFT with a cached prefix, decode at 8
#             concurrent requests (bench/serve_bench.sh). Writes BUILD_DIR/bench/results/serve.json.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${1:-build}"
TESSERA="$BUILD_DIR/tessera"
BACKEND_BENCH="$BUILD_DIR/bench/tessera_backend_bench"
SUITES="${BENCH_SUITES:-ocr backends llm serve}"

die() {
  echo "bench: error: $*" >&2
  exit 1
}
for f in ch_PP-OCRv4_det_infer.onnx ch_PP-OCRv4_rec_infer.onnx ch_ppocr_mobile_v2.0_cls_infer.onnx; do
  [[ -s "$ROOT/models/$f" ]] || die "models/$f is missing: run make models (scripts/fetch-models.sh)"
done

for suite in $SUITES; do
  case "$suite" in
    ocr)
      [[ -x "$TESSERA" ]] || die "$TESSERA not found: build first (make build)"
      command -v node >/dev/null 2>&1 || die "node is not installed (make deps)"
      node "$ROOT/bench/ocr_bench.mjs" --tessera "$(cd "$(dirname "$TESSERA")" && pwd)/tessera" \
        --threads "${BENCH_THREADS:-1 2}" --repeat "${BENCH_REPEAT:-5}" --warmup "${BENCH_WARMUP:-1}" \
        --models "${BENCH_MODELS:-det rec cls}" --backends "${BENCH_OCR_BACKENDS:-ref native onednn blas xnnpack}" \
        --results-dir "$ROOT/bench/results"
      ;;
    backends)
      [[ -x "$BACKEND_BENCH" ]] || die "$BACKEND_BENCH not found: build with -DTESSERA_BUILD_BENCH=ON (make build)"
      # shellcheck disable=SC2086  # BENCH_BACKEND_ARGS is a list of flags
      "$BACKEND_BENCH" --threads "${BENCH_BACKEND_THREADS:-2}" --model "$ROOT/models/ch_PP-OCRv4_det_infer.onnx" \
        --json "$BUILD_DIR/bench/results/backends.json" ${BENCH_BACKEND_ARGS:-}
      ;;
    llm)
      # shellcheck disable=SC2086  # BENCH_LLM_ARGS is a list of flags
      TESSERA="$TESSERA" bash "$ROOT/bench/llm_bench.sh" ${BENCH_LLM_ARGS:-}
      ;;
    serve)
      bash "$ROOT/bench/serve_bench.sh" "$BUILD_DIR"
      ;;
    *) die "unknown suite '$suite' in BENCH_SUITES (ocr, backends, llm, serve)" ;;
  esac
done
