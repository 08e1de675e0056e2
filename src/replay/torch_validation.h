// The pytorch model against PyTorch's own history: a converted snapshot
// says which segments PyTorch allocated inside the trace (size, order, the
// op that caused each) and what it held at its peak; a replay through the
// model says what the model would have done.
//
// The model starts from what PyTorch held when the trace began: the
// trace's `# torch_segment` lines, with the pre-trace allocations at their
// recorded addresses. A trace converted without them (the segments at the
// start are unknown) starts warm instead: the model replays the trace once,
// frees what that pass left allocated and allocates again what it freed of
// the pre-trace set, and is measured on a second pass. The recorded
// history is then known only by its count (the `# actions` header) and the
// peak.
#ifndef STREAMPOOL_SRC_REPLAY_TORCH_VALIDATION_H_
#define STREAMPOOL_SRC_REPLAY_TORCH_VALIDATION_H_

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "src/replay/replay.h"
#include "src/replay/trace.h"

namespace streampool::replay {

struct TorchValidation {
  std::string trace;
  std::string options;  // PYTORCH_CUDA_ALLOC_CONF of the model
  // Whether the model started from the trace's own segments, else warm.
  bool seeded = false;

  // PyTorch's: header figures and the in-trace segment allocations (sizes
  // known when the trace carries the events, else only their count).
  std::optional<uint64_t> torch_peak_reserved;
  std::optional<uint64_t> torch_start_reserved;
  // Segments PyTorch held at the end (header torch_segments_at_end, or the
  // count the reserved figure's method names).
  std::optional<uint64_t> torch_end_segments;
  uint64_t torch_segment_allocs = 0;
  uint64_t torch_segment_frees = 0;
  std::vector<SegmentEvent> torch_history;  // empty when only counted

  // The model's, over the measured part (the whole trace when seeded, the
  // second pass when warm).
  uint64_t model_start_reserved = 0;
  uint64_t model_start_segments = 0;
  uint64_t model_peak_reserved = 0;
  uint64_t model_segment_allocs = 0;
  uint64_t model_segment_frees = 0;
  uint64_t model_end_segments = 0;
  std::vector<SegmentEvent> model_history;

  // Events equal (kind, size, the op that caused it) from the first on.
  uint64_t matched = 0;
  // The first event where the two differ, with both states; empty when
  // they agree throughout (or only counts are known and they are equal).
  std::string first_divergence;

  // (model - PyTorch) / PyTorch; nullopt where PyTorch's figure is missing
  // or zero.
  std::optional<double> PeakError() const;
  std::optional<double> SegmentCountError() const;
};

// Runs the validation with `base`'s capacity and torch options.
absl::StatusOr<TorchValidation> ValidateTorch(const Trace& trace, const ReplaySettings& base);

// The trace run twice, as the warm start runs it (exposed for tests): the
// second pass's lines are the first's plus `*line_offset`.
absl::StatusOr<Trace> TwoPassTrace(const Trace& trace, uint32_t* line_offset);

std::string FormatValidationText(const std::vector<TorchValidation>& v);
nlohmann::ordered_json ValidationJson(const std::vector<TorchValidation>& v);
std::string FormatValidationJson(const std::vector<TorchValidation>& v);

}  // namespace streampool::replay

#endif  // STREAMPOOL_SRC_REPLAY_TORCH_VALIDATION_H_
