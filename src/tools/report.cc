#include "tools/report.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "ir/node_flops.h"

namespace tessera {

namespace {

// A partition label cut to at most `width` characters for one line of text.
std::string short_label(const std::string& label, size_t width) {
  return label.size() > width ? label.substr(0, width - 3) + "..." : label;
}

std::string ms(double seconds, int digits = 3) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f ms", digits, seconds * 1e3);
  return buf;
}

std::string percent(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", x * 100);
  return buf;
}

// Work over time as "123.4" GFLOP/s; "-" without work or time.
std::string gflops_rate(double flops, double seconds) {
  if (flops <= 0 || seconds <= 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", flops / seconds * 1e-9);
  return buf;
}

// The compute floor in one sentence (summary.floor_seconds > 0).
std::string floor_text(const OptimizeSummary& s) {
  char buf[512];
  int n = std::snprintf(buf, sizeof buf,
                        "compute floor: %.3f GFLOP of Conv/MatMul/Gemm work at this machine's measured fp32 FMA peak "
                        "(%.0f GFLOP/s, %d thread(s), %s) takes %s",
                        s.flops * 1e-9, s.peak.gflops_nt, s.peak.threads, s.peak.isa.c_str(), ms(s.floor_seconds).c_str());
  if (s.plan_seconds > 0 && n > 0 && n < static_cast<int>(sizeof buf)) {
    std::snprintf(buf + n, sizeof buf - n, "; the plan's %s is %.2fx that (its work at %.0f%% of peak)",
                  ms(s.plan_seconds).c_str(), s.plan_seconds / s.floor_seconds, 100 * s.floor_seconds / s.plan_seconds);
  }
  return buf;
}

const char* backend_colour(const std::string& b) {
  if (b == "ref") return "#d9d9d9";
  if (b == "native") return "#a1d99b";
  if (b == "onednn") return "#9ecae1";
  if (b == "blas") return "#fdae6b";
  if (b == "xnnpack") return "#bcbddc";
  return "#ffffb3";
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string dot_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

// Candidates evaluated on exactly these nodes, on another backend, valid: the alternatives.
std::vector<const PlannedPartition*> alternatives(const OptimizeResult& r, const PlanPartition& p) {
  std::vector<const PlannedPartition*> out;
  std::set<std::string> seen = {p.backend};
  for (const PlannedPartition& e : r.search.evaluated) {
    if (!e.cost.valid || e.candidate.nodes.to_vector() != p.nodes) continue;
    if (seen.insert(e.candidate.backend->name()).second) out.push_back(&e);
  }
  std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->cost.seconds < b->cost.seconds; });
  return out;
}

}  // namespace

Result<double> parse_duration(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  std::string unit = end ? std::string(end) : "";
  double scale = unit.empty() || unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : unit == "ms" ? 1e-3 : -1;
  if (s.empty() || end == s.c_str() || scale < 0 || !std::isfinite(v) || v < 0)
    return invalid_argument("bad duration '" + s + "' (expected e.g. 90s, 10m, 1h)");
  return v * scale;
}

OptimizeSummary summarize_optimization(const Graph& g, const OptimizeResult& r,
                                       const std::vector<PlacementTiming>& placements, const FmaPeak* peak) {
  OptimizeSummary s;
  const Plan& plan = r.plan;
  s.predicted_seconds = plan.predicted_seconds;
  s.measured_seconds = plan.measured_seconds;
  s.noise_seconds = r.measured_noise;
  s.transition_seconds = plan.transition_seconds;
  s.remeasured_seconds = s.transition_seconds;
  for (const PartitionTiming& t : r.timings)
    s.remeasured_seconds += std::max(0.0, t.isolated_seconds >= 0 ? t.isolated_seconds : t.stored_seconds);
  if (s.measured_seconds > 0) {
    s.prediction_error = std::fabs(s.measured_seconds - s.predicted_seconds) / s.measured_seconds;
    s.remeasured_error = std::fabs(s.measured_seconds - s.remeasured_seconds) / s.measured_seconds;
  }
  // The plan as timed among the placements (in turns with them), else end to end above.
  double plan_seconds = s.measured_seconds;
  for (const PlacementTiming& t : placements) {
    if (!t.cost.valid) continue;
    if (t.name == "plan") {
      plan_seconds = t.cost.seconds;
      continue;
    }
    if (s.best_single.empty() || t.cost.seconds < s.best_single_seconds) s.best_single = t.name, s.best_single_seconds = t.cost.seconds;
  }
  if (!s.best_single.empty() && plan_seconds > 0) s.speedup = s.best_single_seconds / plan_seconds;
  s.plan_seconds = plan_seconds;
  for (const PlanPartition& p : plan.partitions) {
    auto& [parts, nodes] = s.per_backend[p.backend];
    ++parts;
    nodes += static_cast<int>(p.nodes.size());
    s.partition_flops.push_back(nodes_flops(g, p.nodes));
    s.flops += s.partition_flops.back();
  }
  if (peak && peak->gflops_nt > 0) {
    s.peak = *peak;
    s.floor_seconds = s.flops / (peak->gflops_nt * 1e9);
  }
  for (size_t i = 0; i < r.timings.size(); ++i) {
    const PartitionTiming& t = r.timings[i];
    if (t.isolated_seconds < 0) continue;
    double diff = std::fabs(t.in_plan_seconds - t.isolated_seconds);
    if (diff > 0.15 * t.isolated_seconds && diff > 0.02 * std::max(s.measured_seconds, 1e-9))
      s.interacting.push_back(static_cast<int>(i));
  }
  return s;
}

std::string summary_text(const OptimizeSummary& s, const OptimizeResult& r) {
  std::ostringstream out;
  const Plan& plan = r.plan;
  out << "plan: " << plan.partitions.size() << " partitions over ";
  bool first = true;
  for (const auto& [b, pn] : s.per_backend) {
    out << (first ? "" : ", ") << b << " (" << pn.first << " partitions, " << pn.second << " nodes)";
    first = false;
  }
  out << "\n";
  // The biggest partitions by time, so the text stays short on large models.
  std::vector<int> order(plan.partitions.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return r.timings[a].in_plan_seconds > r.timings[b].in_plan_seconds; });
  char line[256];
  std::snprintf(line, sizeof line, "  %-9s %-40s %12s %12s %7s %9s\n", "backend", "partition", "alone", "in plan",
                "share", "GFLOP/s");
  out << line;
  for (size_t k = 0; k < order.size() && k < 12; ++k) {
    const PlanPartition& p = plan.partitions[order[k]];
    const PartitionTiming& t = r.timings[order[k]];
    std::string label = short_label(p.label, 40);
    std::snprintf(line, sizeof line, "  %-9s %-40s %12s %12s %7s %9s\n", p.backend.c_str(), label.c_str(),
                  t.isolated_seconds >= 0 ? ms(t.isolated_seconds).c_str() : "-", ms(t.in_plan_seconds).c_str(),
                  percent(t.in_plan_seconds / std::max(plan.measured_seconds, 1e-12)).c_str(),
                  gflops_rate(s.partition_flops[order[k]], t.in_plan_seconds).c_str());
    out << line;
  }
  if (order.size() > 12) out << "  ... " << order.size() - 12 << " more (see --report)\n";
  out << "predicted " << ms(s.predicted_seconds) << " (transitions " << ms(s.transition_seconds) << "), measured "
      << ms(s.measured_seconds) << " +- " << ms(s.noise_seconds) << " end to end: prediction off by "
      << percent(s.prediction_error) << "\n";
  if (r.stale_predicted_seconds >= 0)
    out << "  (predicted from a timing of this placement taken again now: the one an earlier run stored, "
        << ms(r.stale_predicted_seconds) << ", was over 15% off; the new one replaces it)\n";
  out << "partitions measured alone again now: " << ms(s.remeasured_seconds) << " (with transitions), off by "
      << percent(s.remeasured_error) << " from the end-to-end time"
      << (std::fabs(s.remeasured_seconds - s.predicted_seconds) > 0.15 * s.predicted_seconds
              ? " (the stored costs were measured while the machine ran faster or slower than now)"
              : "")
      << "\n";
  if (r.variants.size() > 1) {
    out << r.variants.size() << " contenders measured end to end (searched backend sets: own thread runtimes "
           "interfere when mixed; single-backend placements):";
    for (size_t k = 0; k < r.variants.size(); ++k) {
      const PlanVariant& v = r.variants[k];
      out << (k ? "," : "") << " " << v.name;
      if (!v.error.empty() && v.measured_seconds < 0) {
        out << ": " << v.error;
        continue;
      }
      if (v.predicted_seconds >= 0) out << " predicted " << ms(v.predicted_seconds);
      out << " measured " << ms(v.measured_seconds);
      if (v.final_seconds >= 0) out << ", side by side " << ms(v.final_seconds);
      out << (static_cast<int>(k) == r.chosen_variant ? " (chosen)" : "");
    }
    out << "\n";
  }
  for (const TriedMove& m : r.refinement_moves)
    if (m.kept)
      out << "refinement kept: " << m.label << " to " << m.to << " (" << ms(m.before_seconds) << " -> "
          << ms(m.after_seconds) << ")\n";
  if (s.remeasured_error > 0.15) {
    out << "  partitions slower or faster inside the plan than alone:";
    if (s.interacting.empty()) out << " none stands out (many small differences add up)";
    for (int i : s.interacting)
      out << " #" << i << " " << plan.partitions[i].backend << ":" << short_label(plan.partitions[i].label, 40);
    out << "\n";
  }
  if (!s.best_single.empty()) {
    std::snprintf(line, sizeof line, "speedup over the best single backend (%s, %s): %.2fx\n", s.best_single.c_str(),
                  ms(s.best_single_seconds).c_str(), s.speedup);
    out << line;
  }
  if (s.floor_seconds > 0) out << floor_text(s) << "\n";
  out << r.num_candidates << " candidates, " << r.costed << " costed (" << r.measured
      << " measured now, " << r.cache_hits << " from the cost database"
      << (r.cost_db_path.empty() ? "" : " " + r.cost_db_path) << "), " << r.states_expanded
      << " search states, " << r.search.merges << " merges; whole-model timings: " << r.timings_taken
      << " taken, " << r.timings_recalled << " recalled; " << std::lround(r.elapsed_seconds) << " s"
      << (r.out_of_budget ? " (stopped at the budget: the best plan found so far)" : "") << "\n";
  return out.str();
}

nlohmann::json summary_json(const OptimizeSummary& s, const OptimizeResult& r) {
  nlohmann::json j;
  j["predicted_ms"] = s.predicted_seconds * 1e3;
  j["measured_ms"] = s.measured_seconds * 1e3;
  j["measured_noise_ms"] = s.noise_seconds * 1e3;
  j["transition_ms"] = s.transition_seconds * 1e3;
  j["prediction_error"] = s.prediction_error;
  // The recalled prediction the plan had before its placement was timed again (null: it was not).
  j["stale_predicted_ms"] = r.stale_predicted_seconds >= 0 ? nlohmann::json(r.stale_predicted_seconds * 1e3) : nullptr;
  j["remeasured_ms"] = s.remeasured_seconds * 1e3;
  j["remeasured_error"] = s.remeasured_error;
  j["best_single_backend"] = s.best_single;
  j["best_single_backend_ms"] = s.best_single_seconds * 1e3;
  j["speedup_over_best_single"] = s.speedup;
  j["candidates"] = r.num_candidates;
  j["costed"] = r.costed;
  j["search_states"] = r.states_expanded;
  j["measured_now"] = r.measured;
  j["cache_hits"] = r.cache_hits;
  j["timings_taken"] = r.timings_taken;
  j["timings_recalled"] = r.timings_recalled;
  j["elapsed_s"] = r.elapsed_seconds;
  j["optimal"] = r.search.optimal;
  j["finished"] = r.search.finished;
  for (size_t k = 0; k < r.variants.size(); ++k) {
    const PlanVariant& v = r.variants[k];
    j["variants"].push_back({{"name", v.name}, {"backends", v.backends}, {"predicted_ms", v.predicted_seconds * 1e3},
                             {"measured_ms", v.measured_seconds * 1e3}, {"final_ms", v.final_seconds * 1e3},
                             {"bound_ms", v.bound_seconds * 1e3}, {"chosen", static_cast<int>(k) == r.chosen_variant}});
  }
  j["partitions"] = nlohmann::json::array();
  for (size_t i = 0; i < r.plan.partitions.size(); ++i) {
    const PlanPartition& p = r.plan.partitions[i];
    j["partitions"].push_back({{"backend", p.backend}, {"label", p.label}, {"nodes", p.nodes.size()},
                               {"stored_ms", r.timings[i].stored_seconds * 1e3},
                               {"alone_ms", r.timings[i].isolated_seconds * 1e3},
                               {"in_plan_ms", r.timings[i].in_plan_seconds * 1e3},
                               {"gflop", s.partition_flops[i] * 1e-9}});
  }
  for (const auto& [b, pn] : s.per_backend) j["per_backend"][b] = {{"partitions", pn.first}, {"nodes", pn.second}};
  j["interacting_partitions"] = s.interacting;
  j["gflop"] = s.flops * 1e-9;
  if (s.floor_seconds > 0) {
    j["peak_gflops"] = s.peak.gflops_nt;
    j["peak_isa"] = s.peak.isa;
    j["floor_ms"] = s.floor_seconds * 1e3;
    if (s.plan_seconds > 0) j["plan_over_floor"] = s.plan_seconds / s.floor_seconds;
  }
  return j;
}

std::string plan_dot(const Graph& g, const Plan& plan) {
  std::ostringstream dot;
  dot << "digraph plan {\n  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", "
         "fontsize=10];\n";
  std::vector<int> part_of(g.num_nodes(), -1);
  for (size_t i = 0; i < plan.partitions.size(); ++i)
    for (int n : plan.partitions[i].nodes)
      if (n >= 0 && n < g.num_nodes()) part_of[n] = static_cast<int>(i);
  auto node_line = [&](int n, const std::string& backend) {
    dot << "    n" << n << " [label=\"" << dot_escape(g.node(n).op_type) << "\", tooltip=\""
        << dot_escape(g.node(n).name + " (" + backend + ")") << "\", fillcolor=\"" << backend_colour(backend) << "\"];\n";
  };
  for (size_t i = 0; i < plan.partitions.size(); ++i) {
    const PlanPartition& p = plan.partitions[i];
    bool cluster = p.nodes.size() > 1;
    if (cluster) {
      dot << "  subgraph cluster_" << i << " {\n    label=\"" << dot_escape(p.backend) << " #" << i
          << "\"; fontsize=9; style=dashed; color=\"#666666\";\n";
    }
    for (int n : p.nodes)
      if (n >= 0 && n < g.num_nodes()) node_line(n, p.backend);
    if (cluster) dot << "  }\n";
  }
  for (int n = 0; n < g.num_nodes(); ++n)
    if (part_of[n] < 0) node_line(n, "ref");
  for (int n = 0; n < g.num_nodes(); ++n) {
    std::set<int> producers;
    for (int v : g.node(n).inputs)
      if (v != kNoValue && g.value(v).producer >= 0) producers.insert(g.value(v).producer);
    for (int p : producers) dot << "  n" << p << " -> n" << n << ";\n";
  }
  dot << "}\n";
  return dot.str();
}

Result<std::string> render_svg(const std::string& dot) {
  char dir_template[] = "/tmp/tessera-dot-XXXXXX";
  if (!mkdtemp(dir_template)) return io_error("cannot create a temporary folder for Graphviz");
  std::string dir = dir_template, in = dir + "/plan.dot", out = dir + "/plan.svg";
  {
    std::ofstream f(in);
    f << dot;
  }
  std::string cmd = "dot -Tsvg -o '" + out + "' '" + in + "' 2>/dev/null";
  int rc = std::system(cmd.c_str());
  std::ifstream f(out);
  std::stringstream svg;
  svg << f.rdbuf();
  std::remove(in.c_str());
  std::remove(out.c_str());
  rmdir(dir.c_str());
  if (rc != 0 || svg.str().empty())
    return unimplemented("Graphviz `dot` is not installed or failed (Debian package graphviz): no graph picture");
  std::string s = svg.str();
  size_t start = s.find("<svg");  // drop the XML prologue to inline it in HTML
  return start == std::string::npos ? s : s.substr(start);
}

Status write_report_html(const std::string& path, const Graph& g, const OptimizeResult& r,
                         const OptimizeSummary& s, const std::vector<PlacementTiming>& placements) {
  const Plan& plan = r.plan;
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>tessera plan: " << html_escape(plan.model)
    << "</title>\n<style>body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;"
       "margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px;text-align:left}"
       "td.n{text-align:right;font-variant-numeric:tabular-nums}.sw{display:inline-block;width:12px;height:12px;"
       "border:1px solid #888;margin-right:4px}.graph{overflow:auto;border:1px solid #ccc;max-height:900px}</style>"
       "</head><body>\n";
  h << "<h1>tessera plan for " << html_escape(plan.model) << "</h1>\n<p>" << plan.threads << " thread(s), "
    << html_escape(plan.cpu) << "; model hash " << plan.model_hash << "</p>\n";
  h << "<h2>Summary</h2><pre>" << html_escape(summary_text(s, r)) << "</pre>\n";

  h << "<h2>Predicted vs measured</h2><table><tr><th></th><th>latency</th></tr>"
    << "<tr><td>predicted (sum of partitions measured alone + transitions)</td><td class=n>" << ms(s.predicted_seconds)
    << "</td></tr><tr><td>of which transitions between backends</td><td class=n>" << ms(s.transition_seconds)
    << "</td></tr><tr><td>measured end to end (median)</td><td class=n>" << ms(s.measured_seconds) << " &plusmn; "
    << ms(s.noise_seconds) << "</td></tr><tr><td>prediction error</td><td class=n>" << percent(s.prediction_error)
    << "</td></tr><tr><td>partitions measured alone again after the end-to-end runs + transitions</td><td class=n>"
    << ms(s.remeasured_seconds) << "</td></tr><tr><td>its error (drift since the costs were stored left out)</td>"
    << "<td class=n>" << percent(s.remeasured_error) << "</td></tr></table>\n";
  if (s.floor_seconds > 0) {
    h << "<p>" << html_escape(floor_text(s))
      << ". No plan of fp32 kernels runs below this floor: a plan far above it has room (memory-bound ops, small "
         "kernels, hand-overs), one near it has little left for any placement to win.</p>\n";
  }
  if (r.variants.size() > 1) {
    h << "<h2>Contenders measured end to end</h2><p>Backends with their own thread runtimes (OpenMP, "
         "...) interfere when one plan mixes them: their idle workers spin on the cores the other "
         "needs. The additive model cannot see it, so each set was searched and its plan measured end to end; "
         "so was each backend's own placement, which keeps its fusion across the whole model. The finalists "
         "(measured near the fastest) were then timed once more side by side, taking turns, and the "
         "fastest there was chosen.</p>"
         "<table><tr><th>set</th><th>backends</th><th>predicted</th><th>measured</th><th>side by side</th></tr>";
    for (size_t k = 0; k < r.variants.size(); ++k) {
      const PlanVariant& v = r.variants[k];
      std::string names;
      for (const std::string& b : v.backends) names += (names.empty() ? "" : ", ") + b;
      h << "<tr><td>" << html_escape(v.name) << (static_cast<int>(k) == r.chosen_variant ? " (chosen)" : "")
        << "</td><td>" << html_escape(names) << "</td><td class=n>" << (v.predicted_seconds >= 0 ? ms(v.predicted_seconds) : "-")
        << "</td><td class=n>"
        << (v.measured_seconds >= 0 ? ms(v.measured_seconds) : html_escape(v.error)) << "</td><td class=n>"
        << (v.final_seconds >= 0 ? ms(v.final_seconds) : "-") << "</td></tr>";
    }
    h << "</table>\n";
  }
  if (!r.refinement_moves.empty()) {
    h << "<h2>Refinement moves</h2><p>Nodes of the fastest placement moved to a backend expected to run them "
         "faster (a node alone, or a region: a node and everything downstream of it), each timed end to end in "
         "turns with the placement so far and kept only when the model ran faster.</p>"
         "<table><tr><th>to</th><th>nodes</th><th>expected saving</th><th>before</th><th>with the move</th>"
         "<th></th></tr>";
    for (const TriedMove& m : r.refinement_moves)
      h << "<tr><td>" << html_escape(m.to) << "</td><td>" << html_escape(m.label) << "</td><td class=n>"
        << ms(m.expected_saving) << "</td><td class=n>" << (m.before_seconds >= 0 ? ms(m.before_seconds) : "-")
        << "</td><td class=n>" << (m.after_seconds >= 0 ? ms(m.after_seconds) : "could not run") << "</td><td>"
        << (m.kept ? "kept" : "lost") << "</td></tr>";
    h << "</table>\n";
  }
  if (!s.interacting.empty()) {
    h << "<p>Partitions whose time inside the plan differs from their time alone by more than 15% (they interact "
         "with their neighbours: caches, thread pools):</p><ul>";
    for (int i : s.interacting)
      h << "<li>#" << i << " " << html_escape(plan.partitions[i].backend + ": " + plan.partitions[i].label) << ": alone "
        << ms(r.timings[i].isolated_seconds) << ", in plan " << ms(r.timings[i].in_plan_seconds) << "</li>";
    h << "</ul>\n";
  }
  if (!placements.empty()) {
    h << "<h2>Single-backend placements (same run)</h2><table><tr><th>placement</th><th>median</th><th>plan "
         "speedup</th></tr>";
    for (const PlacementTiming& t : placements) {
      h << "<tr><td>" << html_escape(t.name) << "</td>";
      if (t.cost.valid) {
        char ratio[32];
        std::snprintf(ratio, sizeof ratio, "%.2fx", t.cost.seconds / std::max(s.measured_seconds, 1e-12));
        h << "<td class=n>" << ms(t.cost.seconds) << "</td><td class=n>" << ratio << "</td>";
      } else {
        h << "<td colspan=2>" << html_escape(t.cost.reason) << "</td>";
      }
      h << "</tr>";
    }
    h << "</table>\n";
  }

  h << "<h2>Partitions</h2><p>";
  for (const char* b : {"ref", "native", "onednn", "blas", "xnnpack"})
    h << "<span class=sw style=\"background:" << backend_colour(b) << "\"></span>" << b << " &nbsp; ";
  h << "</p><table><tr><th>#</th><th>backend</th><th>ops</th><th>nodes</th><th>alone</th><th>in plan</th>"
       "<th>share</th><th>GFLOP/s in plan</th><th>of peak</th><th>alternatives that lost (same nodes)</th></tr>\n";
  for (size_t i = 0; i < plan.partitions.size(); ++i) {
    const PlanPartition& p = plan.partitions[i];
    const PartitionTiming& t = r.timings[i];
    h << "<tr><td>" << i << "</td><td><span class=sw style=\"background:" << backend_colour(p.backend) << "\"></span>"
      << html_escape(p.backend) << "</td><td>" << html_escape(p.label) << "</td><td class=n>" << p.nodes.size()
      << "</td><td class=n>" << (t.isolated_seconds >= 0 ? ms(t.isolated_seconds) : "-") << "</td><td class=n>"
      << ms(t.in_plan_seconds) << "</td><td class=n>" << percent(t.in_plan_seconds / std::max(s.measured_seconds, 1e-12))
      << "</td><td class=n>" << gflops_rate(s.partition_flops[i], t.in_plan_seconds) << "</td><td class=n>"
      << (s.partition_flops[i] > 0 && s.peak.gflops_nt > 0 && t.in_plan_seconds > 0
              ? percent(s.partition_flops[i] / t.in_plan_seconds * 1e-9 / s.peak.gflops_nt)
              : "-")
      << "</td><td>";
    for (const PlannedPartition* a : alternatives(r, p)) {
      double more = a->cost.seconds - std::max(0.0, p.seconds);
      h << html_escape(a->candidate.backend->name()) << " " << ms(a->cost.seconds) << " (+" << ms(more) << ") ";
    }
    h << "</td></tr>\n";
  }
  h << "</table>\n";

  h << "<h2>Invalid candidates</h2><table><tr><th>backend</th><th>candidate</th><th>why</th></tr>\n";
  int invalid = 0;
  for (const PlannedPartition& e : r.search.evaluated) {
    if (e.cost.valid || !e.cost.measured) continue;
    if (++invalid > 500) break;
    h << "<tr><td>" << html_escape(e.candidate.backend->name()) << "</td><td>"
      << html_escape(e.candidate.describe(g)) << "</td><td>" << html_escape(e.cost.reason) << "</td></tr>\n";
  }
  h << "</table>" << (invalid == 0 ? "<p>none</p>" : invalid > 500 ? "<p>(first 500 shown)</p>" : "") << "\n";

  h << "<h2>Graph coloured by backend</h2>\n";
  auto svg = render_svg(plan_dot(g, plan));
  if (svg.ok()) {
    h << "<div class=graph>" << *svg << "</div>\n";
  } else {
    h << "<p>" << html_escape(svg.status().message()) << "</p>\n";
  }
  h << "</body></html>\n";
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return io_error("cannot write report " + path);
  f << h.str();
  if (!f.flush()) return io_error("cannot write report " + path);
  return Status();
}

}  // namespace tessera
