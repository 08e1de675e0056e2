// An inference server (the shape of vLLM's or TGI's serving loop, one
// request per stream rather than one batched forward): requests arrive over
// virtual time with seeded random prompt and generation lengths, wait in a
// queue for a free request stream, run a prefill and then decode steps, and
// leave. Their KV cache grows a block at a time (paged attention's blocks of
// --block_tokens tokens), each block its own cudaMallocAsync on the
// request's stream, and all of it is freed on that stream after the last
// decode step. One pool serves every stream.
//
// The host loop never blocks: it polls each busy stream with cudaStreamQuery
// and, when one has run out of work, enqueues the request's next --chunk
// decode steps (multi-step scheduling) or hands the stream to the next queued
// request. When nothing is ready it spends --poll_us of host time (or less,
// up to the next arrival). So a request's frees are enqueued while its
// stream still runs, and whether another stream's next KV block can reuse
// them depends on what the pool has seen complete: a query that found the
// stream idle proves it; otherwise only observation or an event would.
//
// The weights are loaded once through a pinned staging buffer on a loader
// stream; every request stream waits for the `loaded` event before its first
// kernel.
#include <algorithm>
#include <deque>
#include <string>
#include <vector>

#include "examples/workloads/cost_model.h"
#include "examples/workloads/workload.h"

namespace workloads {
namespace {

constexpr size_t kElementBytes = 2;

struct Options {
  int streams, requests, layers, block_tokens, chunk, max_prompt, max_gen;
  int64_t hidden, vocab, arrival_us, poll_us;
  uint64_t seed;
};

struct Request {
  uint64_t arrival_ns = 0;
  int prompt = 0;    // tokens
  int generate = 0;  // tokens to decode
  int decoded = 0;
  std::vector<void*> kv;   // blocks, in token order
  void* tokens = nullptr;  // the generated token ids, device side
  bool final_chunk_enqueued = false;
};

class Server {
 public:
  explicit Server(const Options& o) : o_(o) {
    layer_bytes_ = 12 * o.hidden * o.hidden * kElementBytes;
    head_bytes_ = o.hidden * o.vocab * kElementBytes;
    kv_block_bytes_ = static_cast<size_t>(o.layers) * 2 * o.block_tokens * o.hidden * kElementBytes;
    slots_.resize(o.streams);
    for (Slot& s : slots_) CHECK(cudaStreamCreate(&s.stream));
    for (Slot& s : slots_) {
      CHECK(cudaMallocHost(&s.host_tokens, sizeof(int32_t) * (o.max_prompt + o.max_gen)));
    }
    LoadWeights();
  }

  ~Server() {
    for (void* w : weights_) CHECK(cudaFreeAsync(w, loader_));
    CHECK(cudaDeviceSynchronize());
    for (Slot& s : slots_) {
      CHECK(cudaFreeHost(s.host_tokens));
      CHECK(cudaStreamDestroy(s.stream));
    }
    CHECK(cudaEventDestroy(loaded_));
    CHECK(cudaStreamDestroy(loader_));
  }

  // Serves `arrivals` (sorted by arrival time) until every request is done.
  void Serve(std::vector<Request> arrivals) {
    const uint64_t start = HostNow();
    for (Request& r : arrivals) r.arrival_ns += start;
    size_t next_arrival = 0;
    std::deque<Request> queue;
    int done = 0;
    while (done < o_.requests) {
      const uint64_t now = HostNow();
      while (next_arrival < arrivals.size() && arrivals[next_arrival].arrival_ns <= now) {
        queue.push_back(arrivals[next_arrival++]);
      }
      bool progressed = false;
      for (Slot& s : slots_) {
        if (s.busy && StreamIdle(s.stream)) {
          if (s.request.final_chunk_enqueued) {
            s.busy = false;  // its frees were enqueued with its last chunk
            ++done;
          } else {
            EnqueueChunk(s);
          }
          progressed = true;
        }
        if (!s.busy && !queue.empty()) {
          s.request = std::move(queue.front());
          queue.pop_front();
          s.busy = true;
          Prefill(s);
          EnqueueChunk(s);
          progressed = true;
        }
      }
      if (progressed || done == o_.requests) continue;
      uint64_t wait = o_.poll_us * 1000;
      if (next_arrival < arrivals.size()) {
        wait = std::min(wait, arrivals[next_arrival].arrival_ns - now);
      }
      HostAdvance(std::max<uint64_t>(wait, 1));
    }
    CHECK(cudaDeviceSynchronize());
  }

  size_t kv_block_bytes() const { return kv_block_bytes_; }

 private:
  struct Slot {
    cudaStream_t stream = nullptr;
    int32_t* host_tokens = nullptr;  // pinned: the prompt in, the output back
    bool busy = false;
    bool waited_for_weights = false;
    Request request;
  };

  void LoadWeights() {
    CHECK(cudaStreamCreateWithFlags(&loader_, cudaStreamNonBlocking));
    CHECK(cudaEventCreateWithFlags(&loaded_, cudaEventDisableTiming));
    void* staging = nullptr;
    CHECK(cudaMallocHost(&staging, std::max(layer_bytes_, head_bytes_)));
    for (int l = 0; l <= o_.layers; ++l) {
      const size_t bytes = l < o_.layers ? layer_bytes_ : head_bytes_;
      void* w = nullptr;
      CHECK(cudaMallocAsync(&w, bytes, loader_));
      // The host reads the next tensor from disk into the staging buffer,
      // which it may overwrite only once the previous copy has finished.
      HostAdvance(cost::Ns(bytes / 5.0));  // a 5 GB/s disk
      PcieCopyAsync(w, staging, bytes, cudaMemcpyHostToDevice, loader_);
      CHECK(cudaStreamSynchronize(loader_));
      weights_.push_back(w);
    }
    CHECK(cudaFreeHost(staging));
    CHECK(cudaEventRecord(loaded_, loader_));
  }

  // Reads every weight; writes nothing of them.
  void AddWeightReads(std::vector<spAccess>& a) const {
    for (int l = 0; l <= o_.layers; ++l) {
      a.push_back({weights_[l], l < o_.layers ? layer_bytes_ : head_bytes_, 0});
    }
  }

  double ParamCount() const {
    return static_cast<double>(o_.layers) * 12 * o_.hidden * o_.hidden +
           static_cast<double>(o_.hidden) * o_.vocab;
  }

  // Makes sure the KV cache holds `tokens` tokens, a block at a time.
  void GrowKv(Slot& s, int tokens) {
    Request& r = s.request;
    while (static_cast<int>(r.kv.size()) * o_.block_tokens < tokens) {
      void* block = nullptr;
      CHECK(cudaMallocAsync(&block, kv_block_bytes_, s.stream));
      r.kv.push_back(block);
    }
  }

  void Prefill(Slot& s) {
    Request& r = s.request;
    if (!s.waited_for_weights) {
      CHECK(cudaStreamWaitEvent(s.stream, loaded_, 0));
      s.waited_for_weights = true;
    }
    const size_t id_bytes = sizeof(int32_t) * r.prompt;
    void* ids = nullptr;
    CHECK(cudaMallocAsync(&ids, id_bytes, s.stream));
    PcieCopyAsync(ids, s.host_tokens, id_bytes, cudaMemcpyHostToDevice, s.stream);
    CHECK(cudaMallocAsync(&r.tokens, sizeof(int32_t) * r.generate, s.stream));
    GrowKv(s, r.prompt);
    // The prompt's activations, widest at the MLP: one workspace per prefill.
    void* work = nullptr;
    const size_t work_bytes = static_cast<size_t>(r.prompt) * 4 * o_.hidden * kElementBytes;
    CHECK(cudaMallocAsync(&work, work_bytes, s.stream));
    std::vector<spAccess> a = {{ids, id_bytes, 0}, {work, work_bytes, 1}};
    AddWeightReads(a);
    for (void* block : r.kv) a.push_back({block, kv_block_bytes_, 1});
    const double attention = 2.0 * r.prompt * r.prompt * o_.hidden * o_.layers;
    Kernel(s.stream, cost::KernelNs(2 * ParamCount() * r.prompt + attention, 2 * ParamCount()), a);
    CHECK(cudaFreeAsync(work, s.stream));
    CHECK(cudaFreeAsync(ids, s.stream));
  }

  // One decode step: the new token's forward over the weights and the whole
  // KV cache, logits, sampling.
  void DecodeStep(Slot& s) {
    Request& r = s.request;
    const int context = r.prompt + r.decoded + 1;
    GrowKv(s, context);
    void* logits = nullptr;
    const size_t logit_bytes = sizeof(float) * o_.vocab;
    CHECK(cudaMallocAsync(&logits, logit_bytes, s.stream));
    std::vector<spAccess> a;
    AddWeightReads(a);
    for (size_t i = 0; i + 1 < r.kv.size(); ++i) a.push_back({r.kv[i], kv_block_bytes_, 0});
    a.push_back({r.kv.back(), kv_block_bytes_, 1});
    a.push_back({logits, logit_bytes, 1});
    const double kv_bytes =
        static_cast<double>(context) * o_.layers * 2 * o_.hidden * kElementBytes;
    const double attention = 4.0 * context * o_.hidden * o_.layers;
    Kernel(s.stream, cost::KernelNs(2 * ParamCount() + attention, 2 * ParamCount() + kv_bytes), a);
    Kernel(s.stream, cost::ElementwiseNs(logit_bytes, sizeof(int32_t)),
           {{logits, logit_bytes, 0},
            {static_cast<int32_t*>(r.tokens) + r.decoded, sizeof(int32_t), 1}});
    CHECK(cudaFreeAsync(logits, s.stream));
    ++r.decoded;
  }

  void EnqueueChunk(Slot& s) {
    Request& r = s.request;
    for (int i = 0; i < o_.chunk && r.decoded < r.generate; ++i) DecodeStep(s);
    if (r.decoded < r.generate) return;
    // The request reached its length: its output goes back to the host and
    // everything it holds is freed in stream order behind its last step.
    PcieCopyAsync(s.host_tokens, r.tokens, sizeof(int32_t) * r.generate, cudaMemcpyDeviceToHost,
                  s.stream);
    CHECK(cudaFreeAsync(r.tokens, s.stream));
    for (void* block : r.kv) CHECK(cudaFreeAsync(block, s.stream));
    r.kv.clear();
    r.final_chunk_enqueued = true;
  }

  Options o_;
  size_t layer_bytes_ = 0, head_bytes_ = 0, kv_block_bytes_ = 0;
  cudaStream_t loader_ = nullptr;
  cudaEvent_t loaded_ = nullptr;
  std::vector<void*> weights_;
  std::vector<Slot> slots_;
};

}  // namespace
}  // namespace workloads

int main(int argc, char** argv) {
  using namespace workloads;
  Flags flags(argc, argv, "workload_server",
              "an inference server: request streams, growing KV caches, polling with "
              "cudaStreamQuery");
  Options o;
  o.streams = flags.Int("streams", 8, "request streams (requests served at once)");
  o.requests = flags.Int("requests", 32, "requests to serve");
  o.arrival_us = flags.Int("arrival_us", 2000, "mean time between arrivals (Poisson)");
  o.max_prompt = flags.Int("max_prompt", 512, "prompt length, uniform in [16, max]", 16);
  o.max_gen = flags.Int("max_gen", 256, "tokens generated, uniform in [8, max]", 8);
  o.layers = flags.Int("layers", 12, "decoder layers");
  o.hidden = flags.Int("hidden", 768, "model width");
  o.vocab = flags.Int("vocab", 32000, "vocabulary size");
  o.block_tokens = flags.Int("block_tokens", 16, "tokens per KV-cache block");
  o.chunk = flags.Int("chunk", 8, "decode steps enqueued per scheduling round");
  o.poll_us = flags.Int("poll_us", 200, "host time between polls when nothing is ready");
  o.seed = flags.Int("seed", 1, "seed of arrivals and lengths", 0);
  flags.Done();

  Rng rng(o.seed);
  std::vector<Request> arrivals(o.requests);
  double at = 0;
  int64_t prompt_tokens = 0, generated = 0;
  for (int i = 0; i < o.requests; ++i) {
    Request& r = arrivals[i];
    at += rng.Exponential(static_cast<double>(o.arrival_us) * 1000);
    r.arrival_ns = cost::Ns(at);
    r.prompt = static_cast<int>(rng.Uniform(16, o.max_prompt));
    r.generate = static_cast<int>(rng.Uniform(8, o.max_gen));
    prompt_tokens += r.prompt;
    generated += r.generate;
  }
  size_t block_bytes = 0;
  {
    Server server(o);
    block_bytes = server.kv_block_bytes();
    server.Serve(std::move(arrivals));
  }
  PrintSummary("workload_server",
               std::to_string(o.requests) + " requests (" + std::to_string(prompt_tokens) +
                   " prompt, " + std::to_string(generated) + " generated tokens) on " +
                   std::to_string(o.streams) + " request streams, " +
                   std::to_string(block_bytes >> 10) + " KiB KV blocks of " +
                   std::to_string(o.block_tokens) + " tokens, " + std::to_string(o.layers) +
                   " layers (d " + std::to_string(o.hidden) + ")");
  return 0;
}
