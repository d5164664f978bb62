#!/usr/bin/env bash
# shellcheck disable=SC1111 # typographic quotes in a tokenizer prompt are test data
# Agreement of tessera's language-model path with llama.cpp (the independent engine, through
# node-llama-cpp's prebuilt CPU binary; scripts/fetch-llama-cpp.sh installs it):
#   1. writes seeded random llama models with `tessera gguf-create` (default: --preset llama-small
#      --seed 1, types q8_0, q4_0, f16) into a temporary folder,
#   2. runs `tessera generate --temperature 0 --max-tokens 32 --json` and
#      tests/llm/llama_cpp_greedy.mjs (llama.cpp's tokenizer and greedy sampler) on the same file
#      and prompt,
#   3. fails unless the prompt token ids agree and the greedy output ids agree (it reports the
#      first divergence, with llama.cpp's most probable ids there, to tell a near-tie from a bug).
#      With --near-tie P, a divergence where tessera's pick is within probability P of llama.cpp's
#      top choice (by llama.cpp's probabilities) passes as a near-tie: the two engines' rounding
#      differs (llama.cpp quantizes activations to q8_0 for q4_0/q8_0 weights, to f16 for f16
#      weights, and keeps the KV cache in f16), and seeded random weights give flat distributions.
# A few more prompts are only tokenized (max-tokens 0) on the first model, to compare tokenizers
# (unless --no-tokenizer); when llama.cpp's own LLaMA vocabulary file is at hand
# (.cache/llama.cpp-src/models/ggml-vocab-llama-spm.gguf, from scripts/fetch-llama-cpp.sh --build
# or --link-prebuilt) and the model has the 32000-token LLaMA vocabulary, tessera's ids are also
# checked against llama.cpp's tokenization with that file's real SentencePiece scores.
# Prints SKIP and exits 77 (CTest's SKIP_RETURN_CODE) when node-llama-cpp is not installed.
#
# Usage: tests/llm/llama_cpp_agreement.sh [--tessera PATH] [--preset NAME] [--types "q8_0 q4_0 f16"]
#          [--seed S] [--max-tokens N] [--threads N] [--prompt TEXT] [--vocab FILE|builtin]
#          [--near-tie P] [--no-tokenizer] [--work-dir DIR (kept)]
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TESSERA="${TESSERA:-$ROOT/build/tessera}"
PRESET=llama-small
TYPES="q8_0 q4_0 f16"
SEED=1
MAX_TOKENS=32
THREADS=2
PROMPT="The capital of France is"
VOCAB=""
WORK=""
NEAR_TIE=0
TOKENIZER=1
# Only tokenized: spaces, digits, punctuation, bytes outside the vocabulary, CJK, emoji.
TOKENIZE_PROMPTS=(
  "Hello world"
  " leading space and  double  spaces"
  "Numbers 3.14159, 2024-06-01 and 1,000,000!"
  "naïve café Ünïcödé — “quotes” … 日本語のテキスト 🦙🚀"
  $'tabs\tand\nnewlines\n\n  indented'
  "</s> <s> [INST] not special tokens [/INST]"
)

die() {
  echo "llama_cpp_agreement: error: $*" >&2
  exit 1
}
while (($#)); do
  case "$1" in
    --tessera) TESSERA="$2"; shift ;;
    --preset) PRESET="$2"; shift ;;
    --types) TYPES="$2"; shift ;;
    --seed) SEED="$2"; shift ;;
    --max-tokens) MAX_TOKENS="$2"; shift ;;
    --threads) THREADS="$2"; shift ;;
    --prompt) PROMPT="$2"; shift ;;
    --vocab) VOCAB="$2"; shift ;;
    --work-dir) WORK="$2"; shift ;;
    --near-tie) NEAR_TIE="$2"; shift ;;
    --no-tokenizer) TOKENIZER=0 ;;
    -h | --help) sed -n '3,28p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done

NLC_PREFIX="${NODE_LLAMA_CPP_PREFIX:-$ROOT/.cache/node-llama-cpp}"
if ! command -v node >/dev/null 2>&1; then
  echo "SKIP: node is not installed"
  exit 77
fi
if [[ ! -f "$NLC_PREFIX/node_modules/node-llama-cpp/package.json" ]]; then
  echo "SKIP: node-llama-cpp is not installed in $NLC_PREFIX (run scripts/fetch-llama-cpp.sh)"
  exit 77
fi
[[ -x "$TESSERA" ]] || die "tessera binary '$TESSERA' not found (build it, or give --tessera PATH)"
GREEDY="$ROOT/tests/llm/llama_cpp_greedy.mjs"
REAL_VOCAB="${LLAMA_SPM_VOCAB:-$ROOT/.cache/llama.cpp-src/models/ggml-vocab-llama-spm.gguf}"

if [[ -n "$WORK" ]]; then
  mkdir -p "$WORK" || die "cannot create $WORK"
else
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/tessera-llama-agree.XXXXXX") || die "mktemp failed"
  trap 'rm -rf "$WORK"' EXIT
fi

vocab_args=()
[[ -n "$VOCAB" ]] && vocab_args=(--vocab "$VOCAB")

# compare.mjs KIND A.json B.json LABEL: KIND is "tokens" (prompt ids only) or "greedy".
cat >"$WORK/compare.mjs" <<'EOF_JS'
import fs from "node:fs";
const [kind, tFile, lFile, label, nearTieArg] = process.argv.slice(2);
const nearTie = Number(nearTieArg || 0);
const t = JSON.parse(fs.readFileSync(tFile, "utf8"));
const l = JSON.parse(fs.readFileSync(lFile, "utf8"));
const firstDiff = (a, b) => {
  for (let i = 0; i < Math.max(a.length, b.length); i++) if (a[i] !== b[i]) return i;
  return -1;
};
const show = (a, i) => JSON.stringify(a.slice(Math.max(0, i - 3), i + 4));
let ok = true;
const pd = firstDiff(t.prompt_ids, l.prompt_ids);
if (pd >= 0) {
  ok = false;
  console.log(`FAIL ${label}: prompt ids differ at index ${pd} (tessera ${t.prompt_ids.length} ids, ` +
              `llama.cpp ${l.prompt_ids.length})\n  tessera   ${show(t.prompt_ids, pd)}\n  llama.cpp ${show(l.prompt_ids, pd)}` +
              `\n  tessera   all: ${JSON.stringify(t.prompt_ids)}\n  llama.cpp all: ${JSON.stringify(l.prompt_ids)}` +
              (l.tokenizer_model === "llama" && l.tokenizer_has_scores === false
                   ? "\n  note: the file has no tokenizer.ggml.scores; llama.cpp's SentencePiece tokenizer merges by token" +
                     " score alone (absent scores count as 0) and ignores tokenizer.ggml.merges" : ""));
} else {
  console.log(`ok   ${label}: ${t.prompt_ids.length} prompt ids agree`);
}
if (kind === "greedy") {
  const od = firstDiff(t.output_ids, l.output_ids);
  if (od >= 0) {
    ok = false;
    let msg = `FAIL ${label}: greedy output ids differ at step ${od} of ${Math.max(t.output_ids.length, l.output_ids.length)}` +
              ` (tessera ${t.output_ids[od]}, llama.cpp ${l.output_ids[od]})` +
              `\n  tessera   ${JSON.stringify(t.output_ids)}\n  llama.cpp ${JSON.stringify(l.output_ids)}`;
    if (l.top && l.top[od]) {
      const top = l.top[od];
      msg += `\n  llama.cpp's most probable ids at step ${od}: ${top.map(([id, p]) => `${id}:${p}`).join(" ")}`;
      const rank = top.findIndex(([id]) => id === t.output_ids[od]);
      const gap = rank >= 0 ? top[0][1] - top[rank][1] : Infinity;
      msg += rank >= 0 ? `\n  tessera's pick is llama.cpp's #${rank + 1} there (probability gap ${gap.toPrecision(3)})`
                       : `\n  tessera's pick is not in llama.cpp's top ${top.length} there`;
      if (od < t.output_ids.length && od < l.output_ids.length && gap <= nearTie) {
        ok = pd < 0;
        msg = msg.replace(/^FAIL/, "ok  ") + `\n  near-tie (gap <= --near-tie ${nearTie}): accepted; ${od} ids agreed before it`;
      }
    }
    console.log(msg);
  } else {
    const gaps = (l.top || []).map((s) => s.length > 1 ? s[0][1] - s[1][1] : 1);
    const minGap = gaps.length ? Math.min(...gaps) : null;
    console.log(`ok   ${label}: ${t.output_ids.length} greedy output ids agree` +
                (minGap !== null ? ` (smallest top-1/top-2 probability gap in llama.cpp: ${minGap.toPrecision(3)})` : "") +
                ` text ${JSON.stringify(t.text)}`);
  }
}
process.exit(ok ? 0 : 1);
EOF_JS

fails=0
first=1
echo "llama_cpp_agreement: $TESSERA vs llama.cpp (node-llama-cpp $(node -p "require('$NLC_PREFIX/node_modules/node-llama-cpp/package.json').version")), preset $PRESET, seed $SEED, prompt $(printf '%q' "$PROMPT")"
for type in $TYPES; do
  model="$WORK/$PRESET-$type.gguf"
  if [[ ! -s "$model" ]]; then
    if ! "$TESSERA" gguf-create --preset "$PRESET" --type "$type" --seed "$SEED" "${vocab_args[@]}" -o "$model" \
      >"$WORK/create-$type.log" 2>&1; then
      cat "$WORK/create-$type.log" >&2
      die "tessera gguf-create --preset $PRESET --type $type failed"
    fi
    ((first)) && tr '\r' '\n' <"$WORK/create-$type.log" | grep -v ' tensors$' | sed 's/^/  /'
  fi
  label="$PRESET $type"
  if ! "$TESSERA" generate "$model" --prompt "$PROMPT" --max-tokens "$MAX_TOKENS" --temperature 0 \
    --repeat-penalty 1 --threads "$THREADS" --json >"$WORK/tessera-$type.json" 2>"$WORK/tessera-$type.err"; then
    cat "$WORK/tessera-$type.err" >&2
    echo "FAIL $label: tessera generate failed"
    fails=$((fails + 1))
    continue
  fi
  if ! node "$GREEDY" --model "$model" --prompt "$PROMPT" --max-tokens "$MAX_TOKENS" --threads "$THREADS" \
    --top 5 --node-prefix "$NLC_PREFIX" >"$WORK/llama-$type.json" 2>"$WORK/llama-$type.err"; then
    cat "$WORK/llama-$type.err" >&2
    echo "FAIL $label: llama.cpp (llama_cpp_greedy.mjs) failed"
    fails=$((fails + 1))
    continue
  fi
  node "$WORK/compare.mjs" greedy "$WORK/tessera-$type.json" "$WORK/llama-$type.json" "$label" "$NEAR_TIE" ||
    fails=$((fails + 1))

  if ((first && TOKENIZER)); then
    real=0
    if [[ -s "$REAL_VOCAB" ]] && node -e 'process.exit(JSON.parse(require("fs").readFileSync(process.argv[1])).vocab_size === 32000 ? 0 : 1)' \
      "$WORK/llama-$type.json" 2>/dev/null; then
      real=1
    fi
    ((real)) || echo "  (no check against the real LLaMA vocabulary: $REAL_VOCAB absent or not a 32000-token model)"
    i=0
    for p in "${TOKENIZE_PROMPTS[@]}"; do
      i=$((i + 1))
      plabel="tokenizer prompt $i $(printf '%q' "$p")"
      if ! "$TESSERA" generate "$model" --prompt "$p" --max-tokens 0 --temperature 0 --threads "$THREADS" --json \
        >"$WORK/tok-t$i.json" 2>"$WORK/tok-t$i.err"; then
        cat "$WORK/tok-t$i.err" >&2
        echo "FAIL $plabel: tessera generate failed"
        fails=$((fails + 1))
        continue
      fi
      if ! node "$GREEDY" --model "$model" --prompt "$p" --max-tokens 0 --node-prefix "$NLC_PREFIX" \
        >"$WORK/tok-l$i.json" 2>"$WORK/tok-l$i.err"; then
        cat "$WORK/tok-l$i.err" >&2
        echo "FAIL $plabel: llama_cpp_greedy.mjs failed"
        fails=$((fails + 1))
        continue
      fi
      node "$WORK/compare.mjs" tokens "$WORK/tok-t$i.json" "$WORK/tok-l$i.json" "$plabel: llama.cpp on the same file" ||
        fails=$((fails + 1))
      if ((real)); then
        if node "$GREEDY" --model "$REAL_VOCAB" --vocab-only --prompt "$p" --node-prefix "$NLC_PREFIX" \
          >"$WORK/tok-r$i.json" 2>"$WORK/tok-r$i.err"; then
          node "$WORK/compare.mjs" tokens "$WORK/tok-t$i.json" "$WORK/tok-r$i.json" \
            "$plabel: llama.cpp on its real LLaMA vocabulary (ggml-vocab-llama-spm.gguf)" || fails=$((fails + 1))
        else
          cat "$WORK/tok-r$i.err" >&2
          echo "FAIL $plabel: llama_cpp_greedy.mjs --vocab-only $REAL_VOCAB failed"
          fails=$((fails + 1))
        fi
      fi
    done
  fi
  first=0
done

if ((fails)); then
  echo "llama_cpp_agreement: FAILED ($fails check(s) disagree; files in $WORK)"
  [[ -n "$(trap -p EXIT)" ]] && trap - EXIT && echo "  (kept $WORK for inspection)"
  exit 1
fi
echo "llama_cpp_agreement: PASSED"
