// fuzz/replay_main.cpp: a main() for the fuzz harnesses in builds without libFuzzer (g++, the ordinary
// test suite): runs every file named on the command line, and every file below every directory named
// there (sorted, recursively; names starting with '.' are skipped, e.g. .gitkeep), through
// LLVMFuzzerTestOneInput, and prints how many. A finding aborts (harness property) or crashes, which
// fails the CTest test fuzz.replay.<name>. A path that does not exist is an error (exit 2).
//
//   tclm_fuzz_replay_records fuzz/corpus/records fuzz/regressions/records
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE_OR_DIR...\n  runs every input through the fuzz harness\n", argv[0]);
    return 2;
  }
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const fs::path p(argv[i]);
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<std::string> found;
      for (auto it = fs::recursive_directory_iterator(p, ec); !ec && it != fs::recursive_directory_iterator();
           it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (!name.empty() && name[0] == '.') {
          if (it->is_directory()) it.disable_recursion_pending();
          continue;
        }
        if (it->is_regular_file()) found.push_back(it->path().string());
      }
      if (ec) {
        std::fprintf(stderr, "error: cannot list '%s': %s\n", argv[i], ec.message().c_str());
        return 2;
      }
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::is_regular_file(p, ec)) {
      files.push_back(p.string());
    } else {
      std::fprintf(stderr, "error: '%s' is neither a file nor a directory\n", argv[i]);
      return 2;
    }
  }
  size_t bytes = 0;
  for (const std::string& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "error: cannot read '%s'\n", f.c_str());
      return 2;
    }
    const std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "replaying %s (%zu bytes)\n", f.c_str(), data.size());
    static const char kEmpty[1] = {0};  // libFuzzer never passes a null pointer, even for an empty input
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(data.empty() ? kEmpty : data.data()), data.size());
    bytes += data.size();
  }
  std::printf("replayed %zu inputs (%zu bytes) without a finding\n", files.size(), bytes);
  return 0;
}
