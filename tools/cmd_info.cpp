// tools/cmd_info.cpp: `tclm info`, dataset statistics per platform.
#include <iostream>
#include <memory>
#include <unistd.h>

#include "cli_common.h"

namespace tclm::cli {

Command add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Dataset statistics per platform: records, programs, tasks, errors, skipped lines");
  struct Options {
    DataOptions data;
    std::string json_path;
  };
  cmd->option_defaults()->always_capture_default();
  auto o = std::make_shared<Options>();
  o->data.add_to(cmd, false);
  cmd->add_option("--json", o->json_path, "Also write the statistics as JSON to this file ('-' = stdout only JSON)");
  return Command{cmd, [o]() {
                   check_outputs(data_inputs(o->data.sources), {{"--json", o->json_path}});
                   const DataSummary d = o->data.summarize(isatty(fileno(stderr)));  // streaming: memory O(tasks)
                   if (o->json_path == "-") {
                     std::cout << info_json(d);
                     return 0;
                   }
                   std::cout << info_text(d);
                   if (!o->json_path.empty()) write_output(o->json_path, info_json(d));
                   return 0;
                 }};
}

}  // namespace tclm::cli
