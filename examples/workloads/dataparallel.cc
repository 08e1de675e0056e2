// Data-parallel training whose host runs ahead of the device, with frees on
// two side streams: each step's gradient bucket is all-reduced and freed on
// a communication stream, and two of its activations are copied out
// (offloaded) and freed on a copy stream, each after an event from the
// compute stream. The compute stream waits for the communication stream only
// every --join_every steps (gradient accumulation, or an overlapped
// optimizer), and nothing synchronizes until the end: the host issues a step
// in --host_us of its own time while the step's kernels take about twice
// that, as a framework's host thread does once its queue is deep.
//
// This is where a pool that grows before it waits pays: the compute stream,
// which allocates everything, learns of the side streams' frees neither
// through its clock (it has not waited on them) nor by observation (the
// host is ahead, so they have not run yet), although waiting for them would
// often delay nothing, the side streams having finished long before the
// compute stream gets that far.
#include <string>
#include <vector>

#include "examples/workloads/cost_model.h"
#include "examples/workloads/workload.h"

namespace workloads {
namespace {

struct Options {
  int steps, activations, offloaded, join_every, ranks;
  int64_t min_act_bytes, max_act_bytes, bucket_bytes, weight_bytes;
  uint64_t host_ns, seed;
};

class DataParallel {
 public:
  explicit DataParallel(const Options& o) : o_(o) {
    CHECK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&comm_, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking));
    CHECK(cudaEventCreateWithFlags(&reduced_, cudaEventDisableTiming));
    CHECK(cudaMallocAsync(&weights_, o.weight_bytes, compute_));
    Kernel(compute_, cost::ElementwiseNs(0, o.weight_bytes),
           {{weights_, size_t(o.weight_bytes), 1}});
  }

  ~DataParallel() {
    CHECK(cudaFreeAsync(weights_, compute_));
    CHECK(cudaDeviceSynchronize());
    for (cudaEvent_t e : events_) CHECK(cudaEventDestroy(e));
    CHECK(cudaEventDestroy(reduced_));
    CHECK(cudaStreamDestroy(compute_));
    CHECK(cudaStreamDestroy(comm_));
    CHECK(cudaStreamDestroy(copy_));
  }

  void Step(int step, Rng& rng) {
    // The host's time per step, spread over its calls.
    const uint64_t host_slice = o_.host_ns / (2 * o_.activations + 4);
    struct Act {
      void* ptr;
      size_t bytes;
    };
    std::vector<Act> acts;
    for (int i = 0; i < o_.activations; ++i) {
      HostAdvance(host_slice);
      const size_t bytes = RoundMiB(rng.Uniform(o_.min_act_bytes, o_.max_act_bytes));
      void* p = nullptr;
      CHECK(cudaMallocAsync(&p, bytes, compute_));
      Kernel(compute_, ForwardNs(bytes), {{weights_, size_t(o_.weight_bytes), 0}, {p, bytes, 1}});
      if (i < o_.offloaded) {
        // Offloaded: the copy stream takes it out and frees it.
        cudaEvent_t produced = Event();
        CHECK(cudaEventRecord(produced, compute_));
        CHECK(cudaStreamWaitEvent(copy_, produced, 0));
        Kernel(copy_, cost::PcieNs(static_cast<double>(bytes)) / 4, {{p, bytes, 0}});
        CHECK(cudaFreeAsync(p, copy_));
      } else {
        acts.push_back({p, bytes});
      }
    }
    HostAdvance(host_slice);
    void* bucket = nullptr;
    CHECK(cudaMallocAsync(&bucket, o_.bucket_bytes, compute_));
    // The backward: each activation read once more and freed where it was
    // made; the gradients accumulate into the bucket.
    for (auto it = acts.rbegin(); it != acts.rend(); ++it) {
      HostAdvance(host_slice);
      Kernel(compute_, 2 * ForwardNs(it->bytes),
             {{it->ptr, it->bytes, 0}, {bucket, size_t(o_.bucket_bytes), 1}});
      CHECK(cudaFreeAsync(it->ptr, compute_));
    }
    // The bucket is complete: reduced and freed on the comm stream.
    HostAdvance(host_slice);
    cudaEvent_t ready = Event();
    CHECK(cudaEventRecord(ready, compute_));
    CHECK(cudaStreamWaitEvent(comm_, ready, 0));
    Kernel(comm_, cost::AllReduceNs(static_cast<double>(o_.bucket_bytes), o_.ranks),
           {{bucket, size_t(o_.bucket_bytes), 1}});
    CHECK(cudaFreeAsync(bucket, comm_));
    if ((step + 1) % o_.join_every == 0) {
      HostAdvance(host_slice);
      CHECK(cudaEventRecord(reduced_, comm_));
      CHECK(cudaStreamWaitEvent(compute_, reduced_, 0));
    }
  }

 private:
  // A block's forward at this model's arithmetic intensity: about 40 us for
  // a 12 MiB activation, the backward twice that.
  static uint64_t ForwardNs(size_t bytes) { return cost::kKernelFloorNs + bytes / 300; }
  static size_t RoundMiB(int64_t bytes) {
    return static_cast<size_t>((bytes + (1 << 20) - 1) >> 20) << 20;
  }

  // Events are made as needed and kept, as a framework's event pool does.
  cudaEvent_t Event() {
    if (next_event_ == events_.size()) {
      cudaEvent_t e = nullptr;
      CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      events_.push_back(e);
    }
    cudaEvent_t e = events_[next_event_];
    next_event_ = (next_event_ + 1) % kEventRing;
    return e;
  }
  static constexpr size_t kEventRing = 64;

  Options o_;
  cudaStream_t compute_ = nullptr, comm_ = nullptr, copy_ = nullptr;
  cudaEvent_t reduced_ = nullptr;
  std::vector<cudaEvent_t> events_;
  size_t next_event_ = 0;
  void* weights_ = nullptr;
};

}  // namespace
}  // namespace workloads

int main(int argc, char** argv) {
  using namespace workloads;
  Flags flags(argc, argv, "workload_dataparallel",
              "data-parallel steps with frees on a comm and a copy stream, the host ahead of "
              "the device");
  Options o;
  o.steps = flags.Int("steps", 40, "training steps");
  o.activations = flags.Int("activations", 8, "activations allocated per step");
  o.offloaded = flags.Int("offloaded", 2, "of them, copied out and freed on the copy stream", 0);
  o.min_act_bytes = flags.Int("min_act_mb", 6, "smallest activation in MiB") << 20;
  o.max_act_bytes = flags.Int("max_act_mb", 16, "largest activation in MiB") << 20;
  o.bucket_bytes = flags.Int("bucket_mb", 24, "gradient bucket in MiB") << 20;
  o.weight_bytes = flags.Int("weights_mb", 64, "parameters in MiB") << 20;
  o.join_every = flags.Int("join_every", 4, "steps between compute's waits on the comm stream");
  o.ranks = flags.Int("ranks", 8, "data-parallel ranks of the all-reduce");
  o.host_ns = flags.Int("host_us", 400, "host time per step in microseconds") * 1000;
  o.seed = flags.Int("seed", 1, "seed of the activation sizes", 0);
  flags.Done();
  if (o.offloaded > o.activations) o.offloaded = o.activations;
  if (o.max_act_bytes < o.min_act_bytes) o.max_act_bytes = o.min_act_bytes;

  Rng rng(o.seed);
  {
    DataParallel dp(o);
    for (int s = 0; s < o.steps; ++s) dp.Step(s, rng);
  }
  PrintSummary("workload_dataparallel",
               std::to_string(o.steps) + " steps, " + std::to_string(o.activations) +
                   " activations each (" + std::to_string(o.offloaded) +
                   " freed on the copy stream), the bucket freed on the comm stream, compute "
                   "joining it every " +
                   std::to_string(o.join_every) + " steps, 3 streams");
  return 0;
}
