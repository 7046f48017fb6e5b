// safetensors: round trips of every dtype and layout, sharded and directory checkpoints, the exact
// on-disk format other readers expect, and one test per kind of corrupt file.
#include <gtest/gtest.h>

#include <cstring>

#include "core/cuda/cuda_api.h"
#include "core/safetensors.h"
#include "test_util.h"

namespace vela {
namespace {

using test::read_bytes;
using test::TempDir;
using test::write_bytes;

// The logical (row-major) bytes of any tensor.
std::string bytes_of(const Tensor& t) {
  Tensor c = t.to(Device::cpu()).contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.nbytes());
}

// A tensor of `shape` whose bytes are a deterministic pattern (any dtype).
Tensor patterned(const Shape& shape, DType dtype, int seed) {
  Tensor t = Tensor::empty(shape, dtype);
  auto* p = static_cast<unsigned char*>(t.data_ptr());
  for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<unsigned char>(i * 37 + seed * 11 + 1);
  if (dtype == DType::kF32) {  // keep floats finite and exact
    float* f = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) f[i] = static_cast<float>(i) * 0.5f - seed;
  }
  return t;
}

// 8-byte little-endian header length, the header, then the data region.
std::string raw_file(const std::string& header, const std::string& data = "") {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(n >> (8 * i));
  return out + header + data;
}

uint64_t header_len_of(const std::string& file) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(file[i]);
  return n;
}

TEST(Safetensors, RoundTripEveryDtypeAndLayout) {
  TempDir dir;
  std::string path = dir.file("all.safetensors");
  Tensor base3 = patterned({2, 3, 4}, DType::kF32, 3);
  std::vector<std::pair<std::string, Tensor>> tensors = {
      {"f32", patterned({2, 3}, DType::kF32, 1)},
      {"u8_odd", patterned({7}, DType::kU8, 2)},  // leaves the next tensor at an odd offset
      {"bf16", patterned({4, 1}, DType::kBF16, 3)},
      {"f16", patterned({3, 1, 2}, DType::kF16, 4)},
      {"i32", patterned({5}, DType::kI32, 5)},
      {"i64", patterned({2, 2}, DType::kI64, 6)},
      {"scalar", Tensor::from_vector<float>({42.5f}, {})},
      {"empty", Tensor::empty({0, 3}, DType::kF32)},
      {"empty_i64", Tensor::empty({0}, DType::kI64)},
      {"transposed", base3.transpose(0, 2)},          // [4, 3, 2], non-contiguous
      {"sliced", base3.slice(1, 1, 3).select(2, 1)},  // offset + strides
      {"bf16_t", patterned({3, 5}, DType::kBF16, 7).transpose(0, 1)},
  };
  // A true 0-d tensor: from_vector with an empty shape means [n], so view it to rank 0.
  tensors[6].second = tensors[6].second.view(Shape{});
  ASSERT_EQ(tensors[6].second.dim(), 0);
  ASSERT_FALSE(tensors[9].second.is_contiguous());
  std::map<std::string, std::string> meta = {{"format", "pt"}, {"note", "héllo \"q\""}};
  save_safetensors(path, tensors, meta);
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"all.safetensors"});

  SafetensorsReader r = SafetensorsReader::open(path);
  EXPECT_EQ(r.files(), std::vector<std::string>{path});
  EXPECT_EQ(r.metadata(), meta);
  std::vector<std::string> want_names;
  for (const auto& [name, t] : tensors) want_names.push_back(name);
  std::sort(want_names.begin(), want_names.end());
  EXPECT_EQ(r.names(), want_names);
  for (const auto& [name, t] : tensors) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(r.contains(name));
    Tensor got = r.get(name);
    EXPECT_EQ(got.dtype(), t.dtype());
    EXPECT_EQ(got.shape(), t.shape());
    EXPECT_TRUE(got.is_cpu());
    EXPECT_TRUE(got.is_contiguous());
    EXPECT_EQ(bytes_of(got), bytes_of(t));
    const SafetensorsEntry& e = r.entry(name);
    EXPECT_EQ(e.end - e.begin, t.nbytes());
    EXPECT_EQ(e.file_idx, 0);
  }
  EXPECT_EQ(r.get("scalar").item<float>(), 42.5f);
  EXPECT_EQ(r.get("transposed").to_vector<float>(), base3.transpose(0, 2).to_vector<float>());
  EXPECT_FALSE(r.contains("nope"));
  EXPECT_THROW_WITH((void)r.get("nope"), InvalidArgument, "nope", path);
}

// The layout the reference (Rust/Python) safetensors reader insists on: header starting with '{',
// padded with spaces to 8-byte alignment, tensors packed back to back from offset 0 in the order
// given, the last one ending exactly at the end of the file, little-endian data.
TEST(Safetensors, WritesTheStandardLayout) {
  TempDir dir;
  std::string path = dir.file("std.safetensors");
  std::vector<std::pair<std::string, Tensor>> tensors = {
      {"z.weight", Tensor::from_vector<int32_t>({1, -2, 0x01020304})},
      {"a.bias", Tensor::from_vector<uint8_t>({9, 8, 7})},
      {"m", Tensor::from_vector<float>({1.0f, -2.0f}, {1, 2})},
  };
  save_safetensors(path, tensors, {{"format", "pt"}});
  std::string file = read_bytes(path);
  uint64_t n = header_len_of(file);
  ASSERT_LE(8 + n, file.size());
  EXPECT_EQ((8 + n) % 8, 0u);
  std::string header = file.substr(8, n);
  ASSERT_EQ(header[0], '{');
  size_t close = header.find_last_of('}');
  EXPECT_EQ(header.find_first_not_of(' ', close + 1), std::string::npos) << header;
  json j = json::parse(header);
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"__metadata__", "z.weight", "a.bias", "m"}));
  EXPECT_EQ(j["__metadata__"], json({{"format", "pt"}}));
  EXPECT_EQ(j["z.weight"]["dtype"], "I32");
  EXPECT_EQ(j["z.weight"]["shape"], json({3}));
  EXPECT_EQ(j["z.weight"]["data_offsets"], json({0, 12}));
  EXPECT_EQ(j["a.bias"]["dtype"], "U8");
  EXPECT_EQ(j["a.bias"]["data_offsets"], json({12, 15}));
  EXPECT_EQ(j["m"]["dtype"], "F32");
  EXPECT_EQ(j["m"]["shape"], json({1, 2}));
  EXPECT_EQ(j["m"]["data_offsets"], json({15, 23}));
  EXPECT_EQ(file.size(), 8 + n + 23);
  const unsigned char* d = reinterpret_cast<const unsigned char*>(file.data()) + 8 + n;
  EXPECT_EQ(d[8], 0x04);  // 0x01020304 little-endian
  EXPECT_EQ(d[11], 0x01);
  EXPECT_EQ(d[12], 9);
  EXPECT_EQ(d[15 + 4 + 3], 0xc0);  // -2.0f = 0xc0000000, high byte last
}

TEST(Safetensors, EmptyCheckpointAndNoMetadata) {
  TempDir dir;
  std::string path = dir.file("none.safetensors");
  save_safetensors(path, {});
  std::string file = read_bytes(path);
  EXPECT_EQ(file.size() % 8, 0u);
  EXPECT_EQ(json::parse(file.substr(8)), json::object());
  SafetensorsReader r = SafetensorsReader::open(path);
  EXPECT_TRUE(r.names().empty());
  EXPECT_TRUE(r.metadata().empty());
}

TEST(Safetensors, MappedTensorOutlivesReader) {
  TempDir dir;
  std::string path = dir.file("keep.safetensors");
  std::vector<float> vals = {1, 2, 3, 4, 5, 6};
  save_safetensors(path, {{"w", Tensor::from_vector(vals, {2, 3})}});
  Tensor w;
  {
    SafetensorsReader r = SafetensorsReader::open(path);
    w = r.get("w").slice(0, 1, 2);
  }
  std::filesystem::remove(path);  // the mapping survives the unlink too
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{4, 5, 6}));
  Tensor c = w.clone();
  w = Tensor();
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{4, 5, 6}));
}

TEST(Safetensors, ReadsForeignLayouts) {
  // Another writer may order entries freely, leave gaps and misalign tensors; all are fine.
  TempDir dir;
  std::string path = dir.file("foreign.safetensors");
  float f = 1.5f;
  std::string data = std::string("\x01\x02\x03", 3) + std::string(reinterpret_cast<char*>(&f), 4) +
                     std::string(5, '\0');
  write_bytes(path, raw_file(R"({"f":{"dtype":"F32","shape":[],"data_offsets":[3,7]},)"
                             R"("b":{"shape":[3],"data_offsets":[0,3],"dtype":"U8"},)"
                             R"("__metadata__":null})",
                             data));
  SafetensorsReader r = SafetensorsReader::open(path);
  EXPECT_EQ(r.get("f").item<float>(), 1.5f);
  EXPECT_EQ(r.get("b").to_vector<uint8_t>(), (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_TRUE(r.metadata().empty());
}

// ---- sharded checkpoints and directories ----

struct ShardedFixture {
  TempDir dir;
  std::string shard1, shard2, index;
  Tensor a = Tensor::from_vector<float>({1, 2, 3});
  Tensor b = Tensor::from_vector<int64_t>({7, 8});
  Tensor c = Tensor::from_vector<uint8_t>({5});

  explicit ShardedFixture(const std::string& index_name = "model.safetensors.index.json") {
    shard1 = dir.file("model-00001-of-00002.safetensors");
    shard2 = dir.file("model-00002-of-00002.safetensors");
    index = dir.file(index_name);
    save_safetensors(shard1, {{"a", a}, {"c", c}}, {{"format", "pt"}, {"shard", "1"}});
    save_safetensors(shard2, {{"b", b}}, {{"shard", "2"}});
  }
  void write_index(const json& weight_map) {
    json j = {{"metadata", {{"total_size", 35}}}, {"weight_map", weight_map}};
    write_bytes(index, j.dump(2));
  }
  void write_good_index() {
    write_index({{"a", "model-00001-of-00002.safetensors"},
                 {"b", "model-00002-of-00002.safetensors"},
                 {"c", "model-00001-of-00002.safetensors"}});
  }
};

void expect_sharded_ok(const SafetensorsReader& r, const ShardedFixture& fx) {
  EXPECT_EQ(r.names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(r.files(), (std::vector<std::string>{fx.shard1, fx.shard2}));  // each shard once
  EXPECT_EQ(r.get("a").to_vector<float>(), fx.a.to_vector<float>());
  EXPECT_EQ(r.get("b").to_vector<int64_t>(), fx.b.to_vector<int64_t>());
  EXPECT_EQ(r.get("c").to_vector<uint8_t>(), fx.c.to_vector<uint8_t>());
  EXPECT_EQ(r.entry("a").file_idx, 0);
  EXPECT_EQ(r.entry("b").file_idx, 1);
  EXPECT_EQ(r.entry("c").file_idx, 0);
  std::map<std::string, std::string> first_meta = {{"format", "pt"}, {"shard", "1"}};
  EXPECT_EQ(r.metadata(), first_meta);
}

TEST(Safetensors, ShardedThroughIndex) {
  ShardedFixture fx("weights.index.json");
  fx.write_good_index();
  expect_sharded_ok(SafetensorsReader::open(fx.index), fx);
}

TEST(Safetensors, DirectoryWithIndex) {
  ShardedFixture fx;
  fx.write_good_index();
  expect_sharded_ok(SafetensorsReader::open(fx.dir.path().string()), fx);
}

TEST(Safetensors, DirectoryWithSingleFile) {
  TempDir dir;
  save_safetensors(dir.file("model.safetensors"), {{"x", Tensor::from_vector<float>({3.f})}});
  SafetensorsReader r = SafetensorsReader::open(dir.path().string());
  EXPECT_EQ(r.files(), std::vector<std::string>{dir.file("model.safetensors")});
  EXPECT_EQ(r.get("x").to_vector<float>(), std::vector<float>{3.f});
}

TEST(Safetensors, DirectoryWithoutCheckpoint) {
  TempDir dir;
  write_bytes(dir.file("other.safetensors"), "");
  EXPECT_THROW_WITH((void)SafetensorsReader::open(dir.path().string()), IoError,
                    dir.path().string(), "model.safetensors");
}

TEST(Safetensors, MissingFile) {
  TempDir dir;
  std::string path = dir.file("absent.safetensors");
  EXPECT_THROW_WITH((void)SafetensorsReader::open(path), IoError, path);
}

TEST(Safetensors, IndexTensorMissingFromShard) {
  ShardedFixture fx;
  fx.write_index({{"a", "model-00001-of-00002.safetensors"},
                  {"b", "model-00002-of-00002.safetensors"},
                  {"c", "model-00001-of-00002.safetensors"},
                  {"ghost", "model-00002-of-00002.safetensors"}});
  EXPECT_THROW_WITH((void)SafetensorsReader::open(fx.index), IoError, fx.shard2, "'ghost'",
                    "missing");
}

TEST(Safetensors, ShardTensorMappedElsewhere) {
  ShardedFixture fx;
  fx.write_index({{"a", "model-00001-of-00002.safetensors"},
                  {"b", "model-00002-of-00002.safetensors"},
                  {"c", "model-00002-of-00002.safetensors"}});
  // Shard 1 holds 'c' which the index puts in shard 2 (and shard 2 then lacks it).
  EXPECT_THROW_WITH((void)SafetensorsReader::open(fx.index), IoError, fx.shard1, "'c'",
                    "another file");
}

TEST(Safetensors, DuplicateNameAcrossShards) {
  ShardedFixture fx;
  save_safetensors(fx.shard2, {{"b", fx.b}, {"a", fx.a}});  // 'a' now in both shards
  fx.write_good_index();
  EXPECT_THROW_WITH((void)SafetensorsReader::open(fx.index), IoError, fx.shard2, "'a'");
  // The same name twice in weight_map (last-one-wins in most JSON parsers) is rejected too.
  write_bytes(fx.index, R"({"weight_map": {"a": "model-00001-of-00002.safetensors",
      "b": "model-00002-of-00002.safetensors", "a": "model-00002-of-00002.safetensors"}})");
  EXPECT_THROW_WITH((void)SafetensorsReader::open(fx.index), IoError, fx.index, "'a'",
                    "more than once");
}

TEST(Safetensors, BadIndex) {
  ShardedFixture fx;
  write_bytes(fx.index, R"({"metadata": {}})");
  EXPECT_THROW_WITH((void)SafetensorsReader::open(fx.index), IoError, fx.index, "weight_map");
  write_bytes(fx.index, R"({"weight_map": {"a": 3}})");
  EXPECT_THROW_WITH((void)SafetensorsReader::open(fx.index), IoError, fx.index, "'a'");
  write_bytes(fx.index, R"({"weight_map": )");
  EXPECT_THROW_WITH((void)SafetensorsReader::open(fx.index), IoError, fx.index, "not valid JSON");
  fx.write_index({{"b", "missing.safetensors"}, {"a", "model-00001-of-00002.safetensors"}});
  EXPECT_THROW_WITH((void)SafetensorsReader::open(fx.index), IoError,
                    fx.dir.file("missing.safetensors"));
}

// ---- corrupt single files: each names the file and the problem ----

struct CorruptCase {
  const char* what;
  std::string bytes;
  const char* phrase;
};

TEST(Safetensors, CorruptFilesAreIoErrors) {
  std::string f32x2(8, '\0');
  const std::string ok_entry = R"("t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  std::string huge_len(8, '\xff');
  std::vector<CorruptCase> cases = {
      {"empty file", "", "shorter than the 8-byte header"},
      {"5 bytes", "abcde", "shorter than the 8-byte header"},
      {"length past end", raw_file("{}").substr(0, 8) + "{", "past the end of the file"},
      {"length 2^64-1", huge_len + "{}", "past the end of the file"},
      {"invalid json", raw_file("{\"t\": ", f32x2), "not valid JSON"},
      {"json array", raw_file("[1, 2]"), "not a JSON object"},
      {"json string", raw_file("\"x\""), "not a JSON object"},
      {"entry not object", raw_file(R"({"t": [1]})"), "'t' is not an object"},
      {"no dtype", raw_file(R"({"t":{"shape":[2],"data_offsets":[0,8]}})", f32x2),
       "'t' has no \"dtype\""},
      {"no shape", raw_file(R"({"t":{"dtype":"F32","data_offsets":[0,8]}})", f32x2),
       "'t' has no \"shape\""},
      {"no offsets", raw_file(R"({"t":{"dtype":"F32","shape":[2]}})", f32x2),
       "'t' has no \"data_offsets\""},
      {"dtype not string", raw_file(R"({"t":{"dtype":4,"shape":[2],"data_offsets":[0,8]}})", f32x2),
       "non-string \"dtype\""},
      {"shape not array",
       raw_file(R"({"t":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", f32x2),
       "\"shape\" that is not an array"},
      {"shape of strings",
       raw_file(R"({"t":{"dtype":"F32","shape":["2"],"data_offsets":[0,8]}})", f32x2),
       "non-integer extent"},
      {"fractional shape",
       raw_file(R"({"t":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", f32x2),
       "non-integer extent"},
      {"negative shape",
       raw_file(R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", f32x2), "negative"},
      {"offsets not pair",
       raw_file(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", f32x2), "[begin, end]"},
      {"offsets negative",
       raw_file(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", f32x2),
       "not non-negative integers"},
      {"offsets strings",
       raw_file(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":["0","8"]}})", f32x2),
       "not non-negative integers"},
      {"begin > end", raw_file(R"({"t":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", f32x2),
       "begin 8 > end 0"},
      {"end past data",
       raw_file(R"({"t":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", f32x2),
       "end 16 past the end of the data region (8 bytes)"},
      {"size mismatch",
       raw_file(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", f32x2),
       "size mismatch"},
      {"size overflow",
       raw_file(R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})",
                f32x2),
       "size mismatch"},
      {"overlap",
       raw_file(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                R"("u":{"dtype":"I32","shape":[1],"data_offsets":[4,8]}})",
                f32x2),
       "overlap"},
      {"duplicate name", raw_file("{" + ok_entry + "," + ok_entry + "}", f32x2),
       "'t' more than once"},
      {"metadata not object", raw_file(R"({"__metadata__": [1]})"), "\"__metadata__\""},
      {"metadata value not string", raw_file(R"({"__metadata__": {"k": 1}})"), "'k'"},
  };
  TempDir dir;
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].what);
    std::string path = dir.file("bad" + std::to_string(i) + ".safetensors");
    write_bytes(path, cases[i].bytes);
    EXPECT_THROW_WITH((void)SafetensorsReader::open(path), IoError, path, cases[i].phrase);
  }
}

TEST(Safetensors, UnsupportedDtypesNameTensorAndDtype) {
  TempDir dir;
  struct Case {
    const char* dtype;
    int bytes;
  };
  for (Case c : {Case{"F64", 8}, Case{"BOOL", 1}, Case{"I8", 1}, Case{"F8_E4M3", 1}, Case{"U16", 2},
                 Case{"C64", 8}}) {
    SCOPED_TRACE(c.dtype);
    std::string path = dir.file(std::string("unsup_") + c.dtype + ".safetensors");
    std::string header = std::string(R"({"layer.w":{"dtype":")") + c.dtype +
                         R"(","shape":[2],"data_offsets":[0,)" + std::to_string(2 * c.bytes) +
                         "]}}";
    write_bytes(path, raw_file(header, std::string(2 * c.bytes, '\0')));
    EXPECT_THROW_WITH((void)SafetensorsReader::open(path), Unsupported, path, "'layer.w'", c.dtype);
  }
  std::string path = dir.file("rank7.safetensors");
  write_bytes(path, raw_file(R"({"r":{"dtype":"U8","shape":[1,1,1,1,1,1,1],"data_offsets":[0,1]}})",
                             std::string(1, '\0')));
  EXPECT_THROW_WITH((void)SafetensorsReader::open(path), Unsupported, path, "'r'", "rank 7");
}

// ---- failed saves leave nothing behind ----

TEST(Safetensors, FailedSaveLeavesExistingFileAlone) {
  TempDir dir;
  std::string path = dir.file("good.safetensors");
  Tensor x = Tensor::from_vector<float>({1, 2});
  save_safetensors(path, {{"x", x}});
  std::string good = read_bytes(path);

  EXPECT_THROW_WITH(save_safetensors(path, {{"x", x}, {"y", x}, {"x", x}}), InvalidArgument,
                    "duplicate", "'x'", path);
  EXPECT_THROW_WITH(save_safetensors(path, {{"__metadata__", x}}), InvalidArgument, "reserved");
  EXPECT_THROW_WITH(save_safetensors(path, {{"u", Tensor()}}), InvalidArgument, "'u'", "undefined");
  EXPECT_THROW_WITH(save_safetensors(path, {{"x", x}}, {{"k", "\xff\xfe"}}), InvalidArgument,
                    "UTF-8", path);
  EXPECT_EQ(read_bytes(path), good);
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"good.safetensors"});

  std::string fresh = dir.file("fresh.safetensors");
  EXPECT_THROW(save_safetensors(fresh, {{"x", x}, {"x", x}}), InvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(fresh));

  if (!cuda::available()) {
    // A failure after the header is written (a "CUDA" tensor in a CPU-only build): the temp file
    // is removed and the old file stays.
    float dummy[2] = {0, 0};
    Tensor fake_cuda = Tensor::from_blob(dummy, {2}, DType::kF32, Device::cuda(0));
    EXPECT_THROW(save_safetensors(path, {{"x", x}, {"g", fake_cuda}}), Unsupported);
    EXPECT_EQ(read_bytes(path), good);
    EXPECT_EQ(dir.listing(), std::vector<std::string>{"good.safetensors"});
  }
}

TEST(Safetensors, SaveIntoMissingDirectory) {
  TempDir dir;
  std::string path = dir.file("no/such/dir/x.safetensors");
  EXPECT_THROW_WITH(save_safetensors(path, {{"x", Tensor::from_vector<float>({1})}}), IoError,
                    path);
  EXPECT_TRUE(dir.listing().empty());
}

TEST(Safetensors, OverwriteReplacesAtomically) {
  TempDir dir;
  std::string path = dir.file("w.safetensors");
  save_safetensors(path, {{"x", Tensor::from_vector<float>({1})}});
  SafetensorsReader old_reader = SafetensorsReader::open(path);
  Tensor old_x = old_reader.get("x");
  save_safetensors(path, {{"x", Tensor::from_vector<float>({2, 3})}});
  // The old mapping still sees the old inode; a fresh open sees the new file.
  EXPECT_EQ(old_x.to_vector<float>(), std::vector<float>{1});
  EXPECT_EQ(SafetensorsReader::open(path).get("x").to_vector<float>(), (std::vector<float>{2, 3}));
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"w.safetensors"});
}

}  // namespace
}  // namespace vela
