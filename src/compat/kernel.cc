#include "src/compat/kernel.h"

#include <atomic>
#include <functional>
#include <memory>
#include <utility>

namespace streampool::internal::compat {

namespace {

// Owns the body's context; copies of the work share it, and the last one
// destroys it.
class BodyOwner {
 public:
  explicit BodyOwner(KernelBody body) : body_(body) {}
  ~BodyOwner() {
    if (body_.destroy != nullptr) body_.destroy(body_.ctx);
  }
  BodyOwner(const BodyOwner&) = delete;
  BodyOwner& operator=(const BodyOwner&) = delete;
  const KernelBody& body() const { return body_; }

 private:
  KernelBody body_;
};

bool Empty(const Dim3& d) { return d.x == 0 || d.y == 0 || d.z == 0; }

// Blocks in order of x, then y, then z, as CUDA numbers them; within a block
// the threads likewise.
void RunGrid(const KernelBody& body, const Dim3& grid, const Dim3& block) {
  KernelCoords c;
  c.grid = grid;
  c.block = block;
  for (c.block_idx.z = 0; c.block_idx.z < grid.z; ++c.block_idx.z) {
    for (c.block_idx.y = 0; c.block_idx.y < grid.y; ++c.block_idx.y) {
      for (c.block_idx.x = 0; c.block_idx.x < grid.x; ++c.block_idx.x) {
        for (c.thread_idx.z = 0; c.thread_idx.z < block.z; ++c.thread_idx.z) {
          for (c.thread_idx.y = 0; c.thread_idx.y < block.y; ++c.thread_idx.y) {
            for (c.thread_idx.x = 0; c.thread_idx.x < block.x; ++c.thread_idx.x) {
              body.run(body.ctx, c);
            }
          }
        }
      }
    }
  }
}

// An exception must not unwind into the executor; like a device fault in
// CUDA, it poisons the runtime until it is reset.
void RunGridGuarded(const KernelBody& body, const Dim3& grid, const Dim3& block,
                    std::atomic<Fault>& fault) {
  try {
    RunGrid(body, grid, block);
  } catch (...) {
    fault.store(Fault::kKernelFailed, std::memory_order_release);
  }
}

// What a kernel node's body holds: the kernel, its extents and where a throw
// is reported.
struct NodeJob {
  BodyOwner owner;
  Dim3 grid;
  Dim3 block;
  std::shared_ptr<std::atomic<Fault>> fault;

  static void Run(void* p) {
    auto* job = static_cast<NodeJob*>(p);
    RunGridGuarded(job->owner.body(), job->grid, job->block, *job->fault);
  }
  static void Destroy(void* p) { delete static_cast<NodeJob*>(p); }
};

}  // namespace

absl::Status LaunchEmulatedKernel(ProcessRuntime& runtime, StreamId stream, Dim3 grid, Dim3 block,
                                  absl::Span<const Access> accesses, KernelBody body) {
  std::shared_ptr<BodyOwner> owner;
  try {
    owner = std::make_shared<BodyOwner>(body);
  } catch (...) {
    // The body is ours from the call on, so it is destroyed here too.
    if (body.destroy != nullptr) body.destroy(body.ctx);
    throw;
  }
  if (body.run == nullptr) return absl::InvalidArgumentError("no kernel body");
  if (Empty(grid) || Empty(block)) return absl::InvalidArgumentError("an empty grid or block");
  std::shared_ptr<std::atomic<Fault>> fault = runtime.fault_cell();
  std::function<void()> work = [owner, fault, grid, block] {
    RunGridGuarded(owner->body(), grid, block, *fault);
  };
  return runtime.cpp().LaunchWork(stream, std::move(work), accesses, runtime.config().kernel_ns);
}

absl::StatusOr<NodeBody> KernelNodeBody(ProcessRuntime& runtime, Dim3 grid, Dim3 block,
                                        KernelBody body) {
  NodeJob* job = nullptr;
  try {
    job = new NodeJob{BodyOwner(body), grid, block, runtime.fault_cell()};
  } catch (...) {
    if (body.destroy != nullptr) body.destroy(body.ctx);
    throw;
  }
  if (body.run == nullptr || Empty(grid) || Empty(block)) {
    NodeJob::Destroy(job);
    return absl::InvalidArgumentError("no kernel body, or an empty grid or block");
  }
  return NodeBody{&NodeJob::Run, job, &NodeJob::Destroy};
}

std::vector<Access> AccessesFromC(const spAccess* accesses, size_t count) {
  std::vector<Access> out(count);
  for (size_t i = 0; i < count; ++i) {
    out[i] = Access{accesses[i].ptr, accesses[i].size, accesses[i].write != 0};
  }
  return out;
}

}  // namespace streampool::internal::compat
