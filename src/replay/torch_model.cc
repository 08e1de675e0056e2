#include "src/replay/torch_model.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace streampool::replay {

uint64_t TorchRoundSize(uint64_t size, const TorchOptions& options) {
  if (size < kTorchMinBlock) return kTorchMinBlock;
  // The interval of the size's power of two, counted from 1 MiB; smaller
  // sizes take the first interval's setting.
  const int log_size = 63 - std::countl_zero(size);
  const int index = std::clamp(log_size - 20, 0, 15);
  const uint64_t divisions = options.roundup_divisions[static_cast<size_t>(index)];
  if (divisions > 1 && size > kTorchMinBlock * divisions) {
    if (std::has_single_bit(size)) return size;
    const uint64_t floor = std::bit_floor(size);
    const uint64_t step = floor >> (63 - std::countl_zero(divisions));
    if (step == 0) return floor << 1;
    const uint64_t down = size & ~(step - 1);
    return down == size ? size : down + step;
  }
  return (size + kTorchMinBlock - 1) / kTorchMinBlock * kTorchMinBlock;
}

uint64_t TorchAllocationSize(uint64_t rounded) {
  if (rounded <= kTorchSmallSize) return kTorchSmallBuffer;
  if (rounded < kTorchMinLargeAlloc) return kTorchLargeBuffer;
  return (rounded + kTorchRoundLarge - 1) / kTorchRoundLarge * kTorchRoundLarge;
}

namespace {

// New segments' addresses start here, 2 MiB aligned, and only grow.
constexpr uint64_t kFirstAddress = uint64_t{0x7f} << 40;

struct Block {
  uint64_t address = 0;
  uint64_t size = 0;
  uint64_t requested = 0;
  uint32_t stream = 0;
  bool small = false;
  bool allocated = false;
  Block* prev = nullptr;  // neighbours in the segment
  Block* next = nullptr;
  int event_count = 0;         // record_stream events not yet complete
  std::vector<uint32_t> uses;  // other streams the live block is used on
  uint64_t gc_base = 0;        // the pool's lookup count when cached
  uint64_t segment = 0;        // the segment's address
};

struct BySize {
  bool operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream) return a->stream < b->stream;
    if (a->size != b->size) return a->size < b->size;
    return a->address < b->address;
  }
};

struct Pool {
  bool small = false;
  std::set<Block*, BySize> blocks;  // free blocks
  uint64_t lookups = 0;             // get_free_block calls (garbage collection age)
};

struct Segment {
  uint64_t address = 0;
  uint64_t size = 0;  // mapped bytes (expandable: the mapped prefix)
  uint32_t stream = 0;
  bool small = false;
  bool expandable = false;
  uint64_t va_size = 0;  // expandable: the address space reserved
  Block* head = nullptr;
};

class TorchModel final : public AllocatorModel {
 public:
  TorchModel(const ModelConfig& config, ModelStreams* streams)
      : config_(config), options_(config.torch), streams_(streams) {
    small_.small = true;
  }
  ~TorchModel() override {
    for (auto& [address, seg] : segments_) {
      for (Block* b = seg.head; b != nullptr;) {
        Block* next = b->next;
        delete b;
        b = next;
      }
    }
  }

  absl::Status Seed(const std::vector<InitialSegment>& segments,
                    const std::vector<InitialBlock>& blocks) override {
    if (!segments_.empty() || counters_.segments_made != 0) {
      return absl::FailedPreconditionError("a model is seeded before its first allocation");
    }
    std::map<uint64_t, const InitialSegment*> by_address;
    for (const InitialSegment& s : segments) {
      if (s.size == 0 || s.address + s.size < s.address) {
        return absl::InvalidArgumentError(absl::StrCat("segment at ", s.address, " is empty"));
      }
      by_address[s.address] = &s;
    }
    uint64_t last_end = 0;
    for (auto& [address, s] : by_address) {
      if (address < last_end) {
        return absl::InvalidArgumentError(absl::StrCat("segments overlap at ", address));
      }
      last_end = address + s->size;
    }
    std::map<uint64_t, const InitialBlock*> live;
    for (const InitialBlock& b : blocks) live[b.address] = &b;
    for (const auto& entry : by_address) {
      // Plain names, not a structured binding: the lambda below captures them, which clang 14
      // refuses for bindings.
      const uint64_t address = entry.first;
      const InitialSegment* s = entry.second;
      Segment seg;
      seg.address = address;
      seg.size = s->size;
      seg.stream = s->stream;
      seg.small = s->small;
      seg.expandable = s->expandable;
      seg.va_size = s->size;
      uint64_t at = address;
      Block* last = nullptr;
      auto append = [&](uint64_t start, uint64_t size, bool allocated) {
        Block* b = new Block;
        b->address = start;
        b->size = size;
        b->stream = s->stream;
        b->small = s->small;
        b->allocated = allocated;
        b->segment = address;
        b->prev = last;
        if (last != nullptr) last->next = b;
        if (seg.head == nullptr) seg.head = b;
        last = b;
        return b;
      };
      for (auto it = live.lower_bound(address); it != live.end() && it->first < address + s->size;
           ++it) {
        const InitialBlock& ib = *it->second;
        if (ib.address < at || ib.size == 0 || ib.address + ib.size > address + s->size) {
          return absl::InvalidArgumentError(
              absl::StrCat("block at ", ib.address, " does not fit its segment at ", address));
        }
        if (ib.address > at) append(at, ib.address - at, false);
        Block* b = append(ib.address, ib.size, true);
        live_[b->address] = b;
        used_ += b->size;
        at = ib.address + ib.size;
      }
      if (at < address + s->size) append(at, address + s->size - at, false);
      for (Block* b = seg.head; b != nullptr; b = b->next) {
        if (!b->allocated) PoolOf(b->small).blocks.insert(b);
      }
      reserved_ += seg.size;
      next_address_ = std::max(next_address_, AlignUp(address + seg.va_size, kTorchRoundLarge));
      segments_.emplace(address, seg);
    }
    for (const InitialBlock& b : blocks) {
      if (live_.find(b.address) == live_.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("block at ", b.address, " lies in no segment"));
      }
    }
    reserved_high_ = reserved_;
    used_high_ = used_;
    counters_.segments_high = segments_.size();
    return absl::OkStatus();
  }

  absl::StatusOr<uint64_t> Allocate(uint64_t orig_size, uint32_t stream, uint32_t line) override {
    line_ = line;
    if (absl::Status st = ProcessEvents(); !st.ok()) return st;
    const uint64_t size = TorchRoundSize(orig_size, options_);
    Pool& pool = PoolOf(size <= kTorchSmallSize);
    const uint64_t alloc_size = TorchAllocationSize(size);
    Block* block = GetFreeBlock(pool, stream, size);
    if (block == nullptr) {
      if (GcActive()) GarbageCollect();
      block = AllocBlock(pool, stream, size, alloc_size);
      if (block == nullptr && ReleaseAvailable(pool, stream, size)) {
        block = AllocBlock(pool, stream, size, alloc_size);
      }
      if (block == nullptr) {
        if (absl::Status st = ReleaseCached(); !st.ok()) return st;
        ++counters_.oom_retries;
        block = AllocBlock(pool, stream, size, alloc_size);
      }
      if (block == nullptr) {
        ++counters_.failed;
        return absl::ResourceExhaustedError(absl::StrCat("out of memory: ", orig_size, " bytes (",
                                                         size, " rounded) with ", reserved_,
                                                         " reserved of ", config_.device_capacity));
      }
    }
    // The front serves; a remainder worth keeping goes back to the pool.
    if (ShouldSplit(*block, size)) {
      Block* rest = new Block(*block);
      rest->address = block->address + size;
      rest->size = block->size - size;
      rest->prev = block;
      rest->next = block->next;
      rest->uses.clear();
      if (block->next != nullptr) block->next->prev = rest;
      block->next = rest;
      block->size = size;
      InsertFree(rest);
    }
    block->allocated = true;
    block->requested = orig_size;
    block->stream = stream;
    live_[block->address] = block;
    used_ += block->size;
    used_high_ = std::max(used_high_, used_);
    return block->address;
  }

  absl::Status Free(uint64_t address, uint32_t stream, uint32_t line) override {
    line_ = line;
    auto it = live_.find(address);
    if (it == live_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("free of ", address, ", which is not live"));
    }
    Block* block = it->second;
    live_.erase(it);
    block->allocated = false;
    used_ -= block->size;
    // A free on another stream than the allocating one is a use there: the
    // caching allocator's caller would have recorded the stream.
    if (stream != block->stream) AddUse(block, stream);
    if (block->uses.empty()) {
      FreeBlock(block);
      return absl::OkStatus();
    }
    for (uint32_t s : block->uses) {
      absl::StatusOr<uint64_t> marker = streams_->Record(s);
      if (!marker.ok()) return marker.status();
      ++block->event_count;
      pending_[s].push_back({*marker, block});
    }
    block->uses.clear();
    return absl::OkStatus();
  }

  absl::Status RecordUse(uint64_t address, uint32_t stream) override {
    auto it = live_.find(address);
    if (it == live_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("use of ", address, ", which is not live"));
    }
    AddUse(it->second, stream);
    return absl::OkStatus();
  }

  uint64_t reserved() const override { return reserved_; }
  uint64_t reserved_high() const override { return reserved_high_; }
  uint64_t used() const override { return used_; }
  uint64_t used_high() const override { return used_high_; }
  uint64_t segments() const override { return segments_.size(); }
  const ModelCounters& counters() const override { return counters_; }
  const std::vector<SegmentEvent>& history() const override { return history_; }

  absl::Status CheckInvariants() const override {
    uint64_t reserved = 0, used = 0, free_blocks = 0;
    for (const auto& [address, seg] : segments_) {
      reserved += seg.size;
      uint64_t at = address;
      const Block* prev = nullptr;
      for (const Block* b = seg.head; b != nullptr; prev = b, b = b->next) {
        if (b->address != at || b->prev != prev || b->segment != address || b->size == 0) {
          return absl::InternalError(absl::StrCat("segment ", address, " is not tiled at ", at));
        }
        at += b->size;
        if (b->allocated) {
          used += b->size;
          auto it = live_.find(b->address);
          if (it == live_.end() || it->second != b) {
            return absl::InternalError(absl::StrCat("live block ", b->address, " not indexed"));
          }
        } else if (b->event_count == 0) {
          ++free_blocks;
          const Pool& pool = b->small ? small_ : large_;
          if (pool.blocks.count(const_cast<Block*>(b)) != 1) {
            return absl::InternalError(absl::StrCat("free block ", b->address, " not in its pool"));
          }
          if (prev != nullptr && !prev->allocated && prev->event_count == 0) {
            return absl::InternalError(absl::StrCat("free blocks ", prev->address, " and ",
                                                    b->address, " were not merged"));
          }
        }
      }
      if (at != address + seg.size) {
        return absl::InternalError(absl::StrCat("segment ", address, " blocks end at ", at));
      }
    }
    if (reserved != reserved_ || used != used_) {
      return absl::InternalError(absl::StrCat("counted ", reserved_, "/", used_, " reserved/used, ",
                                              "blocks hold ", reserved, "/", used));
    }
    if (free_blocks != small_.blocks.size() + large_.blocks.size()) {
      return absl::InternalError("the pools hold other blocks than the free ones");
    }
    return absl::OkStatus();
  }

  std::string Describe(uint32_t stream) const override {
    uint64_t cached = 0, largest = 0;
    size_t count = 0;
    for (const Pool* pool : {&small_, &large_}) {
      for (const Block* b : pool->blocks) {
        if (b->stream != stream) continue;
        cached += b->size;
        largest = std::max(largest, b->size);
        ++count;
      }
    }
    return absl::StrCat("reserved ", reserved_, " in ", segments_.size(), " segments, allocated ",
                        used_, "; stream ", stream, " has ", count, " cached blocks of ", cached,
                        " bytes, the largest ", largest);
  }

 private:
  struct Pending {
    uint64_t marker;
    Block* block;
  };

  static uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

  Pool& PoolOf(bool small) { return small ? small_ : large_; }

  bool GcActive() const { return options_.garbage_collection_threshold > 0; }

  void AddUse(Block* block, uint32_t stream) {
    if (stream == block->stream) return;
    if (std::find(block->uses.begin(), block->uses.end(), stream) == block->uses.end()) {
      block->uses.push_back(stream);
    }
  }

  void InsertFree(Block* b) {
    Pool& pool = PoolOf(b->small);
    b->gc_base = pool.lookups;
    pool.blocks.insert(b);
  }

  void Note(SegmentEvent::Kind kind, uint64_t address, uint64_t size, uint32_t stream) {
    if (config_.keep_history) history_.push_back({kind, line_, address, size, stream});
  }

  // Blocks whose record_stream events have all completed go back to their
  // pool, stream by stream in the order they were freed.
  absl::Status ProcessEvents() {
    for (auto it = pending_.begin(); it != pending_.end();) {
      std::deque<Pending>& q = it->second;
      while (!q.empty()) {
        absl::StatusOr<bool> done = streams_->Done(q.front().marker);
        if (!done.ok()) return done.status();
        if (!*done) break;
        Block* b = q.front().block;
        streams_->Forget(q.front().marker);
        q.pop_front();
        // Back to its own stream's cache: PyTorch never reuses a block on
        // another stream, so nothing here counts as a cross-stream reuse.
        if (--b->event_count == 0) FreeBlock(b);
      }
      it = q.empty() ? pending_.erase(it) : std::next(it);
    }
    return absl::OkStatus();
  }

  Block* GetFreeBlock(Pool& pool, uint32_t stream, uint64_t size) {
    if (GcActive()) ++pool.lookups;
    Block key;
    key.stream = stream;
    key.size = size;
    auto it = pool.blocks.lower_bound(&key);
    if (it == pool.blocks.end() || (*it)->stream != stream) return nullptr;
    const uint64_t max_split = options_.max_split_size;
    if (size < max_split && (*it)->size >= max_split) return nullptr;
    if (size >= max_split && (*it)->size >= size + kTorchLargeBuffer) return nullptr;
    Block* b = *it;
    pool.blocks.erase(it);
    return b;
  }

  bool ShouldSplit(const Block& b, uint64_t size) const {
    const uint64_t remaining = b.size - size;
    if (b.small || options_.expandable_segments) return remaining >= kTorchMinBlock;
    return size < options_.max_split_size && remaining > kTorchSmallSize;
  }

  bool DeviceHas(uint64_t bytes) const {
    return bytes <= config_.device_capacity && reserved_ <= config_.device_capacity - bytes;
  }

  void Reserved(int64_t delta) {
    reserved_ += static_cast<uint64_t>(delta);
    reserved_high_ = std::max(reserved_high_, reserved_);
  }

  // cudaMalloc of a new segment (or an expandable segment's growth); the
  // whole of it is the block returned, out of the pool.
  Block* AllocBlock(Pool& pool, uint32_t stream, uint64_t size, uint64_t alloc_size) {
    if (options_.expandable_segments) return GrowExpandable(pool, stream, size);
    if (!DeviceHas(alloc_size)) return nullptr;
    Segment seg;
    seg.address = next_address_;
    seg.size = seg.va_size = alloc_size;
    seg.stream = stream;
    seg.small = pool.small;
    next_address_ = AlignUp(next_address_ + alloc_size, kTorchRoundLarge);
    Block* b = new Block;
    b->address = seg.address;
    b->size = alloc_size;
    b->stream = stream;
    b->small = pool.small;
    b->segment = seg.address;
    seg.head = b;
    segments_.emplace(seg.address, seg);
    Reserved(static_cast<int64_t>(alloc_size));
    ++counters_.segments_made;
    counters_.segments_high = std::max<uint64_t>(counters_.segments_high, segments_.size());
    Note(SegmentEvent::Kind::kAlloc, seg.address, alloc_size, stream);
    return b;
  }

  // The stream's expandable segment of the pool, mapped further at its end
  // until its last free block holds `size`; that block is returned.
  Block* GrowExpandable(Pool& pool, uint32_t stream, uint64_t size) {
    const uint64_t page = pool.small ? kTorchSmallBuffer : kTorchLargeBuffer;
    Segment* seg = nullptr;
    for (auto& [address, s] : segments_) {
      if (s.expandable && s.stream == stream && s.small == pool.small) seg = &s;
    }
    if (seg == nullptr) {
      Segment fresh;
      fresh.address = next_address_;
      fresh.va_size = AlignUp(std::max<uint64_t>(config_.device_capacity, page), page);
      fresh.stream = stream;
      fresh.small = pool.small;
      fresh.expandable = true;
      next_address_ = AlignUp(next_address_ + fresh.va_size, kTorchRoundLarge);
      seg = &segments_.emplace(fresh.address, fresh).first->second;
      counters_.segments_high = std::max<uint64_t>(counters_.segments_high, segments_.size());
    }
    Block* last = seg->head;
    while (last != nullptr && last->next != nullptr) last = last->next;
    const bool tail_free = last != nullptr && !last->allocated && last->event_count == 0;
    const uint64_t have = tail_free ? last->size : 0;
    const uint64_t map = AlignUp(size - std::min(size, have), page);
    if (seg->size + map > seg->va_size || !DeviceHas(map)) return nullptr;
    const uint64_t start = seg->address + seg->size;
    seg->size += map;
    Reserved(static_cast<int64_t>(map));
    ++counters_.segments_made;
    Note(SegmentEvent::Kind::kMap, start, map, stream);
    if (tail_free) {
      pool.blocks.erase(last);
      last->size += map;
      return last;
    }
    Block* b = new Block;
    b->address = start;
    b->size = map;
    b->stream = stream;
    b->small = pool.small;
    b->segment = seg->address;
    b->prev = last;
    if (last != nullptr) {
      last->next = b;
    } else {
      seg->head = b;
    }
    return b;
  }

  // Merges a freed block with its free neighbours and caches it.
  void FreeBlock(Block* b) {
    Pool& pool = PoolOf(b->small);
    for (Block* n : {b->prev, b->next}) {
      if (n == nullptr || n->allocated || n->event_count > 0 || !n->uses.empty()) continue;
      pool.blocks.erase(n);
      if (n == b->prev) {
        b->address = n->address;
        b->prev = n->prev;
        if (n->prev != nullptr) n->prev->next = b;
        if (segments_.at(b->segment).head == n) segments_.at(b->segment).head = b;
      } else {
        b->next = n->next;
        if (n->next != nullptr) n->next->prev = b;
      }
      b->size += n->size;
      delete n;
    }
    InsertFree(b);
  }

  // cudaFree of a cached segment that is one free block (or, expandable:
  // unmapping its free pages at the end).
  void ReleaseBlock(Block* b) {
    Pool& pool = PoolOf(b->small);
    Segment& seg = segments_.at(b->segment);
    if (seg.expandable) {
      const uint64_t page = seg.small ? kTorchSmallBuffer : kTorchLargeBuffer;
      const uint64_t keep = AlignUp(b->address - seg.address, page);
      const uint64_t end = seg.address + seg.size;
      if (seg.address + keep >= end) return;
      const uint64_t unmap = end - (seg.address + keep);
      pool.blocks.erase(b);
      seg.size -= unmap;
      Reserved(-static_cast<int64_t>(unmap));
      ++counters_.segments_freed;
      Note(SegmentEvent::Kind::kUnmap, seg.address + keep, unmap, seg.stream);
      if (b->address == seg.address + keep) {
        if (b->prev != nullptr) {
          b->prev->next = nullptr;
        } else {
          seg.head = nullptr;
        }
        delete b;
      } else {
        b->size -= unmap;
        InsertFree(b);
      }
      return;
    }
    pool.blocks.erase(b);
    Reserved(-static_cast<int64_t>(seg.size));
    ++counters_.segments_freed;
    Note(SegmentEvent::Kind::kFree, seg.address, seg.size, seg.stream);
    segments_.erase(b->segment);
    delete b;
  }

  static bool Whole(const Block* b) { return b->prev == nullptr && b->next == nullptr; }
  // A whole segment, or the free end of an expandable one.
  bool Releasable(const Block* b) const {
    return Whole(b) || (segments_.at(b->segment).expandable && b->next == nullptr);
  }

  // Out of memory, first step: free one cached oversize block at least as
  // large as the request, or, when none is, oversize blocks from the largest
  // down until they add up to it. Only with max_split_size set.
  bool ReleaseAvailable(Pool& pool, uint32_t stream, uint64_t size) {
    const uint64_t max_split = options_.max_split_size;
    if (max_split == UINT64_MAX) return false;
    Block key;
    key.stream = stream;
    key.size = std::max(size, max_split);
    auto it = pool.blocks.lower_bound(&key);
    if (it != pool.blocks.end() && (*it)->stream == stream &&
        !segments_.at((*it)->segment).expandable && Whole(*it)) {
      ReleaseBlock(*it);
      return true;
    }
    if (it == pool.blocks.begin()) return false;
    --it;
    std::vector<Block*> victims;
    uint64_t released = 0;
    while (released < key.size && (*it)->size >= max_split && (*it)->stream == stream) {
      if (!segments_.at((*it)->segment).expandable && Whole(*it)) {
        victims.push_back(*it);
        released += (*it)->size;
      }
      if (it == pool.blocks.begin()) break;
      --it;
    }
    for (Block* b : victims) ReleaseBlock(b);
    return released >= key.size;
  }

  // Out of memory, last step: wait for every record_stream event, then
  // free every cached segment that is one free block, in both pools.
  absl::Status ReleaseCached() {
    if (!pending_.empty()) {
      ++counters_.syncs;
      if (absl::Status st = streams_->SynchronizeDevice(); !st.ok()) return st;
      for (auto& [s, q] : pending_) {
        for (const Pending& p : q) {
          streams_->Forget(p.marker);
          if (--p.block->event_count == 0) FreeBlock(p.block);
        }
      }
      pending_.clear();
    }
    for (Pool* pool : {&large_, &small_}) {
      std::vector<Block*> victims;
      for (Block* b : pool->blocks) {
        if (Releasable(b)) victims.push_back(b);
      }
      for (Block* b : victims) ReleaseBlock(b);
    }
    return absl::OkStatus();
  }

  // Frees cached whole segments of the large pool at or above the mean age,
  // in whole passes, until reserved is below the threshold's share of the
  // device. Expandable segments are left alone.
  void GarbageCollect() {
    const auto limit = static_cast<uint64_t>(options_.garbage_collection_threshold *
                                             static_cast<double>(config_.device_capacity));
    if (reserved_ <= limit) return;
    const uint64_t target = reserved_ - limit;
    Pool& pool = large_;
    double total_age = 0;
    uint64_t freeable = 0;
    auto freeable_block = [&](const Block* b) {
      return Whole(b) && !segments_.at(b->segment).expandable;
    };
    for (const Block* b : pool.blocks) {
      if (freeable_block(b)) {
        total_age += static_cast<double>(pool.lookups - b->gc_base);
        ++freeable;
      }
    }
    uint64_t reclaimed = 0;
    bool freed = true;
    while (reclaimed < target && freed && freeable > 0) {
      const double age_threshold = total_age / static_cast<double>(freeable);
      freed = false;
      std::vector<Block*> victims;
      for (Block* b : pool.blocks) {
        const auto age = static_cast<double>(pool.lookups - b->gc_base);
        if (freeable_block(b) && age >= age_threshold) victims.push_back(b);
      }
      for (Block* b : victims) {
        freed = true;
        reclaimed += b->size;
        total_age -= static_cast<double>(pool.lookups - b->gc_base);
        --freeable;
        ReleaseBlock(b);
      }
    }
  }

  ModelConfig config_;
  TorchOptions options_;
  ModelStreams* streams_;
  Pool small_, large_;
  std::map<uint64_t, Segment> segments_;  // by address
  absl::flat_hash_map<uint64_t, Block*> live_;
  std::map<uint32_t, std::deque<Pending>> pending_;  // by stream
  uint64_t next_address_ = kFirstAddress;
  uint64_t reserved_ = 0, reserved_high_ = 0, used_ = 0, used_high_ = 0;
  uint32_t line_ = 0;
  ModelCounters counters_;
  std::vector<SegmentEvent> history_;
};

}  // namespace

std::unique_ptr<AllocatorModel> MakeTorchModel(const ModelConfig& config, ModelStreams* streams) {
  return std::make_unique<TorchModel>(config, streams);
}

}  // namespace streampool::replay
