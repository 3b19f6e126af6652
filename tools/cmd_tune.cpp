// tools/cmd_tune.cpp: `tclm tune-bench` and `tclm collect`, which run the Python modules
// python/tclm/tune_bench.py and collect.py in the Python that has TVM and the tclm package: tuning and
// measuring live in TVM's Python API, so the C++ tool only finds that Python and hands the arguments over.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

#include "cli_common.h"

namespace tclm::cli {

namespace {

/// $TCLM_PYTHON, else the project's virtual environment (scripts/setup-python.sh), else python3.
std::string find_python() {
  if (const char* env = std::getenv("TCLM_PYTHON"); env != nullptr && *env != '\0') return env;
  // TCLM_DEFAULT_DATA is <source>/data/records.
  const auto source = std::filesystem::path(TCLM_DEFAULT_DATA).parent_path().parent_path();
  const auto venv = source / ".venv-tvm" / "bin" / "python";
  std::error_code ec;
  if (std::filesystem::exists(venv, ec)) return venv.string();
  return "python3";
}

/// A command that runs `python -m <module> <arguments>` (every argument, --help included, is passed on).
Command add_python_command(CLI::App& app, const std::string& name, const std::string& module,
                           const std::string& description) {
  auto* cmd = app.add_subcommand(name, description + " (runs python -m " + module +
                                           " in $TCLM_PYTHON or .venv-tvm; tclm " + name + " --help lists its options)");
  cmd->allow_extras();
  cmd->prefix_command();
  cmd->set_help_flag();  // --help goes to the Python module too
  return Command{cmd, [cmd, name, module]() -> int {
                   const std::string python = find_python();
                   std::vector<std::string> args = {python, "-m", module};
                   for (const auto& a : cmd->remaining()) args.push_back(a);
                   std::vector<char*> argv;
                   for (auto& a : args) argv.push_back(a.data());
                   argv.push_back(nullptr);
                   std::fflush(stdout);
                   std::fflush(stderr);
                   execvp(argv[0], argv.data());
                   throw Error(name + ": cannot run '" + python + "' (" + std::strerror(errno) +
                               "); set TCLM_PYTHON to a Python with apache-tvm and the tclm package "
                               "(scripts/setup-python.sh)");
                 }};
}

}  // namespace

Command add_tune_bench_command(CLI::App& app) {
  return add_python_command(app, "tune-bench", "tclm.tune_bench",
                            "Tuning benchmark on this CPU: MetaSchedule with TVM's XGBoost model, with tclm and with "
                            "random scores; best latency against measurements and wall time");
}

Command add_collect_command(CLI::App& app) {
  return add_python_command(app, "collect", "tclm.collect",
                            "Collect measurements on this machine: TVM samples candidates, RDU picks --budget of "
                            "them, TVM's local builder/runner measures them into MetaSchedule databases (resumable)");
}

}  // namespace tclm::cli
