// Tests of the weights file (tclm/weights.h): round trips, the byte layout, and refusal of every
// kind of damaged or inconsistent file with a message that names the file.
#include "tclm/weights.h"

#include <gtest/gtest.h>

#include "test_util.h"
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "tclm/error.h"
#include "tclm/model_schema.h"

namespace tclm {
namespace {

namespace fs = std::filesystem;

WeightsFile example_weights() {
  WeightsFile w;
  w.model_kind = "mamba";
  w.feature_version = 3;
  w.config_json = R"({"d_model": 4, "n_layers": 1})";
  w.metadata_json = R"({"trained_on": "tenset-v100"})";
  const float inf = std::numeric_limits<float>::infinity();
  w.tensors = {
      {"layers.0.mixer.in_proj.weight", {2, 3}, {1.5f, -2.25f, 0.0f, -0.0f, 1e-40f, inf}},
      {"layers.0.norm.bias", {3}, {0.1f, 0.2f, std::numeric_limits<float>::quiet_NaN()}},
      {"scale", {}, {42.0f}},  // ndim 0: one value
      {"empty", {0, 4}, {}},   // a zero dimension: no values
  };
  return w;
}

// Bitwise comparison, so that NaN and -0.0 round trips are checked exactly.
void expect_same(const WeightsFile& a, const WeightsFile& b) {
  EXPECT_EQ(a.model_kind, b.model_kind);
  EXPECT_EQ(a.feature_version, b.feature_version);
  EXPECT_EQ(a.config_json, b.config_json);
  EXPECT_EQ(a.metadata_json, b.metadata_json);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    EXPECT_EQ(a.tensors[i].name, b.tensors[i].name);
    EXPECT_EQ(a.tensors[i].shape, b.tensors[i].shape);
    ASSERT_EQ(a.tensors[i].data.size(), b.tensors[i].data.size());
    if (a.tensors[i].data.empty()) continue;  // data() may be null, which memcmp must not get
    EXPECT_EQ(0, std::memcmp(a.tensors[i].data.data(), b.tensors[i].data.data(),
                             a.tensors[i].data.size() * sizeof(float)))
        << a.tensors[i].name;
  }
}

using test::error_of;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Hand-assembles files, independently of the writer, for layouts the writer refuses to produce.
struct FileBuilder {
  std::string bytes;
  FileBuilder& u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) bytes += static_cast<char>(v >> (8 * i));
    return *this;
  }
  FileBuilder& i64(int64_t v) {
    for (int i = 0; i < 8; ++i) bytes += static_cast<char>(static_cast<uint64_t>(v) >> (8 * i));
    return *this;
  }
  FileBuilder& str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    bytes += s;
    return *this;
  }
  FileBuilder& f32(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u32(u);
  }
  // Magic, format version 1, feature version 3, kind, config, metadata.
  static FileBuilder header(uint32_t version = 1) {
    FileBuilder b;
    b.bytes = "TCLMWTS1";
    b.u32(version).u32(3).str("mamba").str("{}").str("{}");
    return b;
  }
  std::string with_crc() const {
    FileBuilder b = *this;
    b.u32(static_cast<uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size()))));
    return b.bytes;
  }
};

// A path in the test temp directory, unique per process (ctest runs tests in parallel).
std::string temp_path(const std::string& name) {
  return (fs::path(::testing::TempDir()) /
          ("tclm_weights_test_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

TEST(Weights, RoundTripInMemory) {
  const WeightsFile w = example_weights();
  expect_same(parse_weights(serialize_weights(w), "mem"), w);
  expect_same(parse_weights(serialize_weights(WeightsFile{}), "mem"), WeightsFile{});
}

TEST(Weights, RoundTripThroughFileAndOverwrite) {
  const std::string path = temp_path("round_trip.tclm");
  WeightsFile w = example_weights();
  save_weights(w, path);
  expect_same(load_weights(path), w);

  w.tensors[0].data[0] = 7.0f;
  w.metadata_json = "{}";
  save_weights(w, path);  // replaces the existing file
  expect_same(load_weights(path), w);
  EXPECT_FALSE(fs::exists(path + ".tmp." + std::to_string(::getpid())));
  fs::remove(path);
}

TEST(Weights, ByteLayoutMatchesHeader) {
  const std::string b = serialize_weights(example_weights());
  EXPECT_EQ(b.substr(0, 8), "TCLMWTS1");
  EXPECT_EQ(b.substr(8, 4), std::string("\x01\x00\x00\x00", 4));   // format version 1
  EXPECT_EQ(b.substr(12, 4), std::string("\x03\x00\x00\x00", 4));  // feature version 3
  EXPECT_EQ(b.substr(16, 9), std::string("\x05\x00\x00\x00mamba", 9));
  // The last 4 bytes are zlib's CRC-32 of everything before them, little-endian.
  const uint32_t crc = static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(b.data()), static_cast<uInt>(b.size() - 4)));
  uint32_t stored = 0;
  for (int i = 0; i < 4; ++i)
    stored |= uint32_t{static_cast<unsigned char>(b[b.size() - 4 + i])} << (8 * i);
  EXPECT_EQ(stored, crc);
  // The hand-built equivalent of a file with one 2x1 tensor is byte-identical.
  WeightsFile one;
  one.model_kind = "mamba";
  one.feature_version = 3;
  one.config_json = one.metadata_json = "{}";
  one.tensors = {{"w", {2, 1}, {1.0f, -2.0f}}};
  EXPECT_EQ(serialize_weights(one),
            FileBuilder::header().u32(1).str("w").u32(2).i64(2).i64(1).f32(1).f32(-2).with_crc());
}

TEST(Weights, FindAndNumParameters) {
  const WeightsFile w = example_weights();
  const NamedTensor* t = w.find("layers.0.norm.bias");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->shape, std::vector<int64_t>{3});
  EXPECT_EQ(w.find("scale")->data, std::vector<float>{42.0f});
  EXPECT_EQ(w.find("missing"), nullptr);
  EXPECT_EQ(w.find("layers.0"), nullptr);  // no prefix matching
  EXPECT_EQ(w.num_parameters(), 6 + 3 + 1 + 0);
  EXPECT_EQ(WeightsFile{}.num_parameters(), 0);
}

TEST(Weights, EveryTruncationIsRefused) {
  const std::string b = serialize_weights(example_weights());
  for (size_t len = 0; len < b.size(); ++len) {
    const std::string msg = error_of([&] { parse_weights(b.substr(0, len), "cut.tclm"); });
    EXPECT_TRUE(contains(msg, "cut.tclm")) << len << ": " << msg;
    EXPECT_TRUE(contains(msg, "truncated")) << len << ": " << msg;
  }
  // The same through files, at a few points (inside the header, a string, shape, data, the CRC).
  const std::string path = temp_path("truncated.tclm");
  for (size_t len : {size_t{0}, size_t{5}, size_t{10}, size_t{18}, size_t{30}, size_t{100},
                     b.size() / 2, b.size() - 5, b.size() - 1}) {
    std::ofstream(path, std::ios::binary) << b.substr(0, len);
    const std::string msg = error_of([&] { load_weights(path); });
    EXPECT_TRUE(contains(msg, path)) << len << ": " << msg;
    EXPECT_TRUE(contains(msg, "truncated")) << len << ": " << msg;
  }
  fs::remove(path);
}

TEST(Weights, EveryFlippedByteIsRefused) {
  const std::string b = serialize_weights(example_weights());
  for (size_t pos = 0; pos < b.size(); ++pos) {
    for (unsigned char mask : {0x01, 0x80}) {
      std::string damaged = b;
      damaged[pos] = static_cast<char>(damaged[pos] ^ mask);
      const std::string msg = error_of([&] { parse_weights(damaged, "flip.tclm"); });
      EXPECT_TRUE(contains(msg, "flip.tclm")) << pos << ": " << msg;
      const char* expected = pos < 8    ? "not a tclm weights file"
                             : pos < 12 ? "format version"
                                        : "corrupted";
      EXPECT_TRUE(contains(msg, expected)) << pos << ": " << msg;
    }
  }
  // A flipped data byte can only be caught by the checksum.
  std::string damaged = b;
  damaged[b.size() - 10] ^= 0x04;
  EXPECT_TRUE(contains(error_of([&] { parse_weights(damaged, "x"); }), "checksum mismatch"));
}

TEST(Weights, OtherFormatVersionIsRefused) {
  const std::string msg =
      error_of([&] { parse_weights(FileBuilder::header(2).u32(0).with_crc(), "v2.tclm"); });
  EXPECT_TRUE(contains(msg, "v2.tclm")) << msg;
  EXPECT_TRUE(contains(msg, "format version 2")) << msg;
  EXPECT_TRUE(contains(msg, "version 1")) << msg;
  // Version 1 with the same content is fine.
  EXPECT_EQ(parse_weights(FileBuilder::header(1).u32(0).with_crc(), "v1").tensors.size(), 0u);
}

TEST(Weights, WrongMagicIsRefused) {
  std::string b = serialize_weights(example_weights());
  b.replace(0, 8, "GGUF\x03\x00\x00\x00", 8);
  EXPECT_TRUE(contains(error_of([&] { parse_weights(b, "m.gguf"); }), "not a tclm weights file"));
  EXPECT_TRUE(contains(error_of([&] { parse_weights("{\"json\": 1}", "m.json"); }), "m.json"));
}

TEST(Weights, ShapeDataMismatchIsRefusedEvenWithValidChecksum) {
  // Shape [3] but only 2 values before the checksum.
  std::string msg = error_of([&] {
    parse_weights(FileBuilder::header().u32(1).str("w").u32(1).i64(3).f32(1).f32(2).with_crc(),
                  "short.tclm");
  });
  EXPECT_TRUE(contains(msg, "short.tclm") && contains(msg, "[3]") && contains(msg, "\"w\"")) << msg;
  // Shape [1] but 2 values: 4 bytes left over before the checksum.
  msg = error_of([&] {
    parse_weights(FileBuilder::header().u32(1).str("w").u32(1).i64(1).f32(1).f32(2).with_crc(),
                  "long.tclm");
  });
  EXPECT_TRUE(contains(msg, "long.tclm") && contains(msg, "4 unexpected bytes")) << msg;
  // A negative dimension.
  msg = error_of([&] {
    parse_weights(FileBuilder::header().u32(1).str("w").u32(2).i64(-1).i64(-2).with_crc(), "n");
  });
  EXPECT_TRUE(contains(msg, "negative dimension")) << msg;
  // Two tensors with the same name would make find() ambiguous.
  msg = error_of([&] {
    parse_weights(
        FileBuilder::header().u32(2).str("w").u32(0).f32(1).str("w").u32(0).f32(2).with_crc(),
        "dup");
  });
  EXPECT_TRUE(contains(msg, "twice")) << msg;
}

TEST(Weights, AbsurdSizesAreRefusedWithoutAllocating) {
  // Each length field claims far more than the file holds; the checksum is valid, so only the
  // bounds checks stand between these and a multi-gigabyte allocation.
  const std::vector<std::string> files = {
      [] {
        FileBuilder b;
        b.bytes = "TCLMWTS1";
        return b.u32(1).u32(3).u32(0xFFFFFFF0u).with_crc();  // model kind of ~4 GiB
      }(),
      FileBuilder::header().u32(0xFFFFFFFFu).with_crc(),                  // 4G tensors
      FileBuilder::header().u32(1).str("w").u32(0xFFFFFFFFu).with_crc(),  // 4G dims
      FileBuilder::header().u32(1).str("w").u32(1).i64(int64_t{1} << 60).with_crc(),
      FileBuilder::header()
          .u32(1)
          .str("w")
          .u32(3)
          .i64(1 << 30)
          .i64(1 << 30)
          .i64(1 << 30)
          .with_crc(),  // product overflows int64
  };
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string msg = error_of([&] { parse_weights(files[i], "absurd.tclm"); });
    EXPECT_TRUE(contains(msg, "absurd.tclm")) << i << ": " << msg;
  }
}

TEST(Weights, SerializeRefusesInconsistentTensors) {
  WeightsFile w = example_weights();
  w.tensors[1].data.pop_back();
  EXPECT_TRUE(contains(error_of([&] { serialize_weights(w); }), "layers.0.norm.bias"));
  w = example_weights();
  w.tensors[0].shape = {-2, -3};
  EXPECT_THROW(serialize_weights(w), Error);
  w = example_weights();
  w.tensors[3].name = w.tensors[2].name;
  EXPECT_TRUE(contains(error_of([&] { serialize_weights(w); }), "twice"));
}

TEST(Weights, FileErrorsNameThePath) {
  const std::string missing = temp_path("does_not_exist.tclm");
  EXPECT_TRUE(contains(error_of([&] { load_weights(missing); }), missing));
  const std::string bad_dir = temp_path("no_such_dir") + "/w.tclm";
  EXPECT_TRUE(contains(error_of([&] { save_weights(example_weights(), bad_dir); }), bad_dir));
  // A refused save leaves the previous file untouched.
  const std::string path = temp_path("keep.tclm");
  save_weights(example_weights(), path);
  WeightsFile bad = example_weights();
  bad.tensors[0].data.clear();
  EXPECT_THROW(save_weights(bad, path), Error);
  expect_same(load_weights(path), example_weights());
  fs::remove(path);
}

// The schema's tensor list is the weights file format of a Mamba model: every file saved so far holds
// exactly these names and shapes, so they are spelled out here rather than derived. A 2-layer config
// with every size different (F 5, D 32, E = expand D = 64, N 4, K 3, R = ceil(32 / 16) = 2, H = D = 32)
// catches a swapped dimension or a name of the wrong layer.
TEST(MambaSchema, TensorNamesAndShapesOfATwoLayerModel) {
  MambaConfig cfg;
  cfg.n_features = 5;
  cfg.d_model = 32;
  cfg.n_layers = 2;
  cfg.d_state = 4;
  cfg.d_conv = 3;
  cfg.expand = 2;
  const std::vector<std::pair<std::string, std::vector<int64_t>>> want = {
      {"embed.weight", {32, 5}},
      {"embed.bias", {32}},
      {"norms.0.weight", {32}},
      {"norms.0.bias", {32}},
      {"norms.1.weight", {32}},
      {"norms.1.bias", {32}},
      {"mixers.0.A_log", {64, 4}},
      {"mixers.0.D", {64}},
      {"mixers.0.in_proj.weight", {128, 32}},
      {"mixers.0.conv1d.weight", {64, 1, 3}},
      {"mixers.0.conv1d.bias", {64}},
      {"mixers.0.x_proj.weight", {10, 64}},
      {"mixers.0.dt_proj.weight", {64, 2}},
      {"mixers.0.dt_proj.bias", {64}},
      {"mixers.0.out_proj.weight", {32, 64}},
      {"mixers.1.A_log", {64, 4}},
      {"mixers.1.D", {64}},
      {"mixers.1.in_proj.weight", {128, 32}},
      {"mixers.1.conv1d.weight", {64, 1, 3}},
      {"mixers.1.conv1d.bias", {64}},
      {"mixers.1.x_proj.weight", {10, 64}},
      {"mixers.1.dt_proj.weight", {64, 2}},
      {"mixers.1.dt_proj.bias", {64}},
      {"mixers.1.out_proj.weight", {32, 64}},
      {"norm_f.weight", {32}},
      {"norm_f.bias", {32}},
      {"head1.weight", {32, 32}},
      {"head1.bias", {32}},
      {"head2.weight", {1, 32}},
      {"head2.bias", {1}},
  };
  const auto got = mamba_schema::mamba_tensors(cfg);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].name, want[i].first) << i;
    EXPECT_EQ(got[i].shape, want[i].second) << want[i].first;
  }
  // Explicit dt_rank and head_hidden take the place of the defaults.
  cfg.dt_rank = 3;
  cfg.head_hidden = 7;
  const auto other = mamba_schema::mamba_tensors(cfg);
  auto shape_of = [&](const std::string& name) {
    for (const auto& t : other) {
      if (t.name == name) return t.shape;
    }
    return std::vector<int64_t>{-1};
  };
  EXPECT_EQ(shape_of("mixers.1.x_proj.weight"), (std::vector<int64_t>{11, 64}));
  EXPECT_EQ(shape_of("mixers.1.dt_proj.weight"), (std::vector<int64_t>{64, 3}));
  EXPECT_EQ(shape_of("head1.weight"), (std::vector<int64_t>{7, 32}));
  EXPECT_EQ(shape_of("head2.weight"), (std::vector<int64_t>{1, 7}));
  EXPECT_EQ(mamba_schema::kLayerNormEps, 1e-5);  // upstream Mamba's; the saved models were trained with it
}

}  // namespace
}  // namespace tclm
