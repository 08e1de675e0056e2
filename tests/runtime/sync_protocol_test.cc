// SyncProtocol, through a runtime: a synchronize that really blocks (threads
// executor) drops the runtime's lock while it waits, so other host threads go
// on; and what it proves complete becomes reusable memory in every pool.
#include "src/runtime/sync_protocol.h"

#include <atomic>
#include <cstdint>
#include <future>
#include <memory>
#include <thread>

#include "gtest/gtest.h"
#include "streampool/runtime.h"

namespace streampool {
namespace {

std::unique_ptr<Runtime> NewRuntime(ExecutorKind executor) {
  RuntimeConfig cfg;
  cfg.device_capacity = uint64_t{256} << 20;
  cfg.executor = executor;
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Create(cfg);
  EXPECT_TRUE(rt.ok()) << rt.status();
  return rt.ok() ? *std::move(rt) : nullptr;
}

TEST(SyncProtocolTest, ABlockedSynchronizeLetsOtherThreadsIn) {
  std::unique_ptr<Runtime> rt = NewRuntime(ExecutorKind::kThreads);
  ASSERT_NE(rt, nullptr);
  absl::StatusOr<StreamId> s = rt->CreateStream(0);
  ASSERT_TRUE(s.ok());
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  // The stream cannot finish until this thread says so.
  ASSERT_TRUE(rt->LaunchHostFunc(*s, [released] { released.wait(); }).ok());
  std::atomic<bool> syncing{false};
  std::thread waiter([&] {
    syncing = true;
    EXPECT_TRUE(rt->StreamSynchronize(*s).ok());
  });
  while (!syncing) std::this_thread::yield();
  // Were the lock held across the wait, each of these would block forever
  // (the stream only completes after them).
  absl::StatusOr<StreamId> other = rt->CreateStream(0);
  ASSERT_TRUE(other.ok());
  absl::StatusOr<AllocInfo> a = rt->MallocAsync(4096, *other);
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(rt->FreeAsync(a->ptr, *other).ok());
  EXPECT_EQ(rt->StreamQuery(*s).code(), absl::StatusCode::kUnavailable);
  release.set_value();
  waiter.join();
  EXPECT_TRUE(rt->StreamQuery(*s).ok());
  EXPECT_TRUE(rt->DestroyStream(*other).ok());
  EXPECT_TRUE(rt->DestroyStream(*s).ok());
}

TEST(SyncProtocolTest, WhatASyncProvesIsReusableByAnyStream) {
  std::unique_ptr<Runtime> rt = NewRuntime(ExecutorKind::kSimulator);
  ASSERT_NE(rt, nullptr);
  absl::StatusOr<StreamId> s = rt->CreateStream(0, /*non_blocking=*/true);
  absl::StatusOr<StreamId> t = rt->CreateStream(0, /*non_blocking=*/true);
  ASSERT_TRUE(s.ok() && t.ok());
  absl::StatusOr<PoolId> pool = rt->DefaultPool(0);
  ASSERT_TRUE(pool.ok());
  ASSERT_TRUE(rt->SetPoolAttribute(*pool, PoolAttr::kReuseAllowOpportunistic, 0).ok());
  ASSERT_TRUE(rt->SetPoolAttribute(*pool, PoolAttr::kReleaseThreshold, UINT64_MAX).ok());
  absl::StatusOr<AllocInfo> a = rt->MallocAsync(1 << 20, *s);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(rt->LaunchKernel(*s, 1000, {}).ok());
  ASSERT_TRUE(rt->FreeAsync(a->ptr, *s).ok());
  // Before any sync, t may not take s's free (no order, no observation).
  absl::StatusOr<AllocInfo> before = rt->MallocAsync(1 << 20, *t);
  ASSERT_TRUE(before.ok());
  EXPECT_NE(before->ptr, a->ptr);
  ASSERT_TRUE(rt->StreamSynchronize(*s).ok());
  absl::StatusOr<AllocInfo> after = rt->MallocAsync(1 << 20, *t);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->ptr, a->ptr);
  EXPECT_EQ(after->rule, ReuseRule::kAfterSync);
  ASSERT_TRUE(rt->FreeAsync(after->ptr, *t).ok());
  ASSERT_TRUE(rt->FreeAsync(before->ptr, *t).ok());
}

}  // namespace
}  // namespace streampool
