#include "common/line_reader.h"

#include <cstring>
#include <zlib.h>

#include "tclm/error.h"

namespace tclm {

namespace {
constexpr size_t kChunk = 1 << 20;
}

// The buffer is not value-initialised: zeroing 1 MiB per file made opening a small file cost ~1 ms.
LineReader::LineReader(const std::string& path) : path_(path), buf_(new char[kChunk]) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) throw Error("cannot open '" + path + "': " + std::strerror(errno));
  gzbuffer(f, 256 * 1024);
  gz_ = f;
}

LineReader::~LineReader() {
  if (gz_ != nullptr) gzclose(static_cast<gzFile>(gz_));
}

namespace {
// zlib's message starts with the path; the reason names the damage and what it costs.
std::string gzip_error(const std::string& path, const char* msg) {
  std::string m = msg ? msg : "unknown";
  if (m.rfind(path + ": ", 0) == 0) m = m.substr(path.size() + 2);
  return "truncated or damaged gzip stream, the rest of the file is lost (" + m + "); copy the file again";
}
}  // namespace

bool LineReader::fill() {
  if (eof_) return false;
  int n = gzread(static_cast<gzFile>(gz_), buf_.get(), static_cast<unsigned>(kChunk));
  if (n < 0) {
    int errnum = 0;
    const char* msg = gzerror(static_cast<gzFile>(gz_), &errnum);
    error_ = gzip_error(path_, msg);
    eof_ = true;
    return false;
  }
  if (n == 0) {
    // gzread returns 0 both at a clean end and at a truncated stream; gzerror tells them apart.
    int errnum = 0;
    const char* msg = gzerror(static_cast<gzFile>(gz_), &errnum);
    if (errnum != Z_OK && errnum != Z_STREAM_END) {
      error_ = gzip_error(path_, msg);
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
    const char* start = buf_.get() + begin_;
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
