// libFuzzer target for the ONNX importer: arbitrary bytes must import cleanly or fail with a
// Status, never crash, leak or hit undefined behaviour. When an import succeeds, a Session is
// built from the graph (kernel lookup and liveness set-up), which must not crash either.
//
// Each input is imported twice: with the default options (ONNX checker and shape inference on,
// known ops required), and with everything permissive, so malformed graphs that the checker would
// reject still reach tessera's own validation.
//
// External data resolves against a private temporary folder holding one small file, ext.bin
// (64 bytes), so models referring to it exercise the external-data reader.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "onnx/onnx_import.h"
#include "runtime/session.h"

namespace {

std::string g_base_dir;

void try_import(const std::string& bytes, const tessera::OnnxImportOptions& opts) {
  auto g = tessera::import_onnx_bytes(bytes, g_base_dir, opts);
  if (!g.ok()) {
    // The message must be usable: non-empty.
    if (g.status().message().empty()) std::abort();
    return;
  }
  tessera::SessionOptions so;
  so.import = opts;
  auto s = tessera::Session::from_graph(std::move(g).value(), so);
  if (s.ok()) {
    (void)(*s)->input_types();
    (void)(*s)->output_types();
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  char tmpl[] = "/tmp/tessera-fuzz-XXXXXX";
  const char* dir = mkdtemp(tmpl);
  if (!dir) return 0;
  g_base_dir = dir;
  std::ofstream f(g_base_dir + "/ext.bin", std::ios::binary);
  for (int i = 0; i < 64; ++i) f.put(static_cast<char>(i));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  try_import(bytes, tessera::OnnxImportOptions{});
  tessera::OnnxImportOptions permissive;
  permissive.run_checker = false;
  permissive.run_shape_inference = false;
  permissive.require_known_ops = false;
  try_import(bytes, permissive);
  return 0;
}
