// SafetensorsFile / write_safetensors: round trips, and every malformed file is refused with one line that
// names the file, the tensor where there is one, and the fault.
#include "io/safetensors.h"
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

using testing_util::TempDir;

std::string le64(std::uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
  return s;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

// A hand-made file: u64 header length, the header text as given, then `data_bytes` bytes of data.
void write_raw(const std::string& path, const std::string& header, std::size_t data_bytes) {
  write_bytes(path, le64(header.size()) + header + std::string(data_bytes, '\x5a'));
}

// open() must fail with one line holding the path and every needle; returns the message.
std::string expect_open_error(const std::string& path, std::initializer_list<std::string> needles) {
  auto r = SafetensorsFile::open(path);
  EXPECT_FALSE(r.ok()) << path << " opened but should not have";
  if (r.ok()) return "";
  const std::string& msg = r.error().message;
  EXPECT_NE(msg.find(path), std::string::npos) << "no file path in: " << msg;
  for (const std::string& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "no '" << n << "' in: " << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << "not one line: " << msg;
  return msg;
}

template <class T>
Tensor filled(Shape shape, DType dtype, std::initializer_list<T> values) {
  Tensor t = Tensor::zeros(std::move(shape), dtype);
  EXPECT_EQ(values.size() * sizeof(T), t.nbytes());
  std::memcpy(t.raw(), values.begin(), t.nbytes());
  return t;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && (a.nbytes() == 0 || std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0);
}

class SafetensorsFileTest : public ::testing::Test {
 protected:
  TempDir dir;
};

// ------------------------------------------------------------------------------------------ round trips

TEST_F(SafetensorsFileTest, RoundTripsSeveralDtypesIncludingAnEmptyTensor) {
  const std::vector<std::pair<std::string, Tensor>> in = {
      {"model.bf16", filled<std::uint16_t>({2, 3}, DType::bf16,
                                           {f32_to_bf16(1.0f), f32_to_bf16(-2.5f), f32_to_bf16(0.0f),
                                            f32_to_bf16(3.0e38f), f32_to_bf16(1e-3f), f32_to_bf16(-0.0f)})},
      {"a.u8", filled<std::uint8_t>({5}, DType::u8, {0, 1, 127, 128, 255})},
      {"fp4", filled<std::uint8_t>({2, 4}, DType::fp4_e2m1, {0x10, 0x32, 0x7f, 0xa9})},
      {"ids.i64", filled<std::int64_t>({3}, DType::i64, {-1, 0, std::int64_t{1} << 62})},
      {"empty", Tensor::zeros({0, 4}, DType::f32)},
      {"scalar", filled<float>({}, DType::f32, {42.5f})},
  };
  const std::string path = dir.file("model.safetensors");
  ASSERT_TRUE(write_safetensors(path, in).ok());

  auto r = SafetensorsFile::open(path);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto& file = *r;
  EXPECT_EQ(file->path(), path);
  EXPECT_EQ(file->file_bytes(), fs::file_size(path));
  EXPECT_TRUE(file->metadata().empty());
  ASSERT_EQ(file->tensors().size(), in.size());
  for (std::size_t i = 1; i < file->tensors().size(); ++i)
    EXPECT_LT(file->tensors()[i - 1].name, file->tensors()[i].name) << "tensors() is sorted by name";

  for (const auto& [name, want] : in) {
    const TensorInfo* info = file->find(name);
    ASSERT_NE(info, nullptr) << name;
    EXPECT_EQ(info->dtype, want.dtype()) << name;
    EXPECT_EQ(info->shape, want.shape()) << name;
    EXPECT_EQ(info->end - info->begin, want.nbytes()) << name;
    const Tensor got = file->tensor(*info);
    EXPECT_EQ(got.dtype(), want.dtype()) << name;
    EXPECT_EQ(got.shape(), want.shape()) << name;
    EXPECT_FALSE(got.owns_storage()) << name;
    EXPECT_TRUE(same_bytes(got, want)) << name;
  }
  EXPECT_EQ(file->find("absent"), nullptr);
  EXPECT_FALSE(file->tensor(TensorInfo{"absent", DType::f32, {1}, 0, 4}).defined());
}

TEST_F(SafetensorsFileTest, WritesNameOrderedContiguousOffsetsAndAnEightBytePaddedHeader) {
  const std::string path = dir.file("w.safetensors");
  ASSERT_TRUE(write_safetensors(path, {{"b", filled<float>({1}, DType::f32, {1.0f})},
                                       {"a", filled<std::uint8_t>({3}, DType::u8, {1, 2, 3})},
                                       {"c", filled<std::uint16_t>({2}, DType::f16, {1, 2})}})
                  .ok());
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GE(bytes.size(), 8u);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ(n % 8, 0u);
  const std::string header = bytes.substr(8, n);
  EXPECT_LT(header.find("\"a\""), header.find("\"b\""));
  EXPECT_LT(header.find("\"b\""), header.find("\"c\""));
  EXPECT_EQ(bytes.size(), 8 + n + 3 + 4 + 4);

  auto r = SafetensorsFile::open(path);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*r)->find("a")->begin, 0u);
  EXPECT_EQ((*r)->find("b")->begin, 3u);  // unaligned for f32: views are byte-addressed
  EXPECT_EQ((*r)->find("c")->begin, 7u);
  EXPECT_EQ((*r)->find("c")->end, 11u);
}

TEST_F(SafetensorsFileTest, RoundTripsMetadata) {
  const std::string path = dir.file("meta.safetensors");
  const std::map<std::string, std::string> meta = {{"format", "pt"}, {"note", "two words, \"quoted\""}, {"empty", ""}};
  ASSERT_TRUE(write_safetensors(path, {{"w", filled<float>({2}, DType::f32, {1.0f, 2.0f})}}, meta).ok());
  auto r = SafetensorsFile::open(path);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*r)->metadata(), meta);
  EXPECT_EQ((*r)->tensors().size(), 1u);
}

TEST_F(SafetensorsFileTest, OpensAFileWithNoTensors) {
  const std::string path = dir.file("none.safetensors");
  ASSERT_TRUE(write_safetensors(path, {}, {{"k", "v"}}).ok());
  auto r = SafetensorsFile::open(path);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE((*r)->tensors().empty());
  EXPECT_EQ((*r)->metadata().at("k"), "v");
}

TEST_F(SafetensorsFileTest, TensorViewKeepsTheMappingAliveAfterTheFileHandleIsDropped) {
  const std::string path = dir.file("alive.safetensors");
  ASSERT_TRUE(write_safetensors(path, {{"w", filled<std::int32_t>({4}, DType::i32, {7, 8, 9, 10})}}).ok());
  Tensor view;
  {
    auto r = SafetensorsFile::open(path);
    ASSERT_TRUE(r.ok()) << r.error().message;
    view = (*r)->tensor(*(*r)->find("w"));
  }
  std::int32_t v[4];
  std::memcpy(v, view.raw(), sizeof v);
  EXPECT_EQ(v[0], 7);
  EXPECT_EQ(v[3], 10);
}

TEST_F(SafetensorsFileTest, WriteReplacesAnExistingFileAndLeavesNoTemporaryFiles) {
  const std::string path = dir.file("m.safetensors");
  ASSERT_TRUE(write_safetensors(path, {{"old", filled<std::uint8_t>({1}, DType::u8, {1})}}).ok());
  ASSERT_TRUE(write_safetensors(path, {{"new", filled<std::uint8_t>({1}, DType::u8, {2})}}).ok());
  auto r = SafetensorsFile::open(path);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*r)->find("old"), nullptr);
  EXPECT_NE((*r)->find("new"), nullptr);
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path())) ++entries;
  EXPECT_EQ(entries, 1);
}

TEST_F(SafetensorsFileTest, WriteRefusesDuplicateNamesAndOddF4Counts) {
  const std::string path = dir.file("bad.safetensors");
  Status dup = write_safetensors(path, {{"w", Tensor::zeros({1}, DType::u8)}, {"w", Tensor::zeros({1}, DType::u8)}});
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.error().message.find("\"w\""), std::string::npos) << dup.error().message;
  Status odd = write_safetensors(path, {{"q", Tensor::zeros({3}, DType::fp4_e2m1)}});
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.error().message.find("\"q\""), std::string::npos) << odd.error().message;
  EXPECT_FALSE(fs::exists(path));
}

// ------------------------------------------------------------------------------- malformed: file level

TEST_F(SafetensorsFileTest, RejectsAnEmptyFile) {
  const std::string path = dir.file("empty.safetensors");
  write_bytes(path, "");
  expect_open_error(path, {"0 bytes", "shorter"});
}

TEST_F(SafetensorsFileTest, RejectsAFileShorterThanTheLengthPrefix) {
  const std::string path = dir.file("short.safetensors");
  write_bytes(path, std::string("\x02\0\0\0\0", 5));
  expect_open_error(path, {"5 bytes", "shorter"});
}

TEST_F(SafetensorsFileTest, RejectsADirectory) {
  const std::string path = dir.file("dir.safetensors");
  fs::create_directory(path);
  expect_open_error(path, {"directory"});
}

TEST_F(SafetensorsFileTest, RejectsAMissingFile) {
  expect_open_error(dir.file("missing.safetensors"), {"cannot open"});
}

TEST_F(SafetensorsFileTest, RejectsAZeroHeaderLength) {
  const std::string path = dir.file("zero.safetensors");
  write_bytes(path, le64(0) + "{}");
  expect_open_error(path, {"header length is 0"});
}

TEST_F(SafetensorsFileTest, RejectsAnOversizedHeaderLength) {
  const std::string path = dir.file("huge.safetensors");
  write_bytes(path, le64(kMaxSafetensorsHeaderBytes + 1) + "{}");
  expect_open_error(path, {"oversized header", std::to_string(kMaxSafetensorsHeaderBytes + 1)});
  write_bytes(path, le64(~std::uint64_t{0}) + "{}");
  expect_open_error(path, {"oversized header", "18446744073709551615"});
}

TEST_F(SafetensorsFileTest, RejectsAHeaderLengthLargerThanTheFile) {
  const std::string path = dir.file("long.safetensors");
  write_bytes(path, le64(1000) + std::string(42, ' '));
  expect_open_error(path, {"truncated header", "1008", "50 bytes"});
}

TEST_F(SafetensorsFileTest, RejectsAHeaderCutShort) {
  const std::string path = dir.file("cut.safetensors");
  const std::string header = R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  write_bytes(path, le64(header.size()) + header.substr(0, 20));
  expect_open_error(path, {"truncated header", std::to_string(8 + header.size())});
}

// ----------------------------------------------------------------------------- malformed: header JSON

TEST_F(SafetensorsFileTest, RejectsInvalidJson) {
  const std::string path = dir.file("json.safetensors");
  write_raw(path, R"({"w": {"dtype": "F32", )", 0);
  expect_open_error(path, {"not valid JSON"});
}

TEST_F(SafetensorsFileTest, RejectsJsonThatIsNotAnObject) {
  const std::string path = dir.file("array.safetensors");
  write_raw(path, "[1, 2, 3]", 0);
  expect_open_error(path, {"array", "expected a JSON object"});
}

TEST_F(SafetensorsFileTest, RejectsADuplicateTensorKey) {
  const std::string path = dir.file("dup.safetensors");
  write_raw(path,
            R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
            R"("w":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})",
            8);
  expect_open_error(path, {"duplicate key", "\"w\""});
}

TEST_F(SafetensorsFileTest, RejectsADuplicateKeyInsideATensorEntry) {
  const std::string path = dir.file("dup2.safetensors");
  write_raw(path, R"({"w":{"dtype":"U8","dtype":"F32","shape":[4],"data_offsets":[0,4]}})", 4);
  expect_open_error(path, {"duplicate key", "\"dtype\"", "\"w\""});
}

TEST_F(SafetensorsFileTest, RejectsPathologicallyDeepNesting) {
  const std::string path = dir.file("deep.safetensors");
  write_raw(path, R"({"w":)" + std::string(100000, '[') + std::string(100000, ']') + "}", 0);
  expect_open_error(path, {"nested deeper"});
}

TEST_F(SafetensorsFileTest, RejectsMetadataThatIsNotStringToString) {
  const std::string path = dir.file("meta.safetensors");
  write_raw(path, R"({"__metadata__":{"format":"pt","layers":32}})", 0);
  expect_open_error(path, {"__metadata__", "\"layers\"", "expected a string"});
  write_raw(path, R"({"__metadata__":["pt"]})", 0);
  expect_open_error(path, {"__metadata__", "expected an object"});
}

TEST_F(SafetensorsFileTest, RejectsATensorEntryThatIsNotAnObject) {
  const std::string path = dir.file("entry.safetensors");
  write_raw(path, R"({"w":[1,2]})", 0);
  expect_open_error(path, {"\"w\"", "expected an object"});
}

TEST_F(SafetensorsFileTest, RejectsATensorEntryWithAMissingField) {
  const std::string path = dir.file("missing.safetensors");
  write_raw(path, R"({"w":{"dtype":"U8","shape":[4]}})", 4);
  expect_open_error(path, {"\"w\"", "missing \"data_offsets\""});
}

// -------------------------------------------------------------------------- malformed: tensor entries

TEST_F(SafetensorsFileTest, RejectsAnUnknownDtypeName) {
  const std::string path = dir.file("dtype.safetensors");
  write_raw(path, R"({"w":{"dtype":"wrong-dtype","shape":[4],"data_offsets":[0,4]}})", 4);
  expect_open_error(path, {"\"w\"", "unknown dtype", "wrong-dtype", "BF16"});
}

TEST_F(SafetensorsFileTest, RejectsAByteLengthThatDoesNotMatchShapeTimesDtypeSize) {
  const std::string path = dir.file("len.safetensors");
  write_raw(path, R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})", 12);
  expect_open_error(path, {"\"w\"", "12 bytes", "needs 16 bytes"});
}

TEST_F(SafetensorsFileTest, RejectsAnOddF4ElementCount) {
  const std::string path = dir.file("f4.safetensors");
  write_raw(path, R"({"q":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", 2);
  expect_open_error(path, {"\"q\"", "even element count"});
}

TEST_F(SafetensorsFileTest, RejectsANegativeDimension) {
  const std::string path = dir.file("neg.safetensors");
  write_raw(path, R"({"w":{"dtype":"U8","shape":[2,-1],"data_offsets":[0,0]}})", 0);
  expect_open_error(path, {"\"w\"", "dimension 1 is -1", "non-negative integer"});
}

TEST_F(SafetensorsFileTest, RejectsANonIntegerDimension) {
  const std::string path = dir.file("float.safetensors");
  write_raw(path, R"({"w":{"dtype":"U8","shape":[2,1.5],"data_offsets":[0,3]}})", 3);
  expect_open_error(path, {"\"w\"", "1.5", "non-negative integer"});
  write_raw(path, R"({"w":{"dtype":"U8","shape":["2"],"data_offsets":[0,2]}})", 2);
  expect_open_error(path, {"\"w\"", "non-negative integer"});
  write_raw(path, R"({"w":{"dtype":"U8","shape":4,"data_offsets":[0,4]}})", 4);
  expect_open_error(path, {"\"w\"", "\"shape\"", "expected an array"});
}

TEST_F(SafetensorsFileTest, RejectsAShapeWhoseElementCountOverflows) {
  const std::string path = dir.file("overflow.safetensors");
  write_raw(path, R"({"w":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0);
  expect_open_error(path, {"\"w\"", "overflow"});
  write_raw(path, R"({"w":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,0]}})", 0);
  expect_open_error(path, {"\"w\"", "overflow"});
}

TEST_F(SafetensorsFileTest, RejectsMalformedDataOffsets) {
  const std::string path = dir.file("offsets.safetensors");
  write_raw(path, R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4,8]}})", 4);
  expect_open_error(path, {"\"w\"", "data_offsets", "[begin, end]"});
  write_raw(path, R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[-4,0]}})", 4);
  expect_open_error(path, {"\"w\"", "data_offsets", "[begin, end]"});
  write_raw(path, R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[4,0]}})", 4);
  expect_open_error(path, {"\"w\"", "begin 4 > end 0"});
}

// ----------------------------------------------------------------------------- malformed: data layout

TEST_F(SafetensorsFileTest, RejectsTruncatedData) {
  const std::string path = dir.file("trunc.safetensors");
  ASSERT_TRUE(write_safetensors(path, {{"a", Tensor::zeros({4}, DType::f32)}, {"w", Tensor::zeros({8}, DType::f32)}}).ok());
  const auto full = fs::file_size(path);
  fs::resize_file(path, full - 4);
  expect_open_error(path, {"\"w\"", "truncated", "[16, 48]", std::to_string(full) + " bytes",
                           std::to_string(full - 4) + " bytes in all"});
}

TEST_F(SafetensorsFileTest, RejectsOffsetsBeyondTheEndOfTheFile) {
  const std::string path = dir.file("beyond.safetensors");
  write_raw(path, R"({"w":{"dtype":"U8","shape":[16],"data_offsets":[100,116]}})", 16);
  expect_open_error(path, {"\"w\"", "truncated", "[100, 116]", "16 data bytes"});
}

TEST_F(SafetensorsFileTest, RejectsOverlappingTensors) {
  const std::string path = dir.file("overlap.safetensors");
  write_raw(path,
            R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},)"
            R"("b":{"dtype":"U8","shape":[8],"data_offsets":[4,12]}})",
            12);
  expect_open_error(path, {"\"b\"", "overlap", "\"a\"", "[0, 8]"});
}

TEST_F(SafetensorsFileTest, RejectsAnEmptyTensorInsideAnother) {
  const std::string path = dir.file("inside.safetensors");
  write_raw(path,
            R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},)"
            R"("e":{"dtype":"U8","shape":[0],"data_offsets":[4,4]}})",
            8);
  expect_open_error(path, {"\"e\"", "overlap", "\"a\""});
}

TEST_F(SafetensorsFileTest, RejectsAGapBetweenTensors) {
  const std::string path = dir.file("gap.safetensors");
  write_raw(path,
            R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},)"
            R"("b":{"dtype":"U8","shape":[8],"data_offsets":[12,20]}})",
            20);
  expect_open_error(path, {"\"b\"", "gap of 4 bytes", "\"a\""});
}

TEST_F(SafetensorsFileTest, RejectsAGapBeforeTheFirstTensor) {
  const std::string path = dir.file("gap0.safetensors");
  write_raw(path, R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[8,16]}})", 16);
  expect_open_error(path, {"\"a\"", "gap of 8 bytes"});
}

TEST_F(SafetensorsFileTest, RejectsTrailingBytesAfterTheLastTensor) {
  const std::string path = dir.file("trailing.safetensors");
  write_raw(path, R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}})", 12);
  expect_open_error(path, {"gap of 4 trailing bytes", "\"a\""});
}

TEST_F(SafetensorsFileTest, KeepsErrorsOnOneLineWhateverTheTensorName) {
  const std::string path = dir.file("name.safetensors");
  write_raw(path, R"({"bad\nname\u0001":{"dtype":"wrong-dtype","shape":[1],"data_offsets":[0,1]}})", 1);
  expect_open_error(path, {"bad\\x0aname\\x01", "unknown dtype"});
}

}  // namespace
}  // namespace day0
