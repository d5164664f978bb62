// `tessera backends`: the compiled-in backends, their versions and availability, and a support
// matrix (claimed op or pattern x backend).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>

#include "backends/backend.h"
#include "tools/cli.h"

namespace tessera {
namespace {

int run_backends(bool json) {
  const auto& backends = all_backends();
  std::set<std::string> patterns;
  for (const Backend* b : backends)
    for (const std::string& p : b->claimed_patterns()) patterns.insert(p);
  nlohmann::json j;
  for (const Backend* b : backends) {
    Status avail = b->available();
    std::vector<std::string> claimed = b->claimed_patterns();
    j["backends"].push_back({{"name", b->name()},
                             {"version", b->version()},
                             {"available", avail.ok()},
                             {"reason", avail.ok() ? "" : avail.message()},
                             {"fusion", fusion_style_name(b->fusion_style())},
                             {"max_fusion_depth", b->max_fusion_depth()},
                             {"patterns", claimed}});
  }
  if (json) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("%-10s %-10s %-10s %s\n", "backend", "available", "fusion", "version");
  for (const Backend* b : backends) {
    Status avail = b->available();
    std::string fusion = fusion_style_name(b->fusion_style());
    if (b->fusion_style() == FusionStyle::kArbitrary) fusion += "<=" + std::to_string(b->max_fusion_depth());
    std::printf("%-10s %-10s %-10s %s%s\n", b->name().c_str(), avail.ok() ? "yes" : "no", fusion.c_str(),
                b->version().c_str(), avail.ok() ? "" : ("  (" + avail.message() + ")").c_str());
  }
  std::printf("\nref runs every op (%zu); claimed ops and patterns:\n\n", RefKernelTable::global().ops().size());
  std::printf("%-28s", "pattern");
  for (const Backend* b : backends)
    if (b != &ref_backend()) std::printf(" %-8s", b->name().c_str());
  std::printf("\n");
  for (const std::string& p : patterns) {
    std::printf("%-28s", p.c_str());
    for (const Backend* b : backends) {
      if (b == &ref_backend()) continue;
      auto claimed = b->claimed_patterns();
      bool has = std::find(claimed.begin(), claimed.end(), p) != claimed.end();
      std::printf(" %-8s", has ? "x" : ".");
    }
    std::printf("\n");
  }
  return 0;
}

}  // namespace

void add_backends_command(CLI::App& app, int& exit_code) {
  auto json = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand("backends", "List the kernel backends, their versions and what each runs");
  sub->add_flag("--json", *json, "Print a machine-readable list");
  sub->callback([json, &exit_code] { exit_code = run_backends(*json); });
}

}  // namespace tessera
