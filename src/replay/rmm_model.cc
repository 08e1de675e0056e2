#include "src/replay/rmm_model.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace streampool::replay {

namespace {

constexpr uint64_t kFirstAddress = uint64_t{0x7e} << 40;

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

struct FreeBlock {
  uint64_t size = 0;
  bool head = false;  // starts an upstream allocation
};

// One stream's free list: by address, with a (size, address) index for the
// best fit.
struct FreeList {
  std::map<uint64_t, FreeBlock> by_address;
  std::set<std::pair<uint64_t, uint64_t>> by_size;
  std::optional<uint64_t> marker;  // the stream's event, recorded at its last free

  void Erase(std::map<uint64_t, FreeBlock>::iterator it) {
    by_size.erase({it->second.size, it->first});
    by_address.erase(it);
  }
  // Inserts with coalescing: a block absorbs the next one unless that one
  // starts an upstream allocation.
  void Insert(uint64_t address, FreeBlock b) {
    auto next = by_address.lower_bound(address);
    if (next != by_address.end() && address + b.size == next->first && !next->second.head) {
      b.size += next->second.size;
      Erase(next);
    }
    auto it = by_address.lower_bound(address);
    if (it != by_address.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second.size == address && !b.head) {
        const uint64_t start = prev->first;
        FreeBlock merged = prev->second;
        merged.size += b.size;
        Erase(prev);
        by_address.emplace(start, merged);
        by_size.insert({merged.size, start});
        return;
      }
    }
    by_address.emplace(address, b);
    by_size.insert({b.size, address});
  }
  // The best fit's address, if any.
  std::optional<uint64_t> Find(uint64_t size) const {
    auto it = by_size.lower_bound({size, 0});
    if (it == by_size.end()) return std::nullopt;
    return it->second;
  }
  // Removes the block at `address` and returns it.
  FreeBlock Take(uint64_t address) {
    auto it = by_address.find(address);
    FreeBlock b = it->second;
    Erase(it);
    return b;
  }
};

class RmmModel final : public AllocatorModel {
 public:
  RmmModel(const ModelConfig& config, ModelStreams* streams)
      : config_(config), options_(config.rmm), streams_(streams) {}

  absl::Status Init() {
    if (options_.initial_pool_size % kRmmAlignment != 0 ||
        options_.maximum_pool_size % kRmmAlignment != 0) {
      return absl::InvalidArgumentError("RMM pool sizes are multiples of 256 bytes");
    }
    if (options_.maximum_pool_size != 0 &&
        options_.initial_pool_size > options_.maximum_pool_size) {
      return absl::InvalidArgumentError("the initial pool size exceeds the maximum");
    }
    if (options_.initial_pool_size == 0) return absl::OkStatus();
    std::optional<uint64_t> a = Upstream(options_.initial_pool_size, 0);
    if (!a) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the initial pool of ", options_.initial_pool_size,
                       " bytes is more than the device's ", config_.device_capacity));
    }
    ListOf(0).Insert(*a, FreeBlock{options_.initial_pool_size, true});
    return absl::OkStatus();
  }

  absl::StatusOr<uint64_t> Allocate(uint64_t bytes, uint32_t stream, uint32_t line) override {
    line_ = line;
    const uint64_t size = AlignUp(std::max<uint64_t>(bytes, 1), kRmmAlignment);
    FreeList& own = ListOf(stream);
    if (std::optional<uint64_t> a = own.Find(size)) return Serve(own, *a, size, stream);
    // Another stream's list: the first with a fit lends it, after a wait.
    for (uint32_t other : order_) {
      if (other == stream) continue;
      FreeList& l = lists_.at(other);
      std::optional<uint64_t> a = l.Find(size);
      if (!a) continue;
      if (absl::Status st = WaitOn(stream, l); !st.ok()) return st;
      ++counters_.cross_stream_reuses;
      return Serve(l, *a, size, stream);
    }
    // Then merge the other lists in, one by one, until something fits.
    for (auto it = order_.begin(); it != order_.end();) {
      const uint32_t other = *it;
      if (other == stream) {
        ++it;
        continue;
      }
      FreeList& l = lists_.at(other);
      if (absl::Status st = WaitOn(stream, l); !st.ok()) return st;
      for (auto& [address, b] : l.by_address) own.Insert(address, b);
      if (l.marker) streams_->Forget(*l.marker);
      lists_.erase(other);
      it = order_.erase(it);
      if (std::optional<uint64_t> a = own.Find(size)) {
        ++counters_.cross_stream_reuses;
        return Serve(own, *a, size, stream);
      }
    }
    // Growth: by the pool's size (or half the room under the maximum),
    // halving on failure down to the request.
    uint64_t grow = 0;
    if (options_.maximum_pool_size != 0) {
      const uint64_t room = pool_size_ >= options_.maximum_pool_size
                                ? 0
                                : AlignUp(options_.maximum_pool_size - pool_size_, kRmmAlignment);
      grow = size <= room ? std::max(size, room / 2) : 0;
    } else {
      grow = std::max(size, pool_size_);
    }
    while (grow != 0 && grow >= size) {
      if (std::optional<uint64_t> a = Upstream(grow, stream)) {
        own.Insert(*a, FreeBlock{grow, true});
        return Serve(own, *a, size, stream);
      }
      if (grow == size) break;
      grow = std::max(size, grow / 2);
    }
    ++counters_.failed;
    return absl::ResourceExhaustedError(absl::StrCat("out of memory: ", bytes,
                                                     " bytes with a pool of ", pool_size_, " of ",
                                                     config_.device_capacity));
  }

  absl::Status Free(uint64_t address, uint32_t stream, uint32_t line) override {
    line_ = line;
    auto it = live_.find(address);
    if (it == live_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("free of ", address, ", which is not live"));
    }
    const uint64_t size = it->second;
    live_.erase(it);
    used_ -= size;
    FreeList& l = ListOf(stream);
    absl::StatusOr<uint64_t> marker = streams_->Record(stream);
    if (!marker.ok()) return marker.status();
    if (l.marker) streams_->Forget(*l.marker);
    l.marker = *marker;
    l.Insert(address, FreeBlock{size, heads_.contains(address)});
    return absl::OkStatus();
  }

  absl::Status RecordUse(uint64_t address, uint32_t stream) override {
    (void)stream;
    // RMM keeps no record of other streams' uses: the caller orders them.
    if (!live_.contains(address)) {
      return absl::InvalidArgumentError(absl::StrCat("use of ", address, ", which is not live"));
    }
    return absl::OkStatus();
  }

  uint64_t reserved() const override { return pool_size_; }
  uint64_t reserved_high() const override { return pool_size_; }
  uint64_t used() const override { return used_; }
  uint64_t used_high() const override { return used_high_; }
  uint64_t segments() const override { return heads_.size(); }
  const ModelCounters& counters() const override { return counters_; }
  const std::vector<SegmentEvent>& history() const override { return history_; }

  absl::Status CheckInvariants() const override {
    uint64_t free_bytes = 0;
    std::map<uint64_t, uint64_t> covered;  // address -> size, every block
    for (const auto& [stream, l] : lists_) {
      if (l.by_size.size() != l.by_address.size()) {
        return absl::InternalError(absl::StrCat("stream ", stream, "'s size index is stale"));
      }
      for (const auto& [address, b] : l.by_address) {
        free_bytes += b.size;
        covered.emplace(address, b.size);
        if (b.head != heads_.contains(address)) {
          return absl::InternalError(absl::StrCat("block ", address, " has the wrong head mark"));
        }
      }
    }
    for (const auto& [address, size] : live_) covered.emplace(address, size);
    if (free_bytes + used_ != pool_size_) {
      return absl::InternalError(
          absl::StrCat("free ", free_bytes, " + used ", used_, " is not the pool's ", pool_size_));
    }
    uint64_t end = 0;
    for (const auto& [address, size] : covered) {
      if (address < end) return absl::InternalError(absl::StrCat("blocks overlap at ", address));
      end = address + size;
    }
    return absl::OkStatus();
  }

  std::string Describe(uint32_t stream) const override {
    uint64_t cached = 0, largest = 0;
    if (auto it = lists_.find(stream); it != lists_.end()) {
      for (const auto& [address, b] : it->second.by_address) {
        cached += b.size;
        largest = std::max(largest, b.size);
      }
    }
    return absl::StrCat("pool ", pool_size_, " in ", heads_.size(), " upstream blocks, allocated ",
                        used_, "; stream ", stream, "'s list holds ", cached,
                        " bytes, the largest block ", largest);
  }

 private:
  FreeList& ListOf(uint32_t stream) {
    auto [it, added] = lists_.try_emplace(stream);
    if (added) order_.push_back(stream);
    return it->second;
  }

  absl::Status WaitOn(uint32_t stream, const FreeList& l) {
    if (!l.marker) return absl::OkStatus();  // never recorded: nothing to wait for
    ++counters_.waits;
    return streams_->Wait(stream, *l.marker);
  }

  std::optional<uint64_t> Upstream(uint64_t size, uint32_t stream) {
    if (size > config_.device_capacity || pool_size_ > config_.device_capacity - size) {
      return std::nullopt;
    }
    const uint64_t address = next_address_;
    next_address_ = AlignUp(next_address_ + size, uint64_t{2} << 20);
    pool_size_ += size;
    heads_.insert(address);
    ++counters_.segments_made;
    counters_.segments_high = heads_.size();
    if (config_.keep_history) {
      history_.push_back({SegmentEvent::Kind::kAlloc, line_, address, size, stream});
    }
    return address;
  }

  uint64_t Serve(FreeList& from, uint64_t address, uint64_t size, uint32_t stream) {
    (void)stream;
    FreeBlock b = from.Take(address);
    if (b.size > size) from.Insert(address + size, FreeBlock{b.size - size, false});
    live_[address] = size;
    used_ += size;
    used_high_ = std::max(used_high_, used_);
    return address;
  }

  ModelConfig config_;
  RmmOptions options_;
  ModelStreams* streams_;
  std::map<uint32_t, FreeList> lists_;
  std::vector<uint32_t> order_;                   // streams in the order first seen
  absl::flat_hash_map<uint64_t, uint64_t> live_;  // address -> aligned size
  absl::flat_hash_set<uint64_t> heads_;
  uint64_t next_address_ = kFirstAddress;
  uint64_t pool_size_ = 0, used_ = 0, used_high_ = 0;
  uint32_t line_ = 0;
  ModelCounters counters_;
  std::vector<SegmentEvent> history_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<AllocatorModel>> MakeRmmModel(const ModelConfig& config,
                                                             ModelStreams* streams) {
  auto model = std::make_unique<RmmModel>(config, streams);
  if (absl::Status st = model->Init(); !st.ok()) return st;
  return model;
}

}  // namespace streampool::replay
