// Checks tessera's shape inference of the reduction family against the output types that the
// ONNX backend test models declare.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "onnx/onnx_import.h"
#include "ops/op_registry.h"

namespace tessera {
namespace {

constexpr const char* kNodeTests = "/usr/share/libonnx-testdata/data/node";

TEST(ReductionInfer, MatchesDeclaredOutputTypesOfNodeTests) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(kNodeTests)) GTEST_SKIP() << "no ONNX test data at " << kNodeTests;
  const std::regex wanted(
      "test_(reduce_|argmax_|argmin_|softmax_|logsoftmax_|hardmax_|cumsum_|top_k|einsum_|det_|"
      "nllloss_|sce_).*");
  const std::regex expanded(".*_expanded");
  OnnxImportOptions opts;
  opts.run_shape_inference = false;
  opts.require_known_ops = false;
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(kNodeTests)) {
    const std::string name = entry.path().filename().string();
    if (!std::regex_match(name, wanted) || std::regex_match(name, expanded)) continue;
    SCOPED_TRACE(name);
    Result<Graph> g = import_onnx_file((entry.path() / "model.onnx").string(), opts);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    ASSERT_EQ(g->num_nodes(), 1);
    // Forget the declared output types, infer them again and compare.
    std::vector<TensorType> declared;
    for (int v : g->node(0).outputs) {
      declared.push_back(g->value(v).type);
      g->value(v).type = TensorType{};
    }
    Status st = OpRegistry::global().infer_node(*g, 0);
    ASSERT_TRUE(st.ok()) << st.to_string();
    for (size_t o = 0; o < declared.size(); ++o) {
      const TensorType& got = g->value(g->node(0).outputs[o]).type;
      EXPECT_EQ(got.dtype, declared[o].dtype) << "output " << o;
      // Where tessera knows the rank or a dim, it must be the declared one.
      if (got.shape && declared[o].shape) {
        ASSERT_EQ(got.rank(), declared[o].rank()) << "output " << o << ": " << got.to_string();
        for (int d = 0; d < got.rank(); ++d) {
          const Dim& want = (*declared[o].shape)[d];
          const Dim& have = (*got.shape)[d];
          if (have.known() && want.known()) {
            EXPECT_EQ(have.value, want.value) << "output " << o << ": " << got.to_string();
          }
        }
      }
    }
    ++checked;
  }
  EXPECT_GT(checked, 150);
}

}  // namespace
}  // namespace tessera
