// The environment configuration of an implicit runtime (src/compat/
// env_config.h): every variable, its default, and that a malformed value
// keeps the default and explains itself instead of failing.
#include "src/compat/env_config.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace streampool::internal::compat {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(ParseBytesTest, DigitsWithBinarySuffixes) {
  EXPECT_EQ(ParseBytes("4096"), 4096u);
  EXPECT_EQ(ParseBytes("64K"), 64u << 10);
  EXPECT_EQ(ParseBytes("3m"), 3u << 20);
  EXPECT_EQ(ParseBytes(" 2G "), uint64_t{2} << 30);
  EXPECT_EQ(ParseBytes("0"), 0u);
}

TEST(ParseBytesTest, RejectsWhatIsNotAByteCount) {
  for (const char* bad : {"", "G", "-1", "+5", "1.5G", "12Q", "1 G x", "abc",
                          "99999999999999999999", "17179869184G"}) {
    EXPECT_EQ(ParseBytes(bad), std::nullopt) << bad;
  }
}

TEST(ParseConfigTest, DefaultsWhenNothingIsSet) {
  std::vector<std::string> problems;
  const CompatConfig c = ParseConfig("STREAMPOOL_CUDA_", Env({}), &problems);
  EXPECT_EQ(c.device_count, 1);
  EXPECT_EQ(c.device_capacity, uint64_t{1} << 30);
  EXPECT_EQ(c.backing, Backing::kHost);
  EXPECT_EQ(c.executor, ExecutorKind::kSimulator);
  EXPECT_EQ(c.kernel_ns, 1000u);
  EXPECT_THAT(problems, IsEmpty());
}

TEST(ParseConfigTest, ReadsEveryVariableUnderItsPrefix) {
  std::vector<std::string> problems;
  const CompatConfig c = ParseConfig("STREAMPOOL_ACL_",
                                     Env({{"STREAMPOOL_ACL_DEVICES", "4"},
                                          {"STREAMPOOL_ACL_CAPACITY", "256M"},
                                          {"STREAMPOOL_ACL_BACKING", "address"},
                                          {"STREAMPOOL_ACL_EXECUTOR", "Threads"},
                                          {"STREAMPOOL_ACL_KERNEL_NS", "250"},
                                          // Another face's variables are not read.
                                          {"STREAMPOOL_CUDA_DEVICES", "8"}}),
                                     &problems);
  EXPECT_EQ(c.device_count, 4);
  EXPECT_EQ(c.device_capacity, uint64_t{256} << 20);
  EXPECT_EQ(c.backing, Backing::kAddressOnly);
  EXPECT_EQ(c.executor, ExecutorKind::kThreads);
  EXPECT_EQ(c.kernel_ns, 250u);
  EXPECT_THAT(problems, IsEmpty());
  const RuntimeConfig rc = c.ToRuntimeConfig();
  EXPECT_EQ(rc.device_count, 4);
  EXPECT_EQ(rc.device_capacity, uint64_t{256} << 20);
  EXPECT_EQ(rc.backing, Backing::kAddressOnly);
  EXPECT_EQ(rc.executor, ExecutorKind::kThreads);
}

TEST(ParseConfigTest, MalformedValuesKeepTheDefaultAndSaySo) {
  std::vector<std::string> problems;
  const CompatConfig c = ParseConfig("STREAMPOOL_CUDA_",
                                     Env({{"STREAMPOOL_CUDA_DEVICES", "65"},
                                          {"STREAMPOOL_CUDA_CAPACITY", "0"},
                                          {"STREAMPOOL_CUDA_BACKING", "disk"},
                                          {"STREAMPOOL_CUDA_EXECUTOR", ""},
                                          {"STREAMPOOL_CUDA_KERNEL_NS", "-5"}}),
                                     &problems);
  EXPECT_EQ(c.device_count, 1);
  EXPECT_EQ(c.device_capacity, uint64_t{1} << 30);
  EXPECT_EQ(c.backing, Backing::kHost);
  EXPECT_EQ(c.executor, ExecutorKind::kSimulator);
  EXPECT_EQ(c.kernel_ns, 1000u);
  ASSERT_EQ(problems.size(), 5u);
  EXPECT_THAT(problems[0], HasSubstr("STREAMPOOL_CUDA_DEVICES='65'"));
  EXPECT_THAT(problems[0], HasSubstr("using the default 1"));
  EXPECT_THAT(problems[1], HasSubstr("STREAMPOOL_CUDA_CAPACITY='0'"));
  EXPECT_THAT(problems[2], HasSubstr("'host' or 'address'"));
  EXPECT_THAT(problems[3], HasSubstr("STREAMPOOL_CUDA_EXECUTOR=''"));
  EXPECT_THAT(problems[4], HasSubstr("STREAMPOOL_CUDA_KERNEL_NS='-5'"));
}

TEST(ParseConfigTest, OneBadValueLeavesTheOthersAlone) {
  std::vector<std::string> problems;
  const CompatConfig c =
      ParseConfig("P_", Env({{"P_DEVICES", "two"}, {"P_CAPACITY", "8K"}}), &problems);
  EXPECT_EQ(c.device_count, 1);
  EXPECT_EQ(c.device_capacity, 8192u);
  EXPECT_THAT(problems, ElementsAre(HasSubstr("P_DEVICES='two'")));
}

}  // namespace
}  // namespace streampool::internal::compat
