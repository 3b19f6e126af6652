// infer/block.h: a block of programs and its scratch memory, and the plan of which rows and scan
// states programs share (internal).
//
// A block holds the steps of several programs as M computed rows (one row per real step; columns
// padded to multiples of 16 so that every row starts a whole vector). Padding columns meet zero
// weights, so they never reach a real column: h's stay exactly 0 (LayerNorm's mean reads them),
// delta's hold softplus(0) against A = 0 and u = 0.
//   x     [M, F]       step features (padding rows inside a program zeroed)
//   h     [M, Dp]      residual stream
//   u     [M, Dp]      LayerNorm(h)
//   xz    [M, 2 Ep]    in_proj(u): x at columns [0, E), z at [Ep, Ep + E)
//   xc    [M, Ep]      SiLU(conv(x)), then overwritten in place by y * SiLU(z) (row t of xc is read by
//                      the scan only at step t, and the conv has already read x from xz)
//   dbc   [M, round16(R + 2N)]   x_proj(xc): dt_raw [0, R), B [R, R + N), C [R + N, R + 2N)
//   delta [M, Ep]      softplus(dt_proj(dt_raw))
// Prefix sharing: a program whose first steps equal its predecessor's in the block reads the
// predecessor's rows for them (through a position -> row map) and starts its scan from the state the
// row's owner saved after them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "infer/model.h"
#include "infer/step_cache.h"

namespace tclm::infer {

/// Scratch memory of one worker: one block of programs, their rows and the activations.
struct Block {
  int64_t cap_rows = 0, cap_progs = 0;
  AlignedFloats x, h, u, xz, xc, dbc, delta, pooled, hid;
  std::vector<int> nz_idx;            // [F]: nonzero features of one row (embed_rows)
  std::vector<float> nz_val;
  std::vector<uint8_t> real;          // per row: 1 = real step, 0 = padding inside a program
  std::vector<const float*> xz_row;   // per row: its in_proj output (a row of xz, or of cache.xz in layer 0)
  std::vector<int32_t> entry;         // per row: its StepRowCache entry
  std::vector<int32_t> row_owner;     // per row: the program (in this block) that computes it
  StepRowCache cache;
  // Programs. A program's steps (positions) map to rows: its first lcp positions are its predecessor's
  // rows (shared prefix), the others are its own rows [row_begin[j], row_begin[j + 1]).
  std::vector<int64_t> row_begin{0};  // per program in the block, plus the end
  std::vector<int64_t> pos_begin{0};  // per program: its positions in pos_row, plus the end
  std::vector<int32_t> pos_row;       // per position of every program: its row
  std::vector<int32_t> lcp;           // per program: positions shared with its predecessor
  std::vector<size_t> index;          // per program: its index in the caller's arrays
  int64_t rows = 0;
  // Scan states handed from a prefix's owner to the programs that continue it (one slot per program).
  struct StateRequest {
    int32_t owner, pos, program;  // after position pos of program owner, save the state for program
  };
  std::vector<StateRequest> requests;  // sorted by (owner, pos); request k saves into state slot k
  std::vector<int32_t> request_pos;    // requests[k].pos, for the scan kernel
  std::vector<int64_t> req_begin;      // per program: its requests (as owner), plus the end
  std::vector<int32_t> state_slot;     // per program: the slot its scan starts from, or -1
  AlignedFloats states;                // [requests][Ep * N]
  CostModelEngine::ReuseCounters* counters = nullptr;  // Options::counters of the call

  /// Every buffer region a block reads has been written earlier in the same block (padding columns
  /// included), so a Block can be reused for any model of the same sizes without clearing it.
  void adopt(const Model& m, size_t cache_bytes);
  /// The capacities are raised only after every buffer has its new size: a std::bad_alloc in between
  /// leaves a Block that is still consistent (the thread's kept Block is used again by its next call).
  void reserve(const Model& m, int64_t rows_needed, int64_t progs_needed);
  int64_t programs() const { return static_cast<int64_t>(index.size()); }
  int32_t length(int64_t j) const { return static_cast<int32_t>(pos_begin[j + 1] - pos_begin[j]); }
  const int32_t* positions(int64_t j) const { return pos_row.data() + pos_begin[j]; }
  void clear();

  /// Adds program i, whose `len` rows the source has just written at row `rows` (x and real). With
  /// `share`, the steps it has in common with the previous program of the block (same features and
  /// padding flags, from the first step on) are not computed again: the causal model gives them
  /// exactly the same values, so the program reads the predecessor's rows and its own rows start after.
  void append_program(const Model& m, size_t i, int64_t len, bool share);

  /// Builds the state requests of the block (before the scans): a program that shares lcp > 0 steps and
  /// has own steps after them starts its scan from the state after position lcp - 1 of that row's owner.
  void plan_states(const Model& m);

 private:
  std::array<int64_t, 6> dims_{};
};

/// The calling thread keeps its Block between calls (a small call then allocates nothing; ~1 MB for
/// the default model, plus the memory of its step-row cache, emptied per call);
/// worker threads, started per call, have their own. A nested call on the same thread (a predict_views
/// callback that predicts) gets a fresh Block.
struct ScratchLease {
  Block local;
  Block* block;
  bool* busy = nullptr;
  ScratchLease(const Model& m, size_t cache_bytes);
  ~ScratchLease() {
    if (busy) *busy = false;
  }
  ScratchLease(const ScratchLease&) = delete;
  ScratchLease& operator=(const ScratchLease&) = delete;
};

/// Runs the model on the block and writes scores[b.index[j]] (forward.cpp).
void forward_block(const Model& m, Block& b, float* scores);

}  // namespace tclm::infer
