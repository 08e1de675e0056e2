// What the tests of the AscendCL face share: a fixture that gives each test a
// fresh implicit runtime (the runtime is process-wide; ctest runs each test
// in a process of its own, but the binary must also pass run whole).
#ifndef STREAMPOOL_TESTS_ACL_ACL_TEST_UTIL_H_
#define STREAMPOOL_TESTS_ACL_ACL_TEST_UTIL_H_

#include <cstdint>
#include <memory>

#include "acl/acl.h"
#include "gtest/gtest.h"
#include "spacl.h"
#include "streampool/runtime.h"

#define ACL_ASSERT_OK(expr) ASSERT_EQ((expr), ACL_SUCCESS) << #expr
#define ACL_EXPECT_OK(expr) EXPECT_EQ((expr), ACL_SUCCESS) << #expr

namespace streampool::acl_test {

// Handles no runtime ever made: a handle's kind lives in its top bits.
inline aclrtStream ForgedStream() { return reinterpret_cast<aclrtStream>(uintptr_t{0x7777}); }
inline aclrtEvent ForgedEvent() { return reinterpret_cast<aclrtEvent>(uintptr_t{0x7777}); }
inline aclrtMemPool ForgedPool() { return reinterpret_cast<aclrtMemPool>(uintptr_t{0x7777}); }
inline aclrtContext ForgedContext() { return reinterpret_cast<aclrtContext>(uintptr_t{0x7777}); }

class AclTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ACL_ASSERT_OK(aclInit(nullptr));
    ACL_ASSERT_OK(aclrtSetDevice(0));
  }
  void TearDown() override {
    // The last reference to the device resets the runtime; aclFinalize then
    // finds nothing left but still ends the process's init.
    EXPECT_EQ(aclrtResetDevice(0), ACL_SUCCESS);
    EXPECT_EQ(aclFinalize(), ACL_SUCCESS);
    aclrtGetLastError(ACL_RT_THREAD_LEVEL);
  }

  // The implicit runtime's C++ view, for statistics and checker reports.
  static std::unique_ptr<Runtime> View() {
    spRuntime_t rt = nullptr;
    EXPECT_EQ(spaclGetRuntime(&rt), ACL_SUCCESS);
    auto view = Runtime::FromC(rt);
    EXPECT_TRUE(view.ok());
    return view.ok() ? *std::move(view) : nullptr;
  }

  static PoolStats Stats(aclrtMemPool pool) {
    auto view = View();
    auto stats = view->GetPoolStats(PoolId{reinterpret_cast<uintptr_t>(pool)});
    EXPECT_TRUE(stats.ok());
    return stats.ok() ? *stats : PoolStats{};
  }

  static aclrtMemPoolProps Props(uint32_t device = 0) {
    aclrtMemPoolProps props{};
    props.allocType = ACL_MEM_ALLOCATION_TYPE_PINNED;
    props.handleType = ACL_MEM_HANDLE_TYPE_NONE;
    props.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = device;
    return props;
  }
};

}  // namespace streampool::acl_test

#endif  // STREAMPOOL_TESTS_ACL_ACL_TEST_UTIL_H_
