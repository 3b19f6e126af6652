// model/xgboost_model.cpp: the XGBoost rank:pairwise baseline through XGBoost's C API.
#include "model/xgboost_model.h"

#include <xgboost/c_api.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fmt/format.h>
#include <thread>

#include "tclm/error.h"
#include "tclm/evaluation.h"
#include "tclm/selection.h"

namespace tclm {
namespace {

void check(int rc, const char* what) {
  if (rc != 0) throw Error(fmt::format("XGBoost: {} failed: {}", what, XGBGetLastError()));
}

/// A DMatrix that frees itself.
struct DMatrix {
  DMatrixHandle h = nullptr;
  DMatrix(const std::vector<float>& rows, size_t n) {
    check(XGDMatrixCreateFromMat(rows.data(), n, kPooledFeatureDim, NAN, &h), "XGDMatrixCreateFromMat");
  }
  ~DMatrix() {
    if (h) XGDMatrixFree(h);
  }
  DMatrix(const DMatrix&) = delete;
  DMatrix& operator=(const DMatrix&) = delete;
};

std::vector<float> predict_rows(BoosterHandle booster, const std::vector<float>& rows, int iteration_end) {
  const size_t n = rows.size() / kPooledFeatureDim;
  if (n == 0) return {};
  DMatrix dm(rows, n);
  const std::string config = fmt::format(
      "{{\"type\": 0, \"training\": false, \"iteration_begin\": 0, \"iteration_end\": {}, \"strict_shape\": false}}",
      iteration_end);
  const bst_ulong* shape = nullptr;
  bst_ulong dim = 0;
  const float* out = nullptr;
  check(XGBoosterPredictFromDMatrix(booster, dm.h, config.c_str(), &shape, &dim, &out), "predict");
  return std::vector<float>(out, out + n);
}

}  // namespace

XgbCostModel::XgbCostModel() = default;
XgbCostModel::~XgbCostModel() {
  if (booster_) XGBoosterFree(booster_);
}
XgbCostModel::XgbCostModel(XgbCostModel&& o) noexcept : booster_(o.booster_) { o.booster_ = nullptr; }
XgbCostModel& XgbCostModel::operator=(XgbCostModel&& o) noexcept {
  if (this != &o) {
    if (booster_) XGBoosterFree(booster_);
    booster_ = o.booster_;
    o.booster_ = nullptr;
  }
  return *this;
}

std::vector<float> XgbCostModel::predict_pooled(const std::vector<float>& pooled) const {
  if (!booster_) throw Error("XgbCostModel: no trained booster");
  return predict_rows(booster_, pooled, 0);
}

std::vector<float> XgbCostModel::predict(const Dataset& data, const std::vector<uint32_t>& programs) const {
  std::vector<float> pooled;
  data.pooled_features(programs, &pooled);
  return predict_pooled(pooled);
}

std::string XgbCostModel::serialize() const {
  if (!booster_) return {};
  bst_ulong len = 0;
  const char* buf = nullptr;
  check(XGBoosterSaveModelToBuffer(booster_, "{\"format\": \"ubj\"}", &len, &buf), "XGBoosterSaveModelToBuffer");
  return std::string(buf, len);
}

int XgbCostModel::rounds() const {
  int r = 0;
  if (booster_) check(XGBoosterBoostedRounds(booster_, &r), "XGBoosterBoostedRounds");
  return r;
}

struct XgbTrainer {
  static XgbTrainResult train(const Dataset& data, const Split& split, const XgbOptions& o) {
    using Clock = std::chrono::steady_clock;
    const auto t0 = Clock::now();
    // One query group per training task (tasks with < 2 programs have no pair to rank).
    std::vector<uint32_t> programs;
    std::vector<unsigned> groups;
    for (uint32_t t : split.train) {
      const auto& p = data.tasks()[t].programs;
      if (p.size() < 2) continue;
      programs.insert(programs.end(), p.begin(), p.end());
      groups.push_back(static_cast<unsigned>(p.size()));
    }
    if (programs.empty()) {
      throw Error("XGBoost: no training task has two programs to rank; give more records per workload (-d) or lower "
                  "--test-fraction");
    }
    std::vector<float> rows, labels(programs.size());
    data.pooled_features(programs, &rows);
    for (size_t i = 0; i < programs.size(); ++i) labels[i] = data.label(programs[i]);
    DMatrix train(rows, programs.size());
    check(XGDMatrixSetFloatInfo(train.h, "label", labels.data(), labels.size()), "set labels");
    check(XGDMatrixSetUIntInfo(train.h, "group", groups.data(), groups.size()), "set groups");

    XgbTrainResult result;
    BoosterHandle booster = nullptr;
    check(XGBoosterCreate(&train.h, 1, &booster), "XGBoosterCreate");
    result.model.booster_ = booster;  // owned from here on
    const int threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const std::vector<std::pair<std::string, std::string>> params = {
        {"objective", "rank:pairwise"},       {"max_depth", std::to_string(o.max_depth)},
        {"eta", fmt::format("{}", o.eta)},     {"gamma", fmt::format("{}", o.gamma)},
        {"min_child_weight", fmt::format("{}", o.min_child_weight)},
        {"seed", std::to_string(o.seed)},      {"nthread", std::to_string(threads)},
        {"tree_method", "hist"},               {"verbosity", "0"}};
    for (const auto& [k, v] : params) check(XGBoosterSetParam(booster, k.c_str(), v.c_str()), "XGBoosterSetParam");

    const std::vector<uint32_t>& valid = split.valid.empty() ? split.train : split.valid;
    EpochLog kept;                         // the validation figures of the kept round count
    result.best_valid_top1 = -1;
    for (int round = 0; round < o.max_rounds; ++round) {
      check(XGBoosterUpdateOneIter(booster, round, train.h), "XGBoosterUpdateOneIter");
      const int done = round + 1;
      if (done % o.eval_every != 0 && done != o.max_rounds) continue;
      auto reports = evaluate_rankings(data, valid, [&](const std::vector<uint32_t>& p) {
        std::vector<float> r;
        data.pooled_features(p, &r);
        return predict_rows(booster, r, done);
      });
      const double top1 = reports.back().top1.task_mean, pairwise = reports.back().pairwise;
      EpochLog e;
      e.epoch = done;
      e.valid_top1 = top1;
      e.valid_top5 = reports.back().top5.task_mean;
      e.valid_pairwise = pairwise;
      const bool better = result.best_rounds == 0 || better_epoch(o.select, e, kept);
      if (better) {
        kept = e;
        result.best_valid_top1 = top1;
        result.best_rounds = done;
      }
      if (o.progress) {
        std::fprintf(stderr, "xgboost round %4d  valid top-1 %.4f  pairwise %.4f%s\n", done, top1, pairwise,
                     better ? "  *" : "");
      }
    }
    // Keep the best round count.
    if (result.best_rounds < result.model.rounds()) {
      BoosterHandle sliced = nullptr;
      check(XGBoosterSlice(booster, 0, result.best_rounds, 1, &sliced), "XGBoosterSlice");
      XGBoosterFree(booster);
      result.model.booster_ = sliced;
    }
    result.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    return result;
  }
};

XgbTrainResult train_xgboost(const Dataset& data, const Split& split, const XgbOptions& options) {
  if (options.max_rounds < 1 || options.eval_every < 1) throw Error("XGBoost: rounds and eval_every must be >= 1");
  return XgbTrainer::train(data, split, options);
}

}  // namespace tclm
