#include "common/line_reader.h"

#include <cstring>
#include <zlib.h>

#include "tclm/error.h"

namespace tclm {

namespace {
constexpr size_t kChunk = 1 << 20;
}

LineReader::LineReader(const std::string& path) : path_(path), buf_(kChunk) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) throw Error("cannot open '" + path + "': " + std::strerror(errno));
  gzbuffer(f, 256 * 1024);
  gz_ = f;
}

LineReader::~LineReader() {
  if (gz_ != nullptr) gzclose(static_cast<gzFile>(gz_));
}

bool LineReader::fill() {
  if (eof_) return false;
  int n = gzread(static_cast<gzFile>(gz_), buf_.data(), static_cast<unsigned>(buf_.size()));
  if (n < 0) {
    int errnum = 0;
    const char* msg = gzerror(static_cast<gzFile>(gz_), &errnum);
    error_ = std::string("gzip read error: ") + (msg ? msg : "unknown");
    eof_ = true;
    return false;
  }
  if (n == 0) {
    // gzread returns 0 both at a clean end and at a truncated stream; gzerror tells them apart.
    int errnum = 0;
    const char* msg = gzerror(static_cast<gzFile>(gz_), &errnum);
    if (errnum != Z_OK && errnum != Z_STREAM_END) {
      error_ = std::string("gzip read error: ") + (msg ? msg : "unknown");
    }
    eof_ = true;
    return false;
  }
  begin_ = 0;
  end_ = static_cast<size_t>(n);
  return true;
}

bool LineReader::next(std::string_view* line) {
  carry_.clear();
  bool partial = false;  // part of the line is already in carry_
  for (;;) {
    if (begin_ == end_ && !fill()) {
      if (!partial) return false;
      ++line_no_;  // a last line without '\n'
      break;
    }
    const char* start = buf_.data() + begin_;
    const void* nl = std::memchr(start, '\n', end_ - begin_);
    if (nl == nullptr) {
      carry_.append(start, end_ - begin_);
      partial = true;
      begin_ = end_;
      continue;
    }
    size_t len = static_cast<const char*>(nl) - start;
    begin_ += len + 1;
    ++line_no_;
    if (!partial) {
      if (len > 0 && start[len - 1] == '\r') --len;
      *line = std::string_view(start, len);
      return true;
    }
    carry_.append(start, len);
    break;
  }
  if (!carry_.empty() && carry_.back() == '\r') carry_.pop_back();
  *line = carry_;
  return true;
}

}  // namespace tclm
