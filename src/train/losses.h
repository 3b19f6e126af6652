// train/losses.h: ranking and regression losses over groups of programs of one task.
//
// Inputs are [T, G]: T groups (rows), each holding up to G programs of ONE task; `mask` marks real
// entries (1) and padding (0). Labels are normalized throughputs in (0, 1].
#pragma once

#include <torch/torch.h>

namespace tclm {

/// LambdaRank (Burges 2010; the TenSet/TLP form, reference-notes §4): per row, rank the predictions,
/// gains G = (2^y - 1) / maxDCG, discounts D = log2(1 + rank), pair weights |1/D_i - 1/D_j| |G_i - G_j|
/// (no gradient), loss = sum over pairs with y_i > y_j of w_ij * log2(1 + exp(-(s_i - s_j))).
/// Returns the mean over rows that have at least one pair; *normalizer (if given) = the number of such
/// rows, so that sums over parts of a batch can be combined (data-parallel training).
torch::Tensor lambdarank_loss(const torch::Tensor& scores, const torch::Tensor& labels, const torch::Tensor& mask,
                              double* normalizer = nullptr);

/// Listwise distillation (ListNet-style, Cao et al. 2007): per row, both score vectors are standardized
/// over the real entries (z = (s - mean) / std: a ranking model's scores have no fixed scale or offset,
/// and raw scores of a few tenths make the softmax nearly uniform and the loss vanish), then
/// KL(softmax(z_teacher / T) || softmax(z_student / T)), times T^2 (Hinton et al. 2015). The teacher
/// gets no gradient. Mean over rows with >= 2 real entries; 0 when the student's scores are an affine image
/// (positive scale) of the teacher's within every row. *normalizer (if given) = the number of rows with
/// >= 2 real entries.
/// Used by continual knowledge distillation (TCL-SPEC §7) to pull one model's ranking towards another's.
torch::Tensor listwise_distill_loss(const torch::Tensor& student, const torch::Tensor& teacher,
                                    const torch::Tensor& mask, double temperature = 1.0,
                                    double* normalizer = nullptr);

/// Mean squared error over real entries; *normalizer (if given) = the number of real entries.
torch::Tensor mse_loss(const torch::Tensor& scores, const torch::Tensor& labels, const torch::Tensor& mask,
                       double* normalizer = nullptr);

}  // namespace tclm
