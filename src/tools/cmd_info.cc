// `tessera info MODEL.onnx`: op counts, input/output types, parameter count, opsets.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "onnx/onnx_import.h"
#include "tools/cli.h"

namespace tessera {
namespace {

struct InfoOptions {
  std::string model;
  bool json = false;
};

int run_info(const InfoOptions& o) {
  auto g = import_onnx_file(o.model);
  if (!g.ok()) {
    std::fprintf(stderr, "error: %s\n", g.status().to_string().c_str());
    return 1;
  }
  std::map<std::string, int> op_counts;
  for (const Node& n : g->nodes()) ++op_counts[n.domain.empty() ? n.op_type : n.domain + "." + n.op_type];
  nlohmann::json j;
  j["model"] = o.model;
  j["graph"] = g->name;
  j["nodes"] = g->num_nodes();
  j["parameters"] = g->parameter_count();
  for (const auto& [d, v] : g->opsets) j["opsets"][d.empty() ? "ai.onnx" : d] = v;
  for (const auto& [op, c] : op_counts) j["ops"][op] = c;
  for (int id : g->inputs()) j["inputs"].push_back({{"name", g->value(id).name}, {"type", g->value(id).type.to_string()}});
  for (int id : g->outputs()) j["outputs"].push_back({{"name", g->value(id).name}, {"type", g->value(id).type.to_string()}});
  if (o.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("model:      %s\n", o.model.c_str());
  std::printf("graph:      %s\n", g->name.c_str());
  std::string opsets;
  for (const auto& [d, v] : g->opsets) opsets += (opsets.empty() ? "" : ", ") + (d.empty() ? std::string("ai.onnx") : d) + " " + std::to_string(v);
  std::printf("opsets:     %s\n", opsets.c_str());
  std::printf("nodes:      %d\n", g->num_nodes());
  std::printf("parameters: %lld\n", static_cast<long long>(g->parameter_count()));
  std::printf("inputs:\n");
  for (int id : g->inputs()) std::printf("  %-24s %s\n", g->value(id).name.c_str(), g->value(id).type.to_string().c_str());
  std::printf("outputs:\n");
  for (int id : g->outputs()) std::printf("  %-24s %s\n", g->value(id).name.c_str(), g->value(id).type.to_string().c_str());
  std::printf("ops:\n");
  for (const auto& [op, c] : op_counts) std::printf("  %-24s %d\n", op.c_str(), c);
  return 0;
}

}  // namespace

void add_info_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<InfoOptions>();
  CLI::App* sub = app.add_subcommand("info", "Print a model's op counts, input/output types, parameter count and opsets");
  sub->add_option("model", o->model, "ONNX model file")->required();
  sub->add_flag("--json", o->json, "Print a machine-readable summary");
  sub->callback([o, &exit_code] { exit_code = run_info(*o); });
}

}  // namespace tessera
