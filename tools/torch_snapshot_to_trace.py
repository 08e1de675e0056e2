#!/usr/bin/env python3
"""Converts a PyTorch CUDA memory snapshot to a streampool trace (v1).

    torch_snapshot_to_trace.py SNAPSHOT.pickle [-o OUT.trace] [--device N]
                               [--source TEXT]

A snapshot is what torch.cuda.memory._snapshot() returns (or _dump_snapshot
writes) after torch.cuda.memory._record_memory_history(): a dict with
`segments` (the caching allocator's state at the end) and `device_traces`
(per device, the allocator's events: alloc, free_requested, free_completed,
segment_alloc, segment_free, segment_map, segment_unmap, oom, snapshot).

The conversion (the rules traces/README.md states for the bundled traces):

* Allocations live before the trace began are emitted first, one `alloc` each
  in address order: the blocks still active in `segments` that the trace did
  not allocate, and the addresses the trace frees without having allocated
  them. So a replay holds the whole working set.
* `alloc` becomes `alloc <id> <size> <stream>` (ids count allocations from 0);
  `free_completed` becomes `free <id> <stream>`, matched by address to the
  allocation live there. `free_requested` is when the tensor died on the host;
  the free reaches the pool when PyTorch completes it, so that is what counts.
* Streams: 0 (the default stream) stays 0, others are numbered 1, 2, ... in
  order of appearance. Time stamps (`time_us`) become `advance <ns>`.
* PyTorch's own segment history is kept for streampool-replay --validate-torch
  as comments that other readers skip: `# torch_segment <address> <size>
  <stream> small|large [expandable]` for each segment live when the trace
  begins (the segments at the end, less those the trace allocated, plus
  those it freed), `# torch_block <address> <size>` after each pre-trace
  `alloc` (where the block sits; its size from the segment's block list, or
  the request rounded to 512 B when the trace freed it), and `# segment_alloc
  | segment_free | segment_map | segment_unmap <address> <size> <stream>`
  where the event happened, before the op that caused it.
* `# frames <frame> | <frame> ...` after an alloc: the top frames of its
  stack as the snapshot recorded them (innermost first, `name (file:line)`,
  at most --frames of them; none where the snapshot has none), so that a
  policy report can say which code holds the blocks live at the peak.
* Header comments carry the figures a replay compares with: peak_live_bytes
  (peak of live requested sizes, pre-trace allocations included) and
  torch_peak_reserved_bytes (the sum of the segments' total_size at the end,
  less in-trace segment growth, plus the peak of that growth).

Snapshots read: the layout torch.cuda.memory._snapshot() has had since
PyTorch 2.1 (device_traces entries with action, addr, size, stream,
time_us; segments with address, total_size, stream, segment_type,
is_expandable and blocks), through 2.10; keys added on the way
(allocator_settings, external_annotations, compile_context, user_metadata,
frames) carry nothing a trace needs and are skipped. Blocks without an
address (older snapshots) are taken to tile their segment in order. The 2.0
layout with a per-block history instead of device_traces is not read.
Expandable segments' start state is taken as their end state: segment_map
and segment_unmap inside the trace are kept as events but not undone.

A snapshot is a pickle, and unpickling runs whatever a pickle names: this
reads it with an Unpickler that refuses every global, since a snapshot is only
dicts, lists, strings and numbers. Only the standard library is used.

Exit status: 0 on success, 1 when the input is refused or malformed, 2 on a
bad command line.
"""

import argparse
import io
import pickle
import sys


class ConversionError(Exception):
    """The input is not a snapshot this tool can convert."""


class _GlobalRefused(pickle.UnpicklingError):
    pass


class _NoGlobalsUnpickler(pickle.Unpickler):
    """Loads plain data only: any class or function reference is refused."""

    def find_class(self, module, name):
        raise _GlobalRefused(
            f"refusing to load global {module}.{name}: a memory snapshot holds "
            "only plain data")


def load_snapshot(data: bytes):
    """Unpickles `data` without allowing any global."""
    try:
        return _NoGlobalsUnpickler(io.BytesIO(data)).load()
    except _GlobalRefused as e:
        raise ConversionError(f"not a safe snapshot pickle: {e}") from e
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError,
            AttributeError, MemoryError, RecursionError) as e:
        raise ConversionError(f"not a readable pickle: {type(e).__name__}: {e}") from e


def _int(entry, key, where, allow_missing=False):
    value = entry.get(key)
    if value is None and allow_missing:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConversionError(f"{where}: '{key}' must be a non-negative integer, got {value!r}")
    return value


def _blocks_of(segment, where):
    """(address, requested size, state, size) of each block of a segment. Older
    snapshots give no block addresses: blocks tile the segment in order."""
    address = _int(segment, "address", where)
    blocks = segment.get("blocks", [])
    if not isinstance(blocks, list):
        raise ConversionError(f"{where}: 'blocks' must be a list")
    out = []
    offset = address
    for j, b in enumerate(blocks):
        bw = f"{where}.blocks[{j}]"
        if not isinstance(b, dict):
            raise ConversionError(f"{bw}: must be a dict")
        size = _int(b, "size", bw)
        addr = _int(b, "address", bw, allow_missing=True)
        if addr is None:
            addr = offset
        requested = _int(b, "requested_size", bw, allow_missing=True)
        out.append((addr, requested if requested is not None else size, b.get("state"), size))
        offset = addr + size
    return out


def _frames_text(frames, limit):
    """`name (file:line) | ...` of the first `limit` frames, or None. Frames
    are untrusted text: separators and line breaks in them become spaces."""
    if not limit or not isinstance(frames, list):
        return None
    out = []
    for f in frames[:limit]:
        if not isinstance(f, dict):
            continue
        text = f"{f.get('name', '?')} ({f.get('filename', '?')}:{f.get('line', '?')})"
        out.append(" ".join(text.replace("|", " ").split()))
    return " | ".join(out) if out else None


def convert(snapshot, device=None, source="snapshot", frames=4):
    """Returns the v1 trace text for one device of `snapshot`; each alloc
    carries its top `frames` stack frames (0: none)."""
    if not isinstance(snapshot, dict):
        raise ConversionError("a snapshot is a dict; got " + type(snapshot).__name__)
    traces = snapshot.get("device_traces")
    if not isinstance(traces, list):
        raise ConversionError("the snapshot has no 'device_traces' list "
                              "(record it with torch.cuda.memory._record_memory_history())")
    if device is None:
        device = next((i for i, t in enumerate(traces) if t), 0)
    if not 0 <= device < len(traces) or not isinstance(traces[device], list):
        raise ConversionError(f"no device_traces[{device}]")
    events = traces[device]
    segments = snapshot.get("segments", [])
    if not isinstance(segments, list):
        raise ConversionError("'segments' must be a list")

    stream_ids = {0: 0}

    def stream_of(value, where):
        if value is None:
            return 0
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConversionError(f"{where}: 'stream' must be an integer, got {value!r}")
        if value not in stream_ids:
            stream_ids[value] = len(stream_ids)
        return stream_ids[value]

    # First pass: the in-trace ops, with pre-trace allocations discovered as
    # frees of addresses the trace never allocated.
    ops = []                 # ("alloc", key, size, stream) | ("free", key, stream) | ("advance", ns)
    live = {}                # address -> key of the allocation live there
    seen = set()             # addresses the trace has allocated or freed
    pretrace = {}            # address -> (key, size, stream)
    counts = {}
    seg_delta, seg_peak, seg_run = 0, 0, 0
    last_time = None
    pending_ns = 0
    dropped_frees = alloc_at_live = size_mismatches = 0
    sizes = {}               # key -> size
    next_key = 0
    for i, e in enumerate(events):
        where = f"device_traces[{device}][{i}]"
        if not isinstance(e, dict) or not isinstance(e.get("action"), str):
            raise ConversionError(f"{where}: an event is a dict with an 'action' string")
        action = e["action"]
        counts[action] = counts.get(action, 0) + 1
        t = e.get("time_us")
        if isinstance(t, int) and not isinstance(t, bool):
            # Time between allocator calls; events that move no memory just
            # add to the next advance. Time going back (threads) moves nothing.
            if last_time is not None and t > last_time:
                pending_ns += (t - last_time) * 1000
            if last_time is None or t > last_time:
                last_time = t
        if pending_ns and action in ("alloc", "free_completed"):
            ops.append(("advance", pending_ns))
            pending_ns = 0
        if action == "alloc":
            addr, size = _int(e, "addr", where), _int(e, "size", where)
            stream = stream_of(e.get("stream"), where)
            if addr in live:
                # A lost free (the history is a ring buffer): end the old one.
                alloc_at_live += 1
                ops.append(("free", live.pop(addr), stream))
            key = next_key
            next_key += 1
            sizes[key] = size
            live[addr] = key
            seen.add(addr)
            ops.append(("alloc", key, size, stream, _frames_text(e.get("frames"), frames)))
        elif action == "free_completed":
            addr, size = _int(e, "addr", where), _int(e, "size", where)
            stream = stream_of(e.get("stream"), where)
            if addr in live:
                key = live.pop(addr)
                if sizes[key] != size:
                    size_mismatches += 1
                ops.append(("free", key, stream))
            elif addr not in seen:
                key = ("pre", addr)
                pretrace[addr] = (key, size, stream)
                sizes[key] = size
                seen.add(addr)
                ops.append(("free", key, stream))
            else:
                dropped_frees += 1
        elif action in ("segment_alloc", "segment_map"):
            seg_run += _int(e, "size", where)
            seg_peak = max(seg_peak, seg_run)
            seg_delta += _int(e, "size", where)
            ops.append(("segment", action, _int(e, "addr", where), _int(e, "size", where),
                        stream_of(e.get("stream"), where)))
        elif action in ("segment_free", "segment_unmap"):
            seg_run -= _int(e, "size", where)
            seg_delta -= _int(e, "size", where)
            ops.append(("segment", action, _int(e, "addr", where), _int(e, "size", where),
                        stream_of(e.get("stream"), where)))
        # free_requested, oom, snapshot and unknown actions move no memory.

    if pending_ns:
        ops.append(("advance", pending_ns))

    # Blocks active at the end that the trace did not allocate were live
    # before it began.
    reserved_end = 0
    segments_end = 0
    end_active = 0
    block_size = {}          # pre-trace address -> its block's size
    block_frames = {}        # pre-trace address -> its frames' text
    start_segments = {}      # address -> (size, stream, small, expandable)
    for k, seg in enumerate(segments):
        where = f"segments[{k}]"
        if not isinstance(seg, dict):
            raise ConversionError(f"{where}: must be a dict")
        if seg.get("device", device) != device:
            continue
        total = _int(seg, "total_size", where)
        reserved_end += total
        segments_end += 1
        seg_stream = stream_of(seg.get("stream"), where)
        kind = seg.get("segment_type")
        small = kind == "small" if kind in ("small", "large") else total == 2 * 1024 * 1024
        start_segments[_int(seg, "address", where)] = (total, seg_stream, small,
                                                       bool(seg.get("is_expandable", False)))
        raw_blocks = seg.get("blocks", [])
        for j, (addr, requested, state, size) in enumerate(_blocks_of(seg, where)):
            if state not in ("active_allocated", "active_pending_free", "active_awaiting_free"):
                continue
            end_active += 1
            if addr in live or addr in seen:
                continue
            key = ("pre", addr)
            pretrace[addr] = (key, requested, seg_stream)
            sizes[key] = requested
            block_size[addr] = size
            block_frames[addr] = _frames_text(raw_blocks[j].get("frames"), frames)
    # The segments at the start: undo the trace's whole-segment events, the
    # last first.
    for op in reversed(ops):
        if op[0] != "segment":
            continue
        _, action, addr, size, stream = op
        if action == "segment_alloc":
            start_segments.pop(addr, None)
        elif action == "segment_free":
            start_segments[addr] = (size, stream, size == 2 * 1024 * 1024, False)

    def segment_holding(addr):
        for base, (size, _, _, _) in start_segments.items():
            if base <= addr < base + size:
                return base
        return None

    # Ids: pre-trace allocations first, in address order, then the trace's.
    ids = {}
    lines_ops = []
    live_bytes = peak_live = 0
    for base in sorted(start_segments):
        size, stream, small, expandable = start_segments[base]
        lines_ops.append(f"# torch_segment {base} {size} {stream} "
                         f"{'small' if small else 'large'}{' expandable' if expandable else ''}")
    for addr in sorted(pretrace):
        key, size, stream = pretrace[addr]
        ids[key] = len(ids)
        line = f"alloc {ids[key]} {size} {stream}"
        # Where it sits, when a segment known at the start holds it.
        bsize = block_size.get(addr, max(512, (size + 511) // 512 * 512))
        base = segment_holding(addr)
        if base is not None and addr + bsize <= base + start_segments[base][0]:
            line += f"  # torch_block {addr} {bsize}"
        lines_ops.append(line)
        if block_frames.get(addr):
            lines_ops.append(f"# frames {block_frames[addr]}")
        live_bytes += size
    pretrace_bytes = live_bytes
    peak_live = live_bytes
    allocs = len(pretrace)
    frees = 0
    trace_time = 0
    for op in ops:
        if op[0] == "alloc":
            ids[op[1]] = len(ids)
            lines_ops.append(f"alloc {ids[op[1]]} {op[2]} {op[3]}")
            if op[4]:
                lines_ops.append(f"# frames {op[4]}")
            live_bytes += op[2]
            peak_live = max(peak_live, live_bytes)
            allocs += 1
        elif op[0] == "free":
            lines_ops.append(f"free {ids[op[1]]} {op[2]}")
            live_bytes -= sizes[op[1]]
            frees += 1
        elif op[0] == "segment":
            lines_ops.append(f"# {op[1]} {op[2]} {op[3]} {op[4]}")
        else:
            lines_ops.append(f"advance {op[1]}")
            trace_time += op[1]

    # One line of header per value: a source given with newlines stays one.
    source = " ".join(str(source).split())
    reserved_start = reserved_end - seg_delta
    if reserved_start < 0:
        raise ConversionError(
            f"segments hold {reserved_end} bytes at the end, less than the trace's net "
            f"segment growth {seg_delta}: the snapshot is inconsistent")
    torch_peak = reserved_start + seg_peak
    header = [
        "# streampool trace v1",
        f"# source: {source}",
        f"# kind pytorch-memory-snapshot device_traces[{device}] ({len(events)} events)",
        "# actions " + " ".join(f"{a}={n}" for a, n in sorted(counts.items())),
        f"# pretrace {len(pretrace)} allocations live before the trace began are emitted "
        "first, in address order",
        f"# allocs {allocs}",
        f"# frees {frees}",
        f"# distinct_sizes {len(set(sizes.values()))}",
        f"# peak_live_bytes {peak_live}",
        f"# torch_peak_reserved_bytes {torch_peak} (method: sum of snapshot segments "
        f"total_size {reserved_end} minus net in-trace segment growth {seg_delta}, plus the "
        f"peak of in-trace segment growth {seg_peak})",
        f"# torch_reserved_at_trace_start {reserved_start}",
        f"# torch_segments_at_end {segments_end}",
        f"# pretrace_live_bytes {pretrace_bytes}",
        f"# live_at_end_allocs {allocs - frees}",
        f"# live_at_end_bytes {live_bytes}",
        f"# snapshot_blocks_active {end_active}",
        f"# alloc_at_live_address {alloc_at_live}",
        f"# dropped_frees {dropped_frees}",
        f"# free_size_mismatches {size_mismatches}",
        f"# duration_ns {trace_time}",
        f"# streams {len(stream_ids)}",
        "# ops: alloc <id> <size_bytes> <stream> | free <id> <stream> | advance <ns>; "
        "torch_segment, torch_block and segment_* comments: PyTorch's own segments; "
        "frames comments: an alloc's top stack frames",
    ]
    return "\n".join(header + lines_ops) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Convert a PyTorch memory snapshot pickle to a streampool trace (v1).")
    parser.add_argument("snapshot", help="the .pickle from torch.cuda.memory._dump_snapshot")
    parser.add_argument("-o", "--output", help="the trace to write (default: stdout)")
    parser.add_argument("--device", type=int, default=None,
                        help="which device_traces entry (default: the first non-empty one)")
    parser.add_argument("--source", default=None,
                        help="text for the '# source:' line (default: the input path)")
    parser.add_argument("--frames", type=int, default=4,
                        help="stack frames kept per allocation, innermost first (default 4; "
                        "0: none)")
    args = parser.parse_args(argv)
    if args.frames < 0:
        parser.error("--frames is 0 or more")
    try:
        with open(args.snapshot, "rb") as f:
            data = f.read()
        text = convert(load_snapshot(data), device=args.device,
                       source=args.source if args.source is not None else args.snapshot,
                       frames=args.frames)
    except OSError as e:
        print(f"torch_snapshot_to_trace: {e}", file=sys.stderr)
        return 1
    except ConversionError as e:
        print(f"torch_snapshot_to_trace: {args.snapshot}: {e}", file=sys.stderr)
        return 1
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
