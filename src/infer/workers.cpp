// infer/workers.cpp: starting and joining a call's worker threads (infer/workers.h).
#include "infer/workers.h"

#include <exception>
#include <mutex>
#include <system_error>

namespace tclm::infer {

void on_threads(int n_threads, const std::function<void(int)>& fn) {
  std::exception_ptr error;
  std::mutex error_mu;
  auto guarded = [&](int w) {
    try {
      fn(w);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mu);
      if (!error) error = std::current_exception();
    }
  };
  if (n_threads == 1) {
    guarded(0);
  } else {
    std::vector<std::thread> pool;
    pool.reserve(static_cast<size_t>(n_threads - 1));
    try {
      for (int i = 1; i < n_threads; ++i) pool.emplace_back(guarded, i);
    } catch (const std::system_error&) {
      // No more threads available: the ones started and this thread share the work.
    }
    guarded(0);
    for (auto& t : pool) t.join();
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace tclm::infer
