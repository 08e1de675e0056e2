// Pipeline-parallel training with the 1F1B schedule (PipeDream-Flush, as
// Megatron-LM and torch.distributed.pipelining's Schedule1F1B run it): S
// stages of consecutive transformer blocks, each stage on its own stream of
// one device standing in for S devices, and M micro-batches per step. Stage s
// runs S-1-s warm-up forwards, then alternates one forward and one backward,
// then drains the remaining backwards, so it holds at most S-s micro-batches
// of activations.
//
// Between stages an activation (forward) or its gradient (backward) moves as
// a send: the producing stage records an event after writing it; the
// receiving stage waits for the event, allocates a receive buffer, copies
// (cudaMemcpyAsync device to device, plus a kernel for the rest of the
// interconnect time) and frees the sender's buffer on its own stream, which
// is ordered after the sender's writes by the event and after the copy by
// stream order. Every hand-off is therefore a cross-stream free.
//
// The host issues each stage's schedule in round-robin order, one op per
// stage per round, and only once the op's input has been issued, so every
// wait follows the record it waits for.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "examples/workloads/cost_model.h"
#include "examples/workloads/transformer.h"
#include "examples/workloads/workload.h"

namespace workloads {
namespace {

struct Options {
  int stages, blocks_per_stage, micro_batches, steps;
  BlockShape shape;
  uint64_t seed;
};

class Pipeline {
 public:
  explicit Pipeline(const Options& o) : o_(o), sh_(o.shape) {
    stages_.resize(o.stages);
    for (Stage& st : stages_) {
      CHECK(cudaStreamCreateWithFlags(&st.stream, cudaStreamNonBlocking));
      st.blocks.resize(o.blocks_per_stage);
      for (Block& b : st.blocks) {
        CHECK(cudaMallocAsync(&b.weights, sh_.ParamBytes(), st.stream));
        Kernel(st.stream, cost::ElementwiseNs(0, sh_.ParamBytes()),
               {{b.weights, sh_.ParamBytes(), 1}});
        b.saved.resize(o.micro_batches);
      }
      st.out.resize(o.micro_batches);
      st.dx.resize(o.micro_batches);
      st.fwd_done.resize(o.micro_batches);
      st.bwd_done.resize(o.micro_batches);
      for (int m = 0; m < o.micro_batches; ++m) {
        CHECK(cudaEventCreateWithFlags(&st.fwd_done[m], cudaEventDisableTiming));
        CHECK(cudaEventCreateWithFlags(&st.bwd_done[m], cudaEventDisableTiming));
      }
    }
  }

  ~Pipeline() {
    for (Stage& st : stages_) {
      for (Block& b : st.blocks) CHECK(cudaFreeAsync(b.weights, st.stream));
    }
    CHECK(cudaDeviceSynchronize());
    for (Stage& st : stages_) {
      for (cudaEvent_t e : st.fwd_done) CHECK(cudaEventDestroy(e));
      for (cudaEvent_t e : st.bwd_done) CHECK(cudaEventDestroy(e));
      CHECK(cudaStreamDestroy(st.stream));
    }
  }

  void Step(Rng& rng) {
    HostAdvance(rng.Uniform(20, 200) * 1000);
    const int S = o_.stages, M = o_.micro_batches;
    // Each stage's 1F1B order: (forward?, micro-batch).
    std::vector<std::vector<std::pair<bool, int>>> order(S);
    for (int s = 0; s < S; ++s) {
      const int warmup = std::min(S - 1 - s, M);
      for (int m = 0; m < warmup; ++m) order[s].push_back({true, m});
      for (int i = 0; i < M - warmup; ++i) {
        order[s].push_back({true, warmup + i});
        order[s].push_back({false, i});
      }
      for (int m = M - warmup; m < M; ++m) order[s].push_back({false, m});
    }
    std::vector<std::vector<bool>> fwd_issued(S, std::vector<bool>(M)),
        bwd_issued(S, std::vector<bool>(M));
    std::vector<size_t> next(S, 0);
    for (bool progress = true; progress;) {
      progress = false;
      for (int s = 0; s < S; ++s) {
        if (next[s] == order[s].size()) continue;
        const auto [forward, m] = order[s][next[s]];
        const bool ready = forward ? (s == 0 || fwd_issued[s - 1][m])
                                   : (s == S - 1 ? fwd_issued[s][m] : bwd_issued[s + 1][m]);
        if (!ready) continue;
        if (forward) {
          Forward(s, m);
          fwd_issued[s][m] = true;
        } else {
          Backward(s, m);
          bwd_issued[s][m] = true;
        }
        ++next[s];
        progress = true;
      }
    }
    for (int s = 0; s < S; ++s) {
      if (next[s] != order[s].size()) Fail(__FILE__, __LINE__, "Step", "schedule deadlocked");
    }
    // The flush: every stage steps its optimizer, then the step ends with
    // the whole device idle.
    for (Stage& st : stages_) {
      for (Block& b : st.blocks) {
        Kernel(st.stream, cost::ElementwiseNs(2 * sh_.ParamBytes(), sh_.ParamBytes()),
               {{b.grads, sh_.ParamBytes(), 0}, {b.weights, sh_.ParamBytes(), 1}});
        CHECK(cudaFreeAsync(b.grads, st.stream));
        b.grads = nullptr;
      }
    }
    CHECK(cudaDeviceSynchronize());
  }

 private:
  struct Block {
    void* weights = nullptr;
    void* grads = nullptr;  // accumulated over the step's micro-batches
    std::vector<Saved> saved;
  };
  struct Stage {
    cudaStream_t stream = nullptr;
    std::vector<Block> blocks;
    std::vector<Tensor> out;  // the stage's output per micro-batch, until sent
    std::vector<Tensor> dx;   // the gradient of its input, until sent back
    std::vector<cudaEvent_t> fwd_done, bwd_done;
  };

  // Moves `from` (written on stage `src`, which recorded `sent` after it)
  // into a new buffer on `dst_stream`, and frees `from` there.
  Tensor Receive(Tensor& from, cudaEvent_t sent, cudaStream_t dst_stream) {
    CHECK(cudaStreamWaitEvent(dst_stream, sent, 0));
    Tensor to = NewTensor(from.bytes, dst_stream);
    CHECK(cudaMemcpyAsync(to.ptr, from.ptr, from.bytes, cudaMemcpyDeviceToDevice, dst_stream));
    const uint64_t link = cost::SendNs(from.bytes);
    const uint64_t face = cost::Ns(from.bytes / cost::kFaceCopyBytesPerNs);
    if (link > face) Kernel(dst_stream, link - face, {{to.ptr, to.bytes, 1}});
    FreeTensor(from, dst_stream);
    return to;
  }

  void Forward(int s, int m) {
    Stage& st = stages_[s];
    const double t = static_cast<double>(sh_.tokens), d = static_cast<double>(sh_.hidden);
    Tensor x;
    if (s == 0) {
      x = NewTensor(sh_.Act(1), st.stream);
      Kernel(st.stream, cost::ElementwiseNs(t * 4, sh_.Act(1)), {{x.ptr, x.bytes, 1}});
    } else {
      x = Receive(stages_[s - 1].out[m], stages_[s - 1].fwd_done[m], st.stream);
    }
    for (Block& b : st.blocks) {
      ForwardResult f = BlockForward(st.stream, sh_, FlatParams(b.weights, sh_), x);
      b.saved[m] = f.saved;
      x = f.out;
    }
    if (s + 1 < o_.stages) {
      st.out[m] = x;
      CHECK(cudaEventRecord(st.fwd_done[m], st.stream));
    } else {
      // The last stage computes the loss and seeds its own backward.
      st.dx[m] = NewTensor(sh_.Act(1), st.stream);
      Kernel(st.stream, cost::MatmulNs(t, d, d),
             {{x.ptr, x.bytes, 0}, {st.dx[m].ptr, st.dx[m].bytes, 1}});
      FreeTensor(x, st.stream);
    }
  }

  void Backward(int s, int m) {
    Stage& st = stages_[s];
    Tensor dout = s + 1 < o_.stages
                      ? Receive(stages_[s + 1].dx[m], stages_[s + 1].bwd_done[m], st.stream)
                      : st.dx[m];
    for (int i = o_.blocks_per_stage - 1; i >= 0; --i) {
      Block& b = st.blocks[i];
      // As with set_to_none gradients: the first micro-batch's backward
      // writes a fresh buffer, the later ones accumulate into it.
      const bool first = b.grads == nullptr;
      if (first) CHECK(cudaMallocAsync(&b.grads, sh_.ParamBytes(), st.stream));
      dout = BlockBackward(st.stream, sh_, FlatParams(b.weights, sh_), FlatParams(b.grads, sh_),
                           b.saved[m], dout, /*accumulate=*/!first);
    }
    if (s > 0) {
      st.dx[m] = dout;
      CHECK(cudaEventRecord(st.bwd_done[m], st.stream));
    } else {
      Kernel(st.stream, cost::ElementwiseNs(dout.bytes, 0), {{dout.ptr, dout.bytes, 0}});
      FreeTensor(dout, st.stream);
    }
  }

  Options o_;
  BlockShape sh_;
  std::vector<Stage> stages_;
};

}  // namespace
}  // namespace workloads

int main(int argc, char** argv) {
  using namespace workloads;
  Flags flags(argc, argv, "workload_pipeline",
              "pipeline-parallel 1F1B training, one stream per stage");
  Options o;
  o.stages = flags.Int("stages", 4, "pipeline stages (streams)");
  o.blocks_per_stage = flags.Int("blocks", 2, "transformer blocks per stage");
  o.micro_batches = flags.Int("micro_batches", 8, "micro-batches per step");
  o.shape.hidden = flags.Int("hidden", 768, "model width (a multiple of 64)", 64);
  o.shape.seq = flags.Int("seq", 512, "sequence length");
  const int64_t batch = flags.Int("batch", 1, "sequences per micro-batch");
  o.steps = flags.Int("steps", 3, "training steps");
  o.seed = flags.Int("seed", 1, "seed of the host-time jitter", 0);
  flags.Done();
  o.shape.tokens = batch * o.shape.seq;

  Rng rng(o.seed);
  {
    Pipeline pipeline(o);
    for (int s = 0; s < o.steps; ++s) pipeline.Step(rng);
  }
  PrintSummary("workload_pipeline",
               std::to_string(o.steps) + " steps of 1F1B, " + std::to_string(o.stages) +
                   " stages x " + std::to_string(o.blocks_per_stage) + " blocks (d " +
                   std::to_string(o.shape.hidden) + ", " + std::to_string(o.shape.tokens) +
                   " tokens per micro-batch), " + std::to_string(o.micro_batches) +
                   " micro-batches, " + std::to_string(o.stages) + " streams");
  return 0;
}
