// Data-parallel training with gradient buckets all-reduced on a side stream
// while the backward goes on (PyTorch DDP's reducer; DeepSpeed ZeRO-1/2's
// reduce buckets have the same shape). Parameters are assigned to buckets in
// reverse order, the first bucket small (1 MiB) so that communication starts
// early, the rest about --bucket_mb each. As the backward produces a
// parameter's gradient, the compute stream copies it into its bucket; when a
// bucket is complete, the compute stream records an event, the comm stream
// waits for it and all-reduces the bucket in place.
//
// Buckets here are allocated per step with cudaMallocAsync on the compute
// stream, as a comm hook's compressed buffers or a ZeRO reducer's flat
// buffers are, so every step has blocks that two streams use and whose free
// must come after both. PyTorch's caching allocator solves that with
// tensor.record_stream(comm_stream); with stream-ordered allocation the
// program does it by hand, one of two ways (--free_on):
//
//   compute   the comm stream records `reduced` after the all-reduce; the
//             compute stream waits for it, copies the averaged gradients
//             out of the bucket and frees the bucket on the compute stream;
//   comm      the comm stream, already ordered after the compute stream's
//             writes by `ready`, copies the gradients out itself and frees
//             the bucket on the comm stream; the compute stream waits for
//             the comm stream once before the optimizer.
#include <algorithm>
#include <string>
#include <vector>

#include "examples/workloads/cost_model.h"
#include "examples/workloads/transformer.h"
#include "examples/workloads/workload.h"

namespace workloads {
namespace {

struct Options {
  int layers, steps, ranks;
  int64_t bucket_bytes, first_bucket_bytes;
  bool free_on_comm;
  BlockShape shape;
  uint64_t seed;
};

// One parameter tensor of a block: (block, which of qkv/out/up/down).
struct ParamRef {
  int block;
  int which;
};

class Ddp {
 public:
  explicit Ddp(const Options& o) : o_(o), sh_(o.shape) {
    CHECK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&comm_, cudaStreamNonBlocking));
    CHECK(cudaEventCreateWithFlags(&comm_done_, cudaEventDisableTiming));
    blocks_.resize(o.layers);
    for (Block& b : blocks_) {
      CHECK(cudaMallocAsync(&b.weights, sh_.ParamBytes(), compute_));
      CHECK(cudaMallocAsync(&b.momentum, sh_.ParamBytes(), compute_));
      Kernel(compute_, cost::ElementwiseNs(0, 2 * sh_.ParamBytes()),
             {{b.weights, sh_.ParamBytes(), 1}, {b.momentum, sh_.ParamBytes(), 1}});
    }
    // DDP's bucket assignment: parameters in reverse order of registration,
    // a bucket closing once it reaches its cap.
    Bucket current;
    for (int i = o.layers - 1; i >= 0; --i) {
      for (int which = 3; which >= 0; --which) {
        current.params.push_back({i, which});
        current.offsets.push_back(current.bytes);
        current.bytes += TensorBytes(which);
        const int64_t cap = buckets_.empty() ? o.first_bucket_bytes : o.bucket_bytes;
        if (static_cast<int64_t>(current.bytes) >= cap) {
          buckets_.push_back(std::move(current));
          current = Bucket{};
        }
      }
    }
    if (!current.params.empty()) buckets_.push_back(std::move(current));
    for (Bucket& k : buckets_) {
      CHECK(cudaEventCreateWithFlags(&k.ready, cudaEventDisableTiming));
      CHECK(cudaEventCreateWithFlags(&k.reduced, cudaEventDisableTiming));
    }
  }

  ~Ddp() {
    for (Block& b : blocks_) {
      CHECK(cudaFreeAsync(b.weights, compute_));
      CHECK(cudaFreeAsync(b.momentum, compute_));
    }
    CHECK(cudaDeviceSynchronize());
    for (Bucket& k : buckets_) {
      CHECK(cudaEventDestroy(k.ready));
      CHECK(cudaEventDestroy(k.reduced));
    }
    CHECK(cudaEventDestroy(comm_done_));
    CHECK(cudaStreamDestroy(compute_));
    CHECK(cudaStreamDestroy(comm_));
  }

  void Step(Rng& rng) {
    HostAdvance(rng.Uniform(20, 200) * 1000);
    const double t = static_cast<double>(sh_.tokens), d = static_cast<double>(sh_.hidden);
    Tensor x = NewTensor(sh_.Act(1), compute_);
    Kernel(compute_, cost::ElementwiseNs(t * 4, sh_.Act(1)), {{x.ptr, x.bytes, 1}});  // embedding
    for (Block& b : blocks_) {
      ForwardResult f = BlockForward(compute_, sh_, FlatParams(b.weights, sh_), x);
      b.saved = f.saved;
      x = f.out;
    }
    Tensor dout = NewTensor(sh_.Act(1), compute_);
    Kernel(compute_, cost::MatmulNs(t, d, d), {{x.ptr, x.bytes, 0}, {dout.ptr, dout.bytes, 1}});
    FreeTensor(x, compute_);

    size_t next_bucket = 0;  // buckets fill in order as the backward runs
    for (int i = o_.layers - 1; i >= 0; --i) {
      Block& b = blocks_[i];
      CHECK(cudaMallocAsync(&b.grads, sh_.ParamBytes(), compute_));
      dout = BlockBackward(compute_, sh_, FlatParams(b.weights, sh_), FlatParams(b.grads, sh_),
                           b.saved, dout);
      // The autograd hooks of the block's four parameters, in the order
      // their gradients become ready.
      for (int which = 3; which >= 0; --which) {
        Bucket& k = buckets_[next_bucket];
        if (k.ptr == nullptr) CHECK(cudaMallocAsync(&k.ptr, k.bytes, compute_));
        const size_t slot = IndexIn(k, {i, which});
        Kernel(compute_, cost::ElementwiseNs(TensorBytes(which), TensorBytes(which)),
               {{GradSlice(i, which), TensorBytes(which), 0},
                {static_cast<char*>(k.ptr) + k.offsets[slot], TensorBytes(which), 1}});
        if (++k.filled == k.params.size()) {
          Reduce(k);
          ++next_bucket;
        }
      }
    }
    Kernel(compute_, cost::ElementwiseNs(dout.bytes, 0), {{dout.ptr, dout.bytes, 0}});
    FreeTensor(dout, compute_);

    // finalize_backward: the compute stream needs every averaged gradient
    // before the optimizer.
    if (o_.free_on_comm) {
      CHECK(cudaEventRecord(comm_done_, comm_));
      CHECK(cudaStreamWaitEvent(compute_, comm_done_, 0));
    } else {
      for (Bucket& k : buckets_) {
        CHECK(cudaStreamWaitEvent(compute_, k.reduced, 0));
        CopyOutAndFree(k, compute_);
      }
    }

    // SGD with momentum; gradients dropped afterwards (set_to_none).
    for (Block& b : blocks_) {
      Kernel(compute_, cost::ElementwiseNs(3 * sh_.ParamBytes(), 2 * sh_.ParamBytes()),
             {{b.grads, sh_.ParamBytes(), 0},
              {b.momentum, sh_.ParamBytes(), 1},
              {b.weights, sh_.ParamBytes(), 1}});
      CHECK(cudaFreeAsync(b.grads, compute_));
      b.grads = nullptr;
    }
    CHECK(cudaStreamSynchronize(compute_));  // loss.item()
  }

  size_t bucket_count() const { return buckets_.size(); }

 private:
  struct Block {
    void* weights = nullptr;
    void* momentum = nullptr;
    void* grads = nullptr;
    Saved saved{};
  };
  struct Bucket {
    std::vector<ParamRef> params;
    std::vector<size_t> offsets;
    size_t bytes = 0;
    void* ptr = nullptr;  // this step's buffer
    size_t filled = 0;
    cudaEvent_t ready = nullptr, reduced = nullptr;
  };

  size_t TensorBytes(int which) const {
    const size_t sizes[4] = {sh_.QkvBytes(), sh_.OutBytes(), sh_.UpBytes(), sh_.DownBytes()};
    return sizes[which];
  }

  void* GradSlice(int block, int which) const {
    const BlockParams g = FlatParams(blocks_[block].grads, sh_);
    void* slices[4] = {g.qkv, g.out, g.up, g.down};
    return slices[which];
  }

  static size_t IndexIn(const Bucket& k, ParamRef p) {
    for (size_t j = 0; j < k.params.size(); ++j) {
      if (k.params[j].block == p.block && k.params[j].which == p.which) return j;
    }
    Fail(__FILE__, __LINE__, "IndexIn", "parameter not in the bucket being filled");
  }

  // The bucket is complete on the compute stream: all-reduce it on the comm
  // stream.
  void Reduce(Bucket& k) {
    CHECK(cudaEventRecord(k.ready, compute_));
    CHECK(cudaStreamWaitEvent(comm_, k.ready, 0));
    Kernel(comm_, cost::AllReduceNs(k.bytes, o_.ranks), {{k.ptr, k.bytes, 1}});
    if (o_.free_on_comm) {
      CopyOutAndFree(k, comm_);
    } else {
      CHECK(cudaEventRecord(k.reduced, comm_));
    }
  }

  // Copies the averaged gradients back into the parameters' gradients and
  // frees the bucket, on a stream already ordered after both streams' use.
  void CopyOutAndFree(Bucket& k, cudaStream_t s) {
    std::vector<spAccess> a = {{k.ptr, k.bytes, 0}};
    for (const ParamRef& p : k.params) {
      a.push_back({GradSlice(p.block, p.which), TensorBytes(p.which), 1});
    }
    Kernel(s, cost::ElementwiseNs(k.bytes, k.bytes), a);
    CHECK(cudaFreeAsync(k.ptr, s));
    k.ptr = nullptr;
    k.filled = 0;
  }

  Options o_;
  BlockShape sh_;
  cudaStream_t compute_ = nullptr, comm_ = nullptr;
  cudaEvent_t comm_done_ = nullptr;
  std::vector<Block> blocks_;
  std::vector<Bucket> buckets_;
};

}  // namespace
}  // namespace workloads

int main(int argc, char** argv) {
  using namespace workloads;
  Flags flags(argc, argv, "workload_collectives",
              "DDP-style gradient buckets all-reduced on a comm stream, each freed after both "
              "streams' use");
  Options o;
  o.layers = flags.Int("layers", 8, "transformer blocks");
  o.shape.hidden = flags.Int("hidden", 768, "model width (a multiple of 64)", 64);
  o.shape.seq = flags.Int("seq", 512, "sequence length");
  const int64_t batch = flags.Int("batch", 2, "sequences per step");
  o.ranks = flags.Int("ranks", 8, "data-parallel ranks of the all-reduce");
  o.bucket_bytes = flags.Int("bucket_mb", 25, "bucket cap in MiB") << 20;
  o.first_bucket_bytes = flags.Int("first_bucket_mb", 1, "cap of the first bucket in MiB") << 20;
  o.steps = flags.Int("steps", 8, "training steps");
  o.free_on_comm = flags.Choice("free_on", "compute", {"compute", "comm"},
                                "stream that frees each bucket") == "comm";
  o.seed = flags.Int("seed", 1, "seed of the host-time jitter", 0);
  flags.Done();
  o.shape.tokens = batch * o.shape.seq;

  Rng rng(o.seed);
  size_t buckets = 0;
  {
    Ddp ddp(o);
    buckets = ddp.bucket_count();
    for (int s = 0; s < o.steps; ++s) ddp.Step(rng);
  }
  PrintSummary("workload_collectives",
               std::to_string(o.steps) + " steps, " + std::to_string(o.layers) + " blocks (d " +
                   std::to_string(o.shape.hidden) + ", " + std::to_string(o.shape.tokens) +
                   " tokens), " + std::to_string(buckets) + " buckets all-reduced over " +
                   std::to_string(o.ranks) + " ranks, freed on the " +
                   (o.free_on_comm ? "comm" : "compute") + " stream, 2 streams");
  return 0;
}
