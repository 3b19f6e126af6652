// tools/plot.cpp: see plot.h.
#include "plot.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>

#ifndef TCLM_PLOT_SCRIPT
#define TCLM_PLOT_SCRIPT "tools/plot_results.py"
#endif

namespace tclm::cli {
namespace {

std::string quoted(const std::string& s) {
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return o + "'";
}

}  // namespace

bool plot_csv(const std::string& kind, const std::string& csv, const std::string& png) {
  const char* py_env = std::getenv("TCLM_PYTHON");
  const char* script_env = std::getenv("TCLM_PLOT_SCRIPT");
  const std::string python = py_env ? py_env : std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  const std::string script = script_env ? script_env : TCLM_PLOT_SCRIPT;
  const std::string cmd =
      fmt::format("{} {} {} {} {}", quoted(python), quoted(script), quoted(kind), quoted(csv), quoted(png));
  std::fflush(stdout);
  const int rc = std::system(cmd.c_str());
  if (rc == 0 && std::filesystem::exists(png)) {
    std::fprintf(stderr, "plot: %s\n", png.c_str());
    return true;
  }
  std::fprintf(stderr, "note: no plot (needs python3 with matplotlib: apt install python3-matplotlib); later: %s\n",
               cmd.c_str());
  return false;
}

}  // namespace tclm::cli
