// infer/block.cpp: blocks of programs, prefix sharing and the scan-state plan (infer/block.h).
#include "infer/block.h"

#include <algorithm>
#include <cstring>

namespace tclm::infer {

void Block::adopt(const Model& m, size_t cache_bytes) {
  const std::array<int64_t, 6> dims{m.F, m.Dp, m.XZp, m.Ep, m.DBCp, m.Hp};
  if (dims != dims_) {
    *this = Block();
    dims_ = dims;
  }
  cache.configure(m, cache_bytes);
  clear();
}

void Block::reserve(const Model& m, int64_t rows_needed, int64_t progs_needed) {
  if (rows_needed > cap_rows) {  // only when the block is empty (run_workers flushes first)
    const size_t n = static_cast<size_t>(rows_needed);
    x.assign(n * m.F, 0.0f);
    h.assign(n * m.Dp, 0.0f);
    u.assign(n * m.Dp, 0.0f);
    xz.assign(n * m.XZp, 0.0f);
    xc.assign(n * m.Ep, 0.0f);
    dbc.assign(n * m.DBCp, 0.0f);
    delta.assign(n * m.Ep, 0.0f);
    real.assign(n, 0);
    xz_row.assign(n, nullptr);
    entry.assign(n, 0);
    row_owner.assign(n, 0);
    cap_rows = rows_needed;
  }
  nz_idx.resize(static_cast<size_t>(m.F));
  nz_val.resize(static_cast<size_t>(m.F));
  if (progs_needed > cap_progs) {
    pooled.assign(static_cast<size_t>(progs_needed * m.Dp), 0.0f);
    hid.assign(static_cast<size_t>(progs_needed * m.Hp), 0.0f);
    cap_progs = progs_needed;
  }
}

void Block::clear() {
  rows = 0;
  row_begin.assign(1, 0);
  pos_begin.assign(1, 0);
  pos_row.clear();
  lcp.clear();
  index.clear();
}

void Block::append_program(const Model& m, size_t i, int64_t len, bool share) {
  const int64_t j = programs(), F = m.F;
  int64_t shared = 0;
  if (share && j > 0) {
    const int64_t prev = pos_begin[j - 1];  // (an index: pos_row grows below)
    const int64_t n = std::min<int64_t>(len, length(j - 1));
    while (shared < n) {
      const int64_t r = rows + shared, q = pos_row[prev + shared];
      if (real[r] != real[q] || std::memcmp(x.data() + r * F, x.data() + q * F, sizeof(float) * F) != 0) break;
      ++shared;
    }
    for (int64_t p = 0; p < shared; ++p) pos_row.push_back(pos_row[prev + p]);
    if (shared > 0 && shared < len) {  // move the own rows down over the shared ones
      std::memmove(x.data() + rows * F, x.data() + (rows + shared) * F, sizeof(float) * F * (len - shared));
      std::memmove(real.data() + rows, real.data() + rows + shared, static_cast<size_t>(len - shared));
    }
  }
  for (int64_t p = shared; p < len; ++p) {
    row_owner[rows] = static_cast<int32_t>(j);
    pos_row.push_back(static_cast<int32_t>(rows++));
  }
  row_begin.push_back(rows);
  pos_begin.push_back(static_cast<int64_t>(pos_row.size()));
  lcp.push_back(static_cast<int32_t>(shared));
  index.push_back(i);
}

void Block::plan_states(const Model& m) {
  requests.clear();
  const int64_t P = programs();
  for (int64_t j = 0; j < P; ++j) {
    if (lcp[j] > 0 && lcp[j] < length(j)) {
      const int32_t pos = lcp[j] - 1;
      requests.push_back({row_owner[positions(j)[pos]], pos, static_cast<int32_t>(j)});
    }
  }
  std::sort(requests.begin(), requests.end(), [](const StateRequest& a, const StateRequest& b) {
    return a.owner != b.owner ? a.owner < b.owner : a.pos < b.pos;
  });
  req_begin.assign(static_cast<size_t>(P + 1), 0);
  state_slot.assign(static_cast<size_t>(P), -1);
  request_pos.resize(requests.size());
  for (size_t k = 0; k < requests.size(); ++k) {
    ++req_begin[requests[k].owner + 1];
    state_slot[requests[k].program] = static_cast<int32_t>(k);
    request_pos[k] = requests[k].pos;
  }
  for (int64_t j = 0; j < P; ++j) req_begin[j + 1] += req_begin[j];
  const size_t need = requests.size() * static_cast<size_t>(m.Ep * m.N);
  if (states.size() < need) states.resize(need);
}

ScratchLease::ScratchLease(const Model& m, size_t cache_bytes) {
  thread_local Block cached;
  thread_local bool cached_busy = false;
  if (cached_busy) {
    local.adopt(m, cache_bytes);
    block = &local;
  } else {
    cached.adopt(m, cache_bytes);  // (before marking it busy: if this throws, the next call may use it)
    cached_busy = true;
    busy = &cached_busy;
    block = &cached;
  }
}

}  // namespace tclm::infer
