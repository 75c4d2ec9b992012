// Checkpoint::open_dir: single files, sharded checkpoints with an index, and every malformed directory
// refused with one line naming the file, the shard and tensor where there are ones, and the fault.
#include "io/checkpoint.h"
#include "test_util/temp_dir.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>

namespace day0 {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test with helpers to write shards and index files into it.
class CheckpointDir : public testing_util::TempDir {
 public:
  // A safetensors file of u8 tensors, each filled with `fill`.
  void shard(const std::string& name, std::initializer_list<std::pair<std::string, std::int64_t>> tensors,
             std::uint8_t fill = 1) const {
    std::vector<std::pair<std::string, Tensor>> ts;
    for (const auto& [n, size] : tensors) {
      Tensor t = Tensor::zeros({size}, DType::u8);
      std::memset(t.raw(), fill, t.nbytes());
      ts.emplace_back(n, std::move(t));
    }
    Status s = write_safetensors(file(name), ts);
    ASSERT_TRUE(s.ok()) << s.error().message;
  }
  void text(const std::string& name, const std::string& contents) const {
    std::ofstream out(file(name), std::ios::binary | std::ios::trunc);
    out << contents;
    ASSERT_TRUE(out.good());
  }
  void index(const std::string& weight_map_json) const {
    text("model.safetensors.index.json", R"({"metadata":{"total_size":0},"weight_map":)" + weight_map_json + "}");
  }

};

// open_dir() must fail with one line holding every needle; returns the message.
std::string expect_open_error(const CheckpointDir& dir, std::initializer_list<std::string> needles) {
  auto r = Checkpoint::open_dir(dir.str());
  EXPECT_FALSE(r.ok()) << dir.str() << " opened but should not have";
  if (r.ok()) return "";
  const std::string& msg = r.error().message;
  for (const std::string& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "no '" << n << "' in: " << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << "not one line: " << msg;
  return msg;
}

const char* kIndex = "model.safetensors.index.json";

class CheckpointTest : public ::testing::Test {
 protected:
  CheckpointDir dir;
};

// ------------------------------------------------------------------------------------------- opening

TEST_F(CheckpointTest, OpensASingleModelSafetensors) {
  dir.shard("model.safetensors", {{"b", 3}, {"a", 5}}, 7);
  EXPECT_TRUE(Checkpoint::has_weights(dir.str()));
  auto r = Checkpoint::open_dir(dir.str());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r->files().size(), 1u);
  EXPECT_EQ(r->total_bytes(), 8u);
  const Checkpoint::Entry* e = r->find("a");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->file, r->files()[0].get());
  EXPECT_EQ(e->info->shape, Shape{5});
  auto t = r->tensor("b");
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->shape(), Shape{3});
  EXPECT_EQ(t->data<std::uint8_t>()[2], 7);
}

TEST_F(CheckpointTest, PrefersModelSafetensorsOverOtherFilesWithoutAnIndex) {
  dir.shard("model.safetensors", {{"w", 2}});
  dir.shard("extra.safetensors", {{"x", 2}});
  auto r = Checkpoint::open_dir(dir.str());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->names(), std::vector<std::string>{"w"});
}

TEST_F(CheckpointTest, OpensTheOnlySafetensorsFileWithoutAnIndex) {
  dir.shard("weights.safetensors", {{"w", 4}});
  dir.text("config.json", "{}");
  auto r = Checkpoint::open_dir(dir.str());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->names(), std::vector<std::string>{"w"});
}

TEST_F(CheckpointTest, OpensShardsListedByTheIndexOnceEach) {
  dir.shard("model-00001-of-00002.safetensors", {{"a", 2}, {"c", 4}}, 1);
  dir.shard("model-00002-of-00002.safetensors", {{"b", 8}}, 2);
  dir.index(R"({"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors",)"
            R"("c":"model-00001-of-00002.safetensors"})");
  auto r = Checkpoint::open_dir(dir.str());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->files().size(), 2u);
  EXPECT_EQ(r->names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(r->total_bytes(), 14u);
  EXPECT_EQ(r->find("a")->file, r->find("c")->file);
  EXPECT_NE(r->find("a")->file, r->find("b")->file);
  auto b = r->tensor("b");
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ(b->data<std::uint8_t>()[7], 2);
}

TEST_F(CheckpointTest, TensorViewsOutliveTheCheckpoint) {
  dir.shard("model.safetensors", {{"w", 4}}, 9);
  Tensor t;
  {
    auto r = Checkpoint::open_dir(dir.str());
    ASSERT_TRUE(r.ok()) << r.error().message;
    auto got = r->tensor("w");
    ASSERT_TRUE(got.ok()) << got.error().message;
    t = *got;
  }
  EXPECT_EQ(t.data<std::uint8_t>()[3], 9);
}

TEST_F(CheckpointTest, TensorLookupOfAnAbsentNameNamesIt) {
  dir.shard("model.safetensors", {{"w", 4}});
  auto r = Checkpoint::open_dir(dir.str());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->find("nope"), nullptr);
  auto t = r->tensor("nope");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("\"nope\""), std::string::npos) << t.error().message;
  EXPECT_NE(t.error().message.find(dir.str()), std::string::npos) << t.error().message;
}

TEST_F(CheckpointTest, HasWeightsIsFalseForADirectoryWithoutSafetensors) {
  dir.text("config.json", "{}");
  EXPECT_FALSE(Checkpoint::has_weights(dir.str()));
  EXPECT_FALSE(Checkpoint::has_weights(dir.file("does-not-exist")));
}

// ------------------------------------------------------------------------------ malformed directories

TEST_F(CheckpointTest, RejectsADirectoryWithoutWeights) {
  dir.text("config.json", "{}");
  expect_open_error(dir, {dir.str(), "no weights"});
}

TEST_F(CheckpointTest, RejectsAMissingDirectory) {
  auto r = Checkpoint::open_dir(dir.file("nope"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find(dir.file("nope")), std::string::npos) << r.error().message;
}

TEST_F(CheckpointTest, RejectsSeveralSafetensorsFilesWithoutAnIndex) {
  dir.shard("part-a.safetensors", {{"a", 1}});
  dir.shard("part-b.safetensors", {{"b", 1}});
  expect_open_error(dir, {dir.str(), "2 *.safetensors files", "part-a.safetensors", "part-b.safetensors", kIndex});
}

TEST_F(CheckpointTest, RejectsAMissingShard) {
  dir.shard("model-00001-of-00002.safetensors", {{"a", 2}});
  dir.index(R"({"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"})");
  expect_open_error(dir, {kIndex, "model-00002-of-00002.safetensors", "\"b\"", "missing"});
}

TEST_F(CheckpointTest, RejectsAnIndexNamingATensorThatIsNotInItsShard) {
  dir.shard("model-00001-of-00001.safetensors", {{"a", 2}});
  dir.index(R"({"a":"model-00001-of-00001.safetensors","ghost":"model-00001-of-00001.safetensors"})");
  expect_open_error(dir, {kIndex, "\"ghost\"", "model-00001-of-00001.safetensors", "does not contain"});
}

TEST_F(CheckpointTest, RejectsShardNamesThatLeaveTheDirectory) {
  dir.shard("model.safetensors", {{"a", 2}});
  for (const std::string shard : {"../model.safetensors", "/etc/passwd", "sub/model.safetensors",
                                  "..\\model.safetensors", "..", ""}) {
    SCOPED_TRACE(shard);
    dir.index(R"({"a":")" + std::string(shard == "..\\model.safetensors" ? "..\\\\model.safetensors" : shard) + R"("})");
    expect_open_error(dir, {kIndex, "\"a\"", "leave the checkpoint directory"});
  }
}

TEST_F(CheckpointTest, RejectsATensorPresentInTwoShards) {
  dir.shard("model-00001-of-00002.safetensors", {{"a", 2}, {"w", 4}});
  dir.shard("model-00002-of-00002.safetensors", {{"b", 2}, {"w", 4}});
  dir.index(R"({"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors",)"
            R"("w":"model-00001-of-00002.safetensors"})");
  expect_open_error(dir, {kIndex, "\"w\"", "two shards", "model-00001-of-00002.safetensors",
                          "model-00002-of-00002.safetensors"});
}

TEST_F(CheckpointTest, RejectsAMalformedShardNamingTheShardFile) {
  dir.text("model-00001-of-00001.safetensors", "garbage");
  dir.index(R"({"a":"model-00001-of-00001.safetensors"})");
  expect_open_error(dir, {dir.file("model-00001-of-00001.safetensors"), "shorter"});
}

TEST_F(CheckpointTest, RejectsInvalidIndexJson) {
  dir.shard("model.safetensors", {{"a", 2}});
  dir.text(kIndex, R"({"weight_map": {"a": )");
  expect_open_error(dir, {dir.file(kIndex), "not valid JSON"});
}

TEST_F(CheckpointTest, RejectsAnIndexThatIsNotAnObjectWithAWeightMap) {
  dir.shard("model.safetensors", {{"a", 2}});
  dir.text(kIndex, "[]");
  expect_open_error(dir, {dir.file(kIndex), "expected a JSON object"});
  dir.text(kIndex, R"({"metadata":{}})");
  expect_open_error(dir, {dir.file(kIndex), "missing \"weight_map\""});
  dir.text(kIndex, R"({"weight_map":["model.safetensors"]})");
  expect_open_error(dir, {dir.file(kIndex), "\"weight_map\"", "expected an object"});
  dir.text(kIndex, R"({"weight_map":{"a":3}})");
  expect_open_error(dir, {dir.file(kIndex), "\"a\"", "expected a file name string"});
}

TEST_F(CheckpointTest, RejectsADuplicateTensorInTheIndex) {
  dir.shard("model.safetensors", {{"a", 2}});
  dir.text(kIndex, R"({"weight_map":{"a":"model.safetensors","a":"model.safetensors"}})");
  expect_open_error(dir, {dir.file(kIndex), "duplicate key", "\"a\""});
}

}  // namespace
}  // namespace day0
