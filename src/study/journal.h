// study/journal.h: a resumable CSV journal: one row per finished run, appended and flushed as the run
// ends, so that a study killed at any point loses at most the run in progress. On restart (resume) the
// rows are read back and the caller skips the runs they hold.
//
// A last line without its '\n' is a row whose write was cut short: it is dropped (and its run done
// again), and `dropped_tail()` says so, for the caller's message. Any other line is the caller's to
// check (Line::number names it in an error).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace tclm::study {

class CsvJournal {
 public:
  struct Line {
    int number = 0;                   // 1-based line number in the file (the header is line 1)
    std::string text;                 // without its '\n'
    std::vector<std::string> fields;  // split at ',' (no quoting: fields must not hold a comma)
  };

  /// Opens `path` for a study whose rows have `header` (without '\n'). Without `resume`, or when the
  /// file does not exist, the file is started anew with the header. With `resume`, an existing file's
  /// header must be `header` (tclm::Error naming path:1 otherwise) and its rows are kept (`lines()`,
  /// empty lines left out). Nothing is written until keep() or append().
  CsvJournal(std::string path, std::string header, bool resume);
  ~CsvJournal();
  CsvJournal(const CsvJournal&) = delete;
  CsvJournal& operator=(const CsvJournal&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<Line>& lines() const { return lines_; }
  /// True when the file read back ended in a line without '\n' (dropped; its run is redone).
  bool dropped_tail() const { return dropped_tail_; }

  /// Rewrites the file (atomically: a temporary file renamed over it) with the header and `kept` (rows
  /// without '\n', e.g. the texts of the lines() the caller keeps), then opens it for append().
  void keep(const std::vector<std::string>& kept);
  /// Appends one row (without '\n') and flushes it to the file. keep() is called first if it was not.
  void append(const std::string& row);

 private:
  std::string path_, header_;
  std::vector<Line> lines_;
  bool dropped_tail_ = false;
  std::FILE* file_ = nullptr;
};

/// The lines of a text without their '\n' (a last line without one included).
std::vector<std::string> split_lines(const std::string& text);
/// "a,b,,c" -> {"a", "b", "", "c"}: every field, empty ones included.
std::vector<std::string> split_csv_fields(const std::string& line);

}  // namespace tclm::study
