// tools/plot.h: PNG plots of the CSV files the commands write, drawn by tools/plot_results.py with
// matplotlib (Debian python3-matplotlib). Plots are a convenience: when Python or matplotlib is
// missing the command still succeeds and prints how to draw the plot later.
#pragma once

#include <string>

namespace tclm::cli {

/// Runs `python3 plot_results.py KIND CSV PNG`. Returns true when the PNG was written; otherwise prints
/// a note with the command to run on stderr. The interpreter is $TCLM_PYTHON, else /usr/bin/python3
/// (Debian's, which sees python3-matplotlib), else python3; the script is $TCLM_PLOT_SCRIPT, else the
/// source tree's tools/plot_results.py.
bool plot_csv(const std::string& kind, const std::string& csv, const std::string& png);

}  // namespace tclm::cli
