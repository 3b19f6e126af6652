// dataset/record_cache.h: a binary cache of parsed record files (internal).
//
// One cache file per source file, named by a hash of its absolute path, valid while the source's
// size and modification time are unchanged; so adding files to a directory re-parses only the new
// ones. Layout: magic "TCLMRC01", u32 cache version, u64 source size, i64 source mtime (ns), str
// source path, the file's ReadStats, u64 record count, records, u32 CRC-32 of all preceding bytes.
// A cache file that is stale, truncated or corrupt is ignored and rewritten.
#pragma once

#include <functional>
#include <string>

#include "tclm/record.h"

namespace tclm {

void read_record_file_cached(const std::string& path, const std::string& cache_dir,
                             const std::function<void(const MeasureRecord&, const RecordOrigin&)>& fn,
                             ReadStats* stats);

}  // namespace tclm
