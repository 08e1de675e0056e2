#!/usr/bin/env python3
"""Training steps of a small transformer on one GPU under a chosen CUDA
allocator, printed as one JSON object:

    python3 tools/gpu/torch_step.py --allocator streampool --steps 20

--allocator default          PyTorch's caching allocator
            cudaMallocAsync  PyTorch's cudaMallocAsync backend
                             (PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync)
            streampool       streampool.torch.use() (settings from the
                             STREAMPOOL_TORCH_* variables), which needs the
                             streampool package on PYTHONPATH (<build>/python)

The output: "peak_reserved_bytes" (torch.cuda.max_memory_reserved(), or the
streampool pool's reserved high watermark: PyTorch keeps no statistics for a
pluggable allocator), "peak_allocated_bytes" likewise, "mean_step_ms" (the
steps after --warmup, each timed between two torch.cuda.synchronize()), and
"losses", one float.hex() string per step, so that runs compare bit for bit.

Every run makes the same computation: a fixed seed, deterministic algorithms
(torch.use_deterministic_algorithms(True), CUBLAS_WORKSPACE_CONFIG=:4096:8),
no TF32, no dropout, and the embedding and the loss written as one-hot
products, whose backward passes have no atomics in any build (the gather and
scatter kernels behind nn.Embedding and NLLLoss accumulate atomically in
some). Whether the losses still differ between allocators is what
tools/gpu/torch_compare.py reports.

Without PyTorch or without a GPU this prints "skipped: <reason>" and exits 0.
"""

import argparse
import json
import os
import sys
import time


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--allocator", choices=("default", "cudaMallocAsync", "streampool"),
                   default="default")
    p.add_argument("--steps", type=int, default=20, help="training steps (default 20)")
    p.add_argument("--warmup", type=int, default=3,
                   help="first steps left out of the mean step time (default 3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--vocab", type=int, default=4096)
    args = p.parse_args(argv)
    if args.steps < 1 or args.warmup < 0 or args.d_model % args.heads:
        p.error("--steps must be positive, --warmup not negative, --d-model a multiple of --heads")
    return args


def skipped(reason):
    print(f"skipped: {reason}")
    return 0


def build_model(torch, args):
    nn = torch.nn
    F = torch.nn.functional

    class Block(nn.Module):
        """Pre-norm attention and MLP, attention written out (no fused
        kernel whose backward may be nondeterministic)."""

        def __init__(self, d, heads):
            super().__init__()
            self.heads = heads
            self.norm1 = nn.LayerNorm(d)
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.norm2 = nn.LayerNorm(d)
            self.fc1 = nn.Linear(d, 4 * d)
            self.fc2 = nn.Linear(4 * d, d)

        def forward(self, x, causal):
            b, t, d = x.shape
            h = self.heads
            q, k, v = self.qkv(self.norm1(x)).split(d, dim=-1)
            q, k, v = (z.view(b, t, h, d // h).transpose(1, 2) for z in (q, k, v))
            scores = (q @ k.transpose(-2, -1)) * (d // h) ** -0.5
            att = scores.masked_fill(causal, float("-inf")).softmax(dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, t, d)
            x = x + self.proj(y)
            return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Parameter(torch.randn(args.vocab, args.d_model) * 0.02)
            self.pos = nn.Parameter(torch.randn(args.seq, args.d_model) * 0.02)
            self.blocks = nn.ModuleList(Block(args.d_model, args.heads)
                                        for _ in range(args.layers))
            self.norm = nn.LayerNorm(args.d_model)
            self.head = nn.Linear(args.d_model, args.vocab)
            self.register_buffer("vocab_ids", torch.arange(args.vocab), persistent=False)
            self.register_buffer(
                "causal", torch.ones(args.seq, args.seq, dtype=torch.bool).triu(1),
                persistent=False)

        def one_hot(self, ids):
            return (ids.unsqueeze(-1) == self.vocab_ids).to(self.embed.dtype)

        def forward(self, tokens, targets):
            x = self.one_hot(tokens) @ self.embed + self.pos
            for block in self.blocks:
                x = block(x, self.causal)
            logp = self.head(self.norm(x)).log_softmax(dim=-1)
            return -(logp * self.one_hot(targets)).sum(dim=-1).mean()

    return Model()


def main(argv):
    args = parse_args(argv)
    # Both must be set before PyTorch initializes CUDA (and cuBLAS).
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    if args.allocator == "cudaMallocAsync":
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "backend:cudaMallocAsync"
    try:
        import torch  # pylint: disable=import-outside-toplevel
    except ImportError as e:
        return skipped(f"PyTorch is not installed ({e})")
    if not torch.cuda.is_available():
        return skipped("no CUDA device (torch.cuda.is_available() is False)")

    spt = None
    if args.allocator == "streampool":
        try:
            import streampool  # pylint: disable=import-outside-toplevel
            import streampool.torch as spt  # pylint: disable=import-outside-toplevel
        except ImportError as e:
            print(f"torch_step: the streampool package is not importable ({e}); "
                  "put <build>/python on PYTHONPATH", file=sys.stderr)
            return 1
        try:
            spt.use()
            # The runtime now, before PyTorch's first allocation, so that a
            # missing driver is a message rather than a failed allocation.
            spt.init()
        except streampool.Error as e:
            print(f"torch_step: streampool: {e}", file=sys.stderr)
            return 1

    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device("cuda", 0)

    model = build_model(torch, args).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    data = torch.Generator(device=device)
    data.manual_seed(args.seed + 1)

    losses = []
    times = []
    for _ in range(args.steps):
        tokens = torch.randint(args.vocab, (args.batch, args.seq + 1), device=device,
                               generator=data)
        torch.cuda.synchronize()
        start = time.perf_counter()
        loss = model(tokens[:, :-1], tokens[:, 1:])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        losses.append(float(loss.item()).hex())

    timed = times[args.warmup:] or times
    out = {
        "allocator": args.allocator,
        "steps": args.steps,
        "warmup": args.warmup,
        "mean_step_ms": 1e3 * sum(timed) / len(timed),
        "losses": losses,
        "device": torch.cuda.get_device_name(device),
        "torch": torch.__version__,
        "model": {k: getattr(args, k) for k in
                  ("batch", "seq", "d_model", "heads", "layers", "vocab", "seed")},
    }
    if spt is not None:
        s = spt.stats(0)
        out["peak_reserved_bytes"] = s["reserved_high"]
        out["peak_allocated_bytes"] = s["used_high"]
        out["streampool"] = {k: s[k] for k in (
            "reuse_same_stream", "reuse_event_dependency", "reuse_opportunistic",
            "reuse_after_sync", "reuse_internal_dependency", "fresh_allocs", "waits_inserted",
            "upstream_maps", "upstream_unmaps", "streams", "settings")}
    else:
        out["peak_reserved_bytes"] = torch.cuda.max_memory_reserved(device)
        out["peak_allocated_bytes"] = torch.cuda.max_memory_allocated(device)
        out["backend"] = torch.cuda.get_allocator_backend()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
