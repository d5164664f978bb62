#!/usr/bin/env bash
# OCR model latency: tessera (reference backend) next to ONNX Runtime (CPU) at the same thread count.
#   bench/run.sh BUILD_DIR          (what `make bench` runs)
# Environment: BENCH_THREADS (default "1 2"), BENCH_REPEAT (timed runs, median reported; default 5),
# BENCH_WARMUP (default 1), BENCH_MODELS (subset of "det rec cls").
# Writes bench/results/ocr-<time>.json and prints a table with the ratio tessera/ORT.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${1:-build}"
TESSERA="$BUILD_DIR/tessera"

die() {
  echo "bench: error: $*" >&2
  exit 1
}
[[ -x "$TESSERA" ]] || die "$TESSERA not found: build first (make build)"
command -v node >/dev/null 2>&1 || die "node is not installed (make deps)"
for f in ch_PP-OCRv4_det_infer.onnx ch_PP-OCRv4_rec_infer.onnx ch_ppocr_mobile_v2.0_cls_infer.onnx; do
  [[ -s "$ROOT/models/$f" ]] || die "models/$f is missing: run make models (scripts/fetch-models.sh)"
done

exec node "$ROOT/bench/ocr_bench.mjs" --tessera "$(cd "$(dirname "$TESSERA")" && pwd)/tessera" \
  --threads "${BENCH_THREADS:-1 2}" --repeat "${BENCH_REPEAT:-5}" --warmup "${BENCH_WARMUP:-1}" \
  --models "${BENCH_MODELS:-det rec cls}" --results-dir "$ROOT/bench/results"
