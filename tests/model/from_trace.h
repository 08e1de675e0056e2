// A parsed trace (streampool trace v1: a recording, or a file written by
// hand) as a program of the reference model, so that a recording runs as a
// regression test as it is: Execute runs it on a runtime and on the model
// side by side.
//
// The ops the model's instructions share with a trace (program.h: free,
// use, record, wait, the synchronizes and queries, advance, trim) are taken
// as they are; an alloc and an attr map onto the model's own. The model
// declares its pools, streams and events up front, so a trace's `pool`,
// `stream` and `event` lines become declarations (a stream made again after
// its sdestroy, a create-stream); copies and host functions become kernels
// of their length (a copy's at the trace's copy bandwidth, as a replay
// times it). What the model does not have is an error that names the line:
// malloc, pool destruction, pool settings of ACL, IPC or a custom upstream,
// a stream made again on another device or of another kind, graphs (their
// ops and allocations made in a capture).
#ifndef STREAMPOOL_TESTS_MODEL_FROM_TRACE_H_
#define STREAMPOOL_TESTS_MODEL_FROM_TRACE_H_

#include "absl/status/statusor.h"
#include "src/replay/trace.h"
#include "tests/model/program.h"

namespace streampool::model {

absl::StatusOr<Program> ProgramFromTrace(const replay::Trace& trace);

}  // namespace streampool::model

#endif  // STREAMPOOL_TESTS_MODEL_FROM_TRACE_H_
