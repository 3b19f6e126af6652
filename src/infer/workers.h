// infer/workers.h: the worker threads of a predict call (internal).
//
// A Source provides the programs one at a time, in the worker thread that scores them (infer/sources.h):
//   int64_t prepare(size_t i)                 rows program i needs (its real steps), or -1: score NaN
//   void fill(size_t i, float* x, uint8_t* real)   writes those rows' features and real flags
// prepare(i) and fill(i) are called back to back for the same i. Each worker has its own Source, made
// by make_source(). Workers take chunks of programs, gather them into blocks (infer/block.h) and run
// forward_block on each full block.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <thread>
#include <vector>

#include "infer/block.h"
#include "infer/step_cache.h"

namespace tclm::infer {

/// Runs fn(worker) on n_threads threads (the calling thread is worker 0) and rethrows the first exception.
/// If no more threads can be started, the ones started and the calling thread share the work.
void on_threads(int n_threads, const std::function<void(int)>& fn);

/// The order in which to score programs so that those with common first steps are neighbours (and so
/// share their prefix in a block): programs sorted by the hashes of their rows, lexicographically. A
/// hash collision can only make the order worse, never a score wrong (append_program compares rows).
template <class MakeSource>
std::vector<size_t> prefix_order(const Model& m, size_t n, int n_threads, size_t chunk, std::atomic<bool>& failed,
                                 const MakeSource& make_source) {
  std::vector<std::vector<uint64_t>> keys(n);
  std::atomic<size_t> next{0};
  on_threads(n_threads, [&](int) {
    try {
      auto source = make_source();
      std::vector<float> x;
      std::vector<uint8_t> real;
      while (!failed.load(std::memory_order_relaxed)) {
        const size_t begin = next.fetch_add(chunk);
        if (begin >= n) break;
        for (size_t i = begin; i < std::min(n, begin + chunk); ++i) {
          const int64_t rows = source.prepare(i);
          if (rows <= 0) continue;
          x.resize(static_cast<size_t>(rows * m.F));
          real.resize(static_cast<size_t>(rows));
          source.fill(i, x.data(), real.data());
          keys[i].resize(static_cast<size_t>(rows));
          for (int64_t r = 0; r < rows; ++r) keys[i][r] = hash_row(x.data() + r * m.F, m.F) ^ real[r];
        }
      }
    } catch (...) {
      failed = true;  // the other threads stop early
      throw;
    }
  });
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return keys[a] < keys[b]; });
  return order;
}

/// Scores programs 0..n-1 of the sources into scores[0..n) on `threads` threads (0 = all cores).
template <class MakeSource>
void run_workers(const Model& m, size_t n, float* scores, int threads, const CostModelEngine::Options& opt,
                 const MakeSource& make_source) {
  if (n == 0) return;
  int n_threads = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // At least ~16 programs (a block of ~500 steps) per thread, so small calls stay on the caller's thread.
  n_threads = static_cast<int>(std::min<size_t>(static_cast<size_t>(n_threads), (n + 15) / 16));
  n_threads = std::max(n_threads, 1);
  const size_t chunk = std::clamp<size_t>(n / (static_cast<size_t>(n_threads) * 8), 1, 64);
  std::atomic<bool> failed{false};
  // Sorting pays when there are enough programs to find neighbours; small calls keep their order
  // (consecutive programs with a common prefix still share it). 512: a 64-program call got 25% slower with it.
  std::vector<size_t> order;
  if (opt.share_prefixes && n >= 512) order = prefix_order(m, n, n_threads, chunk, failed, make_source);
  std::atomic<size_t> next{0};
  on_threads(n_threads, [&](int) {
    try {
      auto source = make_source();
      ScratchLease lease(m, opt.step_cache_bytes);
      Block& b = *lease.block;
      b.counters = opt.counters;
      b.reserve(m, CostModelEngine::kBlockRows, CostModelEngine::kBlockRows);
      while (!failed.load(std::memory_order_relaxed)) {
        const size_t begin = next.fetch_add(chunk);
        if (begin >= n) break;
        const size_t end = std::min(n, begin + chunk);
        for (size_t k = begin; k < end; ++k) {
          const size_t i = order.empty() ? k : order[k];
          const int64_t rows = source.prepare(i);
          if (rows < 0) {
            scores[i] = std::numeric_limits<float>::quiet_NaN();
            continue;
          }
          if (b.programs() > 0 && (b.rows + rows > b.cap_rows || b.programs() >= b.cap_progs)) {
            forward_block(m, b, scores);
            b.clear();
          }
          b.reserve(m, b.rows + rows, b.programs() + 1);  // only grows for a program longer than a block
          source.fill(i, b.x.data() + b.rows * m.F, b.real.data() + b.rows);
          b.append_program(m, i, rows, opt.share_prefixes);
        }
      }
      forward_block(m, b, scores);
    } catch (...) {
      failed = true;
      throw;
    }
  });
}

}  // namespace tclm::infer
