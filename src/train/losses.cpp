#include "train/losses.h"

#include <cmath>

namespace tclm {

torch::Tensor lambdarank_loss(const torch::Tensor& scores, const torch::Tensor& labels, const torch::Tensor& mask,
                              double* normalizer) {
  const auto G = scores.size(1);
  torch::Tensor w;
  {
    torch::NoGradGuard no_grad;
    auto neg_inf = torch::full_like(scores, -1e30);
    auto s = torch::where(mask > 0, scores.detach(), neg_inf);
    // rank (1-based) of every entry by predicted score, descending; padding sorts last
    auto order = std::get<1>(s.sort(/*dim=*/1, /*descending=*/true));
    auto pos = torch::arange(1, G + 1, scores.options()).expand_as(scores).contiguous();
    auto rank = torch::empty_like(scores).scatter_(1, order, pos);
    auto discount = torch::log2(1.0 + rank);
    auto gain = (torch::pow(2.0, labels) - 1.0) * mask;
    // ideal DCG: gains sorted descending over ideal positions
    auto ideal = std::get<0>(gain.sort(1, true));
    auto max_dcg = (ideal / torch::log2(1.0 + pos)).sum(1, true).clamp_min(1e-12);
    auto g = gain / max_dcg;
    auto inv_d = mask / discount;
    w = (inv_d.unsqueeze(2) - inv_d.unsqueeze(1)).abs() * (g.unsqueeze(2) - g.unsqueeze(1)).abs();
    auto pair = (labels.unsqueeze(2) > labels.unsqueeze(1)) & (mask.unsqueeze(2) > 0) & (mask.unsqueeze(1) > 0);
    w = w * pair.to(scores.dtype());
  }
  auto diff = scores.unsqueeze(2) - scores.unsqueeze(1);  // s_i - s_j
  auto pair_loss = torch::softplus(-diff) / std::log(2.0);  // -log2(sigmoid(s_i - s_j))
  auto per_row = (w * pair_loss).sum({1, 2});
  auto has_pairs = (w.sum({1, 2}) > 0).to(scores.dtype());
  const auto rows = has_pairs.sum();
  if (normalizer != nullptr) *normalizer = rows.item<double>();
  return per_row.sum() / rows.clamp_min(1.0);
}

namespace {

/// Scores standardized within each row over the real entries: (s - mean) / std (std floored at 1e-6).
torch::Tensor standardize_rows(const torch::Tensor& s, const torch::Tensor& real) {
  const auto m = real.to(s.dtype());
  const auto n = m.sum(1, /*keepdim=*/true).clamp_min(1.0);
  const auto mean = (s * m).sum(1, true) / n;
  const auto var = ((s - mean).pow(2) * m).sum(1, true) / n;
  return (s - mean) / (var + 1e-12).sqrt().clamp_min(1e-6);
}

}  // namespace

torch::Tensor listwise_distill_loss(const torch::Tensor& student, const torch::Tensor& teacher,
                                    const torch::Tensor& mask, double temperature, double* normalizer) {
  const auto real = mask > 0;
  const auto pad = real.logical_not();
  const auto tz = standardize_rows(teacher.detach(), real);
  const auto sz = standardize_rows(student, real);
  const auto t = torch::log_softmax((tz / temperature).masked_fill(pad, -1e30), 1);
  const auto s = torch::log_softmax((sz / temperature).masked_fill(pad, -1e30), 1);
  const auto per_entry = (t.exp() * (t - s)).masked_fill(pad, 0.0);
  const auto rows = (real.sum(1) >= 2).to(student.dtype());
  if (normalizer != nullptr) *normalizer = rows.sum().item<double>();
  return (per_entry.sum(1) * rows).sum() / rows.sum().clamp_min(1.0) * (temperature * temperature);
}

torch::Tensor mse_loss(const torch::Tensor& scores, const torch::Tensor& labels, const torch::Tensor& mask,
                       double* normalizer) {
  auto d = (scores - labels) * mask;
  const auto n = mask.sum();
  if (normalizer != nullptr) *normalizer = n.item<double>();
  return (d * d).sum() / n.clamp_min(1.0);
}

}  // namespace tclm
