// common/bytes.h: little-endian byte buffers for tclm's binary files (internal).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace tclm {

class ByteWriter {
 public:
  template <typename T>
  void put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const char*>(&v);
    buf_.append(p, sizeof(T));
  }
  void put_str(const std::string& s) {
    put<uint32_t>(static_cast<uint32_t>(s.size()));
    buf_.append(s);
  }
  template <typename T>
  void put_vec(const std::vector<T>& v) {
    put<uint32_t>(static_cast<uint32_t>(v.size()));
    if (!v.empty()) buf_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  std::string& bytes() { return buf_; }

 private:
  std::string buf_;
};

/// Bounds-checked reader: every get returns false instead of reading past the end, so that a
/// truncated or corrupt file can never cause a huge allocation or an out-of-bounds read.
class ByteReader {
 public:
  ByteReader(const char* data, size_t size) : p_(data), end_(data + size) {}
  template <typename T>
  bool get(T* v) {
    if (static_cast<size_t>(end_ - p_) < sizeof(T)) return false;
    std::memcpy(v, p_, sizeof(T));
    p_ += sizeof(T);
    return true;
  }
  bool get_str(std::string* s) {
    uint32_t n;
    if (!get(&n) || static_cast<size_t>(end_ - p_) < n) return false;
    s->assign(p_, n);
    p_ += n;
    return true;
  }
  template <typename T>
  bool get_vec(std::vector<T>* v) {
    uint32_t n;
    if (!get(&n) || static_cast<size_t>(end_ - p_) / sizeof(T) < n) return false;
    v->resize(n);
    if (n) std::memcpy(v->data(), p_, n * sizeof(T));
    p_ += n * sizeof(T);
    return true;
  }
  size_t remaining() const { return static_cast<size_t>(end_ - p_); }

 private:
  const char* p_;
  const char* end_;
};

/// LEB128 varints (7 bits per byte, low first) and zigzag signed integers: the compact codes of the
/// record cache and of the dataset's programs. `Bytes` is std::string or std::vector<uint8_t>.
template <typename Bytes>
inline void put_varint(Bytes& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<typename Bytes::value_type>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<typename Bytes::value_type>(v));
}
inline uint64_t zigzag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
inline int64_t unzigzag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

/// Reads varints; every get fails (returns false) instead of reading past the end.
struct VarReader {
  const uint8_t* p;
  const uint8_t* end;
  bool varint(uint64_t* v) {
    uint64_t x = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p == end) return false;
      const uint8_t b = *p++;
      x |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) {
        *v = x;
        return true;
      }
    }
    return false;
  }
  bool svarint(int64_t* v) {
    uint64_t u;
    if (!varint(&u)) return false;
    *v = unzigzag(u);
    return true;
  }
  bool f64(double* v) {
    if (end - p < 8) return false;
    std::memcpy(v, p, 8);
    p += 8;
    return true;
  }
};

/// Writes `bytes` to `path` atomically (temporary file, fsync, rename) when `path` is a regular file or
/// does not exist; a symbolic link is followed (its target is replaced atomically, the link stays);
/// a character device or a FIFO (/dev/null, /dev/stdout, a named pipe) is written in place, never
/// replaced. A failed or short write throws tclm::Error naming `path`.
void write_file_atomic(const std::string& path, const std::string& bytes);
/// write_file_atomic, except that "-" is standard output (every byte written, or tclm::Error: a full
/// disk, a closed pipe).
void write_output(const std::string& path, const std::string& bytes);
/// Reads a whole file; throws tclm::Error naming the file.
std::string read_file(const std::string& path);
/// `s` with '"', '\\' and control characters escaped for a JSON string.
std::string json_escape(const std::string& s);

}  // namespace tclm
