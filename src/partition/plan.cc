#include "partition/plan.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ir/subgraph.h"
#include "partition/structural_hash.h"

namespace tessera {

using json = nlohmann::json;

std::string graph_hash(const Graph& g) {
  std::string text = "nodes " + std::to_string(g.num_nodes()) + "\n";
  if (g.num_nodes() > 0) text += structural_signature(SubGraph(g, NodeSet::all(g.num_nodes())));
  for (int v : g.inputs()) text += "input " + g.value(v).name + " " + g.value(v).type.to_string() + "\n";
  for (const Node& n : g.nodes()) text += "node " + n.name + "\n";
  char hex[17];
  snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a64(text.data(), text.size())));
  return hex;
}

std::string plan_to_json(const Plan& plan) {
  json j;
  j["format"] = Plan::kFormat;
  j["model"] = plan.model;
  j["model_hash"] = plan.model_hash;
  j["threads"] = plan.threads;
  j["cpu"] = plan.cpu;
  j["input_shapes"] = plan.input_shapes;
  j["backend_versions"] = plan.backend_versions;
  j["layout"] = plan.layout;
  j["predicted_seconds"] = plan.predicted_seconds;
  j["transition_seconds"] = plan.transition_seconds;
  j["measured_seconds"] = plan.measured_seconds;
  j["partitions"] = json::array();
  for (const PlanPartition& p : plan.partitions) {
    j["partitions"].push_back({{"backend", p.backend},
                               {"label", p.label},
                               {"rule", p.rule},
                               {"seconds", p.seconds},
                               {"noise", p.noise},
                               {"nodes", p.nodes}});
  }
  return j.dump(1) + "\n";
}

Result<Plan> plan_from_json(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return invalid_argument("not a JSON object");
  try {
    if (j.value("format", 0) != Plan::kFormat) {
      return invalid_argument("unknown plan format " + j.value("format", json(nullptr)).dump() + " (this build reads " +
                              std::to_string(Plan::kFormat) + ")");
    }
    Plan plan;
    plan.model = j.value("model", "");
    plan.model_hash = j.at("model_hash").get<std::string>();
    plan.threads = j.value("threads", 1);
    plan.cpu = j.value("cpu", "");
    plan.input_shapes = j.value("input_shapes", std::map<std::string, std::vector<int64_t>>{});
    plan.backend_versions = j.value("backend_versions", std::map<std::string, std::string>{});
    plan.layout = j.value("layout", std::string("row-major"));
    if (plan.layout != "row-major" && plan.layout != "channels-last")
      return invalid_argument("unknown tensor layout '" + plan.layout + "' (row-major or channels-last)");
    plan.predicted_seconds = j.value("predicted_seconds", 0.0);
    plan.transition_seconds = j.value("transition_seconds", 0.0);
    plan.measured_seconds = j.value("measured_seconds", -1.0);
    for (const json& p : j.at("partitions")) {
      PlanPartition part;
      part.backend = p.at("backend").get<std::string>();
      part.nodes = p.at("nodes").get<std::vector<int>>();
      part.label = p.value("label", "");
      part.rule = p.value("rule", "");
      part.seconds = p.value("seconds", -1.0);
      part.noise = p.value("noise", 0.0);
      plan.partitions.push_back(std::move(part));
    }
    if (plan.threads < 1) return invalid_argument("threads must be at least 1");
    return plan;
  } catch (const json::exception& e) {
    return invalid_argument(std::string("malformed plan: ") + e.what());
  }
}

Status write_plan(const std::string& path, const Plan& plan) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return io_error("cannot write " + tmp);
    f << plan_to_json(plan);
    if (!f.flush()) return io_error("cannot write " + tmp);
  }
  // Renamed into place: a crash never leaves a half-written plan behind.
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return io_error("cannot rename " + tmp + " to " + path);
  return Status();
}

Result<Plan> read_plan(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return not_found("cannot open plan " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  auto plan = plan_from_json(ss.str());
  if (!plan.ok()) return Status(plan.status().code(), path + ": " + plan.status().message());
  return plan;
}

Status check_plan_matches(const Plan& plan, const Graph& g) {
  std::string hash = graph_hash(g);
  if (plan.model_hash != hash) {
    return invalid_argument("the plan was made for another model" +
                            (plan.model.empty() ? std::string() : " (" + plan.model + ")") + ": its model hash is " +
                            plan.model_hash + ", this model's is " + hash +
                            " (same model? then give the same --shape values it was optimized with)");
  }
  std::vector<char> seen(g.num_nodes(), 0);
  for (const PlanPartition& p : plan.partitions) {
    if (p.nodes.empty()) return invalid_argument("the plan has an empty partition");
    for (int n : p.nodes) {
      if (n < 0 || n >= g.num_nodes()) return invalid_argument("the plan names node " + std::to_string(n) + ", the model has " + std::to_string(g.num_nodes()));
      if (seen[n]++) return invalid_argument("the plan puts " + g.node(n).describe() + " in two partitions");
    }
  }
  return Status();
}

}  // namespace tessera
