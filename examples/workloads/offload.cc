// Activation offloading to pinned host memory, with prefetch for the
// backward (torch.autograd.graph.save_on_cpu, torchtune's and DeepSpeed's
// activation offloading): the forward's largest saved tensors (the MLP's
// pre- and post-activation by default) are copied to pinned host buffers on
// a device-to-host stream and their device copies freed, and the backward
// brings them back on a host-to-device stream a few blocks ahead of use.
//
//   compute   forward, backward, optimizer; records `produced` after each
//             block's forward, waits for `prefetched` before its backward;
//   d2h       waits for `produced`, copies the tensors out, records
//             `offloaded`;
//   h2d       waits for `offloaded`, allocates device buffers, copies the
//             tensors back in, records `prefetched`.
//
// Where the offloaded device copy is freed is a flag, because the two
// choices give the pool different problems: --free_on=compute (torchtune's
// choice) lets the compute stream run --slack blocks ahead, then waits for
// `offloaded` and frees on the compute stream, where its next allocations
// reuse the bytes in stream order; --free_on=copy frees on the d2h stream
// right after the copy, so the compute stream, which allocates, learns of
// the free only through an event, an observation or a synchronize.
//
// Copies are cudaMemcpyAsync (real bytes with the face's host backing) plus
// a kernel on the copy stream for the rest of the PCIe time (PcieCopyAsync).
#include <deque>
#include <string>
#include <vector>

#include "examples/workloads/cost_model.h"
#include "examples/workloads/transformer.h"
#include "examples/workloads/workload.h"

namespace workloads {
namespace {

struct Options {
  int layers, steps, min_width, keep_last, prefetch, slack;
  bool free_on_copy;
  BlockShape shape;
  uint64_t seed;
};

class Offload {
 public:
  explicit Offload(const Options& o) : o_(o), sh_(o.shape) {
    CHECK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&d2h_, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&h2d_, cudaStreamNonBlocking));
    blocks_.resize(o.layers);
    for (Block& b : blocks_) {
      CHECK(cudaEventCreateWithFlags(&b.produced, cudaEventDisableTiming));
      CHECK(cudaEventCreateWithFlags(&b.offloaded, cudaEventDisableTiming));
      CHECK(cudaEventCreateWithFlags(&b.prefetched, cudaEventDisableTiming));
      CHECK(cudaMallocAsync(&b.weights, sh_.ParamBytes(), compute_));
      Kernel(compute_, cost::ElementwiseNs(0, sh_.ParamBytes()),
             {{b.weights, sh_.ParamBytes(), 1}});
    }
  }

  ~Offload() {
    for (Block& b : blocks_) CHECK(cudaFreeAsync(b.weights, compute_));
    CHECK(cudaDeviceSynchronize());
    for (Block& b : blocks_) {
      for (void* h : b.host) {
        if (h != nullptr) CHECK(cudaFreeHost(h));
      }
      CHECK(cudaEventDestroy(b.produced));
      CHECK(cudaEventDestroy(b.offloaded));
      CHECK(cudaEventDestroy(b.prefetched));
    }
    CHECK(cudaStreamDestroy(compute_));
    CHECK(cudaStreamDestroy(d2h_));
    CHECK(cudaStreamDestroy(h2d_));
  }

  void Step(Rng& rng) {
    HostAdvance(rng.Uniform(20, 200) * 1000);
    const double t = static_cast<double>(sh_.tokens), d = static_cast<double>(sh_.hidden);
    const int n = o_.layers;

    Tensor x = NewTensor(sh_.Act(1), compute_);
    Kernel(compute_, cost::ElementwiseNs(t * 4, sh_.Act(1)), {{x.ptr, x.bytes, 1}});  // embedding
    for (int i = 0; i < n; ++i) {
      if (!o_.free_on_copy) FreeStash(/*keep=*/o_.slack);
      Block& b = blocks_[i];
      ForwardResult f = BlockForward(compute_, sh_, FlatParams(b.weights, sh_), x);
      b.saved = f.saved;
      x = f.out;
      if (i < n - o_.keep_last) OffloadBlock(i);
    }
    if (!o_.free_on_copy) FreeStash(/*keep=*/0);
    Tensor dout = NewTensor(sh_.Act(1), compute_);
    Kernel(compute_, cost::MatmulNs(t, d, d), {{x.ptr, x.bytes, 0}, {dout.ptr, dout.bytes, 1}});
    FreeTensor(x, compute_);

    for (int i = n - 1; i >= 0; --i) {
      // Keep --prefetch blocks of copies queued ahead of the block in use.
      for (int j = i; j >= 0 && j >= i - o_.prefetch; --j) Prefetch(j);
      Block& b = blocks_[i];
      if (b.any_offloaded) CHECK(cudaStreamWaitEvent(compute_, b.prefetched, 0));
      CHECK(cudaMallocAsync(&b.grads, sh_.ParamBytes(), compute_));
      dout = BlockBackward(compute_, sh_, FlatParams(b.weights, sh_), FlatParams(b.grads, sh_),
                           b.saved, dout);
      b.any_offloaded = false;
      b.prefetch_issued = false;
    }
    Kernel(compute_, cost::ElementwiseNs(dout.bytes, 0), {{dout.ptr, dout.bytes, 0}});
    FreeTensor(dout, compute_);

    // Plain SGD, then the gradients are dropped (set_to_none).
    for (Block& b : blocks_) {
      Kernel(compute_, cost::ElementwiseNs(2 * sh_.ParamBytes(), sh_.ParamBytes()),
             {{b.grads, sh_.ParamBytes(), 0}, {b.weights, sh_.ParamBytes(), 1}});
      CHECK(cudaFreeAsync(b.grads, compute_));
      b.grads = nullptr;
    }
    CHECK(cudaStreamSynchronize(compute_));  // loss.item()
  }

  size_t offloaded_bytes() const { return offloaded_bytes_; }

 private:
  struct Block {
    void* weights = nullptr;
    void* grads = nullptr;
    Saved saved{};
    void* host[kSavedCount] = {};  // pinned, allocated at first use and kept
    bool offloaded_tensor[kSavedCount] = {};
    bool any_offloaded = false;
    bool prefetch_issued = false;
    cudaEvent_t produced = nullptr, offloaded = nullptr, prefetched = nullptr;
  };

  bool Offloadable(int k) const { return k != kX && kSavedWidth[k] >= o_.min_width; }

  void OffloadBlock(int i) {
    Block& b = blocks_[i];
    CHECK(cudaEventRecord(b.produced, compute_));
    CHECK(cudaStreamWaitEvent(d2h_, b.produced, 0));
    std::vector<Tensor> stashed;
    for (int k = 0; k < kSavedCount; ++k) {
      b.offloaded_tensor[k] = Offloadable(k);
      if (!b.offloaded_tensor[k]) continue;
      Tensor& a = b.saved[k];
      if (b.host[k] == nullptr) CHECK(cudaMallocHost(&b.host[k], a.bytes));
      PcieCopyAsync(b.host[k], a.ptr, a.bytes, cudaMemcpyDeviceToHost, d2h_);
      offloaded_bytes_ += a.bytes;
      // The compute stream's writes are ordered before the copy by
      // `produced`, the copy before this free by stream order.
      if (o_.free_on_copy) {
        CHECK(cudaFreeAsync(a.ptr, d2h_));
      } else {
        stashed.push_back(a);
      }
      a.ptr = nullptr;
      b.any_offloaded = true;
    }
    CHECK(cudaEventRecord(b.offloaded, d2h_));
    if (!o_.free_on_copy) stash_.push_back({b.offloaded, std::move(stashed)});
  }

  // Frees the device copies of all but the `keep` most recently offloaded
  // blocks on the compute stream, once their copies are done.
  void FreeStash(size_t keep) {
    while (stash_.size() > keep) {
      CHECK(cudaStreamWaitEvent(compute_, stash_.front().offloaded, 0));
      for (Tensor& a : stash_.front().tensors) FreeTensor(a, compute_);
      stash_.pop_front();
    }
  }

  void Prefetch(int i) {
    Block& b = blocks_[i];
    if (!b.any_offloaded || b.prefetch_issued) return;
    b.prefetch_issued = true;
    // The host buffers are complete once the d2h stream passed `offloaded`.
    CHECK(cudaStreamWaitEvent(h2d_, b.offloaded, 0));
    for (int k = 0; k < kSavedCount; ++k) {
      if (!b.offloaded_tensor[k]) continue;
      Tensor& a = b.saved[k];
      CHECK(cudaMallocAsync(&a.ptr, a.bytes, h2d_));
      PcieCopyAsync(a.ptr, b.host[k], a.bytes, cudaMemcpyHostToDevice, h2d_);
    }
    CHECK(cudaEventRecord(b.prefetched, h2d_));
  }

  struct Stashed {
    cudaEvent_t offloaded;
    std::vector<Tensor> tensors;
  };

  Options o_;
  BlockShape sh_;
  cudaStream_t compute_ = nullptr, d2h_ = nullptr, h2d_ = nullptr;
  std::vector<Block> blocks_;
  std::deque<Stashed> stash_;
  size_t offloaded_bytes_ = 0;
};

}  // namespace
}  // namespace workloads

int main(int argc, char** argv) {
  using namespace workloads;
  Flags flags(argc, argv, "workload_offload",
              "activation offload to pinned host memory and prefetch for the backward");
  Options o;
  o.layers = flags.Int("layers", 12, "transformer blocks");
  o.shape.hidden = flags.Int("hidden", 512, "model width (a multiple of 64)", 64);
  o.shape.seq = flags.Int("seq", 256, "sequence length");
  const int64_t batch = flags.Int("batch", 1, "sequences per step");
  o.steps = flags.Int("steps", 3, "training steps");
  o.min_width = flags.Int("min_width", 4, "offload saved tensors at least this many d wide");
  o.keep_last = flags.Int("keep_last", 1, "last blocks kept on the device", 0);
  o.prefetch = flags.Int("prefetch", 2, "blocks prefetched ahead of the one in backward", 0);
  o.slack = flags.Int("slack", 1, "blocks compute runs ahead of the copies (free_on=compute)", 0);
  o.free_on_copy = flags.Choice("free_on", "compute", {"compute", "copy"},
                                "stream freeing offloaded copies") == "copy";
  o.seed = flags.Int("seed", 1, "seed of the host-time jitter", 0);
  flags.Done();
  o.shape.tokens = batch * o.shape.seq;

  Rng rng(o.seed);
  size_t offloaded = 0;
  {
    Offload offload(o);
    for (int s = 0; s < o.steps; ++s) offload.Step(rng);
    offloaded = offload.offloaded_bytes();
  }
  PrintSummary("workload_offload",
               std::to_string(o.steps) + " steps, " + std::to_string(o.layers) + " blocks (d " +
                   std::to_string(o.shape.hidden) + ", " + std::to_string(o.shape.tokens) +
                   " tokens), " + std::to_string(offloaded >> 20) + " MiB offloaded, prefetch " +
                   std::to_string(o.prefetch) + ", free on " +
                   (o.free_on_copy ? "copy" : "compute") + " stream, 3 streams");
  return 0;
}
