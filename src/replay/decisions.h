// Decisions as data: every allocation's decision in one replay of a trace,
// as a text file a regression test keeps beside the trace, and the two ways
// of comparing decisions, with a file (a check: did a change move any?) and
// between two settings or allocators on one trace (a diff: what does the
// other setting decide otherwise, by rule and by bytes?).
//
// The file, "streampool-decisions/1" (docs/design.md, "Decisions as data"):
//
//   streampool-decisions/1
//   trace server.trace                     `<key> <value>` lines: what it was
//   setting event+opportunistic+internal, threshold 0
//   ops 23541                              made from; informative only
//   decisions 6610
//   # op line stream size rule pool place waits
//   3 4 1 1048576 fresh 0 1+0 -
//   9 10 2 1048576 internal_dependency 0 1+0 1@4
//   12 13 1 4096 failed 0 - -
//
// One line per allocation, in trace order: the op's index in the trace
// (from 1) and its line in the file; the stream and the pool as the trace
// numbers them (`own` for the replay's own pool of a trace that names none);
// the size asked for; the rule (ReuseRuleName), `failed` when the
// allocation ran out of memory or `model` for an allocator model's; where
// the block lies, `<chunk>+<offset>` (the chunk's creation number in its
// pool, from 1, and the offset in it; never an address, so a file is the
// same on every machine), `-` when there is no block, `@<hex>` for a
// model's address in its own fixed address space; and the waits the
// decision inserted, `<stream>@<position>` of each free waited for,
// comma-separated, or `-`. Lines that start with `#` are comments; keys a
// reader does not know are skipped, so version 1 can gain keys.
#ifndef STREAMPOOL_SRC_REPLAY_DECISIONS_H_
#define STREAMPOOL_SRC_REPLAY_DECISIONS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "src/replay/replay.h"
#include "src/replay/trace.h"

namespace streampool::replay {

inline constexpr char kDecisionsMagic[] = "streampool-decisions/1";

// A decisions file, read against the trace it was made from (its streams
// and pools are the trace's numbers; `decisions` holds them as the replay
// does, by dense index).
struct DecisionFile {
  std::string trace;    // what `trace` said
  std::string setting;  // what `setting` said
  std::vector<ReplayDecision> decisions;
};

// The label a decisions file and a comparison give a setting: Label() for
// streampool's pool, the allocator's for a model, and "recorded settings"
// for a recording replayed at its own.
std::string DecisionSettingLabel(const ReplaySettings& settings);

// The file for `decisions`, made by replaying `trace` under `setting`.
std::string FormatDecisions(const Trace& trace, absl::string_view setting,
                            absl::Span<const ReplayDecision> decisions);
// One decision as its data line (without the newline).
std::string FormatDecisionLine(const Trace& trace, const ReplayDecision& d);
// Reads a file written for `trace`; `name` prefixes errors ("<name>:<line>:
// ..."). A stream or pool the trace does not have is an error: the file was
// made from another trace.
absl::StatusOr<DecisionFile> ParseDecisions(absl::string_view text, absl::string_view name,
                                            const Trace& trace);
absl::StatusOr<DecisionFile> LoadDecisions(const std::string& path, const Trace& trace);

// Same decision: the same op, stream and size, the same outcome, rule, pool,
// place and waits.
bool SameDecision(const ReplayDecision& a, const ReplayDecision& b);

// Why a rule serves an allocation, in a sentence, for the decision reports.
std::string RuleBehind(const ReplayDecision& d);

// Two sides' decisions where they first differ. A side without one there
// (nullopt) had no allocation at that op: the trace changed, or a model
// started with that block already placed.
struct DecisionDifference {
  uint32_t op = 0;
  uint32_t line = 0;
  std::optional<ReplayDecision> a, b;
  // The blocks around each side's place, as each side's pool had them just
  // after the decision (for a saved decision: the replay's pool there).
  Neighbourhood a_blocks, b_blocks;
};

// A check of a replay against a decisions file: stops at the first
// decision that differs.
struct DecisionCheck {
  std::string saved_setting;     // the file's
  std::string replayed_setting;  // DecisionSettingLabel of the replay's
  uint64_t saved = 0;            // decisions in the file
  uint64_t agreed = 0;           // decisions equal before the difference (all, without one)
  std::optional<DecisionDifference> difference;  // a: the file's, b: the replay's
};
absl::StatusOr<DecisionCheck> CheckDecisions(const Trace& trace, const ReplaySettings& settings,
                                             const DecisionFile& saved);
// What a check found, in words: one line when every decision agreed, else
// the op, both decisions, the rule behind each and the blocks around them.
std::string FormatCheck(const Trace& trace, const DecisionCheck& check);

// Differences of one kind: decisions that a took by `a_rule` and b by
// `b_rule` ("failed", "model" and "none" for an op without a decision stand
// beside the rule names).
struct RuleChange {
  std::string a_rule, b_rule;
  uint64_t decisions = 0;
  uint64_t bytes = 0;  // the sizes asked for
};

// Two settings (or allocators) on one trace, every decision compared.
struct SettingsDiff {
  std::string a_setting, b_setting;
  uint64_t compared = 0;  // ops either side decided
  uint64_t differing = 0;
  uint64_t differing_bytes = 0;
  // Of the differing: the same rule but another place or other waits; a
  // rule changed (failures included); failed under one side only.
  uint64_t same_rule_elsewhere = 0;
  uint64_t other_rule = 0;
  uint64_t failed_a_only = 0, failed_b_only = 0;
  // Every (a rule, b rule) that differs, most bytes first (ties: the rule
  // names in order).
  std::vector<RuleChange> by_rule;
  std::optional<DecisionDifference> first;
};
// --diff's value: how setting b differs from a, as `key=value` items
// separated by '/': reuse (as --reuse), threshold (bytes or max), growth,
// allocator (one), capacity, torch-conf, rmm-initial, rmm-max. A pool
// setting replays b at the settings' fields, not at a recording's own.
// Applied to *settings (a copy of a); InvalidArgument names a bad item.
absl::Status ApplySettingChange(absl::string_view change, ReplaySettings* settings);

absl::StatusOr<SettingsDiff> DiffSettings(const Trace& trace, const ReplaySettings& a,
                                          const ReplaySettings& b);
std::string FormatSettingsDiff(const Trace& trace, const SettingsDiff& diff);

}  // namespace streampool::replay

#endif  // STREAMPOOL_SRC_REPLAY_DECISIONS_H_
