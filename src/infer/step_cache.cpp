// infer/step_cache.cpp: the step-row cache (infer/step_cache.h).
#include "infer/step_cache.h"

#include <algorithm>

namespace tclm::infer {

void StepRowCache::configure(const Model& m, size_t budget_bytes) {
  const size_t entry_bytes = sizeof(float) * static_cast<size_t>(m.F + m.Dp + m.XZp);
  const int64_t cap = m.layers.empty() ? 0 : static_cast<int64_t>(std::min<size_t>(budget_bytes / entry_bytes, kMaxEntries));
  if (cap == capacity && m.id == model_id) {
    clear();
    return;
  }
  *this = StepRowCache();
  capacity = cap;
  model_id = m.id;
  F = m.F;
  Dp = m.Dp;
  XZp = m.XZp;
}

bool StepRowCache::reserve(int64_t rows) {
  if (rows > capacity) return false;
  if (used + rows > capacity) clear();
  if (used + rows > allocated) {
    const int64_t want = std::min(capacity, std::max<int64_t>(2 * allocated, used + rows));
    keys.resize(static_cast<size_t>(want * F));
    h0.resize(static_cast<size_t>(want * Dp));
    xz.resize(static_cast<size_t>(want * XZp));
    allocated = want;
  }
  if (static_cast<int64_t>(slots.size()) < 2 * allocated) rehash();
  return true;
}

void StepRowCache::clear() {
  used = 0;
  std::fill(slots.begin(), slots.end(), -1);
}

void StepRowCache::rehash() {
  size_t n_slots = 16;
  while (n_slots < static_cast<size_t>(2 * allocated)) n_slots *= 2;
  std::vector<int32_t> fresh(n_slots, -1);
  for (int64_t e = 0; e < used; ++e) {
    for (size_t s = static_cast<size_t>(hash_row(keys.data() + e * F, F)) & (n_slots - 1);; s = (s + 1) & (n_slots - 1)) {
      if (fresh[s] < 0) {
        fresh[s] = static_cast<int32_t>(e);
        break;
      }
    }
  }
  slots = std::move(fresh);
}

}  // namespace tclm::infer
