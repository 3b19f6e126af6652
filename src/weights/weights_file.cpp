// The versioned weights file of a tclm model (tclm/weights.h).
//
// The reader treats the file as untrusted input: every length field is checked against the bytes
// that are actually left before anything is allocated, so a corrupted or hostile length cannot
// trigger a huge allocation, and every refusal says which file and what is wrong with it.
#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "common/bytes.h"
#include "tclm/error.h"
#include "tclm/feature.h"
#include "tclm/weights.h"

namespace tclm {
namespace {

constexpr std::string_view kMagic = "TCLMWTS1";
constexpr size_t kHeaderBytes = 16;  // magic, format version, feature version
constexpr size_t kCrcBytes = 4;

// ---------------------------------------------------------------------------- small helpers

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

// Quotes possibly binary bytes for an error message (e.g. a wrong magic).
std::string printable(std::string_view bytes) {
  std::string s = "\"";
  for (unsigned char c : bytes) {
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      s += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      s += buf;
    }
  }
  return s + "\"";
}

// zlib's crc32() takes a 32-bit length, so large buffers are fed in chunks.
uint32_t crc32_of(const char* data, size_t size) {
  uLong crc = crc32(0L, Z_NULL, 0);
  constexpr size_t kChunk = size_t{1} << 30;
  for (size_t done = 0; done < size;) {
    const size_t n = std::min(kChunk, size - done);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data + done), static_cast<uInt>(n));
    done += n;
  }
  return static_cast<uint32_t>(crc);
}

// Number of values a shape holds; -1 if a dimension is negative; limit + 1 if the product exceeds
// `limit` (checked before each multiplication, so it never overflows). A zero dimension makes the
// product 0 even after huge ones, so it is looked for first.
int64_t shape_count(const std::vector<int64_t>& shape, int64_t limit) {
  for (int64_t d : shape) {
    if (d < 0) return -1;
  }
  for (int64_t d : shape) {
    if (d == 0) return 0;
  }
  int64_t count = 1;
  for (int64_t d : shape) {
    if (count > limit / d) return limit + 1;
    count *= d;
  }
  return count;
}

// ---------------------------------------------------------------------------- writing

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

void put_i64(std::string& out, int64_t v) {
  const auto u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) out += static_cast<char>((u >> (8 * i)) & 0xff);
}

void put_str(std::string& out, const std::string& s, const std::string& what) {
  if (s.size() > std::numeric_limits<uint32_t>::max()) {
    throw Error("cannot serialize weights: " + what + " is " + std::to_string(s.size()) +
                " bytes, more than a weights file can hold (4 GiB)");
  }
  put_u32(out, static_cast<uint32_t>(s.size()));
  out += s;
}

void put_floats(std::string& out, const std::vector<float>& values) {
  if constexpr (std::endian::native == std::endian::little) {
    out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  } else {
    for (float f : values) put_u32(out, std::bit_cast<uint32_t>(f));
  }
}

// ---------------------------------------------------------------------------- reading

// A structural problem found while parsing. `truncated` means a field ran past the end of the
// data; whether that is reported as truncation or corruption depends on the checksum.
struct ParseProblem {
  bool truncated;
  std::string what;
};

// Bounds-checked little-endian reader over bytes [pos, end).
class Reader {
 public:
  Reader(std::string_view bytes, size_t pos, size_t end) : bytes_(bytes), pos_(pos), end_(end) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return end_ - pos_; }

  // Throws ParseProblem{truncated} unless `n` more bytes are available for `what`.
  void need(uint64_t n, const std::string& what) const {
    if (n > remaining()) {
      throw ParseProblem{true, what + " needs " + std::to_string(n) + " bytes at offset " +
                                   std::to_string(pos_) + ", but only " +
                                   std::to_string(remaining()) + " remain before the checksum"};
    }
  }

  uint32_t u32(const std::string& what) {
    need(4, what);
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(byte(pos_ + i)) << (8 * i);
    pos_ += 4;
    return v;
  }

  int64_t i64(const std::string& what) {
    need(8, what);
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(byte(pos_ + i)) << (8 * i);
    pos_ += 8;
    return static_cast<int64_t>(v);
  }

  std::string str(const std::string& what) {
    const uint32_t n = u32("the length of " + what);
    need(n, what + " (" + std::to_string(n) + " bytes long)");
    std::string s(bytes_.substr(pos_, n));
    pos_ += n;
    return s;
  }

  // `count` must already be checked with need(count * 4, ...).
  std::vector<float> floats(size_t count) {
    std::vector<float> values(count);
    if constexpr (std::endian::native == std::endian::little) {
      if (count) std::memcpy(values.data(), bytes_.data() + pos_, count * sizeof(float));
      pos_ += count * sizeof(float);
    } else {
      for (float& f : values) f = std::bit_cast<float>(u32("tensor data"));
    }
    return values;
  }

 private:
  unsigned char byte(size_t i) const { return static_cast<unsigned char>(bytes_[i]); }

  std::string_view bytes_;
  size_t pos_, end_;
};

NamedTensor read_tensor(Reader& in, uint32_t index) {
  NamedTensor t;
  const std::string label = "tensor " + std::to_string(index);
  t.name = in.str("the name of " + label);
  // A damaged name may be binary or huge; the message shows a short, escaped prefix.
  const std::string named = label + " (" + printable(std::string_view(t.name).substr(0, 64)) +
                            (t.name.size() > 64 ? "...)" : ")");
  const uint32_t ndim = in.u32("the dimension count of " + named);
  in.need(uint64_t{ndim} * 8, "the shape of " + named + " (" + std::to_string(ndim) + " dims)");
  t.shape.resize(ndim);
  for (int64_t& d : t.shape) d = in.i64("the shape of " + named);

  constexpr int64_t kMaxCount = std::numeric_limits<int64_t>::max() / sizeof(float);
  const int64_t count = shape_count(t.shape, kMaxCount);
  if (count < 0) {
    throw ParseProblem{false,
                       named + " has a negative dimension in shape " + shape_string(t.shape)};
  }
  const std::string data_label = "the data of " + named + " with shape " + shape_string(t.shape);
  if (count > kMaxCount) {  // the product overflowed: no file can hold it
    throw ParseProblem{true, data_label + " needs more bytes than any file can hold"};
  }
  // Checked before allocating, so a corrupted shape cannot cause a huge allocation.
  in.need(static_cast<uint64_t>(count) * sizeof(float), data_label);
  t.data = in.floats(static_cast<size_t>(count));
  return t;
}

// Parses everything between the header and the checksum. Throws ParseProblem.
WeightsFile parse_body(std::string_view bytes, uint32_t feature_version) {
  Reader in(bytes, kHeaderBytes, bytes.size() - kCrcBytes);
  WeightsFile w;
  w.feature_version = feature_version;
  w.model_kind = in.str("the model kind");
  w.config_json = in.str("the model config");
  w.metadata_json = in.str("the metadata");
  const uint32_t num_tensors = in.u32("the tensor count");
  // Reserve only what the remaining bytes could possibly hold (a tensor takes >= 12 bytes), so a
  // corrupted count cannot cause a huge allocation.
  w.tensors.reserve(std::min<size_t>(num_tensors, in.remaining() / 12));
  std::set<std::string> names;
  for (uint32_t i = 0; i < num_tensors; ++i) {
    w.tensors.push_back(read_tensor(in, i));
    if (!names.insert(w.tensors.back().name).second) {
      throw ParseProblem{
          false, "tensor name " + printable(w.tensors.back().name.substr(0, 64)) + " occurs twice"};
    }
  }
  if (in.remaining() != 0) {
    throw ParseProblem{false, "the last tensor ends at offset " + std::to_string(in.pos()) +
                                  " but the checksum starts at offset " +
                                  std::to_string(bytes.size() - kCrcBytes) + ": " +
                                  std::to_string(in.remaining()) +
                                  " unexpected bytes (a tensor shape does not match its data)"};
  }
  return w;
}

}  // namespace

// ---------------------------------------------------------------------------- public API

const NamedTensor* WeightsFile::find(const std::string& name) const {
  for (const NamedTensor& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

int64_t WeightsFile::num_parameters() const {
  int64_t n = 0;
  for (const NamedTensor& t : tensors) {
    if (!is_training_state(t.name)) n += static_cast<int64_t>(t.data.size());
  }
  return n;
}

void check_finite_parameters(const WeightsFile& weights, const std::string& name) {
  for (const NamedTensor& t : weights.tensors) {
    if (is_training_state(t.name)) continue;
    for (size_t i = 0; i < t.data.size(); ++i) {
      if (!std::isfinite(t.data[i])) {
        throw Error(fmt::format("{}: tensor \"{}\" holds {} at index {}: the model diverged or the file was written "
                                "wrongly; retrain it (a lower --lr) or use another model",
                                name, t.name, t.data[i], i));
      }
    }
  }
}

WeightsFile without_training_state(const WeightsFile& weights) {
  WeightsFile out;
  out.model_kind = weights.model_kind;
  out.feature_version = weights.feature_version;
  out.config_json = weights.config_json;
  out.metadata_json = weights.metadata_json;
  for (const NamedTensor& t : weights.tensors) {
    if (!is_training_state(t.name)) out.tensors.push_back(t);
  }
  return out;
}

std::string serialize_weights(const WeightsFile& weights) {
  // Validate everything first so that a bad model never produces a file that a reader refuses.
  size_t total = kHeaderBytes + 12 + weights.model_kind.size() + weights.config_json.size() +
                 weights.metadata_json.size() + 4 + kCrcBytes;
  if (weights.tensors.size() > std::numeric_limits<uint32_t>::max()) {
    throw Error("cannot serialize weights: too many tensors (" +
                std::to_string(weights.tensors.size()) + ")");
  }
  std::set<std::string> names;
  for (const NamedTensor& t : weights.tensors) {
    const int64_t count = shape_count(t.shape, std::numeric_limits<int64_t>::max() / 4);
    if (count < 0 || static_cast<uint64_t>(count) != t.data.size()) {
      throw Error("cannot serialize weights: tensor '" + t.name + "' has shape " +
                  shape_string(t.shape) + " but " + std::to_string(t.data.size()) + " data values");
    }
    if (!names.insert(t.name).second) {
      throw Error("cannot serialize weights: tensor name '" + t.name + "' occurs twice");
    }
    total += 8 + t.name.size() + 8 * t.shape.size() + 4 * t.data.size();
  }

  std::string out;
  out.reserve(total);
  out += kMagic;
  put_u32(out, kWeightsFormatVersion);
  put_u32(out, weights.feature_version);
  put_str(out, weights.model_kind, "the model kind");
  put_str(out, weights.config_json, "the model config");
  put_str(out, weights.metadata_json, "the metadata");
  put_u32(out, static_cast<uint32_t>(weights.tensors.size()));
  for (const NamedTensor& t : weights.tensors) {
    put_str(out, t.name, "tensor name '" + t.name.substr(0, 64) + "'");
    put_u32(out, static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) put_i64(out, d);
    put_floats(out, t.data);
  }
  put_u32(out, crc32_of(out.data(), out.size()));
  return out;
}

WeightsFile parse_weights(const std::string& bytes, const std::string& name_for_errors) {
  const std::string prefix = "weights file '" + name_for_errors + "': ";
  const size_t size = bytes.size();
  auto read_u32_at = [&](size_t pos) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      v |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[pos + i])) << (8 * i);
    }
    return v;
  };

  // The magic and version are checked before the checksum so that a file of another kind or a
  // newer format gets the message that tells the user what to do, not "corrupted".
  const std::string_view head = std::string_view(bytes).substr(0, kMagic.size());
  if (head != kMagic.substr(0, head.size())) {
    throw Error(prefix + "not a tclm weights file: it starts with " + printable(head) +
                " instead of \"" + std::string(kMagic) + "\"");
  }
  if (size < kMagic.size() + 4) {
    throw Error(prefix + "file is truncated: only " + std::to_string(size) +
                " bytes, too short to hold the header");
  }
  const uint32_t version = read_u32_at(kMagic.size());
  if (version != kWeightsFormatVersion) {
    throw Error(prefix + "format version " + std::to_string(version) +
                ", but this build of tclm reads only version " +
                std::to_string(kWeightsFormatVersion) +
                "; use the tclm release that wrote it or re-export the model");
  }
  if (size < kHeaderBytes + kCrcBytes) {
    throw Error(prefix + "file is truncated: only " + std::to_string(size) + " bytes");
  }

  const uint32_t stored_crc = read_u32_at(size - kCrcBytes);
  const uint32_t actual_crc = crc32_of(bytes.data(), size - kCrcBytes);
  const bool crc_ok = stored_crc == actual_crc;
  const std::string crc_text =
      "stored checksum " + hex32(stored_crc) + ", computed " + hex32(actual_crc);
  try {
    WeightsFile w = parse_body(bytes, read_u32_at(kMagic.size() + 4));
    if (!crc_ok) {
      throw Error(prefix + "checksum mismatch (" + crc_text +
                  "): the file is corrupted; copy or export it again");
    }
    return w;
  } catch (const ParseProblem& p) {
    const std::string size_text = " (file size " + std::to_string(size) + " bytes)";
    if (crc_ok) {
      // The checksum vouches for the bytes, so whoever wrote them wrote an inconsistent file.
      throw Error(prefix + "malformed file with a valid checksum: " + p.what + size_text);
    }
    if (p.truncated) {
      // A cut-off file and a damaged length field look the same here; the checksum values would
      // only be noise, since the stored one is read from the wrong place after a truncation.
      throw Error(prefix + "file is truncated or corrupted: " + p.what + size_text);
    }
    throw Error(prefix + "file is corrupted (" + crc_text + "): " + p.what + size_text);
  }
}

void save_weights(const WeightsFile& weights, const std::string& path) {
  const std::string bytes = serialize_weights(weights);  // may throw before touching the disk
  write_file_atomic(path, bytes);  // a device, FIFO or symbolic link is written through, not replaced
}

WeightsFile load_weights(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) {
    throw Error("cannot open weights file '" + path + "': " + std::strerror(errno));
  }
  std::string bytes;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.append(buf, n);
  const bool read_error = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (read_error) {
    throw Error("cannot read weights file '" + path + "': " + std::strerror(err));
  }
  return parse_weights(bytes, path);
}

void check_feature_version(const WeightsFile& w, const std::string& name) {
  if (w.feature_version != kFeatureVersion && w.feature_version != kTraceFeatureVersion) {
    throw Error(fmt::format(
        "{}: the model was trained on a feature encoding this tclm does not read ({}; this tclm encodes "
        "Ansor records as {} and MetaSchedule traces as {}); retrain the model with this version (tclm "
        "train) or use the tclm release that made it",
        name, feature_version_name(w.feature_version), feature_version_name(kFeatureVersion),
        feature_version_name(kTraceFeatureVersion)));
  }
}

void check_feature_family(uint32_t model_version, uint32_t data_version, const std::string& name) {
  if (model_version != data_version) {
    throw Error(fmt::format("{}: the model was trained on {} but the programs to score are in {}; use a model "
                            "trained on data of the same tuner (tclm train -d on {})",
                            name, feature_version_name(model_version), feature_version_name(data_version),
                            data_version == kTraceFeatureVersion ? "MetaSchedule databases" : "Ansor records"));
  }
}

}  // namespace tclm
