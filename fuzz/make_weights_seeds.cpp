// fuzz/make_weights_seeds.cpp: writes the hand-made seeds of fuzz/corpus/weights/ from one small real
// model (a tiny Mamba trained by `tclm train`, fuzz/corpus/weights/real_tiny_mamba_d4.tclm):
// valid variants the engine accepts, and broken files, one problem each, named after it. The files
// that need a correct checksum get one, so that the problem they carry is the one the parser meets.
//
//   cmake --build build --target tclm_fuzz_make_weights_seeds
//   build/tclm_fuzz_make_weights_seeds fuzz/corpus/weights/real_tiny_mamba_d4.tclm fuzz/corpus/weights
#include <zlib.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "tclm/error.h"
#include "tclm/feature.h"
#include "tclm/model_schema.h"
#include "tclm/weights.h"

namespace {

namespace ms = tclm::mamba_schema;

using tclm::NamedTensor;
using tclm::WeightsFile;

std::string dir;

void write(const std::string& name, const std::string& bytes) {
  const std::string path = dir + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fclose(f) != 0) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::exit(1);
  }
  std::printf("%-48s %6zu bytes\n", name.c_str(), bytes.size());
}

void u32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
}
void i64(std::string& s, int64_t v) {
  for (int i = 0; i < 8; ++i) s += static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff);
}
void str(std::string& s, const std::string& v) {
  u32(s, static_cast<uint32_t>(v.size()));
  s += v;
}
void set_u32(std::string& s, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) s[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
// Appends the CRC-32 of everything so far (the file's last field).
std::string with_crc(std::string s) {
  u32(s, static_cast<uint32_t>(crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(s.data()),
                                     static_cast<uInt>(s.size()))));
  return s;
}
// Header and strings of a hand-built file; the caller appends the tensor count and tensors.
std::string head(const std::string& kind = "mamba", const std::string& config = "{}", uint32_t feature = 2) {
  std::string s = "TCLMWTS1";
  u32(s, tclm::kWeightsFormatVersion);
  u32(s, feature);
  str(s, kind);
  str(s, config);
  str(s, "{}");
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s REAL_TINY_MODEL.tclm OUT_DIR\n", argv[0]);
    return 2;
  }
  dir = argv[2];
  try {
    const WeightsFile real = tclm::load_weights(argv[1]);
    const std::string real_bytes = tclm::serialize_weights(real);

    // ---- valid files
    WeightsFile w = real;
    w.feature_version = tclm::kTraceFeatureVersion;  // the same model as a MetaSchedule-trace model
    write("valid_trace_feature_version.tclm", tclm::serialize_weights(w));
    w = real;
    for (NamedTensor& t : w.tensors) {
      if (t.name == ms::join(ms::kEmbed, ms::kWeight)) t.data[0] = std::numeric_limits<float>::quiet_NaN();
      if (t.name == ms::join(ms::kHead1, ms::kWeight)) t.data[0] = std::numeric_limits<float>::infinity();
      if (t.name == ms::join(ms::mixer_module(0), ms::kALog)) t.data[0] = 1e30f;  // exp overflows
    }
    write("valid_nan_inf_weights.tclm", tclm::serialize_weights(w));
    w = real;
    w.metadata_json = "\xff\xfe not JSON, not UTF-8 \xc3";
    write("valid_binary_metadata.tclm", tclm::serialize_weights(w));
    w = WeightsFile{};
    w.model_kind = "mamba";
    w.feature_version = tclm::kFeatureVersion;
    w.config_json = "{}";
    w.tensors.push_back({"scalar", {}, {1.5f}});
    w.tensors.push_back({"empty", {3, 0, 7}, {}});
    write("valid_scalar_and_empty_tensor_bad_config.tclm", tclm::serialize_weights(w));

    // ---- the engine refuses these (valid files)
    w = real;
    w.model_kind = "lstm";
    write("engine_wrong_model_kind.tclm", tclm::serialize_weights(w));
    w = real;
    w.feature_version = 99;
    write("engine_unknown_feature_version.tclm", tclm::serialize_weights(w));
    w = real;
    w.config_json = R"({"n_features":54,"d_model":4,"n_layers":1,"d_state":1,"d_conv":2,"expand":1,"dt_rank":0,"head_hidden":0,"dropout":0})";
    write("engine_config_54_features.tclm", tclm::serialize_weights(w));
    w = real;
    w.config_json = R"({"n_features":55,"d_model":65536,"n_layers":2147483647,"d_state":1,"d_conv":2,"expand":1,"dt_rank":0,"head_hidden":0,"dropout":0})";
    write("engine_config_huge_sizes.tclm", tclm::serialize_weights(w));
    w = real;
    w.config_json = R"({"n_features":55,"d_model":4,"n_layers":1,"d_state":1,"d_conv":2,"expand":1,"dt_rank":0,"head_hidden":0,"dropout":NaN})";
    write("engine_config_not_json.tclm", tclm::serialize_weights(w));
    w = real;
    w.config_json = R"({"n_features":55,"d_model":4,"n_layers":1,"d_state":1,"d_conv":2,"expand":1,"dt_rank":0,"head_hidden":0,"dropout":0,"d_model":4})";
    write("engine_config_repeated_field.tclm", tclm::serialize_weights(w));
    w = real;
    w.tensors.pop_back();
    write("engine_missing_tensor.tclm", tclm::serialize_weights(w));
    w = real;
    w.tensors.push_back({"mixers.1.D", {4}, {0, 0, 0, 0}});
    write("engine_unknown_tensor.tclm", tclm::serialize_weights(w));
    w = real;
    w.tensors[0].shape = {static_cast<int64_t>(w.tensors[0].data.size())};
    write("engine_tensor_wrong_shape.tclm", tclm::serialize_weights(w));

    // ---- broken files
    write("empty.tclm", "");
    write("wrong_magic_zip.tclm", std::string("PK\x03\x04\x14\x00\x00\x00", 8) + real_bytes.substr(8));
    write("magic_only.tclm", "TCLMWTS1");
    std::string b = real_bytes;
    set_u32(b, 8, 2);
    write("format_version_2.tclm", b);
    b = real_bytes;
    b[b.size() / 2] ^= 0x40;
    write("checksum_mismatch_flipped_byte.tclm", b);
    write("truncated_half.tclm", real_bytes.substr(0, real_bytes.size() / 2));
    write("truncated_last_byte.tclm", real_bytes.substr(0, real_bytes.size() - 1));
    write("truncated_header_12_bytes.tclm", real_bytes.substr(0, 12));
    write("header_and_crc_only.tclm", with_crc(real_bytes.substr(0, 16)));

    b = head();
    u32(b, 0xffffffffu);  // tensor count
    write("huge_tensor_count.tclm", with_crc(b));
    b = "TCLMWTS1";
    u32(b, tclm::kWeightsFormatVersion);
    u32(b, 2);
    u32(b, 0xfffffff0u);  // model kind length
    b += "mamba";
    write("huge_string_length.tclm", with_crc(b));
    b = head();
    u32(b, 1);
    str(b, "embed.weight");
    u32(b, 0xffffffffu);  // ndim
    write("huge_ndim.tclm", with_crc(b));
    b = head();
    u32(b, 1);
    str(b, "embed.weight");
    u32(b, 2);
    i64(b, int64_t{1} << 62);
    i64(b, int64_t{1} << 62);  // the product overflows int64
    write("huge_dims_overflow.tclm", with_crc(b));
    b = head();
    u32(b, 1);
    str(b, "embed.weight");
    u32(b, 1);
    i64(b, int64_t{1} << 40);  // fits int64, not the file
    write("huge_dim_past_end.tclm", with_crc(b));
    b = head();
    u32(b, 1);
    str(b, "embed.weight");
    u32(b, 2);
    i64(b, -1);
    i64(b, -4);
    b += std::string(16, '\0');
    write("negative_dims.tclm", with_crc(b));
    b = head();
    u32(b, 2);
    for (int k = 0; k < 2; ++k) {
      str(b, "head2.bias");
      u32(b, 1);
      i64(b, 1);
      b += std::string(4, '\0');
    }
    write("duplicate_tensor_names.tclm", with_crc(b));
    b = head();
    u32(b, 1);
    str(b, "head2.bias");
    u32(b, 1);
    i64(b, 1);
    b += std::string(4 + 5, '\x7f');  // 5 bytes past the last tensor
    write("trailing_bytes_before_crc.tclm", with_crc(b));
    b = real_bytes.substr(0, real_bytes.size() - 4) + "junk";
    write("crc_replaced_by_junk.tclm", b);
    b = real_bytes + real_bytes;
    write("two_files_concatenated.tclm", b);
  } catch (const tclm::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
