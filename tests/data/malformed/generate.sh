#!/usr/bin/env bash
# Regenerates the malformed-model corpus: each NAME.textproto becomes NAME.onnx (protoc
# --encode), plus three files that are not protobuf text: empty.onnx, not_protobuf.onnx and
# truncated.onnx (the first half of valid_relu.onnx). valid_relu.onnx itself is the one valid
# model, kept as the source of truncated.onnx. Run from anywhere; needs protoc and onnx.proto
# (Debian: protobuf-compiler, libonnx-dev).
set -euo pipefail
cd "$(dirname "$0")"
proto_path=${ONNX_PROTO_PATH:-/usr/include}
for src in *.textproto; do
  protoc --proto_path="$proto_path" --encode=onnx.ModelProto onnx/onnx.proto < "$src" > "${src%.textproto}.onnx"
done
: > empty.onnx
printf 'this is not an ONNX model\n' > not_protobuf.onnx
size=$(stat -c %s valid_relu.onnx)
head -c $((size / 2)) valid_relu.onnx > truncated.onnx
