// dataset/record_cache.h: a binary cache of parsed record files (internal).
//
// One cache file per source file, named by a hash of its absolute path, valid while the source's
// size and modification time are unchanged; so adding files to a directory re-parses only the new
// ones (the cache is built incrementally). Layout (version 3): magic "TCLMRC01", u32 cache version,
// u64 source size, i64 source mtime (ns), str source path, then blocks of about 1 MB (u8 kind, u32
// bytes, u32 CRC-32, payload): records coded with varints and a per-file string table (workload
// keys, targets are stored once), then one stats block (the file's ReadStats). Written and read block
// by block: memory stays at one block whatever the file's size. A cache file that is stale,
// truncated or corrupt (any block's checksum) is ignored, delivers nothing, and is rewritten.
#pragma once

#include <functional>
#include <string>

#include "tclm/record.h"

namespace tclm {

void read_record_file_cached(const std::string& path, const std::string& cache_dir,
                             const std::function<void(const MeasureRecord&, const RecordOrigin&)>& fn,
                             ReadStats* stats);

}  // namespace tclm
