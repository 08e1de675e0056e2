// One pre-norm transformer block, forward and backward, as the kernels and
// allocations an eager framework issues for it on one stream: every
// activation a fresh cudaMallocAsync, every saved tensor freed on the stream
// right after the backward kernel that last reads it. The training
// workloads (fsdp, offload, pipeline, loader, collectives) differ in where
// the weights come from and where activations and gradients go, which is
// what their allocation patterns are about; the block itself is shared so
// their numbers are comparable.
//
// Elements are 2 bytes (bf16). A block of width d over t tokens has four
// weight matrices (qkv d x 3d, out d x d, up d x 4d, down 4d x d: 12 d^2
// parameters) and keeps nine tensors for its backward (its input, the two
// norms' outputs, q/k/v, the attention output and its softmax statistics,
// the residual, and the MLP's pre- and post-activation).
#ifndef STREAMPOOL_EXAMPLES_WORKLOADS_TRANSFORMER_H_
#define STREAMPOOL_EXAMPLES_WORKLOADS_TRANSFORMER_H_

#include <array>
#include <cstddef>
#include <cstdint>

#include "examples/workloads/cost_model.h"
#include "examples/workloads/workload.h"

namespace workloads {

inline constexpr size_t kElementBytes = 2;
inline constexpr int64_t kHeadDim = 64;

struct BlockShape {
  int64_t tokens;  // micro-batch x sequence length
  int64_t seq;     // sequence length, for the attention's cost
  int64_t hidden;  // model width d

  // A (tokens x widths*d) activation.
  size_t Act(int64_t widths) const { return tokens * widths * hidden * kElementBytes; }
  // The softmax statistics flash attention keeps: one float per token and head.
  size_t Lse() const { return tokens * (hidden / kHeadDim) * 4; }
  size_t QkvBytes() const { return 3 * hidden * hidden * kElementBytes; }
  size_t OutBytes() const { return hidden * hidden * kElementBytes; }
  size_t UpBytes() const { return 4 * hidden * hidden * kElementBytes; }
  size_t DownBytes() const { return 4 * hidden * hidden * kElementBytes; }
  size_t ParamBytes() const { return QkvBytes() + OutBytes() + UpBytes() + DownBytes(); }
  // Causal attention: half of the 4 t s d of QK^T and PV.
  double AttentionFlops() const { return 2.0 * tokens * seq * hidden; }
};

// Where a block's four weight matrices (or their gradients) live. They may
// be slices of one flat buffer (FSDP's flat parameter) or of different
// buffers (DDP buckets).
struct BlockParams {
  void* qkv;
  void* out;
  void* up;
  void* down;
};

// The four matrices one after the other in a buffer of ParamBytes().
inline BlockParams FlatParams(void* base, const BlockShape& s) {
  char* p = static_cast<char*>(base);
  return {p, p + s.QkvBytes(), p + s.QkvBytes() + s.OutBytes(),
          p + s.QkvBytes() + s.OutBytes() + s.UpBytes()};
}

struct Tensor {
  void* ptr = nullptr;
  size_t bytes = 0;
};

enum SavedIndex { kX, kLn1, kQkv, kAttn, kLse, kX1, kLn2, kH, kG, kSavedCount };
// What the forward keeps for the backward; [kX] is the block's input.
using Saved = std::array<Tensor, kSavedCount>;

// How wide each saved tensor is, in units of d (kLse is not a multiple).
inline constexpr int64_t kSavedWidth[kSavedCount] = {1, 1, 3, 1, 0, 1, 1, 4, 4};

inline Tensor NewTensor(size_t bytes, cudaStream_t s) {
  Tensor t{nullptr, bytes};
  CHECK(cudaMallocAsync(&t.ptr, bytes, s));
  return t;
}

inline void FreeTensor(Tensor& t, cudaStream_t s) {
  CHECK(cudaFreeAsync(t.ptr, s));
  t = Tensor{};
}

struct ForwardResult {
  Saved saved;
  Tensor out;
};

// The block's forward on `s` over input `x` (kept as saved[kX]). The caller
// owns the output and hands the saved tensors to Backward.
inline ForwardResult BlockForward(cudaStream_t s, const BlockShape& sh, const BlockParams& w,
                                  Tensor x) {
  using cost::ElementwiseNs;
  using cost::KernelNs;
  using cost::MatmulNs;
  const double t = static_cast<double>(sh.tokens), d = static_cast<double>(sh.hidden);
  ForwardResult r;
  Saved& a = r.saved;
  a[kX] = x;
  a[kLn1] = NewTensor(sh.Act(1), s);
  Kernel(s, ElementwiseNs(x.bytes, sh.Act(1)), {{x.ptr, x.bytes, 0}, {a[kLn1].ptr, sh.Act(1), 1}});
  a[kQkv] = NewTensor(sh.Act(3), s);
  Kernel(s, MatmulNs(t, 3 * d, d),
         {{a[kLn1].ptr, sh.Act(1), 0}, {w.qkv, sh.QkvBytes(), 0}, {a[kQkv].ptr, sh.Act(3), 1}});
  a[kAttn] = NewTensor(sh.Act(1), s);
  a[kLse] = NewTensor(sh.Lse(), s);
  Kernel(s, KernelNs(sh.AttentionFlops(), sh.Act(3) + sh.Act(1)),
         {{a[kQkv].ptr, sh.Act(3), 0}, {a[kAttn].ptr, sh.Act(1), 1}, {a[kLse].ptr, sh.Lse(), 1}});
  // The output projection with the residual add fused in.
  a[kX1] = NewTensor(sh.Act(1), s);
  Kernel(s, MatmulNs(t, d, d),
         {{a[kAttn].ptr, sh.Act(1), 0},
          {w.out, sh.OutBytes(), 0},
          {x.ptr, x.bytes, 0},
          {a[kX1].ptr, sh.Act(1), 1}});
  a[kLn2] = NewTensor(sh.Act(1), s);
  Kernel(s, ElementwiseNs(sh.Act(1), sh.Act(1)),
         {{a[kX1].ptr, sh.Act(1), 0}, {a[kLn2].ptr, sh.Act(1), 1}});
  a[kH] = NewTensor(sh.Act(4), s);
  Kernel(s, MatmulNs(t, 4 * d, d),
         {{a[kLn2].ptr, sh.Act(1), 0}, {w.up, sh.UpBytes(), 0}, {a[kH].ptr, sh.Act(4), 1}});
  a[kG] = NewTensor(sh.Act(4), s);
  Kernel(s, ElementwiseNs(sh.Act(4), sh.Act(4)),
         {{a[kH].ptr, sh.Act(4), 0}, {a[kG].ptr, sh.Act(4), 1}});
  r.out = NewTensor(sh.Act(1), s);
  Kernel(s, MatmulNs(t, d, 4 * d),
         {{a[kG].ptr, sh.Act(4), 0},
          {w.down, sh.DownBytes(), 0},
          {a[kX1].ptr, sh.Act(1), 0},
          {r.out.ptr, sh.Act(1), 1}});
  return r;
}

// The block's backward on `s`: reads the saved tensors and the gradient of
// the output `dout`, writes the weight gradients into `dw` (accumulating
// when `accumulate`, which only changes the cost), frees every saved tensor
// and `dout` after its last reader, and returns the gradient of the input.
inline Tensor BlockBackward(cudaStream_t s, const BlockShape& sh, const BlockParams& w,
                            const BlockParams& dw, Saved& a, Tensor dout, bool accumulate = false) {
  using cost::ElementwiseNs;
  using cost::KernelNs;
  using cost::MatmulNs;
  const double t = static_cast<double>(sh.tokens), d = static_cast<double>(sh.hidden);
  // Accumulating reads the old gradient too: one more pass over the weights.
  // The checker sees a write either way.
  const auto wgrad = [&](double m, double n, double k, size_t bytes) {
    return MatmulNs(m, n, k) + (accumulate ? ElementwiseNs(bytes, 0) : 0);
  };

  // MLP down projection: dg = dout W_down^T, dW_down = g^T dout.
  Tensor dg = NewTensor(sh.Act(4), s);
  Kernel(s, MatmulNs(t, 4 * d, d) + wgrad(4 * d, d, t, sh.DownBytes()),
         {{a[kG].ptr, sh.Act(4), 0},
          {w.down, sh.DownBytes(), 0},
          {dout.ptr, dout.bytes, 0},
          {dg.ptr, sh.Act(4), 1},
          {dw.down, sh.DownBytes(), 1}});
  FreeTensor(a[kG], s);
  Tensor dh = NewTensor(sh.Act(4), s);
  Kernel(s, ElementwiseNs(2 * sh.Act(4), sh.Act(4)),
         {{a[kH].ptr, sh.Act(4), 0}, {dg.ptr, sh.Act(4), 0}, {dh.ptr, sh.Act(4), 1}});
  FreeTensor(a[kH], s);
  FreeTensor(dg, s);
  Tensor dln2 = NewTensor(sh.Act(1), s);
  Kernel(s, MatmulNs(t, d, 4 * d) + wgrad(d, 4 * d, t, sh.UpBytes()),
         {{a[kLn2].ptr, sh.Act(1), 0},
          {w.up, sh.UpBytes(), 0},
          {dh.ptr, sh.Act(4), 0},
          {dln2.ptr, sh.Act(1), 1},
          {dw.up, sh.UpBytes(), 1}});
  FreeTensor(a[kLn2], s);
  FreeTensor(dh, s);
  // The second norm's backward plus the residual branch's gradient.
  Tensor dx1 = NewTensor(sh.Act(1), s);
  Kernel(s, ElementwiseNs(3 * sh.Act(1), sh.Act(1)),
         {{a[kX1].ptr, sh.Act(1), 0},
          {dln2.ptr, sh.Act(1), 0},
          {dout.ptr, dout.bytes, 0},
          {dx1.ptr, sh.Act(1), 1}});
  FreeTensor(a[kX1], s);
  FreeTensor(dln2, s);
  FreeTensor(dout, s);
  Tensor dattn = NewTensor(sh.Act(1), s);
  Kernel(s, MatmulNs(t, d, d) + wgrad(d, d, t, sh.OutBytes()),
         {{a[kAttn].ptr, sh.Act(1), 0},
          {w.out, sh.OutBytes(), 0},
          {dx1.ptr, sh.Act(1), 0},
          {dattn.ptr, sh.Act(1), 1},
          {dw.out, sh.OutBytes(), 1}});
  // Flash attention's backward recomputes the scores: about 2.5 forwards.
  Tensor dqkv = NewTensor(sh.Act(3), s);
  Kernel(s, KernelNs(2.5 * sh.AttentionFlops(), sh.Act(3) * 2 + sh.Act(1) * 2),
         {{a[kQkv].ptr, sh.Act(3), 0},
          {a[kAttn].ptr, sh.Act(1), 0},
          {a[kLse].ptr, sh.Lse(), 0},
          {dattn.ptr, sh.Act(1), 0},
          {dqkv.ptr, sh.Act(3), 1}});
  FreeTensor(a[kQkv], s);
  FreeTensor(a[kAttn], s);
  FreeTensor(a[kLse], s);
  FreeTensor(dattn, s);
  Tensor dln1 = NewTensor(sh.Act(1), s);
  Kernel(s, MatmulNs(t, d, 3 * d) + wgrad(d, 3 * d, t, sh.QkvBytes()),
         {{a[kLn1].ptr, sh.Act(1), 0},
          {w.qkv, sh.QkvBytes(), 0},
          {dqkv.ptr, sh.Act(3), 0},
          {dln1.ptr, sh.Act(1), 1},
          {dw.qkv, sh.QkvBytes(), 1}});
  FreeTensor(a[kLn1], s);
  FreeTensor(dqkv, s);
  Tensor dx = NewTensor(sh.Act(1), s);
  Kernel(s, ElementwiseNs(3 * sh.Act(1), sh.Act(1)),
         {{a[kX].ptr, a[kX].bytes, 0},
          {dln1.ptr, sh.Act(1), 0},
          {dx1.ptr, sh.Act(1), 0},
          {dx.ptr, sh.Act(1), 1}});
  FreeTensor(a[kX], s);
  FreeTensor(dln1, s);
  FreeTensor(dx1, s);
  return dx;
}

}  // namespace workloads

#endif  // STREAMPOOL_EXAMPLES_WORKLOADS_TRANSFORMER_H_
