// common/timer.h: wall-clock seconds for progress lines and logs.
#pragma once

#include <chrono>

namespace tclm {

using Clock = std::chrono::steady_clock;

/// Seconds elapsed since t0.
inline double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace tclm
