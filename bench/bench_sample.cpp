// bench/bench_sample.cpp: wall time of the active samplers (tclm/sample.h) on a big synthetic pool.
//
// The pool imitates pooled program features (kPooledFeatureDim = 111 floats): programs of a task
// form a few tight groups (schedules that differ in one knob), tasks are far apart, some dims are
// constant (unused feature slots), group sizes are skewed. Selects `fraction` of the pool with
//   rdu (cold start, and with uncertainty), random, uncertainty, rdu per task (tasks of equal size),
// and k-center / BALTO on a smaller pool (their cost grows with n * budget).
// Run:  build-sample/bench_sample [--n 1000000] [--fraction 0.1] [--tasks 1000] [--kcenter-n 100000]
//                                 [--threads 0] [--seed 0]
// Figures go to docs/sampler.md.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/runtime_env.h"
#include "tclm/error.h"
#include "tclm/feature.h"
#include "tclm/sample.h"

using namespace tclm;

namespace {

struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double normal() {  // Box-Muller
    const double u1 = std::max(uniform(), 1e-300), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
};

struct Pool {
  std::size_t n = 0, dim = 0;
  std::vector<float> x;
  std::vector<std::vector<uint32_t>> tasks;
};

// n points in `tasks` tasks of n / tasks programs; each task has 2..9 groups of skewed sizes.
Pool make_pool(std::size_t n, std::size_t dim, std::size_t n_tasks, uint64_t seed) {
  Pool p;
  p.n = n;
  p.dim = dim;
  p.x.resize(n * dim);
  p.tasks.resize(n_tasks);
  const std::size_t per_task = n / n_tasks;
  const std::size_t n_constant = dim / 10;  // unused feature slots
  unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> workers;
  for (unsigned w = 0; w < hw; ++w) {
    workers.emplace_back([&, w] {
      for (std::size_t t = w; t < n_tasks; t += hw) {
        Rng rng{seed * 1000003 + t};
        std::vector<double> task_centre(dim);
        for (auto& v : task_centre) v = 4.0 * rng.normal();
        const int groups = 2 + static_cast<int>(rng.next() % 8);
        std::vector<std::vector<double>> centre(groups, std::vector<double>(dim));
        std::vector<double> weight(groups), scale(groups);
        double wsum = 0;
        for (int g = 0; g < groups; ++g) {
          for (std::size_t j = 0; j < dim; ++j) centre[g][j] = task_centre[j] + rng.normal();
          weight[g] = std::pow(0.5, g);  // skewed group sizes
          wsum += weight[g];
          scale[g] = 0.1 + 0.2 * rng.uniform();
        }
        const std::size_t b = t * per_task, e = t + 1 == n_tasks ? n : b + per_task;
        for (std::size_t i = b; i < e; ++i) {
          double r = rng.uniform() * wsum;
          int g = 0;
          while (g + 1 < groups && r >= weight[g]) r -= weight[g++];
          float* row = &p.x[i * dim];
          for (std::size_t j = 0; j < dim; ++j) {
            row[j] = j < n_constant ? 1.0f
                                    : static_cast<float>(centre[g][j] + scale[g] * rng.normal());
          }
        }
      }
    });
  }
  for (auto& th : workers) th.join();
  for (std::size_t t = 0; t < n_tasks; ++t) {
    const std::size_t b = t * per_task, e = t + 1 == n_tasks ? n : b + per_task;
    for (std::size_t i = b; i < e; ++i) p.tasks[t].push_back(static_cast<uint32_t>(i));
  }
  return p;
}

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void row(const char* method, std::size_t pool, std::size_t picks, double secs, const char* note) {
  std::printf("%-26s %10zu %9zu %9.2f %12.0f  %s\n", method, pool, picks, secs,
              static_cast<double>(pool) / secs, note);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  tclm::reexec_with_runtime_env(argv);  // as the CLI (common/runtime_env.h)
  std::size_t n = 1000000, tasks = 1000, kc_n = 100000;
  double fraction = 0.1;
  int threads = 0;
  uint64_t seed = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const char* v = argv[i + 1];
    if (a == "--n") n = std::strtoull(v, nullptr, 10);
    else if (a == "--tasks") tasks = std::strtoull(v, nullptr, 10);
    else if (a == "--kcenter-n") kc_n = std::strtoull(v, nullptr, 10);
    else if (a == "--fraction") fraction = std::strtod(v, nullptr);
    else if (a == "--threads") threads = std::atoi(v);
    else if (a == "--seed") seed = std::strtoull(v, nullptr, 10);
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  const std::size_t dim = kPooledFeatureDim;
  try {
    double t0 = now();
    Pool p = make_pool(n, dim, tasks, seed);
    std::printf("pool: %zu points x %zu dims (%zu tasks), generated in %.1f s; %u hardware threads\n",
                n, dim, tasks, now() - t0, std::thread::hardware_concurrency());
    std::vector<float> unc(n);
    Rng r{seed + 17};
    for (auto& v : unc) v = static_cast<float>(r.uniform());
    const std::size_t budget = static_cast<std::size_t>(std::ceil(fraction * static_cast<double>(n)));
    std::printf("%-26s %10s %9s %9s %12s\n", "method", "pool", "picks", "seconds", "points/s");

    SamplerOptions o;
    o.threads = threads;
    o.seed = seed;
    SamplePool pool{p.x, dim, {}, {}, {}};
    char note[256];

    SampleReport rep;
    auto stages = [&] {
      std::snprintf(note, sizeof note,
                    "k=%d dims=%d | std %.1fs seed %.1fs kmeans %.1fs assign %.1fs select %.1fs",
                    rep.n_clusters, rep.used_dims, rep.seconds_standardize, rep.seconds_seed,
                    rep.seconds_kmeans, rep.seconds_assign, rep.seconds_select);
      return note;
    };
    t0 = now();
    auto picks = select_samples(pool, budget, o, &rep);
    row("rdu (cold: R+D)", n, picks.size(), now() - t0, stages());

    pool.uncertainty = unc;
    t0 = now();
    picks = select_samples(pool, budget, o, &rep);
    row("rdu (R+D+U)", n, picks.size(), now() - t0, stages());

    // a second round: the first round's picks are measured, pick another fraction
    pool.selected = picks;
    t0 = now();
    auto picks2 = select_samples(pool, budget, o, &rep);
    row("rdu (2nd round, R+D+U)", n, picks2.size(), now() - t0, stages());
    pool.selected = {};

    o.method = SampleMethod::kRandom;
    t0 = now();
    picks = select_samples(pool, budget, o);
    row("random", n, picks.size(), now() - t0, "");

    o.method = SampleMethod::kUncertainty;
    t0 = now();
    picks = select_samples(pool, budget, o);
    row("uncertainty", n, picks.size(), now() - t0, "");

    o.method = SampleMethod::kRdu;
    pool.uncertainty = {};
    t0 = now();
    auto per = select_per_task(pool, p.tasks, PerTaskOptions{fraction, 2}, o);
    double secs = now() - t0;
    std::size_t total = 0;
    for (const auto& v : per) total += v.size();
    std::snprintf(note, sizeof note, "%zu tasks of %zu", tasks, n / tasks);
    row("rdu per task (cold)", n, total, secs, note);

    o.method = SampleMethod::kRandom;
    t0 = now();
    per = select_per_task(pool, p.tasks, PerTaskOptions{fraction, 2}, o);
    secs = now() - t0;
    row("random per task", n, total, secs, note);

    // k-center and BALTO: O(n * budget * dim), on the first kc_n points
    kc_n = std::min(kc_n, n);
    const auto kc_budget =
        static_cast<std::size_t>(std::ceil(fraction * static_cast<double>(kc_n)));
    SamplePool small{std::span<const float>(p.x.data(), kc_n * dim), dim, {}, {}, {}};
    o.method = SampleMethod::kRdu;
    t0 = now();
    picks = select_samples(small, kc_budget, o);
    row("rdu (cold)", kc_n, picks.size(), now() - t0, "same pool as kcenter");
    o.method = SampleMethod::kKCenter;
    t0 = now();
    picks = select_samples(small, kc_budget, o);
    row("kcenter", kc_n, picks.size(), now() - t0, "");
    std::vector<float> score(kc_n);
    for (std::size_t i = 0; i < kc_n; ++i) score[i] = static_cast<float>(r.uniform());
    small.scores = score;
    o.method = SampleMethod::kBalto;
    t0 = now();
    picks = select_samples(small, kc_budget, o);
    row("balto", kc_n, picks.size(), now() - t0, "");
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
