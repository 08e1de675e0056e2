// What one process has once, whatever the number of runtimes: the registry
// (live runtimes by id, and which runtime owns which address) and the DVPP
// window (CANN gives a process one 16 GiB range for media memory).
//
// Runtimes get their Process at creation and reach these through it, never
// through a global; RuntimeImpl's handle lookups are given the process to look
// in. Handles carry a runtime id but not a process, so only the public faces
// (the C API, streampool::Runtime) name Default(), the process's own, at their
// boundary; a test may make a Process of its own to run runtimes in isolation
// from the rest.
#ifndef STREAMPOOL_SRC_RUNTIME_PROCESS_H_
#define STREAMPOOL_SRC_RUNTIME_PROCESS_H_

#include "src/memory/upstreams.h"
#include "src/runtime/registry.h"

namespace streampool::internal {

class Process {
 public:
  // Never destroyed: runtimes and their memory may outlive static destructors
  // (a runtime destroyed from an atexit handler still unregisters here).
  static Process& Default() {
    static Process* const process = new Process;
    return *process;
  }

  Process() = default;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  Registry& registry() { return registry_; }
  DvppWindow& dvpp_window() { return dvpp_window_; }

 private:
  Registry registry_;
  DvppWindow dvpp_window_;
};

}  // namespace streampool::internal

#endif  // STREAMPOOL_SRC_RUNTIME_PROCESS_H_
