// ONNX import, export and TensorProto reading, on models built in code.
//
// Importer-only tests use require_known_ops=false so they hold whatever the op registry holds.
// The Session round-trip tests need reference kernels for their ops and skip while those are
// missing.
#include "onnx/onnx_import.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

#include "backends/ref/ref_kernel.h"
#include "onnx/onnx_pb.h"
#include "ops/op_registry.h"
#include "runtime/session.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

// A fresh temporary folder, removed with its contents at the end of the test.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/tessera-onnx-test-XXXXXX";
    const char* p = mkdtemp(tmpl);
    path_ = p ? p : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

OnnxImportOptions importer_only() {
  OnnxImportOptions o;
  o.require_known_ops = false;
  return o;
}

OnnxImportOptions unchecked() {
  OnnxImportOptions o;
  o.run_checker = false;
  o.run_shape_inference = false;
  o.require_known_ops = false;
  return o;
}

void set_type(onnx::ValueInfoProto* vi, const std::string& name, int elem_type,
              std::vector<int64_t> dims) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem_type);
  auto* shape = tt->mutable_shape();
  for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
}

onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& op,
                          std::vector<std::string> inputs, std::vector<std::string> outputs,
                          const std::string& name) {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  return n;
}

onnx::ModelProto new_model(int opset = 13) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* imp = m.add_opset_import();
  imp->set_domain("");
  imp->set_version(opset);
  m.mutable_graph()->set_name("test");
  return m;
}

std::string serialize(const onnx::ModelProto& m) {
  std::string bytes;
  EXPECT_TRUE(m.SerializeToString(&bytes));
  return bytes;
}

std::vector<float> floats_of(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  std::memcpy(v.data(), t.raw_data(), v.size() * sizeof(float));
  return v;
}

// y = Add(x, w) where w: float[2x3] lives in weights.bin at byte 16 (after 16 bytes of other data).
onnx::ModelProto external_data_model(const std::string& location, int64_t offset, int64_t length) {
  onnx::ModelProto m = new_model();
  auto* g = m.mutable_graph();
  add_node(g, "Add", {"x", "w"}, {"y"}, "add");
  set_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {2, 3});
  set_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {2, 3});
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(2);
  w->add_dims(3);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto add_kv = [&](const std::string& k, const std::string& v) {
    auto* kv = w->add_external_data();
    kv->set_key(k);
    kv->set_value(v);
  };
  add_kv("location", location);
  if (offset >= 0) add_kv("offset", std::to_string(offset));
  if (length >= 0) add_kv("length", std::to_string(length));
  return m;
}

const std::vector<float> kExternalValues = {1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, -7.0f};

std::string external_weights_file() {
  std::string bytes(16, '\x7f');  // data of some other tensor
  bytes.append(reinterpret_cast<const char*>(kExternalValues.data()),
               kExternalValues.size() * sizeof(float));
  bytes.append(8, '\x01');  // and more after
  return bytes;
}

TEST(OnnxImport, ExternalDataWithOffsetAndLength) {
  TempDir dir;
  write_file(dir.path() + "/weights.bin", external_weights_file());
  write_file(dir.path() + "/model.onnx", serialize(external_data_model("weights.bin", 16, 24)));

  auto g = import_onnx_file(dir.path() + "/model.onnx", importer_only());
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  auto w = g->find_value("w");
  ASSERT_TRUE(w.has_value());
  const Value& wv = g->value(*w);
  ASSERT_TRUE(wv.constant.has_value());
  EXPECT_EQ(wv.constant->dtype(), DType::kFloat32);
  EXPECT_EQ(wv.constant->dims(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(floats_of(*wv.constant), kExternalValues);
  EXPECT_EQ(g->parameter_count(), 6);
  ASSERT_EQ(g->num_nodes(), 1);
  EXPECT_EQ(g->node(0).op_type, "Add");
  EXPECT_EQ(g->node(0).name, "add");
  EXPECT_EQ(g->node(0).opset, 13);
  ASSERT_EQ(g->inputs().size(), 1u);
  EXPECT_EQ(g->value(g->inputs()[0]).type, TensorType::of(DType::kFloat32, {2, 3}));
  ASSERT_EQ(g->outputs().size(), 1u);
  EXPECT_EQ(g->value(g->outputs()[0]).name, "y");

  // The same model from bytes resolves external data against base_dir.
  std::ifstream f(dir.path() + "/model.onnx", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto g2 = import_onnx_bytes(bytes, dir.path(), importer_only());
  ASSERT_TRUE(g2.ok()) << g2.status().to_string();
  EXPECT_EQ(floats_of(*g2->value(*g2->find_value("w")).constant), kExternalValues);
}

TEST(OnnxImport, ExternalDataWithoutLengthReadsToTheEnd) {
  TempDir dir;
  std::string bytes(8, '\0');
  bytes.append(reinterpret_cast<const char*>(kExternalValues.data()), 24);
  write_file(dir.path() + "/w.bin", bytes);
  auto g = import_onnx_bytes(serialize(external_data_model("w.bin", 8, -1)), dir.path(),
                             importer_only());
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(floats_of(*g->value(*g->find_value("w")).constant), kExternalValues);
}

TEST(OnnxImport, BadExternalDataIsAnError) {
  TempDir dir;
  write_file(dir.path() + "/weights.bin", external_weights_file());
  fs::create_directory(dir.path() + "/sub");
  struct Case {
    std::string location;
    int64_t offset, length;
    std::string expected;
  };
  const Case cases[] = {
      {"weights.bin", 16, 20, "raw data has 20 bytes"},      // length disagrees with dims
      {"weights.bin", 32, 24, "truncated"},                  // runs past the end
      {"weights.bin", 1000, -1, "offset beyond the end"},    //
      {"missing.bin", 0, 24, "cannot be opened"},            //
      {"../weights.bin", 0, 24, "leaves the model folder"},  //
      {"/etc/passwd", 0, 24, "leaves the model folder"},     //
      {"weights.bin", 16, INT64_MAX, "truncated"},           // offset + length overflows
      {"sub", 0, -1, "cannot be opened"},                    // a folder, not a file
      {std::string("\0\0bin", 5), 0, -1, "NUL character"},   // found by the fuzzer
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.location + " offset " + std::to_string(c.offset) + " length " +
                 std::to_string(c.length));
    auto g = import_onnx_bytes(serialize(external_data_model(c.location, c.offset, c.length)),
                               dir.path(), unchecked());
    ASSERT_FALSE(g.ok());
    EXPECT_NE(g.status().message().find("initializer 'w'"), std::string::npos)
        << g.status().to_string();
    EXPECT_NE(g.status().message().find(c.expected), std::string::npos) << g.status().to_string();
  }
  // Offsets and lengths that are not decimal sizes.
  for (const char* bad : {"-4", "12abc", "", "99999999999999999999999"}) {
    onnx::ModelProto m = external_data_model("weights.bin", -1, -1);
    auto* kv = m.mutable_graph()->mutable_initializer(0)->add_external_data();
    kv->set_key("offset");
    kv->set_value(bad);
    auto g = import_onnx_bytes(serialize(m), dir.path(), unchecked());
    ASSERT_FALSE(g.ok()) << bad;
    EXPECT_NE(g.status().message().find("is not a valid size"), std::string::npos)
        << g.status().to_string();
  }
}

// Typed data fields, raw bool bytes, Constant nodes and attributes, without any op known.
TEST(OnnxImport, TensorFieldsConstantsAndAttributes) {
  onnx::ModelProto m = new_model();
  auto* g = m.mutable_graph();
  auto* i8 = g->add_initializer();
  i8->set_name("i8");
  i8->set_data_type(onnx::TensorProto::INT8);
  i8->add_dims(3);
  for (int v : {-128, 5, 127}) i8->add_int32_data(v);
  auto* i64 = g->add_initializer();
  i64->set_name("i64");
  i64->set_data_type(onnx::TensorProto::INT64);
  i64->add_dims(2);
  i64->add_int64_data(INT64_MIN);
  i64->add_int64_data(42);
  auto* b = g->add_initializer();
  b->set_name("b");
  b->set_data_type(onnx::TensorProto::BOOL);
  b->add_dims(3);
  b->set_raw_data(std::string("\x00\x02\x01", 3));  // 2 is not a valid bool byte: read as true
  auto* c = add_node(g, "Constant", {}, {"c"}, "const");
  auto* a = c->add_attribute();
  a->set_name("value_floats");
  a->set_type(onnx::AttributeProto::FLOATS);
  a->add_floats(0.5f);
  a->add_floats(-1.0f);
  auto* n = add_node(g, "MyOp", {"i8", "i64", "b", "c", ""}, {"y"}, "my_op");
  auto* at = n->add_attribute();
  at->set_name("axes");
  at->set_type(onnx::AttributeProto::INTS);
  at->add_ints(0);
  at->add_ints(-1);
  auto* as = n->add_attribute();
  as->set_name("mode");
  as->set_type(onnx::AttributeProto::STRING);
  as->set_s("nearest");
  g->add_output()->set_name("y");

  auto imported = import_onnx_bytes(serialize(m), "", unchecked());
  ASSERT_TRUE(imported.ok()) << imported.status().to_string();
  const Graph& gr = *imported;
  EXPECT_EQ(gr.value(*gr.find_value("i8")).constant->to_int64_vector(),
            (std::vector<int64_t>{-128, 5, 127}));
  EXPECT_EQ(gr.value(*gr.find_value("i64")).constant->to_int64_vector(),
            (std::vector<int64_t>{INT64_MIN, 42}));
  const Tensor& bt = *gr.value(*gr.find_value("b")).constant;
  EXPECT_EQ(bt.dtype(), DType::kBool);
  EXPECT_EQ(bt.to_int64_vector(), (std::vector<int64_t>{0, 1, 1}));
  const Value& cv = gr.value(*gr.find_value("c"));
  ASSERT_TRUE(cv.constant.has_value());
  EXPECT_EQ(floats_of(*cv.constant), (std::vector<float>{0.5f, -1.0f}));
  ASSERT_EQ(gr.num_nodes(), 1);  // the Constant node became data
  const Node& node = gr.node(0);
  EXPECT_EQ(node.op_type, "MyOp");
  ASSERT_EQ(node.inputs.size(), 5u);
  EXPECT_EQ(node.inputs[4], kNoValue);
  EXPECT_EQ(node.attr_ints("axes"), (std::vector<int64_t>{0, -1}));
  EXPECT_EQ(node.attr_string("mode", ""), "nearest");
}

// Errors that only tessera's own checks see (the ONNX checker is off).
TEST(OnnxImport, StructuralErrorsNameTheNodeOrValue) {
  struct Case {
    const char* what;
    std::function<void(onnx::ModelProto&)> build;
    std::vector<std::string> expected;
  };
  auto io = [](onnx::GraphProto* g) {
    set_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {2});
    set_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {2});
  };
  const std::vector<Case> cases = {
      {"cycle",
       [&](onnx::ModelProto& m) {
         auto* g = m.mutable_graph();
         io(g);
         add_node(g, "Add", {"x", "b"}, {"a"}, "add");
         add_node(g, "Relu", {"a"}, {"b"}, "relu");
         add_node(g, "Neg", {"b"}, {"y"}, "neg");
       },
       {"cycle", "Relu 'relu'", "'b'"}},
      {"self loop",
       [&](onnx::ModelProto& m) {
         auto* g = m.mutable_graph();
         io(g);
         add_node(g, "Add", {"x", "y"}, {"y"}, "acc");
       },
       {"cycle", "Add 'acc'"}},
      {"undefined input",
       [&](onnx::ModelProto& m) {
         auto* g = m.mutable_graph();
         io(g);
         add_node(g, "MatMul", {"x", "w"}, {"y"}, "mm");
       },
       {"MatMul 'mm'", "input 'w'", "not produced"}},
      {"dangling output",
       [&](onnx::ModelProto& m) {
         auto* g = m.mutable_graph();
         io(g);
         add_node(g, "Relu", {"x"}, {"r"}, "relu");
       },
       {"graph output 'y' is never produced"}},
      {"produced twice",
       [&](onnx::ModelProto& m) {
         auto* g = m.mutable_graph();
         io(g);
         add_node(g, "Relu", {"x"}, {"y"}, "relu");
         add_node(g, "Neg", {"x"}, {"y"}, "neg");
       },
       {"'y' is produced twice"}},
      {"overwrites an input",
       [&](onnx::ModelProto& m) {
         auto* g = m.mutable_graph();
         io(g);
         add_node(g, "Relu", {"y"}, {"x"}, "relu");
       },
       {"Relu 'relu'", "overwrites a graph input"}},
      {"opset out of range",
       [&](onnx::ModelProto& m) {
         m.mutable_opset_import(0)->set_version(18);
         io(m.mutable_graph());
         add_node(m.mutable_graph(), "Relu", {"x"}, {"y"}, "relu");
       },
       {"opset 18 is out of the supported range"}},
      {"absurd opset",
       [&](onnx::ModelProto& m) {
         m.mutable_opset_import(0)->set_version((int64_t{1} << 32) + 13);
         io(m.mutable_graph());
         add_node(m.mutable_graph(), "Relu", {"x"}, {"y"}, "relu");
       },
       {"opset version 4294967309", "is invalid"}},
      {"domain not imported",
       [&](onnx::ModelProto& m) {
         auto* g = m.mutable_graph();
         io(g);
         add_node(g, "Foo", {"x"}, {"y"}, "foo")->set_domain("com.example");
       },
       {"com.example.Foo 'foo'", "not imported"}},
      {"subgraph attribute",
       [&](onnx::ModelProto& m) {
         auto* g = m.mutable_graph();
         io(g);
         auto* a = add_node(g, "If", {"x"}, {"y"}, "if")->add_attribute();
         a->set_name("then_branch");
         a->set_type(onnx::AttributeProto::GRAPH);
       },
       {"If 'if'", "subgraph 'then_branch'", "no outputs"}},
      {"huge dims, tiny data",
       [&](onnx::ModelProto& m) {
         auto* g = m.mutable_graph();
         io(g);
         auto* w = g->add_initializer();
         w->set_name("w");
         w->set_data_type(onnx::TensorProto::FLOAT);
         w->add_dims(1000000);
         w->add_dims(1000000);
         w->add_float_data(1.0f);
         add_node(g, "Add", {"x", "w"}, {"y"}, "add");
       },
       {"initializer 'w'", "float_data has 1 elements, the dims say 1000000000000"}},
      {"negative dim",
       [&](onnx::ModelProto& m) {
         auto* g = m.mutable_graph();
         set_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {-3});
         set_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {2});
         add_node(g, "Relu", {"x"}, {"y"}, "relu");
       },
       {"graph input 'x'", "negative dimension -3"}},
      {"no outputs", [&](onnx::ModelProto& m) { m.mutable_graph(); }, {"no outputs"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    onnx::ModelProto m = new_model();
    c.build(m);
    auto g = import_onnx_bytes(serialize(m), "", unchecked());
    ASSERT_FALSE(g.ok());
    for (const auto& e : c.expected) {
      EXPECT_NE(g.status().message().find(e), std::string::npos) << g.status().to_string();
    }
  }
}

TEST(OnnxImport, EmptyAndGarbageBytes) {
  auto empty = import_onnx_bytes("", "");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("empty"), std::string::npos);
  auto garbage = import_onnx_bytes("this is not an ONNX model\n", "");
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.status().message().find("not a valid ONNX model"), std::string::npos);
  auto missing = import_onnx_file("/nonexistent/model.onnx");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

// x -> Mul(x, c1) -> a -> Add(a, c2) -> b -> Relu -> r -> Neg -> y; a, r and y are graph outputs.
onnx::ModelProto chain_model() {
  onnx::ModelProto m = new_model();
  auto* g = m.mutable_graph();
  set_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {2, 3});
  auto add_init = [&](const std::string& name, std::vector<float> v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(static_cast<int64_t>(v.size()));
    for (float f : v) t->add_float_data(f);
  };
  add_init("c1", {2.0f, -1.0f, 0.5f});
  add_init("c2", {0.25f, 0.0f, -0.5f});
  add_node(g, "Mul", {"x", "c1"}, {"a"}, "mul");
  add_node(g, "Add", {"a", "c2"}, {"b"}, "add");
  add_node(g, "Relu", {"b"}, {"r"}, "relu");
  add_node(g, "Neg", {"r"}, {"y"}, "neg");
  for (const char* out : {"a", "r", "y"})
    set_type(g->add_output(), out, onnx::TensorProto::FLOAT, {2, 3});
  return m;
}

int node_index(const Graph& g, const std::string& name) {
  for (int i = 0; i < g.num_nodes(); ++i)
    if (g.node(i).name == name) return i;
  return -1;
}

// The structure of an exported subgraph: free inputs, constants as initializers, outputs.
TEST(OnnxExport, SubgraphStructureRoundTrip) {
  auto g = import_onnx_bytes(serialize(chain_model()), "", importer_only());
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  ASSERT_EQ(g->num_nodes(), 4);
  auto bytes = export_onnx_subgraph(*g, {node_index(*g, "add"), node_index(*g, "relu")});
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();

  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(*bytes));
  ASSERT_EQ(m.graph().input_size(), 1);
  EXPECT_EQ(m.graph().input(0).name(), "a");
  EXPECT_EQ(m.graph().input(0).type().tensor_type().elem_type(), onnx::TensorProto::FLOAT);
  ASSERT_EQ(m.graph().initializer_size(), 1);
  EXPECT_EQ(m.graph().initializer(0).name(), "c2");
  ASSERT_EQ(m.graph().output_size(), 1);
  EXPECT_EQ(m.graph().output(0).name(), "r");  // b stays inside; r is a graph output

  auto sub = import_onnx_bytes(*bytes, "", importer_only());
  ASSERT_TRUE(sub.ok()) << sub.status().to_string();
  ASSERT_EQ(sub->num_nodes(), 2);
  EXPECT_EQ(sub->node(0).op_type, "Add");
  EXPECT_EQ(sub->node(1).op_type, "Relu");
  EXPECT_EQ(sub->opsets.at(""), 13);
  ASSERT_EQ(sub->inputs().size(), 1u);
  EXPECT_EQ(sub->value(sub->inputs()[0]).type, TensorType::of(DType::kFloat32, {2, 3}));
  const Tensor& c2 = *sub->value(*sub->find_value("c2")).constant;
  EXPECT_EQ(floats_of(c2), (std::vector<float>{0.25f, 0.0f, -0.5f}));

  // The whole graph exports and re-imports to the same structure.
  auto all = export_onnx(*g);
  ASSERT_TRUE(all.ok()) << all.status().to_string();
  auto again = import_onnx_bytes(*all, "", importer_only());
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  ASSERT_EQ(again->num_nodes(), g->num_nodes());
  for (int i = 0; i < g->num_nodes(); ++i) EXPECT_EQ(again->node(i).op_type, g->node(i).op_type);
  EXPECT_EQ(again->parameter_count(), g->parameter_count());

  EXPECT_FALSE(export_onnx_subgraph(*g, {7}).ok());
}

bool have_kernels(std::initializer_list<const char*> ops) {
  for (const char* op : ops)
    if (!OpRegistry::global().find("", op) || !RefKernelTable::global().find("", op)) return false;
  return true;
}

Tensor random_floats(std::vector<int64_t> dims, std::mt19937& rng) {
  Tensor t(DType::kFloat32, std::move(dims));
  std::uniform_real_distribution<float> uni(-2.0f, 2.0f);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = uni(rng);
  return t;
}

// Runs `model`, its re-imported full export and the exported subgraph of nodes `sub_nodes`
// through Session on seeded random float inputs `x`: every output must agree exactly (same kernels,
// same data). The subgraph reads `sub_input` and writes `sub_output` (and maybe more), all of them
// outputs of `model`.
void check_export_round_trip(const onnx::ModelProto& model, const std::vector<int64_t>& x_dims,
                             const std::vector<std::string>& sub_nodes,
                             const std::string& sub_input, const std::string& sub_output) {
  auto g = import_onnx_bytes(serialize(model), "");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  std::vector<int> nodes;
  for (const auto& name : sub_nodes) nodes.push_back(node_index(*g, name));
  auto sub_bytes = export_onnx_subgraph(*g, nodes);
  ASSERT_TRUE(sub_bytes.ok()) << sub_bytes.status().to_string();
  auto all_bytes = export_onnx(*g);
  ASSERT_TRUE(all_bytes.ok()) << all_bytes.status().to_string();

  auto full = Session::from_graph(*g);
  ASSERT_TRUE(full.ok()) << full.status().to_string();
  auto sub_graph = import_onnx_bytes(*sub_bytes, "");
  ASSERT_TRUE(sub_graph.ok()) << sub_graph.status().to_string();
  ASSERT_EQ(sub_graph->num_nodes(), static_cast<int>(sub_nodes.size()));
  auto sub = Session::from_graph(std::move(sub_graph).value());
  ASSERT_TRUE(sub.ok()) << sub.status().to_string();
  auto all_graph = import_onnx_bytes(*all_bytes, "");
  ASSERT_TRUE(all_graph.ok()) << all_graph.status().to_string();
  auto all = Session::from_graph(std::move(all_graph).value());
  ASSERT_TRUE(all.ok()) << all.status().to_string();

  std::mt19937 rng(20240607);
  for (int trial = 0; trial < 3; ++trial) {
    Tensor x = random_floats(x_dims, rng);
    auto ref = (*full)->run({{"x", x}});
    ASSERT_TRUE(ref.ok()) << ref.status().to_string();
    auto round = (*all)->run({{"x", x}});
    ASSERT_TRUE(round.ok()) << round.status().to_string();
    ASSERT_EQ(round->size(), ref->size());
    for (const auto& [name, t] : *ref) {
      EXPECT_EQ(round->at(name).dims(), t.dims()) << name;
      EXPECT_EQ(floats_of(round->at(name)), floats_of(t)) << name;
    }
    auto part = (*sub)->run({{sub_input, ref->at(sub_input)}});
    ASSERT_TRUE(part.ok()) << part.status().to_string();
    ASSERT_TRUE(part->count(sub_output));
    for (const auto& [name, t] : *part) {  // sub_output, and any other model output inside
      ASSERT_TRUE(ref->count(name)) << name;
      EXPECT_EQ(t.dims(), ref->at(name).dims()) << name;
      EXPECT_EQ(floats_of(t), floats_of(ref->at(name))) << name;
    }
  }
}

TEST(OnnxExport, ElementwiseSubgraphRunsLikeTheOriginal) {
  if (!have_kernels({"Mul", "Add", "Relu", "Neg"}))
    GTEST_SKIP() << "needs Mul/Add/Relu/Neg kernels";
  check_export_round_trip(chain_model(), {2, 3}, {"add", "relu"}, "a", "r");
  // And by hand: r = relu(x * c1 + c2).
  auto session = Session::from_graph(*import_onnx_bytes(serialize(chain_model()), ""));
  ASSERT_TRUE(session.ok()) << session.status().to_string();
  std::mt19937 rng(7);
  Tensor x = random_floats({2, 3}, rng);
  auto out = (*session)->run({{"x", x}});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const float c1[] = {2.0f, -1.0f, 0.5f}, c2[] = {0.25f, 0.0f, -0.5f};
  std::vector<float> xs = floats_of(x), rs = floats_of(out->at("r")), ys = floats_of(out->at("y"));
  for (int i = 0; i < 6; ++i) {
    EXPECT_FLOAT_EQ(rs[i], std::max(0.0f, xs[i] * c1[i % 3] + c2[i % 3])) << i;
    EXPECT_EQ(ys[i], -rs[i]) << i;
  }
}

// x[2x3] -> MatMul(x, w[3x4]) -> m -> Transpose -> t -> Softmax(axis 1) -> s -> Reshape([8]) -> y;
// m, t, s and y are graph outputs. Exercises int/ints attributes and an int64 initializer.
onnx::ModelProto matmul_chain_model() {
  onnx::ModelProto m = new_model();
  auto* g = m.mutable_graph();
  set_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {2, 3});
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(3);
  w->add_dims(4);
  for (int i = 0; i < 12; ++i) w->add_float_data(0.25f * static_cast<float>(i) - 1.0f);
  auto* shape = g->add_initializer();
  shape->set_name("shape");
  shape->set_data_type(onnx::TensorProto::INT64);
  shape->add_dims(1);
  shape->add_int64_data(8);
  add_node(g, "MatMul", {"x", "w"}, {"m"}, "matmul");
  auto* perm = add_node(g, "Transpose", {"m"}, {"t"}, "transpose")->add_attribute();
  perm->set_name("perm");
  perm->set_type(onnx::AttributeProto::INTS);
  perm->add_ints(1);
  perm->add_ints(0);
  auto* axis = add_node(g, "Softmax", {"t"}, {"s"}, "softmax")->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(1);
  add_node(g, "Reshape", {"s", "shape"}, {"y"}, "reshape");
  set_type(g->add_output(), "m", onnx::TensorProto::FLOAT, {2, 4});
  set_type(g->add_output(), "t", onnx::TensorProto::FLOAT, {4, 2});
  set_type(g->add_output(), "s", onnx::TensorProto::FLOAT, {4, 2});
  set_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {8});
  return m;
}

TEST(OnnxExport, MatMulSubgraphRunsLikeTheOriginal) {
  if (!have_kernels({"MatMul", "Transpose", "Softmax", "Reshape"})) {
    GTEST_SKIP() << "needs MatMul/Transpose/Softmax/Reshape kernels";
  }
  check_export_round_trip(matmul_chain_model(), {2, 3}, {"transpose", "softmax"}, "m", "s");
  check_export_round_trip(matmul_chain_model(), {2, 3}, {"softmax", "reshape"}, "t", "y");
}

TEST(TensorProtoFile, ReadsWhatWasWritten) {
  TempDir dir;
  onnx::TensorProto p;
  p.set_name("probe");
  p.set_data_type(onnx::TensorProto::FLOAT16);
  p.add_dims(2);
  p.add_dims(2);
  for (int bits : {0x3c00, 0xc000, 0x0000, 0x7bff}) p.add_int32_data(bits);  // 1, -2, 0, 65504
  std::string bytes;
  ASSERT_TRUE(p.SerializeToString(&bytes));
  write_file(dir.path() + "/t.pb", bytes);
  auto t = read_tensor_proto_file(dir.path() + "/t.pb");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->dtype(), DType::kFloat16);
  EXPECT_EQ(t->dims(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(t->to_double_vector(), (std::vector<double>{1.0, -2.0, 0.0, 65504.0}));
  auto name = read_tensor_proto_name(dir.path() + "/t.pb");
  ASSERT_TRUE(name.ok());
  EXPECT_EQ(*name, "probe");

  write_file(dir.path() + "/bad.pb", "\xff\xff\xff");
  EXPECT_FALSE(read_tensor_proto_file(dir.path() + "/bad.pb").ok());
  EXPECT_EQ(read_tensor_proto_file(dir.path() + "/none.pb").status().code(), StatusCode::kNotFound);
}

// The ONNX backend test data: test_add's output is the sum of its two inputs.
TEST(TensorProtoFile, ReadsOnnxBackendTestData) {
  const std::string dir = "/usr/share/libonnx-testdata/data/node/test_add/test_data_set_0";
  if (!fs::exists(dir + "/input_0.pb")) GTEST_SKIP() << "libonnx-testdata is not installed";
  auto x = read_tensor_proto_file(dir + "/input_0.pb");
  auto y = read_tensor_proto_file(dir + "/input_1.pb");
  auto sum = read_tensor_proto_file(dir + "/output_0.pb");
  ASSERT_TRUE(x.ok() && y.ok() && sum.ok());
  EXPECT_EQ(*read_tensor_proto_name(dir + "/input_0.pb"), "x");
  EXPECT_EQ(*read_tensor_proto_name(dir + "/output_0.pb"), "sum");
  EXPECT_EQ(x->dtype(), DType::kFloat32);
  EXPECT_EQ(x->dims(), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(sum->dims(), x->dims());
  std::vector<float> xs = floats_of(*x), ys = floats_of(*y), ss = floats_of(*sum);
  for (size_t i = 0; i < ss.size(); ++i) EXPECT_FLOAT_EQ(ss[i], xs[i] + ys[i]) << i;
}

}  // namespace
}  // namespace tessera
