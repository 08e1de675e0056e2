#include "src/replay/executor_compare.h"

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "src/pool/names.h"
#include "src/replay/report.h"

namespace streampool::replay {

DecisionDiff DiffDecisions(absl::Span<const ReplayDecision> simulator,
                           absl::Span<const ReplayDecision> executor) {
  DecisionDiff d;
  d.compared = std::min(simulator.size(), executor.size());
  for (uint64_t i = 0; i < d.compared; ++i) {
    const ReplayDecision& s = simulator[i];
    const ReplayDecision& e = executor[i];
    if (s.SameAs(e)) {
      ++d.equal;
      continue;
    }
    if (!d.first_difference) d.first_difference = i;
    // A failed allocation took no rule.
    const bool observed = (!s.failed && s.rule == ReuseRule::kOpportunistic) ||
                          (!e.failed && e.rule == ReuseRule::kOpportunistic);
    if (observed && !d.first_observation_difference) d.first_observation_difference = i;
  }
  // Nothing differs before the first rule-3 difference exactly when the
  // first difference is that one (or there is none at all).
  d.equal_before_observation = d.first_difference == d.first_observation_difference;
  return d;
}

namespace {

// The machine cannot run the executor: no driver, no device, or fewer
// devices than the trace's runtime asks for.
std::string MissingDevice(const absl::Status& status) {
  switch (ToCError(status)) {
    case spErrorInsufficientDriver:
    case spErrorNoDevice:
      return absl::StrCat("no CUDA device (", status.message(), ")");
    case spErrorInvalidDevice:
      return absl::StrCat("not enough CUDA devices (", status.message(), ")");
    default:
      return "";
  }
}

}  // namespace

absl::StatusOr<ExecutorComparison> CompareExecutors(const Trace& trace,
                                                    const ReplaySettings& settings,
                                                    ExecutorKind executor) {
  if (executor == ExecutorKind::kSimulator) {
    return absl::InvalidArgumentError("an executor comparison is against the simulator");
  }
  ExecutorComparison c;
  c.trace = trace.name;
  c.setting = settings.Label();
  c.executor = executor;

  // The executor first: a machine that cannot run it costs no simulation.
  ReplaySettings real = settings;
  real.executor = executor;
  real.keep_decisions = true;
  absl::StatusOr<ReplayResult> on_executor = Replay(trace, real);
  if (!on_executor.ok()) {
    if (executor == ExecutorKind::kCuda) {
      c.skipped = MissingDevice(on_executor.status());
      if (!c.skipped.empty()) return c;
    }
    return absl::Status(on_executor.status().code(),
                        absl::StrCat("on the ", internal::EnumName(executor),
                                     " executor: ", on_executor.status().message()));
  }
  ReplaySettings simulated = settings;
  simulated.executor = ExecutorKind::kSimulator;
  simulated.keep_decisions = true;
  absl::StatusOr<ReplayResult> on_simulator = Replay(trace, simulated);
  if (!on_simulator.ok()) return on_simulator.status();

  c.diff = DiffDecisions(on_simulator->decisions, on_executor->decisions);
  if (c.diff.first_difference) {
    c.simulator_first = on_simulator->decisions[*c.diff.first_difference];
    c.executor_first = on_executor->decisions[*c.diff.first_difference];
    for (const TraceOp& op : trace.ops) {
      if (op.line >= c.simulator_first.line) break;
      if (std::holds_alternative<ops::Query>(op.op) ||
          std::holds_alternative<ops::EventQuery>(op.op)) {
        ++c.queries_before_first_difference;
      }
    }
  }
  c.simulator_peak_reserved = on_simulator->peak_reserved;
  c.executor_peak_reserved = on_executor->peak_reserved;
  c.simulator_failed = on_simulator->failed_allocs;
  c.executor_failed = on_executor->failed_allocs;
  c.simulator_waits = on_simulator->stats.waits_inserted;
  c.executor_waits = on_executor->stats.waits_inserted;
  c.simulator_wall_ns = on_simulator->wall_ns;
  c.executor_wall_ns = on_executor->wall_ns;
  return c;
}

namespace {

std::string Ms(uint64_t ns) { return absl::StrCat(ns / 1000000, ".", (ns / 100000) % 10, " ms"); }

}  // namespace

std::string FormatComparisonText(const std::vector<ExecutorComparison>& comparisons) {
  std::string out;
  for (const ExecutorComparison& c : comparisons) {
    const char* exec = internal::EnumName(c.executor);
    absl::StrAppend(&out, c.trace, ": simulator vs ", exec, " (", c.setting, ")\n");
    if (!c.skipped.empty()) {
      absl::StrAppend(&out, "  skipped: ", c.skipped, "\n");
      continue;
    }
    const DecisionDiff& d = c.diff;
    absl::StrAppend(&out, "  decisions equal: ", d.equal, " of ", d.compared, "\n");
    if (d.first_difference) {
      absl::StrAppend(&out, "  first difference: allocation ", *d.first_difference, " (line ",
                      c.simulator_first.line, ", ", c.simulator_first.size, " bytes): simulator ",
                      c.simulator_first.Describe(), ", ", exec, " ", c.executor_first.Describe(),
                      "\n");
      absl::StrAppend(&out, "  queries before it: ", c.queries_before_first_difference, "\n");
    } else {
      absl::StrAppend(&out, "  first difference: none\n");
    }
    if (d.first_observation_difference) {
      absl::StrAppend(&out, "  first rule-3 (observation) difference: allocation ",
                      *d.first_observation_difference, "\n");
    } else {
      absl::StrAppend(&out, "  first rule-3 (observation) difference: none\n");
    }
    absl::StrAppend(&out, "  every decision before it equals the simulator's: ",
                    d.equal_before_observation ? "yes" : "no", "\n");
    absl::StrAppend(&out, "  peak reserved: simulator ", c.simulator_peak_reserved, ", ", exec, " ",
                    c.executor_peak_reserved, "; failed allocations: ", c.simulator_failed, ", ",
                    c.executor_failed, "; inserted waits: ", c.simulator_waits, ", ",
                    c.executor_waits, "\n");
    absl::StrAppend(&out, "  wall time: simulator ", Ms(c.simulator_wall_ns), ", ", exec, " ",
                    Ms(c.executor_wall_ns), "\n");
  }
  return out;
}

namespace {

using Json = nlohmann::ordered_json;

Json DecisionJson(const ReplayDecision& d) {
  if (d.failed) return {{"line", d.line}, {"size", d.size}, {"failed", true}};
  return {{"line", d.line},
          {"size", d.size},
          {"failed", false},
          {"rule", ReuseRuleName(d.rule)},
          {"pool", d.pool == TraceOp::kNoPool ? Json(nullptr) : Json(d.pool)},
          {"chunk", d.chunk},
          {"offset", d.offset}};
}

template <typename T>
Json OrNull(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}

}  // namespace

std::string FormatComparisonJson(const std::vector<ExecutorComparison>& comparisons) {
  Json list = Json::array();
  for (const ExecutorComparison& c : comparisons) {
    Json j = {{"trace", c.trace},
              {"setting", c.setting},
              {"executor", internal::EnumName(c.executor)},
              {"skipped", c.skipped.empty() ? Json(nullptr) : Json(c.skipped)}};
    if (c.skipped.empty()) {
      const DecisionDiff& d = c.diff;
      j["compared"] = d.compared;
      j["equal"] = d.equal;
      j["first_difference"] = OrNull(d.first_difference);
      if (d.first_difference) {
        j["simulator_first"] = DecisionJson(c.simulator_first);
        j["executor_first"] = DecisionJson(c.executor_first);
        j["queries_before_first_difference"] = c.queries_before_first_difference;
      }
      j["first_observation_difference"] = OrNull(d.first_observation_difference);
      j["equal_before_observation"] = d.equal_before_observation;
      j["peak_reserved_bytes"] = {{"simulator", c.simulator_peak_reserved},
                                  {"executor", c.executor_peak_reserved}};
      j["failed_allocs"] = {{"simulator", c.simulator_failed}, {"executor", c.executor_failed}};
      j["waits_inserted"] = {{"simulator", c.simulator_waits}, {"executor", c.executor_waits}};
      j["wall_ns"] = {{"simulator", c.simulator_wall_ns}, {"executor", c.executor_wall_ns}};
    }
    list.push_back(std::move(j));
  }
  return DumpJson(Json{{"schema", "streampool-executor-compare/1"}, {"comparisons", list}},
                  /*indent=*/2) +
         "\n";
}

}  // namespace streampool::replay
