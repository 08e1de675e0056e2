// A data loader that prefetches batches on its own stream (torch's
// DataLoader with pin_memory=True feeding `.to(device, non_blocking=True)`
// on a side stream, as the CUDA prefetchers of Apex and timm do): while the
// compute stream trains on batch i, the loader stream copies batches
// i+1 .. i+k from pinned host buffers into freshly allocated device
// buffers and records an event per batch; the compute stream waits for that
// event before its first read and frees the batch on the compute stream
// after its last read.
//
// So every batch buffer is allocated on the loader stream and freed on the
// compute stream, and the loader's next allocations are ordered after those
// frees only when the host learns of them: the loader stream itself never
// waits for the compute stream. The pinned host slots are reused round-robin;
// the host synchronizes on a slot's last copy before refilling it, as a
// pinned-memory cache must.
//
// The model is a small vision transformer: the images are normalised to
// bf16, cut into patches and embedded, and run through transformer blocks
// with a classification loss. Copies are cudaMemcpyAsync plus a kernel for
// the rest of the PCIe time (PcieCopyAsync).
#include <string>
#include <vector>

#include "examples/workloads/cost_model.h"
#include "examples/workloads/transformer.h"
#include "examples/workloads/workload.h"

namespace workloads {
namespace {

struct Options {
  int layers, steps, prefetch, log_every;
  int64_t batch, image, patch, hidden, classes, host_us;
  uint64_t seed;
};

class Trainer {
 public:
  explicit Trainer(const Options& o) : o_(o) {
    const int64_t patches = (o.image / o.patch) * (o.image / o.patch) + 1;  // + class token
    sh_ = {o.batch * patches, patches, o.hidden};
    image_bytes_ = static_cast<size_t>(o.batch) * 3 * o.image * o.image;  // uint8 RGB
    label_bytes_ = static_cast<size_t>(o.batch) * sizeof(int64_t);
    embed_bytes_ = static_cast<size_t>(3 * o.patch * o.patch * o.hidden) * kElementBytes;
    head_bytes_ = static_cast<size_t>(o.hidden * o.classes) * kElementBytes;

    CHECK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&loader_, cudaStreamNonBlocking));
    slots_.resize(o.prefetch + 1);
    for (Slot& s : slots_) {
      CHECK(cudaMallocHost(&s.images, image_bytes_));
      CHECK(cudaMallocHost(&s.labels, label_bytes_));
      CHECK(cudaEventCreateWithFlags(&s.copied, cudaEventDisableTiming));
    }
    params_.push_back({nullptr, embed_bytes_});
    for (int i = 0; i < o.layers; ++i) params_.push_back({nullptr, sh_.ParamBytes()});
    params_.push_back({nullptr, head_bytes_});
    for (Param& p : params_) {
      CHECK(cudaMallocAsync(&p.weights, p.bytes, compute_));
      CHECK(cudaMallocAsync(&p.momentum, p.bytes, compute_));
      Kernel(compute_, cost::ElementwiseNs(0, 2 * p.bytes),
             {{p.weights, p.bytes, 1}, {p.momentum, p.bytes, 1}});
    }
  }

  ~Trainer() {
    for (Param& p : params_) {
      CHECK(cudaFreeAsync(p.weights, compute_));
      CHECK(cudaFreeAsync(p.momentum, compute_));
    }
    CHECK(cudaDeviceSynchronize());
    for (Slot& s : slots_) {
      CHECK(cudaFreeHost(s.images));
      CHECK(cudaFreeHost(s.labels));
      CHECK(cudaEventDestroy(s.copied));
    }
    CHECK(cudaStreamDestroy(compute_));
    CHECK(cudaStreamDestroy(loader_));
  }

  void Run(Rng& rng) {
    for (int i = 0; i < o_.steps; ++i) {
      // Keep batches i .. i+prefetch on their way.
      for (; next_load_ <= i + o_.prefetch && next_load_ < o_.steps; ++next_load_) {
        Load(next_load_, rng);
      }
      Train(i);
      if ((i + 1) % o_.log_every == 0 || i + 1 == o_.steps) {
        CHECK(cudaStreamSynchronize(compute_));  // loss.item() for the log line
      }
    }
  }

 private:
  struct Slot {
    void* images = nullptr;  // pinned
    void* labels = nullptr;  // pinned
    cudaEvent_t copied = nullptr;
    bool used = false;
    void* d_images = nullptr;  // the batch on the device, until trained on
    void* d_labels = nullptr;
  };
  struct Param {
    void* weights = nullptr;
    size_t bytes = 0;
    void* momentum = nullptr;
    void* grads = nullptr;
  };

  void Load(int i, Rng& rng) {
    Slot& s = slots_[i % slots_.size()];
    // The slot's pinned pages may be refilled only after its last copy.
    if (s.used) CHECK(cudaEventSynchronize(s.copied));
    s.used = true;
    // The main process receives the batch from a worker and pins it: host
    // time that varies with the worker's luck.
    HostAdvance(rng.Uniform(o_.host_us / 2, o_.host_us * 3 / 2) * 1000);
    CHECK(cudaMallocAsync(&s.d_images, image_bytes_, loader_));
    CHECK(cudaMallocAsync(&s.d_labels, label_bytes_, loader_));
    PcieCopyAsync(s.d_images, s.images, image_bytes_, cudaMemcpyHostToDevice, loader_);
    PcieCopyAsync(s.d_labels, s.labels, label_bytes_, cudaMemcpyHostToDevice, loader_);
    CHECK(cudaEventRecord(s.copied, loader_));
  }

  void Train(int i) {
    Slot& s = slots_[i % slots_.size()];
    const double t = static_cast<double>(sh_.tokens), d = static_cast<double>(o_.hidden);
    const double k = 3.0 * o_.patch * o_.patch;
    CHECK(cudaStreamWaitEvent(compute_, s.copied, 0));
    // Normalise the uint8 images to bf16; the uint8 batch is done with.
    Tensor pixels = NewTensor(image_bytes_ * kElementBytes, compute_);
    Kernel(compute_, cost::ElementwiseNs(image_bytes_, pixels.bytes),
           {{s.d_images, image_bytes_, 0}, {pixels.ptr, pixels.bytes, 1}});
    CHECK(cudaFreeAsync(s.d_images, compute_));
    // Patch embedding: a (patches x 3p^2) by (3p^2 x d) matmul.
    Param& embed = params_.front();
    Tensor x = NewTensor(sh_.Act(1), compute_);
    Kernel(compute_, cost::MatmulNs(t, d, k),
           {{pixels.ptr, pixels.bytes, 0}, {embed.weights, embed.bytes, 0}, {x.ptr, x.bytes, 1}});

    std::vector<Saved> saved(o_.layers);
    for (int l = 0; l < o_.layers; ++l) {
      ForwardResult f = BlockForward(compute_, sh_, FlatParams(params_[1 + l].weights, sh_), x);
      saved[l] = f.saved;
      x = f.out;
    }
    // Classification head on the class tokens and the loss against the
    // labels; its backward seeds the blocks'.
    Param& head = params_.back();
    CHECK(cudaMallocAsync(&head.grads, head.bytes, compute_));
    Tensor dout = NewTensor(sh_.Act(1), compute_);
    const double b = static_cast<double>(o_.batch), c = static_cast<double>(o_.classes);
    Kernel(compute_, 3 * cost::MatmulNs(b, c, d),
           {{x.ptr, x.bytes, 0},
            {head.weights, head.bytes, 0},
            {s.d_labels, label_bytes_, 0},
            {head.grads, head.bytes, 1},
            {dout.ptr, dout.bytes, 1}});
    CHECK(cudaFreeAsync(s.d_labels, compute_));
    FreeTensor(x, compute_);

    for (int l = o_.layers - 1; l >= 0; --l) {
      Param& p = params_[1 + l];
      CHECK(cudaMallocAsync(&p.grads, p.bytes, compute_));
      dout = BlockBackward(compute_, sh_, FlatParams(p.weights, sh_), FlatParams(p.grads, sh_),
                           saved[l], dout);
    }
    CHECK(cudaMallocAsync(&embed.grads, embed.bytes, compute_));
    Kernel(
        compute_, cost::MatmulNs(k, d, t),
        {{pixels.ptr, pixels.bytes, 0}, {dout.ptr, dout.bytes, 0}, {embed.grads, embed.bytes, 1}});
    FreeTensor(dout, compute_);
    FreeTensor(pixels, compute_);

    // SGD with momentum, then the gradients are dropped (set_to_none).
    for (Param& p : params_) {
      Kernel(compute_, cost::ElementwiseNs(3 * p.bytes, 2 * p.bytes),
             {{p.grads, p.bytes, 0}, {p.momentum, p.bytes, 1}, {p.weights, p.bytes, 1}});
      CHECK(cudaFreeAsync(p.grads, compute_));
      p.grads = nullptr;
    }
  }

  Options o_;
  BlockShape sh_{};
  size_t image_bytes_ = 0, label_bytes_ = 0, embed_bytes_ = 0, head_bytes_ = 0;
  cudaStream_t compute_ = nullptr, loader_ = nullptr;
  std::vector<Slot> slots_;
  std::vector<Param> params_;  // patch embedding, blocks, head
  int next_load_ = 0;
};

}  // namespace
}  // namespace workloads

int main(int argc, char** argv) {
  using namespace workloads;
  Flags flags(argc, argv, "workload_loader",
              "a data loader prefetching batches on its own stream for a compute stream");
  Options o;
  o.steps = flags.Int("steps", 24, "training steps (batches)");
  o.prefetch = flags.Int("prefetch", 2, "batches in flight ahead of the one in use", 0);
  o.batch = flags.Int("batch", 16, "images per batch");
  o.image = flags.Int("image", 224, "image side in pixels", 16);
  o.patch = flags.Int("patch", 16, "patch side in pixels");
  o.hidden = flags.Int("hidden", 384, "model width (a multiple of 64)", 64);
  o.layers = flags.Int("layers", 6, "transformer blocks");
  o.classes = flags.Int("classes", 1000, "classes of the head");
  o.host_us = flags.Int("host_us", 500, "mean host time to receive and pin one batch", 2);
  o.log_every = flags.Int("log_every", 4, "steps between loss.item() synchronizations");
  o.seed = flags.Int("seed", 1, "seed of the host-time jitter", 0);
  flags.Done();

  Rng rng(o.seed);
  {
    Trainer trainer(o);
    trainer.Run(rng);
  }
  PrintSummary("workload_loader", std::to_string(o.steps) + " steps, batches of " +
                                      std::to_string(o.batch) + " " + std::to_string(o.image) +
                                      "px images prefetched " + std::to_string(o.prefetch) +
                                      " ahead, ViT of " + std::to_string(o.layers) + " blocks (d " +
                                      std::to_string(o.hidden) + "), 2 streams");
  return 0;
}
