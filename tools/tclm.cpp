// tools/tclm.cpp: the tclm command-line tool.
//
//   tclm info     dataset statistics per platform (tools/cmd_info.cpp)
//   tclm train    train a cost model, evaluate it on held-out tasks (tools/cmd_train.cpp)
//   tclm eval     evaluate a trained model on the held-out tasks of a dataset (tools/cmd_eval.cpp)
//   tclm predict  score the candidates of a file, JSON or CSV out (tools/cmd_predict.cpp)
//   tclm export   check a checkpoint and write it as a deployable weights file (tools/cmd_train.cpp)
//   tclm compare  Mamba against the baselines (tools/cmd_compare.cpp)
//   tclm sweep    Mamba hyper-parameter study (tools/cmd_compare.cpp)
//   tclm sample   choose which candidate programs to measure (tools/cmd_sample.cpp)
//   tclm study-sampling  samplers x rates x seeds (tools/cmd_sample.cpp)
//   tclm transfer the TCL pipeline across platforms (tools/cmd_transfer.cpp)
// Exit codes (docs/reliability.md): 0 success; 1 an input, file or option was refused or an operation
// failed (the message names the file, line or option and says what to do); 2 a usage error on the
// command line (unknown command or option, a value out of range); 3 an internal error (a bug).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <new>
#include <string>
#include <torch/torch.h>

#include "cli_common.h"
#include "common/runtime_env.h"
#include "tclm/error.h"
#include "tclm/feature.h"

using namespace tclm;
using namespace tclm::cli;

namespace {
constexpr int kExitOk = 0, kExitError = 1, kExitUsage = 2, kExitInternal = 3;

/// Runs the parsed command; maps what it throws to the documented exit codes.
int run_parsed(const std::vector<Command>& commands) {
  try {
    for (const Command& c : commands) {
      if (c.app->parsed()) return c.run();
    }
    throw InternalError("no command was parsed");
  } catch (const InternalError& e) {
    std::fprintf(stderr, "tclm: internal error: %s\nThis is a bug in tclm; please report it with the command line.\n",
                 e.what());
    return kExitInternal;
  } catch (const Error& e) {
    std::fprintf(stderr, "tclm: error: %s\n", e.what());
    return kExitError;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "tclm: error: out of memory; use fewer or smaller inputs (or a smaller --batch-size, "
                         "--d-model, --expand)\n");
    return kExitError;
  } catch (const c10::Error& e) {
    // libtorch reports its allocator's failure as c10::Error, not std::bad_alloc.
    const std::string what = e.what_without_backtrace();
    if (what.find("can't allocate memory") != std::string::npos) {
      std::fprintf(stderr, "tclm: error: out of memory in libtorch (%s); use a smaller --batch-size, --d-model or "
                           "--expand, or fewer inputs\n", what.c_str());
      return kExitError;
    }
    std::fprintf(stderr, "tclm: internal error: %s\nThis is a bug in tclm (or libtorch); please report it with the "
                         "command line.\n", what.c_str());
    return kExitInternal;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tclm: internal error: %s\nThis is a bug in tclm (or a library it calls); please report it "
                         "with the command line.\n", e.what());
    return kExitInternal;
  }
}
/// What was printed must have reached standard output: a full disk or a closed pipe is an error, not
/// exit 0 (with SIGPIPE ignored, a closed pipe shows here as EPIPE).
int finish_stdout(int rc) {
  errno = 0;
  std::cout.flush();
  if ((std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout) && rc == kExitOk) {
    const int e = errno != 0 ? errno : EIO;
    std::fprintf(stderr, "tclm: error: cannot write to standard output: %s\n", std::strerror(e));
    return rc == kExitOk ? kExitError : rc;
  }
  return rc;
}
}  // namespace

int main(int argc, char** argv) {
  // OMP_WAIT_POLICY=PASSIVE and, where OpenBLAS fell back to kernels older than this CPU, the
  // OPENBLAS_CORETYPE of its own kernels: both are read when the libraries load, before main, so the
  // process re-executes itself once (common/runtime_env.h; a user's own setting wins).
  tclm::reexec_with_runtime_env(argv);
  CLI::App app{
      "tclm: a learned, cross-hardware cost model for tensor programs (TCL).\n"
      "Reads Ansor measure records, trains a Mamba model on transform-step sequences and ranks candidate\n"
      "programs of a task. Run 'tclm COMMAND --help' for each command."};
  app.require_subcommand(1);
  app.footer("Exit codes: 0 success; 1 an input, file or option was refused or an operation failed (the message\n"
             "names the file, line or option); 2 a usage error on the command line; 3 an internal error (a bug).");
  app.set_version_flag("--version", "tclm 0.1.0 (feature encoding v" + std::to_string(kFeatureVersion) + ")");

  // Registration order is the order of 'tclm --help' and of the unknown-command message.
  const std::vector<Command> commands = {
      add_info_command(app),    add_train_command(app),          add_eval_command(app),
      add_predict_command(app), add_export_command(app),         add_compare_command(app),
      add_sweep_command(app),   add_sample_command(app),         add_study_sampling_command(app),
      add_transfer_command(app), add_tune_bench_command(app),    add_collect_command(app),
      add_tune_command(app)};
  harden_options(app);  // every float option finite, --threads capped (cli_common.h)

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const auto subs = app.get_subcommands({});
    if (argc > 1 && argv[1][0] != '-' &&
        std::none_of(subs.begin(), subs.end(), [&](const CLI::App* sub) { return sub->check_name(argv[1]); })) {
      std::string names;
      for (const CLI::App* sub : subs) names += (names.empty() ? "" : ", ") + sub->get_name();
      std::fprintf(stderr, "tclm: unknown command '%s'; commands: %s (tclm --help)\n", argv[1], names.c_str());
      return kExitUsage;
    }
    const int rc = app.exit(e);  // prints the help, the version or the usage error
    return finish_stdout(rc == 0 ? kExitOk : kExitUsage);
  }

  const int rc = run_parsed(commands);
  return finish_stdout(rc);
}
