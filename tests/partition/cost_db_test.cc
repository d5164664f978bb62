// The cost database: round trips, keys, default location, two processes writing at once, damaged
// files rebuilt with a warning; and the cached estimator in front of a mock.
#include "partition/cost_db.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "partition/cached_estimator.h"
#include "partition/mock_estimator.h"
#include "partition/partition_test_util.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using namespace partition_test;

// A fresh folder per test; removed afterwards.
class CostDbTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(testing::TempDir()) /
           ("cost_db_" + std::to_string(::getpid()) + "_" +
            testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name = "costs.sqlite") const {
    return (dir_ / name).string();
  }

  fs::path dir_;
};

CostKey key(int i, int threads = 2) {
  return CostKey{"hash" + std::to_string(i), "native", "native 1.0", threads, "test cpu"};
}

TEST_F(CostDbTest, StoresAndLooksUp) {
  auto db = CostDatabase::open(path());
  ASSERT_TRUE(db.ok()) << db.status().to_string();
  auto miss = (*db)->lookup(key(1));
  ASSERT_TRUE(miss.ok());
  EXPECT_FALSE(miss->has_value());
  ASSERT_TRUE((*db)->store(key(1), Cost::of(1.5e-3, 2e-5), "Conv+Relu").ok());
  ASSERT_TRUE(
      (*db)->store(key(2), Cost::invalid("wrong results: max rel error 0.3"), "Softmax").ok());
  auto hit = (*db)->lookup(key(1));
  ASSERT_TRUE(hit.ok() && hit->has_value());
  EXPECT_DOUBLE_EQ((*hit)->seconds, 1.5e-3);
  EXPECT_DOUBLE_EQ((*hit)->noise, 2e-5);
  EXPECT_TRUE((*hit)->valid);
  auto bad = (*db)->lookup(key(2));
  ASSERT_TRUE(bad.ok() && bad->has_value());
  EXPECT_FALSE((*bad)->valid);
  EXPECT_EQ((*bad)->reason, "wrong results: max rel error 0.3");
  // Every part of the key counts.
  EXPECT_FALSE((*db)->lookup(key(1, 4))->has_value());
  CostKey other_cpu = key(1);
  other_cpu.cpu = "another cpu";
  EXPECT_FALSE((*db)->lookup(other_cpu)->has_value());
  CostKey other_version = key(1);
  other_version.backend_version = "native 2.0";
  EXPECT_FALSE((*db)->lookup(other_version)->has_value());
  // A new measurement replaces the old one; unmeasured costs are refused.
  ASSERT_TRUE((*db)->store(key(1), Cost::of(1e-3), "Conv+Relu").ok());
  EXPECT_DOUBLE_EQ((*(*db)->lookup(key(1)))->seconds, 1e-3);
  EXPECT_FALSE((*db)->store(key(3), Cost::unmeasured("cap"), "Relu").ok());
  EXPECT_EQ(*(*db)->count(), 2);
}

TEST_F(CostDbTest, PersistsAcrossOpens) {
  {
    auto db = CostDatabase::open(path("sub/dir/costs.sqlite"));  // folders are created
    ASSERT_TRUE(db.ok()) << db.status().to_string();
    ASSERT_TRUE((*db)->store(key(7), Cost::of(0.25), "MatMul").ok());
  }
  auto db = CostDatabase::open(path("sub/dir/costs.sqlite"));
  ASSERT_TRUE(db.ok());
  EXPECT_DOUBLE_EQ((*(*db)->lookup(key(7)))->seconds, 0.25);
  EXPECT_TRUE((*db)->moved_aside().empty());
}

TEST_F(CostDbTest, DefaultPath) {
  const char* old_env = std::getenv("TESSERA_COST_DB");
  const char* old_xdg = std::getenv("XDG_CACHE_HOME");
  const char* old_home = std::getenv("HOME");
  std::string saved_env = old_env ? old_env : "", saved_xdg = old_xdg ? old_xdg : "",
              saved_home = old_home ? old_home : "";
  ::unsetenv("XDG_CACHE_HOME");
  ::unsetenv("TESSERA_COST_DB");
  ::setenv("HOME", "/home/someone", 1);
  EXPECT_EQ(CostDatabase::default_path(), "/home/someone/.cache/tessera/costs.sqlite");
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(CostDatabase::default_path(), "/xdg/tessera/costs.sqlite");
  ::setenv("TESSERA_COST_DB", path("env.sqlite").c_str(), 1);
  EXPECT_EQ(CostDatabase::default_path(), path("env.sqlite"));
  auto db = CostDatabase::open();
  ASSERT_TRUE(db.ok());
  EXPECT_EQ((*db)->path(), path("env.sqlite"));
  EXPECT_TRUE(fs::exists(path("env.sqlite")));
  auto restore = [](const char* name, const char* old, const std::string& saved) {
    if (old)
      ::setenv(name, saved.c_str(), 1);
    else
      ::unsetenv(name);
  };
  restore("TESSERA_COST_DB", old_env, saved_env);
  restore("XDG_CACHE_HOME", old_xdg, saved_xdg);
  restore("HOME", old_home, saved_home);
}

TEST_F(CostDbTest, GarbageFileIsMovedAsideAndRebuilt) {
  {
    std::ofstream out(path(), std::ios::binary);
    for (int i = 0; i < 512; ++i) out << "this is not a database ";
  }
  testing::internal::CaptureStderr();
  auto db = CostDatabase::open(path());
  std::string err = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(db.ok()) << db.status().to_string();
  EXPECT_NE(err.find("warning: cost database"), std::string::npos) << err;
  EXPECT_NE(err.find("damaged"), std::string::npos) << err;
  ASSERT_FALSE((*db)->moved_aside().empty());
  EXPECT_TRUE(fs::exists((*db)->moved_aside()));
  EXPECT_EQ(*(*db)->count(), 0);
  EXPECT_TRUE((*db)->store(key(1), Cost::of(1), "Relu").ok());
}

TEST_F(CostDbTest, DamagedPagesAreDetected) {
  {
    auto db = CostDatabase::open(path());
    ASSERT_TRUE(db.ok());
    for (int i = 0; i < 2000; ++i)
      ASSERT_TRUE((*db)->store(key(i), Cost::of(i * 1e-6), std::string(100, 'x')).ok());
  }
  ASSERT_FALSE(fs::exists(path() + "-wal") &&
               fs::file_size(path() + "-wal") > 0);  // checkpointed at close
  size_t size = fs::file_size(path());
  ASSERT_GT(size, 16u * 4096);
  {
    std::fstream f(path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(
        static_cast<std::streamoff>(size / 2 / 4096 * 4096));  // a page in the middle of the b-tree
    std::string junk(3 * 4096, '\x5a');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  testing::internal::CaptureStderr();
  auto db = CostDatabase::open(path());
  std::string err = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(db.ok()) << db.status().to_string();
  EXPECT_FALSE((*db)->moved_aside().empty()) << err;
  EXPECT_EQ(*(*db)->count(), 0);
}

TEST_F(CostDbTest, TwoProcessesWriteAtOnce) {
  constexpr int kRows = 150, kShared = 40;
  std::vector<pid_t> children;
  for (int child = 0; child < 2; ++child) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // Both create the database (it does not exist yet) and write, one row per transaction.
      auto db = CostDatabase::open(path());
      if (!db.ok()) ::_exit(10);
      for (int i = 0; i < kRows; ++i) {
        if (!(*db)->store(key(child * 1000 + i), Cost::of(i), "Relu").ok()) ::_exit(11);
        if (i < kShared && !(*db)->store(key(-1 - i), Cost::of(child), "Neg").ok()) ::_exit(12);
        if (!(*db)->lookup(key(child * 1000 + i)).ok()) ::_exit(13);
      }
      ::_exit(0);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
  }
  auto db = CostDatabase::open(path());
  ASSERT_TRUE(db.ok());
  EXPECT_EQ(*(*db)->count(), 2 * kRows + kShared);
  EXPECT_TRUE((*db)->moved_aside().empty());
}

TEST_F(CostDbTest, TwoConnectionsInterleave) {
  auto a = CostDatabase::open(path());
  auto b = CostDatabase::open(path());
  ASSERT_TRUE(a.ok() && b.ok());
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE((*a)->store(key(i), Cost::of(1), "Relu").ok());
    ASSERT_TRUE((*b)->store(key(100 + i), Cost::of(2), "Relu").ok());
    ASSERT_TRUE((*b)->lookup(key(i))->has_value());  // sees a's committed row
  }
  EXPECT_EQ(*(*a)->count(), 100);
}

TEST_F(CostDbTest, UnwritableLocationIsAnError) {
  fs::create_directories(path("blocked"));
  auto db = CostDatabase::open(path("blocked"));  // a folder, not a file
  EXPECT_FALSE(db.ok());
  EXPECT_TRUE(fs::is_directory(path("blocked")));  // never moved aside: not a content problem
}

TEST_F(CostDbTest, CachedEstimatorMeasuresOnce) {
  Graph g = diamond();
  FakeBackend fa("fa", FusionStyle::kArbitrary, {"Relu", "Neg", "Exp", "Add"});
  Candidate c{nodes_named(g, {"neg", "exp"}), &fa, "test"};
  MockCostModel model;
  auto db = CostDatabase::open(path());
  ASSERT_TRUE(db.ok());
  MockEstimator first_mock(g, model);
  CachedEstimator first(g, db->get(), first_mock, 2, "cpu");
  Cost cost = first.cost(c);
  EXPECT_EQ(first.misses(), 1);
  EXPECT_EQ(first_mock.calls(), 1);
  EXPECT_EQ(*(*db)->count(), 1);

  MockEstimator second_mock(g, model);
  CachedEstimator second(g, db->get(), second_mock, 2, "cpu");
  EXPECT_DOUBLE_EQ(second.cost(c).seconds, cost.seconds);
  EXPECT_EQ(second.hits(), 1);
  EXPECT_EQ(second_mock.calls(), 0);
  // The key is structural: the same ops in another graph hit the same entry.
  Graph d = diamond();
  MockEstimator third_mock(d, model);
  CachedEstimator third(d, db->get(), third_mock, 2, "cpu");
  EXPECT_EQ(third.key(Candidate{nodes_named(d, {"neg", "exp"}), &fa, ""}).subgraph_hash,
            first.key(c).subgraph_hash);

  // Unmeasured costs pass through and are not stored.
  model.max_measurements = 1;
  MockEstimator capped(g, model);
  CachedEstimator fourth(g, db->get(), capped, 2, "cpu");
  fourth.cost(Candidate{nodes_named(g, {"relu"}), &fa, ""});
  Cost refused = fourth.cost(Candidate{nodes_named(g, {"add"}), &fa, ""});
  EXPECT_FALSE(refused.measured);
  EXPECT_EQ(*(*db)->count(), 2);
}

TEST(CpuModel, IsKnownOnLinux) {
  std::string cpu = cpu_model();
  EXPECT_FALSE(cpu.empty());
  EXPECT_EQ(cpu.find('\n'), std::string::npos);
}

}  // namespace
}  // namespace tessera
