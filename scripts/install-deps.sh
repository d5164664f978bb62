#!/usr/bin/env bash
# Installs every Debian package tessera needs to build, test and benchmark.
# Idempotent: packages already present are skipped; apt is only touched when something is missing.
set -euo pipefail

packages=(
  build-essential g++ cmake ninja-build ccache pkg-config git
  clang libclang-rt-14-dev
  protobuf-compiler libprotobuf-dev libonnx-dev libonnx-testdata
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libcpp-httplib-dev
  # oneDNN's CMake config looks for OpenCL (a Recommends of libdnnl-dev, skipped by --no-install-recommends)
  libdnnl-dev ocl-icd-opencl-dev libopenblas-dev libxnnpack-dev libpthreadpool-dev libsqlite3-dev graphviz
  nodejs npm
  time curl
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

# node and npm may come from outside Debian (a preinstalled Node.js): accept working binaries.
filtered=()
for p in "${missing[@]}"; do
  case "$p" in
    nodejs) command -v node >/dev/null 2>&1 || filtered+=("$p") ;;
    npm) command -v npm >/dev/null 2>&1 || filtered+=("$p") ;;
    *) filtered+=("$p") ;;
  esac
done
missing=("${filtered[@]}")

if ((${#missing[@]} == 0)); then
  echo "install-deps: all packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
