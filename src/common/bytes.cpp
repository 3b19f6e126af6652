#include "common/bytes.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <cstdio>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "tclm/error.h"

namespace tclm {

namespace {

Error write_error(const std::string& path, int e) {
  // Messages name the user's path (not the temporary file) and what to do.
  return Error("cannot write '" + path + "': " + std::strerror(e) +
               (e == ENOENT   ? "; create its directory or choose another output path"
                : e == EISDIR ? "; it is a directory, give a file name"
                : e == ENOSPC ? "; free some disk space or choose another output path"
                : e == EPIPE  ? "; the reader of the pipe went away"
                              : "; check the path, its permissions and the free disk space"));
}

/// Writes every byte to `fd` (short writes continued, EINTR retried); the errno of a failure, else 0.
int write_all(int fd, const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + off, bytes.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;
    off += static_cast<size_t>(n);
  }
  return 0;
}

/// A character device or a FIFO: opened and written in place (a temporary file renamed over it would
/// replace the device node or the pipe with a regular file).
void write_in_place(const std::string& path, const std::string& shown, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) throw write_error(shown, errno);
  int e = write_all(fd, bytes);
  if (::close(fd) != 0 && e == 0) e = errno;
  if (e != 0) throw write_error(shown, e);
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& bytes) {
  // A symbolic link: the file it points to is written (atomically beside it), the link stays.
  std::string target = path;
  struct stat lst{};
  if (::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
    std::error_code ec;
    const auto resolved = std::filesystem::weakly_canonical(path, ec);
    if (ec) throw write_error(path, ec.value());
    target = resolved.string();
  }
  struct stat st{};
  if (::stat(target.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) throw write_error(path, EISDIR);
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) return write_in_place(target, path, bytes);
    if (!S_ISREG(st.st_mode)) {
      throw Error("cannot write '" + path + "': not a regular file, a character device or a FIFO; choose another "
                  "output path");
    }
  }
  const std::string tmp = target + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw write_error(path, errno);
  if (const int e = write_all(fd, bytes); e != 0) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw write_error(path, e);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    throw write_error(path, e);
  }
  if (std::rename(tmp.c_str(), target.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    throw write_error(path, e);
  }
  // Best effort: make the rename itself durable. Failure here leaves a complete file either way.
  const auto dir = std::filesystem::path(target).parent_path();
  const int dir_fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

void write_output(const std::string& path, const std::string& bytes) {
  if (path != "-") return write_file_atomic(path, bytes);
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {  // what was printed before comes first
    throw write_error("standard output", errno != 0 ? errno : EIO);
  }
  if (const int e = write_all(STDOUT_FILENO, bytes); e != 0) throw write_error("standard output", e);
}

std::string read_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error("'" + path + "' is a directory; give a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open '" + path + "': " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error("cannot read '" + path + "'");
  return ss.str();
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      o += fmt::format("\\u{:04x}", static_cast<int>(c));
    } else {
      o += c;
    }
  }
  return o;
}

}  // namespace tclm
