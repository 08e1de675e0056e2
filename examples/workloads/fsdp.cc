// Fully sharded data-parallel training (PyTorch FSDP with FULL_SHARD), seen
// from one rank: each block's parameters live sharded, 1/ranks per rank, and
// are all-gathered into a freshly allocated full buffer just before use and
// freed right after (reshard after forward), in the forward and again in the
// backward. Three streams, as FSDP uses them:
//
//   all-gather stream   allocates the full buffer, gathers into it, records
//                       an event the compute stream waits on;
//   compute stream      forward over the blocks (activations kept), backward
//                       in reverse (full gradient buffer per block), frees the
//                       gathered parameters after their last reader;
//   reduce-scatter      waits for a block's gradient, reduce-scatters it into
//                       a new gradient shard and frees the full gradient.
//
// The rate limiter FSDP calls limit_all_gathers keeps at most --limit
// gathered blocks in flight: before a new all-gather the host synchronizes on
// the event recorded after the oldest outstanding free. The compute stream's
// frees therefore become reusable by the all-gather stream's allocations only
// through that synchronize or by being observed complete: the pool's reuse
// rules decide how much memory the gathers take.
#include <deque>
#include <string>
#include <vector>

#include "examples/workloads/cost_model.h"
#include "examples/workloads/transformer.h"
#include "examples/workloads/workload.h"

namespace workloads {
namespace {

struct Options {
  int layers, ranks, steps, limit;
  BlockShape shape;
  uint64_t seed;
};

class Fsdp {
 public:
  explicit Fsdp(const Options& o) : o_(o), sh_(o.shape) {
    // FSDP pads the flat parameter so that it splits evenly across ranks.
    shard_bytes_ = (sh_.ParamBytes() + o.ranks - 1) / o.ranks;
    shard_bytes_ = (shard_bytes_ + 255) / 256 * 256;
    full_bytes_ = shard_bytes_ * o.ranks;
    CHECK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&gather_, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&reduce_, cudaStreamNonBlocking));
    CHECK(cudaEventCreateWithFlags(&compute_done_, cudaEventDisableTiming));
    CHECK(cudaEventCreateWithFlags(&reduce_done_, cudaEventDisableTiming));
    layers_.resize(o.layers);
    for (Layer& l : layers_) {
      CHECK(cudaEventCreateWithFlags(&l.gathered, cudaEventDisableTiming));
      CHECK(cudaEventCreateWithFlags(&l.grad_ready, cudaEventDisableTiming));
      // The sharded bf16 parameter plus fp32 master weights and Adam moments.
      CHECK(cudaMallocAsync(&l.shard, shard_bytes_, compute_));
      CHECK(cudaMallocAsync(&l.master, 2 * shard_bytes_, compute_));
      CHECK(cudaMallocAsync(&l.exp_avg, 2 * shard_bytes_, compute_));
      CHECK(cudaMallocAsync(&l.exp_avg_sq, 2 * shard_bytes_, compute_));
      Kernel(compute_, cost::ElementwiseNs(0, 7 * shard_bytes_),
             {{l.shard, shard_bytes_, 1},
              {l.master, 2 * shard_bytes_, 1},
              {l.exp_avg, 2 * shard_bytes_, 1},
              {l.exp_avg_sq, 2 * shard_bytes_, 1}});
    }
    // Enough free events for every reshard the limiter has not waited for.
    free_events_.resize(o.limit + 4);
    for (cudaEvent_t& e : free_events_) CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }

  ~Fsdp() {
    for (Layer& l : layers_) {
      CHECK(cudaFreeAsync(l.shard, compute_));
      CHECK(cudaFreeAsync(l.master, compute_));
      CHECK(cudaFreeAsync(l.exp_avg, compute_));
      CHECK(cudaFreeAsync(l.exp_avg_sq, compute_));
    }
    CHECK(cudaDeviceSynchronize());
    for (Layer& l : layers_) {
      CHECK(cudaEventDestroy(l.gathered));
      CHECK(cudaEventDestroy(l.grad_ready));
    }
    for (cudaEvent_t e : free_events_) CHECK(cudaEventDestroy(e));
    CHECK(cudaEventDestroy(compute_done_));
    CHECK(cudaEventDestroy(reduce_done_));
    CHECK(cudaStreamDestroy(compute_));
    CHECK(cudaStreamDestroy(gather_));
    CHECK(cudaStreamDestroy(reduce_));
  }

  void Step(Rng& rng) {
    // The host's own share of a step (data, Python, logging) before the
    // first launch; its jitter shifts every later decision in time.
    HostAdvance(rng.Uniform(20, 200) * 1000);
    const double t = static_cast<double>(sh_.tokens), d = static_cast<double>(sh_.hidden);

    // Forward. The all-gathers read the shards the last optimizer step
    // wrote on the compute stream: FSDP makes the all-gather stream wait for
    // the compute stream once at the root's pre-forward.
    CHECK(cudaEventRecord(compute_done_, compute_));
    CHECK(cudaStreamWaitEvent(gather_, compute_done_, 0));
    Tensor x = NewTensor(sh_.Act(1), compute_);
    Kernel(compute_, cost::ElementwiseNs(t * 4, sh_.Act(1)), {{x.ptr, x.bytes, 1}});  // embedding
    for (int i = 0; i < o_.layers; ++i) {
      Unshard(i);
      if (i + 1 < o_.layers) Unshard(i + 1);  // forward prefetch
      Layer& l = layers_[i];
      CHECK(cudaStreamWaitEvent(compute_, l.gathered, 0));
      ForwardResult f = BlockForward(compute_, sh_, FlatParams(l.full, sh_), x);
      l.saved = f.saved;
      x = f.out;
      Reshard(i);
    }
    // The loss: logits are left out, the gradient of the last output is the
    // backward's seed.
    Tensor dout = NewTensor(sh_.Act(1), compute_);
    Kernel(compute_, cost::MatmulNs(t, d, d), {{x.ptr, x.bytes, 0}, {dout.ptr, dout.bytes, 1}});
    FreeTensor(x, compute_);

    // Backward, in reverse, gathering each block again.
    CHECK(cudaEventRecord(compute_done_, compute_));
    CHECK(cudaStreamWaitEvent(gather_, compute_done_, 0));
    for (int i = o_.layers - 1; i >= 0; --i) {
      Unshard(i);
      if (i > 0) Unshard(i - 1);  // BACKWARD_PRE prefetch
      Layer& l = layers_[i];
      CHECK(cudaStreamWaitEvent(compute_, l.gathered, 0));
      void* grad_full = nullptr;
      CHECK(cudaMallocAsync(&grad_full, full_bytes_, compute_));
      dout = BlockBackward(compute_, sh_, FlatParams(l.full, sh_), FlatParams(grad_full, sh_),
                           l.saved, dout);
      Reshard(i);
      // The post-backward hook: the reduce-scatter stream takes the full
      // gradient once the compute stream has written it, and frees it after
      // its own read, so the free is ordered after both streams' use.
      CHECK(cudaEventRecord(l.grad_ready, compute_));
      CHECK(cudaStreamWaitEvent(reduce_, l.grad_ready, 0));
      CHECK(cudaMallocAsync(&l.grad_shard, shard_bytes_, reduce_));
      Kernel(reduce_, cost::ReduceScatterNs(full_bytes_, o_.ranks),
             {{grad_full, full_bytes_, 0}, {l.grad_shard, shard_bytes_, 1}});
      CHECK(cudaFreeAsync(grad_full, reduce_));
    }
    Kernel(compute_, cost::ElementwiseNs(dout.bytes, 0), {{dout.ptr, dout.bytes, 0}});
    FreeTensor(dout, compute_);

    // FSDP's final backward callback makes the compute stream wait for the
    // reduce-scatters before the optimizer reads the gradient shards.
    CHECK(cudaEventRecord(reduce_done_, reduce_));
    CHECK(cudaStreamWaitEvent(compute_, reduce_done_, 0));
    for (Layer& l : layers_) {
      // Adam over the shard: a temporary for the update, then the gradient
      // shard is dropped (zero_grad(set_to_none=True)).
      void* update = nullptr;
      CHECK(cudaMallocAsync(&update, 2 * shard_bytes_, compute_));
      Kernel(compute_, cost::ElementwiseNs(8 * shard_bytes_, 9 * shard_bytes_),
             {{l.grad_shard, shard_bytes_, 0},
              {l.master, 2 * shard_bytes_, 1},
              {l.exp_avg, 2 * shard_bytes_, 1},
              {l.exp_avg_sq, 2 * shard_bytes_, 1},
              {update, 2 * shard_bytes_, 1},
              {l.shard, shard_bytes_, 1}});
      CHECK(cudaFreeAsync(update, compute_));
      CHECK(cudaFreeAsync(l.grad_shard, compute_));
      l.grad_shard = nullptr;
    }
    // loss.item(): the host reads the loss, which waits for the step.
    CHECK(cudaStreamSynchronize(compute_));
  }

  size_t full_bytes() const { return full_bytes_; }

 private:
  struct Layer {
    void* shard = nullptr;
    void* master = nullptr;
    void* exp_avg = nullptr;
    void* exp_avg_sq = nullptr;
    void* full = nullptr;  // the gathered parameters, while they exist
    void* grad_shard = nullptr;
    cudaEvent_t gathered = nullptr;
    cudaEvent_t grad_ready = nullptr;
    Saved saved{};
  };

  void Unshard(int i) {
    Layer& l = layers_[i];
    if (l.full != nullptr) return;
    if (static_cast<int>(pending_frees_.size()) >= o_.limit) {
      CHECK(cudaEventSynchronize(pending_frees_.front()));
      pending_frees_.pop_front();
    }
    CHECK(cudaMallocAsync(&l.full, full_bytes_, gather_));
    Kernel(gather_, cost::AllGatherNs(full_bytes_, o_.ranks),
           {{l.shard, shard_bytes_, 0}, {l.full, full_bytes_, 1}});
    CHECK(cudaEventRecord(l.gathered, gather_));
  }

  // Frees the gathered parameters on the compute stream, after their last
  // reader there; the all-gather that wrote them is ordered before through
  // the `gathered` event the compute stream waited on.
  void Reshard(int i) {
    Layer& l = layers_[i];
    CHECK(cudaFreeAsync(l.full, compute_));
    l.full = nullptr;
    if (pending_frees_.size() >= free_events_.size()) {
      Fail(__FILE__, __LINE__, "Reshard", "more outstanding frees than free events");
    }
    cudaEvent_t e = free_events_[next_free_event_++ % free_events_.size()];
    CHECK(cudaEventRecord(e, compute_));
    pending_frees_.push_back(e);
  }

  Options o_;
  BlockShape sh_;
  size_t shard_bytes_ = 0;
  size_t full_bytes_ = 0;
  cudaStream_t compute_ = nullptr, gather_ = nullptr, reduce_ = nullptr;
  cudaEvent_t compute_done_ = nullptr, reduce_done_ = nullptr;
  std::vector<Layer> layers_;
  std::vector<cudaEvent_t> free_events_;
  size_t next_free_event_ = 0;
  std::deque<cudaEvent_t> pending_frees_;
};

}  // namespace
}  // namespace workloads

int main(int argc, char** argv) {
  using namespace workloads;
  Flags flags(argc, argv, "workload_fsdp",
              "FSDP-style training: per-block all-gather and reduce-scatter on side streams");
  Options o;
  o.layers = flags.Int("layers", 12, "transformer blocks");
  o.shape.hidden = flags.Int("hidden", 768, "model width (a multiple of 64)", 64);
  o.shape.seq = flags.Int("seq", 512, "sequence length");
  const int64_t batch = flags.Int("batch", 2, "sequences per step");
  o.ranks = flags.Int("ranks", 8, "data-parallel ranks the parameters are sharded over");
  o.limit = flags.Int("limit", 2, "gathered blocks in flight (limit_all_gathers)");
  o.steps = flags.Int("steps", 6, "training steps");
  o.seed = flags.Int("seed", 1, "seed of the host-time jitter", 0);
  flags.Done();
  o.shape.tokens = batch * o.shape.seq;

  Rng rng(o.seed);
  size_t full_bytes = 0;
  {
    Fsdp fsdp(o);
    full_bytes = fsdp.full_bytes();
    for (int s = 0; s < o.steps; ++s) fsdp.Step(rng);
  }
  PrintSummary("workload_fsdp",
               std::to_string(o.steps) + " steps, " + std::to_string(o.layers) + " blocks (d " +
                   std::to_string(o.shape.hidden) + ", " + std::to_string(o.shape.tokens) +
                   " tokens, " + std::to_string(o.ranks) + " ranks, " +
                   std::to_string(full_bytes >> 20) + " MiB gathered per block, limit " +
                   std::to_string(o.limit) + "), 3 streams");
  return 0;
}
