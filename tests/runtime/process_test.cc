// The Process object: what is process-wide is injected into runtimes, so a
// Process of one's own isolates its runtimes' registry and DVPP window from
// the default process's.
#include "src/runtime/process.h"

#include <cstdint>

#include "gtest/gtest.h"
#include "src/runtime/runtime_impl.h"
#include "streampool/runtime.h"

namespace streampool::internal {
namespace {

// A runtime of `process`: its handles are looked up there, not in the
// default process.
absl::StatusOr<std::shared_ptr<RuntimeImpl>> NewRuntime(Process& process) {
  RuntimeConfig cfg;
  cfg.device_capacity = uint64_t{256} << 20;
  return RuntimeImpl::Create(cfg, process);
}

TEST(ProcessTest, ARuntimeRegistersInTheProcessItWasGiven) {
  Process own;
  auto rt = NewRuntime(own);
  ASSERT_TRUE(rt.ok()) << rt.status();
  EXPECT_EQ(own.registry().Find((*rt)->id()), *rt);
  // Its handles name it in its own process only.
  EXPECT_EQ(Process::Default().registry().Find((*rt)->id()), nullptr);
  EXPECT_FALSE(RuntimeImpl::Find(Process::Default(), (*rt)->handle()).ok());
  EXPECT_EQ(RuntimeImpl::FindFast(Process::Default(), (*rt)->handle()), nullptr);
  EXPECT_EQ(*RuntimeImpl::Find(own, (*rt)->handle()), *rt);
  EXPECT_EQ(RuntimeImpl::FindFast(own, (*rt)->handle()), rt->get());

  absl::StatusOr<void*> p = (*rt)->Run<&Allocator::Malloc>(4096, 0);
  ASSERT_TRUE(p.ok()) << p.status();
  const auto addr = reinterpret_cast<uintptr_t>(*p);
  EXPECT_EQ(own.registry().RuntimeOwning(addr), (*rt)->id());
  EXPECT_EQ(Process::Default().registry().RuntimeOwning(addr), 0u);
  ASSERT_TRUE((*rt)->Run<&Allocator::Free>(*p).ok());
  EXPECT_EQ(own.registry().RuntimeOwning(addr), 0u) << "unregistered with the free";
  EXPECT_FALSE(RuntimeImpl::Destroy(Process::Default(), (*rt)->handle()).ok());
  ASSERT_TRUE(RuntimeImpl::Destroy(own, (*rt)->handle()).ok());
  EXPECT_EQ(own.registry().Find((*rt)->id()), nullptr);
}

TEST(ProcessTest, DvppPoolsCarveTheirProcesssWindow) {
  Process own;
  auto rt = NewRuntime(own);
  ASSERT_TRUE(rt.ok()) << rt.status();
  const uint64_t default_free = Process::Default().dvpp_window().free_bytes();
  PoolProps props;
  props.alloc_type = AllocationType::kDvpp;
  auto pool = (*rt)->Run<&Pools::CreatePool>(props, nullptr);
  ASSERT_TRUE(pool.ok()) << pool.status();
  auto s = (*rt)->Run<&Streams::LegacyStream>(0);
  ASSERT_TRUE(s.ok());
  auto a = (*rt)->MallocAsync(1000, *pool, *s);
  ASSERT_TRUE(a.ok()) << a.status();
  const uintptr_t base = own.dvpp_window().base();
  ASSERT_NE(base, 0u);
  const auto addr = reinterpret_cast<uintptr_t>(a->ptr);
  EXPECT_GE(addr, base);
  EXPECT_LT(addr, base + DvppWindow::kSize);
  EXPECT_LT(own.dvpp_window().free_bytes(), DvppWindow::kSize);
  EXPECT_EQ(Process::Default().dvpp_window().free_bytes(), default_free)
      << "the default process's window is untouched";
  ASSERT_TRUE((*rt)->FreeAsync(a->ptr, *s).ok());
  ASSERT_TRUE((*rt)->Run<&Pools::DestroyPool>(*pool).ok());
  ASSERT_TRUE((*rt)->Run<&Streams::DeviceSynchronize>(0).ok());
  own.registry().Remove((*rt)->id());
  rt->reset();
  EXPECT_EQ(own.dvpp_window().free_bytes(), DvppWindow::kSize) << "all given back";
}

}  // namespace
}  // namespace streampool::internal
