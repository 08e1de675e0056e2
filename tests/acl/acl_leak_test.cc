// Leak reports through the AscendCL face: STREAMPOOL_ACL_LEAK_CHECK=1 lists
// what a program never freed when its runtime goes, and fails the process.
#include <cstdlib>

#include "acl/acl.h"
#include "gtest/gtest.h"

namespace {

TEST(AclLeakCheckDeathTest, FinalizeWithLiveAllocationsFails) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("STREAMPOOL_ACL_LEAK_CHECK", "1", 1);
        if (aclInit(nullptr) != ACL_SUCCESS) std::exit(3);
        if (aclrtSetDevice(0) != ACL_SUCCESS) std::exit(3);
        void* p = nullptr;
        if (aclrtMalloc(&p, 1000, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) std::exit(3);
        std::exit(0);
      },
      testing::ExitedWithCode(1), "1 live allocation.*size 1000");
}

TEST(AclLeakCheckDeathTest, EverythingFreedExitsNormally) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("STREAMPOOL_ACL_LEAK_CHECK", "1", 1);
        if (aclInit(nullptr) != ACL_SUCCESS) std::exit(3);
        if (aclrtSetDevice(0) != ACL_SUCCESS) std::exit(3);
        void* p = nullptr;
        if (aclrtMalloc(&p, 1000, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) std::exit(3);
        if (aclrtFree(p) != ACL_SUCCESS) std::exit(3);
        if (aclrtResetDevice(0) != ACL_SUCCESS) std::exit(3);
        if (aclFinalize() != ACL_SUCCESS) std::exit(3);
        std::exit(0);
      },
      testing::ExitedWithCode(0), "");
}

}  // namespace
