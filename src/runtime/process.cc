#include "src/runtime/process.h"

namespace streampool::internal {

Process& Process::Default() {
  static Process* const process = new Process;
  return *process;
}

}  // namespace streampool::internal
