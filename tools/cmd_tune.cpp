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

/// Whether the arguments ask for Ansor (`--scheduler ansor` or `--scheduler=ansor`), which lives in
/// another venv (TVM 0.19) than MetaSchedule (apache-tvm).
bool wants_ansor(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--scheduler=ansor" || (args[i] == "--scheduler" && i + 1 < args.size() && args[i + 1] == "ansor"))
      return true;
  }
  return false;
}

/// $TCLM_PYTHON, else the project's virtual environment (.venv-tvm from scripts/setup-python.sh, or
/// .venv-ansor from scripts/setup-ansor.sh for Ansor), else python3.
std::string find_python(bool ansor) {
  if (const char* env = std::getenv("TCLM_PYTHON"); env != nullptr && *env != '\0') return env;
  // TCLM_DEFAULT_DATA is <source>/data/records.
  const auto source = std::filesystem::path(TCLM_DEFAULT_DATA).parent_path().parent_path();
  const auto venv = source / (ansor ? ".venv-ansor" : ".venv-tvm") / "bin" / "python";
  std::error_code ec;
  if (std::filesystem::exists(venv, ec)) return venv.string();
  return "python3";
}

/// A command that runs `python -m <module> <arguments>` (every argument, --help included, is passed on).
/// `ansor`: the module has `--scheduler ansor`, which runs in .venv-ansor.
Command add_python_command(CLI::App& app, const std::string& name, const std::string& module,
                           const std::string& description, bool ansor) {
  auto* cmd = app.add_subcommand(name, description + " (runs python -m " + module + " in $TCLM_PYTHON, or .venv-tvm" +
                                           (ansor ? " (.venv-ansor with --scheduler ansor)" : "") + "; tclm " + name +
                                           " --help lists its options)");
  cmd->allow_extras();
  cmd->prefix_command();
  cmd->set_help_flag();  // --help goes to the Python module too
  return Command{cmd, [cmd, name, module, ansor]() -> int {
                   const std::vector<std::string> rest = cmd->remaining();
                   const std::string python = find_python(ansor && wants_ansor(rest));
                   std::vector<std::string> args = {python, "-m", module};
                   for (const auto& a : rest) args.push_back(a);
                   std::vector<char*> argv;
                   for (auto& a : args) argv.push_back(a.data());
                   argv.push_back(nullptr);
                   std::fflush(stdout);
                   std::fflush(stderr);
                   execvp(argv[0], argv.data());
                   throw Error(name + ": cannot run '" + python + "' (" + std::strerror(errno) +
                               "); set TCLM_PYTHON to a Python with TVM and the tclm package "
                               "(scripts/setup-python.sh, scripts/setup-ansor.sh for Ansor)");
                 }};
}

}  // namespace

Command add_tune_bench_command(CLI::App& app) {
  return add_python_command(app, "tune-bench", "tclm.tune_bench",
                            "Tuning benchmark on this CPU: MetaSchedule (or Ansor, --scheduler ansor) with TVM's XGBoost "
                            "model, with tclm and with random scores; best latency against measurements and wall time",
                            true);
}

Command add_collect_command(CLI::App& app) {
  return add_python_command(app, "collect", "tclm.collect",
                            "Collect measurements on this machine: TVM samples candidates, RDU picks --budget of "
                            "them, TVM's local builder/runner measures them into MetaSchedule databases (resumable)",
                            false);
}

}  // namespace tclm::cli
