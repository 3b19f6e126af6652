// tools/cmd_tune.cpp: `tclm tune`, `tclm tune-bench` and `tclm collect`, which run the Python modules
// python/tclm/tune.py, tune_bench.py and collect.py in a Python that has TVM and the tclm package:
// tuning and measuring live in TVM's Python API, so the C++ tool only finds that Python and hands the
// arguments over.
//
// Which Python (the same order in `tclm tune-bench --help`, lookup_help):
//   1. $TCLM_PYTHON, when set (an error when it cannot import tclm: it is never passed over);
//   2. for a tclm built from a checkout (TCLM_SOURCE_DIR, defined by CMake), that checkout's venv:
//      .venv-tvm (scripts/setup-python.sh), or .venv-ansor (scripts/setup-ansor.sh) for Ansor
//      (`--scheduler ansor`; `tclm tune`'s default), when it exists and imports the command's module;
//   3. python3 on PATH, when it imports tclm (an installed tclm next to a pip-installed package).
// When none does, the command (and its --help) says so and what to run, instead of a Python traceback.
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "cli_common.h"

namespace tclm::cli {

namespace {

/// The lookup order, for --help. `ansor`: the command has `--scheduler ansor` (.venv-ansor).
std::string lookup_help(bool ansor) {
  return std::string("Python lookup: (1) $TCLM_PYTHON if set; (2) for a tclm built from a checkout, the checkout's "
                     ".venv-tvm") +
         (ansor ? " (.venv-ansor with --scheduler ansor)" : "") +
         " if it exists and can import the command's module; (3) python3 on PATH if it can.";
}

/// Whether the arguments ask for Ansor, which lives in another venv (TVM 0.19) than MetaSchedule
/// (apache-tvm): the last `--scheduler X` / `--scheduler=X` decides (as argparse takes the last one);
/// without one, the command's default.
bool wants_ansor(const std::vector<std::string>& args, bool default_ansor) {
  bool ansor = default_ansor;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].starts_with("--scheduler=")) ansor = args[i] == "--scheduler=ansor";
    if (args[i] == "--scheduler" && i + 1 < args.size()) ansor = args[i + 1] == "ansor";
  }
  return ansor;
}

bool wants_help(const std::vector<std::string>& args) {
  for (const auto& a : args) {
    if (a == "-h" || a == "--help") return true;
  }
  return false;
}

const char* const kCannotRun = "cannot run it: ";

/// Runs `python -c "import <module>"` with stdout discarded; "" when it works, else why not (the last
/// line of its stderr, or the exec/exit failure). The command's own module, not only the package: a
/// Python whose tclm imports but whose tclm.collect cannot (no TVM, numpy, an older tclm) would
/// otherwise end `--help` in a traceback.
std::string import_fails(const std::string& python, const std::string& module) {
  int pipefd[2];
  if (pipe(pipefd) != 0) return std::string("pipe: ") + std::strerror(errno);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(pipefd[0]);
    close(pipefd[1]);
    return std::string("fork: ") + std::strerror(errno);
  }
  if (pid == 0) {
    const int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      dup2(devnull, STDIN_FILENO);
      dup2(devnull, STDOUT_FILENO);
    }
    dup2(pipefd[1], STDERR_FILENO);
    close(pipefd[0]);
    close(pipefd[1]);
    const std::string code = "import " + module;
    execlp(python.c_str(), python.c_str(), "-c", code.c_str(), static_cast<char*>(nullptr));
    std::fprintf(stderr, "%s%s\n", kCannotRun, std::strerror(errno));
    _exit(127);
  }
  close(pipefd[1]);
  std::string err;
  std::array<char, 4096> buf{};
  for (;;) {
    const ssize_t n = read(pipefd[0], buf.data(), buf.size());
    if (n > 0) {
      err.append(buf.data(), static_cast<size_t>(n));
      if (err.size() > 65536) err.erase(0, err.size() - 65536);
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(pipefd[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  while (!err.empty() && (err.back() == '\n' || err.back() == '\r' || err.back() == ' ')) err.pop_back();
  if (const auto nl = err.rfind('\n'); nl != std::string::npos) err.erase(0, nl + 1);
  if (err.starts_with(kCannotRun)) return err;
  if (err.empty()) err = WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status)) : "killed by a signal";
  return "cannot import " + module + ": " + err;
}

/// The Python found, how it was found, and what was tried before.
struct PythonChoice {
  std::string python;  // empty: none works
  std::string how;
  std::vector<std::string> tried;
};

PythonChoice find_python(bool ansor, const std::string& module) {
  PythonChoice c;
  if (const char* env = std::getenv("TCLM_PYTHON"); env != nullptr && *env != '\0') {
    if (const std::string why = import_fails(env, module); !why.empty()) {
      throw Error(std::string("TCLM_PYTHON=") + env + ": " + why +
                  " (set TCLM_PYTHON to a Python with TVM and the tclm package, e.g. .venv-tvm/bin/python from "
                  "scripts/setup-python.sh or .venv-ansor/bin/python from scripts/setup-ansor.sh, or unset it)");
    }
    c.python = env;
    c.how = "$TCLM_PYTHON";
    return c;
  }
  c.tried.push_back("$TCLM_PYTHON (unset)");
#ifdef TCLM_SOURCE_DIR
  {
    const auto venv = std::filesystem::path(TCLM_SOURCE_DIR) / (ansor ? ".venv-ansor" : ".venv-tvm") / "bin" / "python";
    std::error_code ec;
    if (!std::filesystem::exists(venv, ec)) {
      c.tried.push_back(venv.string() + " (missing)");
    } else if (const std::string why = import_fails(venv.string(), module); !why.empty()) {
      c.tried.push_back(venv.string() + " (" + why + ")");
    } else {
      c.python = venv.string();
      c.how = "the venv of the checkout this tclm was built from";
      return c;
    }
  }
#endif
  if (const std::string why = import_fails("python3", module); !why.empty()) {
    c.tried.push_back("python3 on PATH (" + why + ")");
  } else {
    c.python = "python3";
    c.how = "python3 on PATH";
  }
  return c;
}

std::string not_found_message(const std::string& name, bool ansor, const PythonChoice& c) {
  std::string tried;
  for (const auto& t : c.tried) tried += "\n  " + t;
  const std::string venv = ansor ? ".venv-ansor" : ".venv-tvm";
  return name + ": no Python with the tclm package found; tried:" + tried + "\nIn a tclm checkout, run " +
         (ansor ? "scripts/setup-ansor.sh (TVM 0.19 with Ansor, makes .venv-ansor)"
                : "scripts/setup-python.sh (apache-tvm and the tclm package, makes .venv-tvm)") +
         ", then run this command again, or set TCLM_PYTHON to such a Python (e.g. " + venv + "/bin/python).";
}

/// A command that runs `python -m <module> <arguments>` (every argument, --help included, is passed on).
/// `ansor`: the module has `--scheduler ansor`, which runs in .venv-ansor; `default_ansor`: it is the
/// module's default scheduler.
Command add_python_command(CLI::App& app, const std::string& name, const std::string& module,
                           const std::string& description, bool ansor, bool default_ansor = false) {
  auto* cmd = app.add_subcommand(name, description + " (runs python -m " + module + "; " + lookup_help(ansor) +
                                           " tclm " + name + " --help lists its options)");
  cmd->allow_extras();
  cmd->prefix_command();
  cmd->set_help_flag();  // --help goes to the Python module too
  return Command{cmd, [cmd, name, module, ansor, default_ansor]() -> int {
                   const std::vector<std::string> rest = cmd->remaining();
                   const bool use_ansor = ansor && wants_ansor(rest, default_ansor);
                   const bool help = wants_help(rest);
                   if (help) {
                     std::printf("tclm %s runs python -m %s with these arguments.\n%s\n", name.c_str(), module.c_str(),
                                 lookup_help(ansor).c_str());
                     if (ansor)
                       std::printf("With --scheduler ansor%s, $TCLM_PYTHON must be a Python with TVM 0.19 (Ansor).\n",
                                   default_ansor ? " (the default)" : "");
                   }
                   PythonChoice choice;
                   try {
                     choice = find_python(use_ansor, module);
                   } catch (const Error& e) {
                     if (!help) throw;
                     std::printf("\n%s\n", e.what());
                     return 0;
                   }
                   if (help) {
                     if (choice.python.empty()) {
                       std::printf("\n%s\n", not_found_message("tclm " + name, use_ansor, choice).c_str());
                       return 0;
                     }
                     std::printf("Python: %s (%s). Its options:\n\n", choice.python.c_str(), choice.how.c_str());
                   }
                   if (choice.python.empty()) throw Error(not_found_message(name, use_ansor, choice));
                   std::vector<std::string> args = {choice.python, "-m", module};
                   for (const auto& a : rest) args.push_back(a);
                   std::vector<char*> argv;
                   for (auto& a : args) argv.push_back(a.data());
                   argv.push_back(nullptr);
                   std::fflush(stdout);
                   std::fflush(stderr);
                   execvp(argv[0], argv.data());
                   throw Error(name + ": cannot run '" + choice.python + "' (" + std::strerror(errno) +
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
                            "Collect measurements on this machine: TVM samples candidate programs of operators or of "
                            "whole networks' tasks (--scheduler ansor --networks), RDU picks --budget of them, TVM's "
                            "local builder/runner measures them into MetaSchedule databases or Ansor record files "
                            "(resumable)",
                            true);
}

Command add_tune_command(CLI::App& app) {
  return add_python_command(app, "tune", "tclm.tune",
                            "Tune a whole network on this CPU with a tclm model: Ansor's task scheduler (default; "
                            "TVM 0.19) or MetaSchedule (--scheduler metaschedule; TVM 0.26, Relax), then compile it "
                            "with the best schedules and measure its end-to-end latency (resumable)",
                            true, true);
}

}  // namespace tclm::cli
