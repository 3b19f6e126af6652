#include "dataset/record_cache.h"

#include <filesystem>
#include <fmt/format.h>
#include <zlib.h>

#include "common/bytes.h"
#include "record/trace_reader.h"
#include "tclm/dataset.h"
#include "tclm/error.h"

namespace tclm {

namespace {

constexpr char kMagic[8] = {'T', 'C', 'L', 'M', 'R', 'C', '0', '1'};
constexpr uint32_t kCacheVersion = 2;  // 2: MetaSchedule databases are read

void put_record(ByteWriter& w, const MeasureRecord& r, int64_t line) {
  w.put<int64_t>(line);
  w.put_str(r.workload_key);
  w.put_str(r.target);
  w.put_vec(r.hw_params);
  w.put_vec(r.costs);
  w.put<int32_t>(r.error_no);
  w.put<double>(r.all_cost);
  w.put<int64_t>(r.timestamp);
  w.put_str(r.version);
  w.put<uint32_t>(static_cast<uint32_t>(r.steps.size()));
  for (const auto& s : r.steps) {
    w.put<uint8_t>(static_cast<uint8_t>(s.kind));
    w.put<int32_t>(s.list_pos);
    w.put<int32_t>(s.n_list);
    w.put_str(s.str);
    w.put_vec(s.ints);
  }
}

bool get_record(ByteReader& rd, MeasureRecord* r, int64_t* line) {
  int32_t err;
  uint32_t n_steps;
  if (!rd.get(line) || !rd.get_str(&r->workload_key) || !rd.get_str(&r->target) ||
      !rd.get_vec(&r->hw_params) || !rd.get_vec(&r->costs) || !rd.get(&err) || !rd.get(&r->all_cost) ||
      !rd.get(&r->timestamp) || !rd.get_str(&r->version) || !rd.get(&n_steps)) {
    return false;
  }
  r->error_no = err;
  if (n_steps > rd.remaining()) return false;
  r->steps.resize(n_steps);
  for (auto& s : r->steps) {
    uint8_t kind;
    if (!rd.get(&kind) || kind >= kNumStepKinds || !rd.get(&s.list_pos) || !rd.get(&s.n_list) ||
        !rd.get_str(&s.str) || !rd.get_vec(&s.ints)) {
      return false;
    }
    s.kind = static_cast<StepKind>(kind);
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

// Replays a cache file; false if it is missing, stale or damaged (nothing was delivered then).
bool replay(const std::string& cache_path, const std::string& abs, const SourceId& id,
            const std::function<void(const MeasureRecord&, const RecordOrigin&)>& fn,
            const std::string& path, ReadStats* stats) {
  std::string bytes;
  try {
    bytes = read_file(cache_path);
  } catch (const Error&) {
    return false;
  }
  if (bytes.size() < sizeof(kMagic) + 4 || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) return false;
  uint32_t stored_crc;
  std::memcpy(&stored_crc, bytes.data() + bytes.size() - 4, 4);
  uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size() - 4));
  if (crc != stored_crc) return false;
  ByteReader rd(bytes.data() + sizeof(kMagic), bytes.size() - sizeof(kMagic) - 4);
  uint32_t version;
  SourceId cached;
  std::string cached_path;
  ReadStats fs;
  uint64_t n;
  if (!rd.get(&version) || version != kCacheVersion || !rd.get(&cached.size) || !rd.get(&cached.mtime) ||
      !rd.get_str(&cached_path) || cached.size != id.size || cached.mtime != id.mtime || cached_path != abs ||
      !get_stats(rd, &fs) || !rd.get(&n)) {
    return false;
  }
  // Decode everything first so that a damaged file delivers nothing rather than half.
  std::vector<MeasureRecord> records(n > rd.remaining() ? 0 : n);
  std::vector<int64_t> lines(records.size());
  if (records.size() != n) return false;
  for (uint64_t i = 0; i < n; ++i) {
    if (!get_record(rd, &records[i], &lines[i])) return false;
  }
  for (uint64_t i = 0; i < n; ++i) fn(records[i], RecordOrigin{&path, lines[i]});
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

  ByteWriter body;
  uint64_t n = 0;
  ByteWriter recs;
  ReadStats fs1;
  read_record_file(
      path,
      [&](const MeasureRecord& r, const RecordOrigin& o) {
        put_record(recs, r, o.line);
        ++n;
        fn(r, o);
      },
      &fs1);
  stats->merge(fs1);
  body.bytes().append(kMagic, sizeof(kMagic));
  body.put<uint32_t>(kCacheVersion);
  body.put<uint64_t>(id.size);
  body.put<int64_t>(id.mtime);
  body.put_str(abs);
  put_stats(body, fs1);
  body.put<uint64_t>(n);
  body.bytes() += recs.bytes();
  uint32_t crc = static_cast<uint32_t>(
      crc32(0L, reinterpret_cast<const Bytef*>(body.bytes().data()), static_cast<uInt>(body.bytes().size())));
  body.put<uint32_t>(crc);
  fs::create_directories(cache_dir, ec);
  try {
    write_file_atomic(cache_path, body.bytes());
  } catch (const Error& e) {
    // A cache that cannot be written only costs speed next time; say so once per file.
    std::fprintf(stderr, "warning: %s (continuing without cache)\n", e.what());
  }
}

}  // namespace tclm
