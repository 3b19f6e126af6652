// bench/bench_scale.cpp: TenSet-scale input (docs/reliability.md, "Scale").
//
// Builds a synthetic directory of N records (default 10,000,000) from real records: the source lines
// are repeated, copy k with every workload key renamed ("c<k>:" + name) so that each copy is a new set
// of tasks, in gzip files of --per-file records. Then measures, on that directory:
//   1. parse + featurize, streaming, all threads: every record parsed (RecordParser via
//      read_record_file) and featurized (featurize_program); records/s, MB/s, and resident memory
//      after 1%, 10%, 50% and 100% of the files (bounded: it must not grow with the records read);
//   2. `tclm info`'s path, summarize_sources (one thread): without a cache; building the binary cache
//      (cold); from the cache (warm); after one more file is added (incremental: only it is parsed);
//   3. with --load-files K: Dataset::load of the first K files (what training holds in memory):
//      resident memory per program, the bytes the dataset holds per program (Dataset::program_bytes),
//      what the same programs took in the fixed-width layout tclm used before (24-byte steps, 8-byte
//      integers), and the time to decode and featurize every program once.
// Run:  build/bench_scale [--records 10000000] [--dir /tmp/tclm-scale] [--source data/records]
//                         [--per-file 100000] [--threads 0] [--json out.json] [--skip-cache]
//                         [--load-files K]
// The directory is kept (delete it yourself: ~1 GB for 10M records, plus ~the same for the cache).
#include <sys/resource.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "common/line_reader.h"
#include "common/runtime_env.h"
#include "tclm/dataset.h"
#include "tclm/error.h"
#include "tclm/feature.h"
#include "tclm/record.h"

using namespace tclm;
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Resident set size now (kB), from /proc/self/statm.
long rss_kb() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}
long peak_rss_kb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

uint64_t dir_bytes(const fs::path& dir) {
  uint64_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) n += e.file_size();
  }
  return n;
}

// The source record lines (comments and blanks left out), with the offset where the workload key's
// name starts (just after `[\"` of i[0][0]); lines without that shape are not used.
struct SourceLine {
  std::string text;
  size_t key_at;
};

std::vector<SourceLine> read_source(const std::string& path) {
  std::vector<SourceLine> out;
  for (const std::string& file : list_record_files(path)) {
    LineReader r(file);
    std::string_view line;
    while (r.next(&line)) {
      const size_t i = line.find("\"i\": [[\"[\\\"");
      if (i == std::string_view::npos) continue;
      out.push_back(SourceLine{std::string(line), i + std::strlen("\"i\": [[\"[\\\"")});
    }
  }
  return out;
}

// Writes files part-00000.json.gz ... so that the directory holds `records` records. Returns seconds.
double generate(const std::vector<SourceLine>& src, const fs::path& dir, int64_t records, int64_t per_file,
                int threads, int64_t first_file = 0) {
  const int64_t n_files = (records + per_file - 1) / per_file;
  std::atomic<int64_t> next{0};
  const auto t0 = Clock::now();
  auto work = [&] {
    std::string buf;
    for (int64_t f; (f = next++) < n_files;) {
      const int64_t begin = f * per_file, end = std::min(records, begin + per_file);
      const fs::path path = dir / fmt::format("part-{:05d}.json.gz", first_file + f);
      const std::string tmp = path.string() + ".tmp";
      gzFile gz = gzopen(tmp.c_str(), "wb1");
      if (gz == nullptr) throw Error("cannot write " + tmp);
      gzbuffer(gz, 1 << 20);
      for (int64_t i = begin; i < end; ++i) {
        const int64_t g = (first_file * per_file) + i;
        const SourceLine& s = src[static_cast<size_t>(g % static_cast<int64_t>(src.size()))];
        const int64_t copy = g / static_cast<int64_t>(src.size());
        buf.assign(s.text, 0, s.key_at);
        buf += fmt::format("c{}:", copy);
        buf.append(s.text, s.key_at);
        buf += '\n';
        if (gzwrite(gz, buf.data(), static_cast<unsigned>(buf.size())) != static_cast<int>(buf.size())) {
          throw Error("cannot write " + tmp);
        }
      }
      if (gzclose(gz) != Z_OK) throw Error("cannot write " + tmp);
      fs::rename(tmp, path);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  return since(t0);
}

}  // namespace

int main(int argc, char** argv) {
  tclm::reexec_with_runtime_env(argv);  // as the CLI (common/runtime_env.h)
  int64_t records = 10'000'000, per_file = 100'000;
  std::string dir = "/tmp/tclm-scale", source = std::string(TCLM_SOURCE_DIR) + "/data/records", json;
  int threads = 0;
  bool skip_cache = false;
  int load_files = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_scale: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--records") records = std::stoll(value());
    else if (a == "--per-file") per_file = std::stoll(value());
    else if (a == "--dir") dir = value();
    else if (a == "--source") source = value();
    else if (a == "--threads") threads = std::stoi(value());
    else if (a == "--json") json = value();
    else if (a == "--skip-cache") skip_cache = true;
    else if (a == "--load-files") load_files = std::stoi(value());
    else {
      std::fprintf(stderr, "usage: bench_scale [--records N] [--per-file N] [--dir DIR] [--source PATH] "
                           "[--threads N] [--json FILE] [--skip-cache] [--load-files K]\n");
      return a == "--help" ? 0 : 2;
    }
  }
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  try {
    const fs::path root(dir), rec_dir = root / "records", cache_dir = root / "cache";
    const std::string marker = (root / "records.complete").string();
    std::string have;
    if (std::ifstream m(marker); m) std::getline(m, have);
    const std::string want = fmt::format("{} {} {}", records, per_file, source);
    double gen_seconds = 0;
    if (have != want) {
      const auto src = read_source(source);
      if (src.empty()) throw Error("no record lines under " + source);
      fs::remove_all(root);
      fs::create_directories(rec_dir);
      std::fprintf(stderr, "generating %lld records from %zu source lines into %s ...\n",
                   static_cast<long long>(records), src.size(), rec_dir.c_str());
      gen_seconds = generate(src, rec_dir, records, per_file, threads);
      std::ofstream(marker) << want << "\n";
    }
    const uint64_t gz_bytes = dir_bytes(rec_dir);
    std::printf("synthetic directory: %lld records in %lld files, %.1f MB gzip%s\n", static_cast<long long>(records),
                static_cast<long long>((records + per_file - 1) / per_file), gz_bytes / 1e6,
                gen_seconds > 0 ? fmt::format(" (generated in {:.1f} s)", gen_seconds).c_str() : " (reused)");

    // 1. Streaming parse + featurize on all threads.
    const std::vector<std::string> files = list_record_files(rec_dir.string());
    std::atomic<size_t> next{0};
    std::atomic<int64_t> parsed{0}, steps{0}, skipped{0}, done_files{0};
    std::mutex mu;
    std::vector<std::pair<double, long>> rss_at;  // (fraction of files, rss kB)
    const long rss_start = rss_kb();
    const auto t0 = Clock::now();
    auto work = [&] {
      std::vector<float> x(static_cast<size_t>(kDefaultMaxSteps) * kStepFeatureDim);
      for (size_t f; (f = next++) < files.size();) {
        ReadStats st;
        int64_t n = 0, s = 0;
        read_record_file(files[f], [&](const MeasureRecord& r, const RecordOrigin&) {
          s += featurize_program(r.steps, kDefaultMaxSteps, x.data());
          ++n;
        }, &st);
        parsed += n;
        steps += s;
        skipped += st.skipped;
        const int64_t d = ++done_files;
        std::lock_guard<std::mutex> lock(mu);
        const double frac = static_cast<double>(d) / static_cast<double>(files.size());
        for (double mark : {0.01, 0.1, 0.5, 1.0}) {
          if (frac >= mark && std::none_of(rss_at.begin(), rss_at.end(), [&](auto& p) { return p.first == mark; })) {
            rss_at.emplace_back(mark, rss_kb());
          }
        }
        std::fprintf(stderr, "\rparse + featurize: %lld/%zu files, %lld records, %.0f records/s   ",
                     static_cast<long long>(d), files.size(), static_cast<long long>(parsed.load()),
                     parsed.load() / std::max(since(t0), 1e-9));
      }
    };
    {
      std::vector<std::thread> pool;
      for (int t = 1; t < threads; ++t) pool.emplace_back(work);
      work();
      for (auto& t : pool) t.join();
    }
    const double parse_s = since(t0);
    std::fprintf(stderr, "\n");
    std::printf("\n1. parse + featurize (streaming, %d threads): %lld records (%lld skipped lines), %lld steps in %.1f s\n"
                "   %.0f records/s, %.0f steps/s; %.1f MB gzip/s\n",
                threads, static_cast<long long>(parsed.load()), static_cast<long long>(skipped.load()),
                static_cast<long long>(steps.load()), parse_s, parsed / parse_s, steps / parse_s, gz_bytes / 1e6 / parse_s);
    std::printf("   resident memory: %.1f MB at the start", rss_start / 1024.0);
    for (const auto& [frac, kb] : rss_at) std::printf(", %.1f MB after %.0f%% of the files", kb / 1024.0, frac * 100);
    std::printf("; peak %.1f MB\n", peak_rss_kb() / 1024.0);

    // 2. tclm info's path.
    std::string cache_rows;
    double info_s = 0, cold_s = 0, warm_s = 0, incr_s = 0;
    uint64_t cache_bytes = 0;
    int64_t info_tasks = 0;
    if (!skip_cache) {
      const std::vector<DataSource> sources = {DataSource::parse("scale=" + rec_dir.string())};
      LoadOptions lo;
      auto t = Clock::now();
      DataSummary s = summarize_sources(sources, lo);
      info_s = since(t);
      info_tasks = s.platform_stats.empty() ? 0 : s.platform_stats[0].tasks;
      fs::remove_all(cache_dir);
      lo.cache_dir = cache_dir.string();
      t = Clock::now();
      summarize_sources(sources, lo);
      cold_s = since(t);
      cache_bytes = dir_bytes(cache_dir);
      t = Clock::now();
      DataSummary warm = summarize_sources(sources, lo);
      warm_s = since(t);
      const long peak_info_kb = peak_rss_kb();  // before this bench reads the source lines again
      // One more file (incremental): only it is parsed, the others come from the cache.
      const auto src = read_source(source);
      generate(src, rec_dir, per_file, per_file, 1, static_cast<int64_t>(files.size()));
      t = Clock::now();
      DataSummary incr = summarize_sources(sources, lo);
      incr_s = since(t);
      fs::remove(rec_dir / fmt::format("part-{:05d}.json.gz", files.size()));
      std::printf("\n2. tclm info (summarize_sources, one thread): %lld records, %lld tasks\n"
                  "   no cache %.1f s (%.0f records/s); building the cache %.1f s; from the cache %.1f s (%.0f records/s)\n"
                  "   one more file of %lld records added: %.1f s (the cache holds %.1f MB); peak memory %.1f MB\n",
                  static_cast<long long>(s.read_stats.records), static_cast<long long>(info_tasks), info_s,
                  s.read_stats.records / info_s, cold_s, warm_s, warm.read_stats.records / warm_s,
                  static_cast<long long>(incr.read_stats.records - warm.read_stats.records), incr_s, cache_bytes / 1e6,
                  peak_info_kb / 1024.0);
    }
    double load_mb = 0, load_s = 0, held_bytes = 0, fixed_bytes = 0, featurize_s = 0;
    int64_t load_programs = 0;
    if (load_files > 0) {
      std::vector<DataSource> first;
      for (size_t f = 0; f < files.size() && static_cast<int>(f) < load_files; ++f) first.push_back(DataSource::parse("scale=" + files[f]));
      const long before = rss_kb();
      const auto t = Clock::now();
      Dataset d = Dataset::load(first, LoadOptions{});
      load_s = since(t);
      load_mb = (rss_kb() - before) / 1024.0;
      load_programs = static_cast<int64_t>(d.num_programs());
      held_bytes = static_cast<double>(d.program_bytes());
      // The previous layout: per program an 8-byte offset, 8-byte cost, 4-byte label, task and task-list
      // entry; per step 24 bytes; per integer 8 bytes (sizes, not capacities).
      int64_t n_steps = 0, n_ints = 0;
      std::vector<StepView> views;
      std::vector<int64_t> ints;
      std::vector<float> x, mask;
      const auto tf = Clock::now();
      std::vector<uint32_t> chunk;
      for (uint32_t p = 0; p < d.num_programs(); ++p) {
        d.steps(p, &views, &ints);
        n_steps += static_cast<int64_t>(views.size());
        n_ints += static_cast<int64_t>(ints.size());
        chunk.push_back(p);
        if (chunk.size() == 1024 || p + 1 == d.num_programs()) {
          d.featurize(chunk, &x, &mask);
          chunk.clear();
        }
      }
      featurize_s = since(tf);
      fixed_bytes = 28.0 * static_cast<double>(load_programs) + 24.0 * static_cast<double>(n_steps) +
                    8.0 * static_cast<double>(n_ints);
      const double per = 1.0 / static_cast<double>(std::max<int64_t>(load_programs, 1));
      std::printf("\n3. Dataset::load of %zu files (what training holds): %lld programs (%.1f steps each) in %.1f s, "
                  "resident memory +%.1f MB = %.0f bytes per program; the dataset holds %.0f bytes per program "
                  "(the fixed-width layout: %.0f, %.2fx); decoding + featurizing every program: %.1f s "
                  "(%.0f programs/s, one thread)\n",
                  first.size(), static_cast<long long>(load_programs), n_steps * per, load_s, load_mb,
                  load_mb * 1048576.0 * per, held_bytes * per, fixed_bytes * per, fixed_bytes / std::max(held_bytes, 1.0),
                  featurize_s, load_programs / std::max(featurize_s, 1e-9));
    }
    if (!json.empty()) {
      std::string rss;
      for (const auto& [frac, kb] : rss_at) rss += fmt::format("{}{{\"fraction\": {}, \"mb\": {:.1f}}}", rss.empty() ? "" : ", ", frac, kb / 1024.0);
      std::ofstream(json) << fmt::format(
          "{{\"records\": {}, \"files\": {}, \"gzip_mb\": {:.1f}, \"threads\": {}, \"parse_featurize_seconds\": {:.2f}, "
          "\"records_per_second\": {:.0f}, \"steps\": {}, \"rss_start_mb\": {:.1f}, \"rss\": [{}], "
          "\"info_seconds\": {:.2f}, \"info_tasks\": {}, \"cache_build_seconds\": {:.2f}, \"cache_warm_seconds\": {:.2f}, "
          "\"cache_incremental_seconds\": {:.2f}, \"cache_mb\": {:.1f}, \"peak_rss_mb\": {:.1f}, "
          "\"load_programs\": {}, \"load_seconds\": {:.2f}, \"load_mb\": {:.1f}, \"held_bytes\": {:.0f}, "
          "\"fixed_width_bytes\": {:.0f}, \"featurize_seconds\": {:.2f}}}\n",
          records, files.size(), gz_bytes / 1e6, threads, parse_s, parsed / parse_s, steps.load(), rss_start / 1024.0, rss,
          info_s, info_tasks, cold_s, warm_s, incr_s, cache_bytes / 1e6, peak_rss_kb() / 1024.0, load_programs, load_s, load_mb, held_bytes,
          fixed_bytes, featurize_s);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_scale: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
