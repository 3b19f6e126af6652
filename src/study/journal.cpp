// study/journal.cpp: see journal.h.
#include "study/journal.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <unistd.h>

#include "common/bytes.h"
#include "tclm/error.h"

namespace tclm::study {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  for (size_t a = 0, b; a < text.size(); a = b + 1) {
    b = text.find('\n', a);
    if (b == std::string::npos) b = text.size();
    lines.push_back(text.substr(a, b - a));
  }
  return lines;
}

std::vector<std::string> split_csv_fields(const std::string& line) {
  std::vector<std::string> out;
  size_t a = 0;
  for (;;) {
    const size_t b = line.find(',', a);
    out.push_back(line.substr(a, b == std::string::npos ? std::string::npos : b - a));
    if (b == std::string::npos) return out;
    a = b + 1;
  }
}

CsvJournal::CsvJournal(std::string path, std::string header, bool resume)
    : path_(std::move(path)), header_(std::move(header)) {
  if (!resume || !std::filesystem::exists(path_)) return;
  const std::string text = read_file(path_);
  const std::vector<std::string> lines = split_lines(text);
  if (lines.empty() || lines[0] != header_) {
    throw Error(fmt::format("{}:1: not a journal of this study's columns (header '{}', expected '{}'); move it "
                            "away or drop --resume",
                            path_, lines.empty() ? std::string() : lines[0], header_));
  }
  const bool cut = !text.empty() && text.back() != '\n';
  for (size_t i = 1; i < lines.size(); ++i) {
    if (cut && i + 1 == lines.size()) {
      dropped_tail_ = !lines[i].empty();
      break;
    }
    if (lines[i].empty()) continue;
    lines_.push_back(Line{static_cast<int>(i + 1), lines[i], split_csv_fields(lines[i])});
  }
}

CsvJournal::~CsvJournal() {
  if (file_) std::fclose(file_);
}

void CsvJournal::keep(const std::vector<std::string>& kept) {
  if (file_) {
    std::fclose(file_);
    file_ = nullptr;
  }
  std::string text = header_ + "\n";
  for (const auto& k : kept) text += k + "\n";
  write_file_atomic(path_, text);
  file_ = std::fopen(path_.c_str(), "ab");
  if (!file_) throw Error(fmt::format("{}: cannot open for appending: {}", path_, std::strerror(errno)));
}

void CsvJournal::append(const std::string& row) {
  if (!file_) keep({});
  const std::string line = row + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    throw Error(fmt::format("{}: cannot write a row: {}", path_, std::strerror(errno)));
  }
  ::fsync(fileno(file_));
}

}  // namespace tclm::study
