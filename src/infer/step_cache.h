// infer/step_cache.h: the step-row cache of the inference engine (internal).
//
// The first layer up to its in_proj (embedding, LayerNorm, in_proj: about half of the default model's
// FLOPs) is a function of one step's features alone, and candidate programs repeat their steps a lot:
// in 10,000 real records drawn from data/records, 1.3% of the 274,537 step rows are distinct (1% within
// one task, which is what a search round scores). StepRowCache keeps, per worker, the embedding h0 and
// in_proj output xz of the distinct rows it has seen, keyed by the row's bits, so each is computed once.
// Results are bitwise those of the uncached path: the same kernels compute each row the same way
// wherever it sits in a GEMM. Entries are appended; when a block's rows could overflow the capacity,
// the cache starts empty again (no eviction bookkeeping).
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <vector>

#include "infer/model.h"

namespace tclm::infer {

/// A 64-bit hash of the bits of one feature row (F floats). Four independent lanes, so the multiplies
/// overlap; mixed at the end.
inline uint64_t hash_row(const float* row, int64_t F) {
  uint64_t h[4] = {0x9E3779B97F4A7C15ull, 0xC2B2AE3D27D4EB4Full, 0x165667B19E3779F9ull, 0x27D4EB2F165667C5ull};
  int64_t f = 0;
  for (; f + 4 <= F; f += 4) {
    for (int l = 0; l < 4; ++l) {
      uint32_t bits;
      std::memcpy(&bits, row + f + l, sizeof bits);
      h[l] = (h[l] ^ bits) * 0xBF58476D1CE4E5B9ull;
    }
  }
  for (; f < F; ++f) {
    uint32_t bits;
    std::memcpy(&bits, row + f, sizeof bits);
    h[0] = (h[0] ^ bits) * 0xBF58476D1CE4E5B9ull;
  }
  uint64_t x = h[0] ^ std::rotl(h[1], 16) ^ std::rotl(h[2], 32) ^ std::rotl(h[3], 48);
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 29);
}

struct StepRowCache {
  /// At most this many entries whatever the budget (entry indices are int32; a table this size is
  /// ~30 GB for the default model, so the budget is what limits it in practice).
  static constexpr int64_t kMaxEntries = int64_t{1} << 24;
  int64_t capacity = 0;   // entries the budget allows (0: disabled)
  int64_t allocated = 0;  // entries the arrays hold now (grown on demand, <= capacity)
  int64_t used = 0;
  uint64_t model_id = 0;
  int64_t F = 0, Dp = 0, XZp = 0;
  std::vector<float> keys;   // [allocated][F]: the feature rows
  AlignedFloats h0;          // [allocated][Dp]: embed(row)
  AlignedFloats xz;          // [allocated][XZp]: in_proj(LayerNorm(h0)) of layer 0
  std::vector<int32_t> slots;  // open addressing (linear probing): entry index, or -1; >= 2 allocated

  /// Starts a call: empty, for model `m` and the memory budget (the memory is kept if neither changed).
  /// Entries live for one call only, so that a call's cost does not depend on what the thread scored before.
  void configure(const Model& m, size_t budget_bytes);
  /// Makes room for `rows` new entries (false if the capacity is smaller than that). The arrays grow
  /// geometrically up to the capacity; `allocated` changes only once every array has its new size, so
  /// a failed allocation (std::bad_alloc) leaves a consistent cache.
  bool reserve(int64_t rows);
  void clear();
  /// The entry of `row` (F floats), appending it if new (reserve() made room).
  int32_t find_or_insert(const float* row) {
    const size_t mask = slots.size() - 1;
    for (size_t s = static_cast<size_t>(hash_row(row, F)) & mask;; s = (s + 1) & mask) {
      const int32_t e = slots[s];
      if (e < 0) {
        slots[s] = static_cast<int32_t>(used);
        std::memcpy(keys.data() + used * F, row, sizeof(float) * static_cast<size_t>(F));
        return static_cast<int32_t>(used++);
      }
      if (std::memcmp(keys.data() + e * F, row, sizeof(float) * static_cast<size_t>(F)) == 0) return e;
    }
  }

 private:
  /// A slot table of at least 2 `allocated` (a power of two) holding the `used` entries.
  void rehash();
};

}  // namespace tclm::infer
