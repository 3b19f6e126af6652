// common/line_reader.h: reads lines from a plain or gzip-compressed file (internal).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tclm {

/// Buffered line reader over zlib's gzread, which reads gzip and plain files alike. Lines may be of
/// any length. A damaged or truncated gzip stream ends the file early; error() then says why.
class LineReader {
 public:
  /// Throws tclm::Error when the file cannot be opened.
  explicit LineReader(const std::string& path);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  /// Next line without its '\n' (and without a trailing '\r'); false at the end of the file. The
  /// view is valid until the next call.
  bool next(std::string_view* line);
  /// 1-based number of the line last returned.
  int64_t line_number() const { return line_no_; }
  /// Empty, or the reason reading stopped early (e.g. "truncated gzip stream").
  const std::string& error() const { return error_; }

 private:
  bool fill();
  void* gz_ = nullptr;
  std::string path_;
  std::unique_ptr<char[]> buf_;  // kChunk bytes, not zeroed (gzread fills what is used)
  size_t begin_ = 0, end_ = 0;
  bool eof_ = false;
  int64_t line_no_ = 0;
  std::string error_;
  std::string carry_;
};

}  // namespace tclm
