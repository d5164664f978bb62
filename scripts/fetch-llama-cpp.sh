#!/usr/bin/env bash
# Fetches llama.cpp, the independent reference engine for tessera's language-model path, from the
# npm registry only:
#   - node-llama-cpp (JS bindings) with its prebuilt CPU binary @node-llama-cpp/linux-x64 into
#     .cache/node-llama-cpp (its own npm prefix). Used by tests/llm/llama_cpp_greedy.mjs and
#     tests/llm/llama_cpp_agreement.sh for greedy token ids.
#   - with --build: llama.cpp's own `llama-bench`, built from the source
#     bundle that node-llama-cpp ships (node_modules/node-llama-cpp/llama/gitRelease.bundle),
#     cloned into .cache/llama.cpp-src and built into .cache/llama.cpp-build. Used by
#     bench/llm_bench.sh for the fair speed comparison (the node CLI adds per-token overhead).
#     A full build is ~260 compile steps (many minutes on 2 busy cores).
#   - with --link-prebuilt: only llama-bench's own source file (from the same bundle) compiled and
#     linked against the prebuilt shared libraries of @node-llama-cpp/linux-x64 (libllama,
#     libllama-common, libggml*, whose CPU backend picks the variant for this CPU at run time,
#     e.g. libggml-cpu-zen4.so), into .cache/llama.cpp-prebuilt-bench/bin. One compile: a quick
#     way to a llama-bench when the full build is too slow; same llama.cpp release.
# Idempotent and quick once done. .cache/ is git-ignored; nothing of llama.cpp is committed.
#
# Usage: scripts/fetch-llama-cpp.sh [--build] [--link-prebuilt] [--jobs N]
# Env:   LLAMA_CPP_BUILD_JOBS (default 2), LLAMA_CPP_CMAKE_ARGS (extra cmake arguments)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PKG="node-llama-cpp"
VERSION="3.21.1"
# The CPU-only prebuilt binary. The package's other optional dependencies (CUDA, Vulkan, other
# platforms: ~650 MB) are left out with --omit=optional.
BIN_PKG="@node-llama-cpp/linux-x64"
PREFIX="$ROOT/.cache/node-llama-cpp"
SRC_DIR="$ROOT/.cache/llama.cpp-src"
BUILD_DIR="$ROOT/.cache/llama.cpp-build"
PREBUILT_BENCH_DIR="$ROOT/.cache/llama.cpp-prebuilt-bench"
TARGETS=(llama-bench)

die() {
  echo "fetch-llama-cpp: error: $*" >&2
  exit 1
}
log() { echo "fetch-llama-cpp: $*"; }

build=0
link_prebuilt=0
jobs="${LLAMA_CPP_BUILD_JOBS:-2}"
while (($#)); do
  case "$1" in
    --build) build=1 ;;
    --link-prebuilt) link_prebuilt=1 ;;
    --jobs) shift; jobs="${1:?--jobs needs a number}" ;;
    -h | --help)
      sed -n '2,21p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *) die "unknown argument '$1' (usage: scripts/fetch-llama-cpp.sh [--build] [--link-prebuilt] [--jobs N])" ;;
  esac
  shift
done

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) ;;
  *) die "only Linux x86-64 is supported (this is $(uname -s)-$(uname -m))" ;;
esac
command -v node >/dev/null 2>&1 || die "node is not installed (run 'make deps' or scripts/install-deps.sh)"
command -v npm >/dev/null 2>&1 || die "npm is not installed (run 'make deps' or scripts/install-deps.sh)"

# Offline behaviour of node-llama-cpp: never download llama.cpp source or binaries from outside
# the npm registry, never build from source at install or load time (only the prebuilt binary).
export NODE_LLAMA_CPP_SKIP_DOWNLOAD=true
export NODE_LLAMA_CPP_POSTINSTALL=skip
export NODE_LLAMA_CPP_GPU=false

pkg_version() { # package.json path -> version or ""
  [[ -f "$1" ]] || return 0
  node -e 'process.stdout.write(require(process.argv[1]).version)' "$1" 2>/dev/null || true
}

# --- 1. node-llama-cpp with the prebuilt CPU binary ---------------------------------------------
have=$(pkg_version "$PREFIX/node_modules/$PKG/package.json")
have_bin=$(pkg_version "$PREFIX/node_modules/$BIN_PKG/package.json")
if [[ "$have" == "$VERSION" && "$have_bin" == "$VERSION" ]]; then
  log "$PKG@$VERSION present in .cache/node-llama-cpp"
else
  log "installing $PKG@$VERSION and $BIN_PKG@$VERSION into .cache/node-llama-cpp (CPU only)"
  mkdir -p "$PREFIX"
  [[ -f "$PREFIX/package.json" ]] || echo '{"name":"tessera-llama-cpp","private":true}' >"$PREFIX/package.json"
  # The install script (a postinstall that would try to download or build llama.cpp) is off
  # through NODE_LLAMA_CPP_POSTINSTALL=skip and --ignore-scripts.
  if ! (cd "$PREFIX" && npm install --no-audit --no-fund --ignore-scripts --omit=optional -E \
    "$PKG@$VERSION" "$BIN_PKG@$VERSION" >"$PREFIX/install.log" 2>&1); then
    tail -n 20 "$PREFIX/install.log" >&2 || true
    die "'npm install $PKG@$VERSION $BIN_PKG@$VERSION' failed (is the npm registry reachable? full log:" \
      "$PREFIX/install.log)"
  fi
fi
# Check that the prebuilt binary loads on this machine (build: "never": no compile, no download).
# It must run from a file, not `node -e`: node-llama-cpp tests the binding in a forked child that
# inherits node's exec arguments, and with `-e` that child would run the inline code instead.
cat >"$PREFIX/load-check.mjs" <<'EOF_JS'
import {getLlama, LlamaLogLevel} from "node-llama-cpp";
const llama = await getLlama({gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true,
                              progressLogs: false, logLevel: LlamaLogLevel.error});
if (llama.gpu !== false) throw new Error("expected the CPU binary, got gpu=" + llama.gpu);
console.log(`llama.cpp ${llama.llamaCppRelease.release} (${llama.buildType}), ${llama.cpuMathCores} CPU math cores`);
await llama.dispose();
EOF_JS
if ! (cd "$PREFIX" && node load-check.mjs >"$PREFIX/load.log" 2>&1); then
  cat "$PREFIX/load.log" >&2
  die "$PKG@$VERSION is installed but its prebuilt CPU binary ($BIN_PKG) does not load (see above)"
fi
log "$PKG prebuilt CPU binary loads: $(tail -n 1 "$PREFIX/load.log")"

# --- 2. the llama.cpp source bundle (for --build and --link-prebuilt) -----------------------
bundle="$PREFIX/node_modules/$PKG/llama/gitRelease.bundle"
bundle_sum=""
clone_bundle() {
  [[ -s "$bundle" ]] || die "$bundle is missing (a broken $PKG install? delete .cache/node-llama-cpp and retry)"
  command -v git >/dev/null 2>&1 || die "git is not installed"
  bundle_sum=$(sha256sum "$bundle" | cut -d' ' -f1)
  if [[ ! -f "$SRC_DIR/.tessera-bundle" || "$(cat "$SRC_DIR/.tessera-bundle")" != "$bundle_sum" ]]; then
    log "cloning the llama.cpp source bundle of $PKG@$VERSION into .cache/llama.cpp-src"
    rm -rf "$SRC_DIR" "$BUILD_DIR" "$PREBUILT_BENCH_DIR"
    git clone -q "$bundle" "$SRC_DIR" 2>"$ROOT/.cache/llama.cpp-clone.log" ||
      die "git clone of $bundle failed (see $ROOT/.cache/llama.cpp-clone.log)"
    echo "$bundle_sum" >"$SRC_DIR/.tessera-bundle"
  fi
}

# --- 3. llama-bench, full native build (--build) ------------------------------------------------
if ((build)); then
  clone_bundle
  command -v cmake >/dev/null 2>&1 || die "cmake is not installed (run 'make deps' or scripts/install-deps.sh)"
  stamp="$BUILD_DIR/.tessera-stamp"
  want_stamp="$bundle_sum ${TARGETS[*]} ${LLAMA_CPP_CMAKE_ARGS:-}"
  all_built=1
  for t in "${TARGETS[@]}"; do [[ -x "$BUILD_DIR/bin/$t" ]] || all_built=0; done
  if ((all_built)) && [[ -f "$stamp" && "$(cat "$stamp")" == "$want_stamp" ]]; then
    log "llama.cpp tools present in .cache/llama.cpp-build/bin (${TARGETS[*]})"
  else
    generator=()
    command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
    mkdir -p "$BUILD_DIR"
    log "configuring llama.cpp (CPU, GGML_NATIVE=ON, Release) in .cache/llama.cpp-build"
    # shellcheck disable=SC2086 # LLAMA_CPP_CMAKE_ARGS is a list of words on purpose
    if ! cmake -S "$SRC_DIR" -B "$BUILD_DIR" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DGGML_NATIVE=ON -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DGGML_OPENMP=ON \
      -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
      -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF \
      -DLLAMA_USE_PREBUILT_UI=OFF -DBUILD_SHARED_LIBS=OFF ${LLAMA_CPP_CMAKE_ARGS:-} \
      >"$BUILD_DIR/configure.log" 2>&1; then
      tail -n 30 "$BUILD_DIR/configure.log" >&2
      die "configuring llama.cpp failed (full log: $BUILD_DIR/configure.log)"
    fi
    log "building ${TARGETS[*]} with $jobs jobs (~260 steps: many minutes on 2 cores)"
    if ! nice -n 10 cmake --build "$BUILD_DIR" --target "${TARGETS[@]}" -j "$jobs" \
      >"$BUILD_DIR/build.log" 2>&1; then
      grep -E "error|Error" "$BUILD_DIR/build.log" | head -n 20 >&2 || tail -n 30 "$BUILD_DIR/build.log" >&2
      die "building llama.cpp failed (full log: $BUILD_DIR/build.log)"
    fi
    for t in "${TARGETS[@]}"; do
      [[ -x "$BUILD_DIR/bin/$t" ]] || die "the build finished but $BUILD_DIR/bin/$t is missing"
    done
    echo "$want_stamp" >"$stamp"
    log "built ${TARGETS[*]} into .cache/llama.cpp-build/bin"
  fi
  "$BUILD_DIR/bin/llama-bench" --help >/dev/null 2>&1 || die "$BUILD_DIR/bin/llama-bench does not run"
fi

# --- 4. llama-bench linked against the prebuilt libraries (--link-prebuilt) ----------------------
if ((link_prebuilt)); then
  clone_bundle
  command -v g++ >/dev/null 2>&1 || die "g++ is not installed (run 'make deps' or scripts/install-deps.sh)"
  libdir="$PREFIX/node_modules/$BIN_PKG/bins/linux-x64"
  [[ -d "$libdir" ]] || die "$libdir is missing (a broken $BIN_PKG install? delete .cache/node-llama-cpp and retry)"
  bin="$PREBUILT_BENCH_DIR/bin"
  stamp="$PREBUILT_BENCH_DIR/.tessera-stamp"
  want_stamp="$bundle_sum $VERSION"
  if [[ -x "$bin/llama-bench" && -f "$stamp" && "$(cat "$stamp")" == "$want_stamp" ]]; then
    log "llama-bench (prebuilt libraries) present in .cache/llama.cpp-prebuilt-bench/bin"
  else
    rm -rf "$bin"
    mkdir -p "$bin"
    # The libraries next to the binary: it finds them through an $ORIGIN rpath, and ggml looks
    # for its CPU backend variants (libggml-cpu-*.so) in the executable's folder.
    for f in "$libdir"/*.so; do ln -s "$f" "$bin/"; done
    libs=()
    for l in libllama-common.so "libllama.v*.so" "libggml.v*.so" libggml-base.so; do
      # shellcheck disable=SC2206 # the glob is meant to expand
      m=($bin/$l)
      [[ -e "${m[0]}" ]] || die "$libdir has no $l"
      libs+=("${m[0]}")
    done
    log "compiling llama-bench against the prebuilt libraries of $BIN_PKG@$VERSION (one file, a few minutes)"
    if ! nice -n 10 g++ -O2 -DNDEBUG -std=c++17 -I"$SRC_DIR/include" -I"$SRC_DIR/ggml/include" \
      -I"$SRC_DIR/common" -I"$SRC_DIR/tools/llama-bench" "$SRC_DIR/tools/llama-bench/llama-bench.cpp" \
      "$SRC_DIR/tools/llama-bench/main.cpp" -o "$bin/llama-bench" "${libs[@]}" -Wl,-rpath,"\$ORIGIN" \
      -pthread >"$PREBUILT_BENCH_DIR/build.log" 2>&1; then
      grep -E "error" "$PREBUILT_BENCH_DIR/build.log" | head -n 20 >&2 || tail -n 30 "$PREBUILT_BENCH_DIR/build.log" >&2
      die "compiling llama-bench against the prebuilt libraries failed (full log: $PREBUILT_BENCH_DIR/build.log)"
    fi
    echo "$want_stamp" >"$stamp"
    log "built .cache/llama.cpp-prebuilt-bench/bin/llama-bench"
  fi
  "$bin/llama-bench" --help >/dev/null 2>&1 || die "$bin/llama-bench does not run (see '$bin/llama-bench --help')"
fi
log "done"
