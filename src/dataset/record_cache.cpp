#include "dataset/record_cache.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <fmt/format.h>
#include <zlib.h>

#include "common/bytes.h"
#include "record/trace_reader.h"
#include "tclm/dataset.h"
#include "tclm/error.h"

namespace tclm {

namespace {

constexpr char kMagic[8] = {'T', 'C', 'L', 'M', 'R', 'C', '0', '1'};
// 3: blocks of varint-coded records with a string table, streamed (2: one buffer of fixed-width
//    records, decoded whole: bigger than the JSON and slower than parsing it; docs/reliability.md).
constexpr uint32_t kCacheVersion = 3;
constexpr size_t kBlockBytes = 1 << 20;  // a block is flushed once it holds this much
constexpr uint8_t kRecordsBlock = 'R', kStatsBlock = 'S';
constexpr uint32_t kMaxBlockBytes = 64u << 20;  // a larger length is damage, never allocated

// The strings of one cache file (workload keys, targets, versions, step strings), each written once:
// id == table size means "a new string follows".
struct StringTableWriter {
  std::map<std::string, uint64_t, std::less<>> ids;
  void put(std::string& out, const std::string& s) {
    auto [it, inserted] = ids.emplace(s, ids.size());
    put_varint(out, it->second);
    if (inserted) {
      put_varint(out, s.size());
      out += s;
    }
  }
};
struct StringTableReader {
  std::vector<std::string> strings;
  bool get(VarReader& rd, std::string* s) {
    uint64_t id;
    if (!rd.varint(&id) || id > strings.size()) return false;
    if (id == strings.size()) {
      uint64_t n;
      if (!rd.varint(&n) || n > static_cast<uint64_t>(rd.end - rd.p)) return false;
      strings.emplace_back(reinterpret_cast<const char*>(rd.p), n);
      rd.p += n;
    }
    s->assign(strings[id]);
    return true;
  }
};

void put_record(std::string& out, StringTableWriter& strings, const MeasureRecord& r, int64_t line) {
  put_varint(out, zigzag(line));
  strings.put(out, r.workload_key);
  strings.put(out, r.target);
  strings.put(out, r.version);
  put_varint(out, r.hw_params.size());
  for (int64_t v : r.hw_params) put_varint(out, zigzag(v));
  put_varint(out, r.costs.size());
  for (double c : r.costs) out.append(reinterpret_cast<const char*>(&c), 8);
  put_varint(out, zigzag(r.error_no));
  out.append(reinterpret_cast<const char*>(&r.all_cost), 8);
  put_varint(out, zigzag(r.timestamp));
  put_varint(out, r.steps.size());
  for (const auto& st : r.steps) {
    out.push_back(static_cast<char>(st.kind));
    put_varint(out, zigzag(st.list_pos));
    put_varint(out, zigzag(st.n_list));
    strings.put(out, st.str);
    put_varint(out, st.ints.size());
    for (int64_t v : st.ints) put_varint(out, zigzag(v));
  }
}

// Decodes one record into `r`, reusing its storage.
bool get_record(VarReader& rd, StringTableReader& strings, MeasureRecord* r, int64_t* line) {
  uint64_t n;
  int64_t v;
  if (!rd.svarint(line) || !strings.get(rd, &r->workload_key) || !strings.get(rd, &r->target) ||
      !strings.get(rd, &r->version) || !rd.varint(&n) || n > static_cast<uint64_t>(rd.end - rd.p)) {
    return false;
  }
  r->hw_params.resize(n);
  for (auto& h : r->hw_params) {
    if (!rd.svarint(&h)) return false;
  }
  if (!rd.varint(&n) || n > static_cast<uint64_t>(rd.end - rd.p) / 8) return false;
  r->costs.resize(n);
  for (auto& c : r->costs) {
    if (!rd.f64(&c)) return false;
  }
  if (!rd.svarint(&v) || v < INT32_MIN || v > INT32_MAX) return false;
  r->error_no = static_cast<int>(v);
  if (!rd.f64(&r->all_cost) || !rd.svarint(&r->timestamp) || !rd.varint(&n) ||
      n > static_cast<uint64_t>(rd.end - rd.p)) {
    return false;
  }
  r->steps.resize(n);
  for (auto& st : r->steps) {
    int64_t list_pos, n_list;
    if (rd.p == rd.end || *rd.p >= kNumStepKinds) return false;
    st.kind = static_cast<StepKind>(*rd.p++);
    if (!rd.svarint(&list_pos) || !rd.svarint(&n_list) || list_pos < INT32_MIN || list_pos > INT32_MAX ||
        n_list < INT32_MIN || n_list > INT32_MAX || !strings.get(rd, &st.str) || !rd.varint(&n) ||
        n > static_cast<uint64_t>(rd.end - rd.p)) {
      return false;
    }
    st.list_pos = static_cast<int32_t>(list_pos);
    st.n_list = static_cast<int32_t>(n_list);
    st.ints.resize(n);
    for (auto& x : st.ints) {
      if (!rd.svarint(&x)) return false;
    }
  }
  return true;
}

void put_stats(ByteWriter& w, const ReadStats& s) {
  w.put<int64_t>(s.lines);
  w.put<int64_t>(s.records);
  w.put<int64_t>(s.skipped);
  w.put<uint32_t>(static_cast<uint32_t>(s.skipped_by_reason.size()));
  for (const auto& [k, v] : s.skipped_by_reason) {
    w.put_str(k);
    w.put<int64_t>(v);
  }
  w.put<uint32_t>(static_cast<uint32_t>(s.examples.size()));
  for (const auto& e : s.examples) w.put_str(e);
}

bool get_stats(ByteReader& rd, ReadStats* s) {
  uint32_t n;
  if (!rd.get(&s->lines) || !rd.get(&s->records) || !rd.get(&s->skipped) || !rd.get(&n)) return false;
  for (uint32_t i = 0; i < n; ++i) {
    std::string k;
    int64_t v;
    if (!rd.get_str(&k) || !rd.get(&v)) return false;
    s->skipped_by_reason[k] = v;
  }
  if (!rd.get(&n)) return false;
  for (uint32_t i = 0; i < n; ++i) {
    std::string e;
    if (!rd.get_str(&e)) return false;
    s->examples.push_back(std::move(e));
  }
  return true;
}

struct SourceId {
  uint64_t size = 0;
  int64_t mtime = 0;
};

SourceId source_id(const std::string& path) {
  namespace fs = std::filesystem;
  SourceId id;
  std::error_code e1, e2;
  id.size = fs::file_size(path, e1);
  const auto mtime = fs::last_write_time(path, e2);
  if (e1 || e2) throw Error("cannot stat '" + path + "': " + (e1 ? e1 : e2).message());
  id.mtime = static_cast<int64_t>(mtime.time_since_epoch().count());
  return id;
}

// A cache file: magic, u32 version, u64 source size, i64 source mtime, str source path, then blocks
// (u8 kind, u32 payload bytes, u32 CRC-32 of the payload, payload): records blocks, then exactly one
// stats block (the file's ReadStats), which ends the file.
class CacheFile {
 public:
  explicit CacheFile(const std::string& path) : f_(std::fopen(path.c_str(), "rb")) {}
  ~CacheFile() {
    if (f_) std::fclose(f_);
  }
  CacheFile(const CacheFile&) = delete;
  CacheFile& operator=(const CacheFile&) = delete;
  bool ok() const { return f_ != nullptr; }
  bool read(void* p, size_t n) { return std::fread(p, 1, n, f_) == n; }
  template <typename T>
  bool get(T* v) { return read(v, sizeof(T)); }
  bool get_str(std::string* s) {
    uint32_t n;
    if (!get(&n) || n > 1 << 20) return false;
    s->resize(n);
    return read(s->data(), n);
  }
  long tell() { return std::ftell(f_); }
  bool seek(long at) { return std::fseek(f_, at, SEEK_SET) == 0; }
  // The next block; false at damage (bad length, short read, CRC mismatch).
  bool block(uint8_t* kind, std::string* payload) {
    uint32_t n, crc;
    if (!get(kind) || !get(&n) || !get(&crc) || n > kMaxBlockBytes) return false;
    payload->resize(n);
    if (!read(payload->data(), n)) return false;
    return crc32(0L, reinterpret_cast<const Bytef*>(payload->data()), n) == crc;
  }
  bool at_end() { return std::fgetc(f_) == EOF; }

 private:
  FILE* f_;
};

// Replays a cache file; false if it is missing, stale or damaged (nothing was delivered then).
// Memory: one block and the file's string table, whatever the size of the file.
bool replay(const std::string& cache_path, const std::string& abs, const SourceId& id,
            const std::function<void(const MeasureRecord&, const RecordOrigin&)>& fn,
            const std::string& path, ReadStats* stats) {
  CacheFile f(cache_path);
  if (!f.ok()) return false;
  char magic[sizeof(kMagic)];
  uint32_t version;
  SourceId cached;
  std::string cached_path;
  if (!f.read(magic, sizeof magic) || std::memcmp(magic, kMagic, sizeof magic) != 0 || !f.get(&version) ||
      version != kCacheVersion || !f.get(&cached.size) || !f.get(&cached.mtime) || !f.get_str(&cached_path) ||
      cached.size != id.size || cached.mtime != id.mtime || cached_path != abs) {
    return false;
  }
  // Pass 1: every block's checksum and the final stats block, so that a damaged file delivers nothing
  // rather than half (the caller then re-parses the source).
  const long first_block = f.tell();
  std::string payload;
  uint8_t kind = 0;
  ReadStats fs;
  for (;;) {
    if (!f.block(&kind, &payload)) return false;
    if (kind == kStatsBlock) break;
    if (kind != kRecordsBlock) return false;
  }
  ByteReader srd(payload.data(), payload.size());
  if (!get_stats(srd, &fs) || !f.at_end()) return false;
  // Pass 2: decode and deliver, block by block (the pages are in the OS cache now).
  if (!f.seek(first_block)) return false;
  StringTableReader strings;
  MeasureRecord r;
  int64_t line = 0;
  for (;;) {
    if (!f.block(&kind, &payload)) return false;
    if (kind == kStatsBlock) break;
    VarReader rd{reinterpret_cast<const uint8_t*>(payload.data()),
                 reinterpret_cast<const uint8_t*>(payload.data()) + payload.size()};
    while (rd.p < rd.end) {
      // Checked by CRC, so a decode failure means a bug or a file written by another build: stop
      // here; what was delivered stays delivered, and the caller does not re-parse.
      if (!get_record(rd, strings, &r, &line)) {
        throw Error(fmt::format("{}: undecodable record in the cache of {}; delete the cache directory", cache_path,
                                path));
      }
      fn(r, RecordOrigin{&path, line});
    }
  }
  fs.files = 1;
  stats->merge(fs);
  return true;
}

}  // namespace

void read_record_file_cached(const std::string& path, const std::string& cache_dir,
                             const std::function<void(const MeasureRecord&, const RecordOrigin&)>& fn,
                             ReadStats* stats) {
  namespace fs = std::filesystem;
  // MetaSchedule databases are read directly: a tuning-record file's records depend on the workload
  // table beside it, which the cache key (this file's size and time) would not cover.
  if (is_workload_table(path) || !workload_table_of(path).empty()) {
    read_record_file(path, fn, stats);
    return;
  }
  std::error_code ec;
  const std::string abs = fs::absolute(path, ec).lexically_normal().string();
  const SourceId id = source_id(path);
  const std::string cache_path = (fs::path(cache_dir) / fmt::format("{:016x}.tcrc", fnv1a64(abs))).string();
  if (replay(cache_path, abs, id, fn, path, stats)) return;

  // Parse the source, delivering its records and writing the cache block by block to a temporary file
  // renamed over the cache at the end (atomic; a failed write only costs speed next time).
  fs::create_directories(cache_dir, ec);
  const std::string tmp = fmt::format("{}.tmp.{}", cache_path, static_cast<long>(::getpid()));
  FILE* out = std::fopen(tmp.c_str(), "wb");
  bool write_ok = out != nullptr;
  auto write = [&](const void* p, size_t n) { write_ok = write_ok && std::fwrite(p, 1, n, out) == n; };
  auto write_block = [&](uint8_t kind, const std::string& payload) {
    const uint32_t n = static_cast<uint32_t>(payload.size());
    const uint32_t crc =
        static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(payload.data()), static_cast<uInt>(n)));
    write(&kind, 1);
    write(&n, 4);
    write(&crc, 4);
    write(payload.data(), n);
  };
  if (write_ok) {
    ByteWriter head;
    head.bytes().append(kMagic, sizeof(kMagic));
    head.put<uint32_t>(kCacheVersion);
    head.put<uint64_t>(id.size);
    head.put<int64_t>(id.mtime);
    head.put_str(abs);
    write(head.bytes().data(), head.bytes().size());
  }
  StringTableWriter strings;
  std::string block;
  ReadStats fs1;
  read_record_file(
      path,
      [&](const MeasureRecord& r, const RecordOrigin& o) {
        if (write_ok) {
          put_record(block, strings, r, o.line);
          if (block.size() >= kBlockBytes) {
            write_block(kRecordsBlock, block);
            block.clear();
          }
        }
        fn(r, o);
      },
      &fs1);
  stats->merge(fs1);
  if (write_ok) {
    if (!block.empty()) write_block(kRecordsBlock, block);
    ByteWriter st;
    put_stats(st, fs1);
    write_block(kStatsBlock, st.bytes());
  }
  if (out != nullptr) {
    write_ok = std::fflush(out) == 0 && ::fsync(fileno(out)) == 0 && write_ok;
    write_ok = std::fclose(out) == 0 && write_ok;
  }
  if (write_ok && std::rename(tmp.c_str(), cache_path.c_str()) == 0) return;
  const int err = errno;
  std::remove(tmp.c_str());
  // A cache that cannot be written only costs speed next time; said once per process (not per file).
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true)) {
    std::fprintf(stderr, "warning: --cache-dir '%s': cannot write %s (%s); continuing without a cache\n",
                 cache_dir.c_str(), cache_path.c_str(), err ? std::strerror(err) : "write failed");
  }
}

}  // namespace tclm
