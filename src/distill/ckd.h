// distill/ckd.h: continual knowledge distillation across platforms (TCL-SPEC §7; the seed's §2.3).
//
// Two models. The knowledge base (KB) is a compact Mamba cost model that holds what every learned
// platform taught; it is the model deployed for tuning, and its size never changes. The active
// column (AC) learns the current platform. Platforms are learned one after another, and nothing of
// an earlier platform but the KB, its EWC state (diagonal Fisher information and anchor parameters,
// the same shapes as the KB) and its training programs without their labels (EarlierPrograms) is
// carried: no earlier platform's measurements are needed later.
//
// Per platform t (learn_platform):
//   Phi   = the KB's ranking quality on t's (measured) training data: its top-1 score (task mean,
//           TCL-SPEC §5) above a random ranking's, as a fraction of the possible gain,
//           (top1_KB - top1_random) / (1 - top1_random), clamped to [phi_floor, 1]; 0 for the first
//           platform (the KB has learned nothing yet); 1 when dynamic_phi is off (ablation). It shrinks
//           the teacher term when the KB ranks t badly, so that bad prior knowledge cannot cause
//           negative transfer. (The top-1 score, not pairwise accuracy: the search needs the best
//           programs first, and on these logs a KB can rank the best program of most tasks first with
//           a pairwise accuracy near 0.5.)
//   CL    the AC starts from the KB's knowledge: its Mamba column is a copy of the KB, plus a lateral
//         connection from the frozen KB's pooled representation (zero-initialised, so AC = KB at the
//         start; Progress & Compress, Schwarz et al. 2018). Trained on t's data with
//           L = LambdaRank(AC) + beta * Phi_e * ListwiseKD(AC <- KB) + w * ListwiseKD_E(AC <- KB),
//           Phi_e = Phi * phi_decay^(epoch-1)
//         where _E is one batch per step of E, the earlier platforms' training programs of workloads t
//         has no task of (labels unused), and w = earlier_weight * min(1, |E| / batch_size): fewer
//         programs than a batch are all in every step's batch, and the scaling keeps each from weighing
//         more than one of t's programs in its full batch. The first two terms are on t's data.
//         The KB is frozen during CL, so the spec's EWC term (which acts on the KB) is zero here.
//   KD    the AC is frozen; the KB, starting from its own weights, is trained to match it:
//           L = ListwiseKD(KB <- AC) + w' * ListwiseKD_E'(KB <- AC) + lambda * sum_j F_j (theta_j - theta*_j)^2
//         the first term on t's candidate programs when they are given (CandidatePrograms: every program
//         of t's training tasks the measured budget was picked from, measured or not; no label is read),
//         else on its measured training programs (temperature 1: the AC's z-scored scores as they are).
//         Programs cost nothing to sample, only measurements do: on the pool the KB learns the AC's order
//         of the programs the budget left out (tclm transfer: the target's unmeasured programs, or
//         --candidates, the pool tclm collect writes). On the tuning split (3 orders, 3 seeds) the
//         target was level in each and the Platinum of Platinum -> cpu24 ended 0.046 higher (every
//         seed) than with KD on the measured programs; on the GPU orders' test split the target of
//         V100, MI50 -> K80 0.020 higher (every seed) and one earlier GPU of each order (the K80, the
//         MI50) 0.033-0.049 lower (docs/experiments/transfer.md).
//         E' is every earlier platform's training programs, of every workload, scaled like E (w'). The
//         AC teaches both terms: it learned t's programs from their labels and kept the earlier
//         platforms' order from the KB, and KD is to carry that whole function into the KB, not only
//         where t measured.
//   E and E'  Without E (w = 0) the AC ranks an earlier platform's new workloads worse than the KB did
//         before t, and only KD's start from the KB's weights holds them; with E the earlier platforms
//         ended 0.03 higher in both CPU orders of docs/transfer.md (tuning split, every seed; on the
//         test split the Platinum 0.046 higher in every seed and cpu24 level). CL leaves out of E the
//         workloads t has measured (Task::workload, however a log spells the key): there t's labels
//         say how to rank, and the old KB's order of the same workloads, learned on another platform,
//         held the new platform back in the GPU orders (one operator suite on three GPUs). So in the
//         GPU orders E is a few tasks (6-13 a phase, 230-613 programs), none where the new GPU measured
//         every workload of the earlier one, and w is scaled to a batch (w 0.22-0.60: the V100 ended
//         0.047 and 0.015 higher in the two GPU orders, tuning split, every seed). E' keeps them: its
//         teacher is the AC, which learned t's labels, so there is nothing to contradict, and the KB
//         learns the AC's order of the earlier GPUs' programs of the shared workloads too (74-154 tasks,
//         5,575-11,292 programs a phase at --source-fraction 0.1). On the tuning split of the two GPU
//         orders (3 seeds, paired with E' = E) the target was level in both (+0.004 +- 0.080, +0.026 +-
//         0.026), its KB no longer below its AC (KB - AC -0.028 -> -0.008 and -0.010 -> +0.022, every
//         seed of the second order), no earlier GPU behind; the test split, read once after that choice,
//         had V100, MI50 -> K80's target 0.033, its V100 0.021 and its MI50 0.051 lower (the last two
//         in every seed; docs/transfer.md). Each KD step of a source GPU's phase now also scores a
//         batch of up to batch_size earlier programs with both models and back-propagates it through
//         the KB. In the CPU orders (no workload shared) E' is E, and the phases are as they were,
//         digit for digit.
//         lambda is 0 by default: a pull towards the old KB's parameters (EWC), or towards its ranking
//         of the earlier platforms' programs in KD (a replay with the old KB as the teacher), kept the
//         KB 0.06-0.09 top-1 below the AC on the target.
//   EWC   after KD, the diagonal (empirical) Fisher information of the KB on t's data,
//         F_t = mean over ranking lists of (d LambdaRank_list / d theta)^2 (list_fisher below), is
//         accumulated: F <- fisher_gamma * F + F_t, and the anchors theta* become the KB's current
//         parameters (every phase, at lambda 0 too: a few seconds, and transfer.json reports its mean).
// Both phases: Adam, step decay x lr_gamma every lr_step epochs, batches of whole task groups of one
// platform, at least min_steps optimizer steps (more epochs on a small budget), the best epoch on the
// platform's validation tasks kept.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "model/mamba.h"
#include "train/batches.h"
#include "tclm/dataset.h"
#include "tclm/evaluation.h"
#include "tclm/selection.h"
#include "train/distributed.h"

namespace tclm {

struct CkdOptions {
  MambaConfig kb;               // knowledge-base architecture (n_features set from the encoding)
  double beta = 0.5;            // teacher weight in CL
  double lambda = 0;            // EWC strength in KD (0 = no EWC, the default; the paper's term at e.g. 1e4)
  double earlier_weight = 1;    // weight of the earlier platforms' programs in CL and KD (EarlierPrograms;
                                // 0 = the platform's programs alone)
  double phi_floor = 0.1;       // Phi never drops below this once a platform is learned
  double phi_decay = 1.0;       // Phi_e = Phi * phi_decay^(epoch - 1) during CL
  bool dynamic_phi = true;      // false: Phi = 1 (ablation)
  double fisher_gamma = 1.0;    // F <- fisher_gamma * F + F_t (1 = plain accumulation)
  double temperature = 1.0;     // of CL's beta * Phi term (the KB teaching the AC on t's programs); 1 elsewhere
  // KD's learning rate is CL's, not the spec's 1e-4 (TCL-SPEC §7): at 1e-4 the KB did not take in the
  // AC in a phase of 150-200 steps. Measured on the V100 (docs/experiments/transfer.md): test top-1 task mean
  // 0.827 for the AC, 0.690 for the KB distilled from it at 1e-4, 0.754 at 7e-4.
  double lr_cl = 7e-4, lr_kd = 7e-4;
  int epochs_cl = 10, epochs_kd = 10;
  int lr_step = 5;              // epochs between learning-rate steps
  int64_t min_steps = 150;      // at least this many steps per phase: a small platform (a sampled
                                // budget) gets more epochs, and lr_step stretches in proportion
  double lr_gamma = 0.1;        // the step factor
  int batch_size = 1024, group_size = 64;
  double grad_clip = 1.0;
  SelectRule select = SelectRule::kPairwise;  // which validation figure picks each phase's kept epoch
                                             // (tclm/selection.h; every epoch runs)
  uint64_t seed = 0;
  bool progress = true;
  // Data-parallel phases (train/distributed.h): null or world 1 = this process alone. With N processes
  // every dataset must be a shard (LoadOptions::shard = rank, shards = N) of the same records on every
  // process, and every option the same: each process computes the groups of each batch whose tasks it
  // owns, and every process ends each step with the same KB and active column.
  std::shared_ptr<DataParallel> dist;
};

/// The active column: a Mamba column (a copy of the KB when built) plus a zero-initialised lateral
/// connection from a frozen snapshot of the KB (its own copy, taken when the column is built, so that
/// training the KB in the KD phase cannot move the teacher). At construction its scores equal the KB's.
/// x [B, L, F], mask [B, L] -> scores [B].
class ActiveColumnImpl : public torch::nn::Module {
 public:
  explicit ActiveColumnImpl(const WeightsFile& kb_weights);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask);
  MambaCostModel column{nullptr};
  torch::nn::Linear lateral{nullptr};

 private:
  MambaCostModel frozen_kb_{nullptr};  // not a registered submodule: never trained, never exported
};
TORCH_MODULE(ActiveColumn);

/// Diagonal empirical Fisher information of `model` over ranking lists, for EWC (Kirkpatrick et al.
/// 2017, with one ranking list as the sample): F_j = mean over lists l of (d LambdaRank_l / d theta_j)^2,
/// one list being one group of a task's programs in `batches` (every group of every batch, each
/// scored alone; a list whose programs all have the same label has no pair and is left out).
/// Squaring a whole batch's gradient instead (the mean over its T lists) gives (mean g)^2 <=
/// mean g^2 (Jensen): about T times less when the lists' gradients are independent with mean zero
/// (near a minimum), arbitrarily less when they cancel.
/// Returns tensors aligned with model->parameters(); the model's gradients are left zero.
/// With `dist` (N processes) each process takes the lists of the tasks it owns and the sums and the
/// count of lists are all-reduced: every process gets the same information.
std::vector<torch::Tensor> list_fisher(MambaCostModel& model, const Dataset& data, const std::vector<Batch>& batches,
                                       int group_size, DataParallel* dist = nullptr);

/// What is carried from platform to platform.
class KnowledgeBase {
 public:
  /// A fresh KB (Mamba initialisation from `seed`).
  KnowledgeBase(const MambaConfig& cfg, uint64_t seed);
  MambaCostModel& model() { return model_; }
  const std::vector<std::string>& learned() const { return learned_; }
  bool has_fisher() const { return !fisher_.empty(); }
  /// sum_j F_j (theta_j - theta*_j)^2 over the KB's parameters (a scalar tensor with gradient);
  /// zero before the first platform.
  torch::Tensor ewc_penalty();
  /// The deployable model: a plain Mamba weights file (kind "mamba"), the KB's size whatever the
  /// number of platforms. `metadata_json` is stored as is.
  WeightsFile deployable(const std::string& metadata_json);
  /// Mean of the accumulated Fisher information (for the log).
  double fisher_mean() const;

 private:
  friend struct CkdTrainer;
  MambaCostModel model_{nullptr};
  std::vector<torch::Tensor> fisher_, anchor_;  // aligned with model_->parameters()
  std::vector<std::string> learned_;
  uint32_t feature_version_ = kFeatureVersion;  // the encoding of the platforms learned (one family)
};

struct CkdPhaseLog {
  std::string platform;
  double phi = 0;                 // Phi at the start of CL
  double kb_top1_before = 0;      // the KB's top-1 (task mean) on the platform's training tasks before CL
  double kb_pairwise_before = 0;  // the KB's pairwise accuracy on the platform's training tasks before CL
  std::vector<double> cl_valid_top1, kd_valid_top1;          // per epoch (validation task mean)
  std::vector<double> cl_valid_pairwise, kd_valid_pairwise;  // per epoch (validation pairwise accuracy)
  int cl_kept_epoch = 0, kd_kept_epoch = 0;                  // the epochs kept (CkdOptions::select), 1-based
  double ac_valid_top1 = 0, kb_valid_top1 = 0;               // the kept epochs' validation top-1
  int64_t kd_programs = 0;        // programs KD distilled on (each epoch): the measured training programs,
                                  // or the candidate pool (CandidatePrograms) when one is given
  int64_t earlier_tasks = 0, earlier_programs = 0;  // the earlier platforms' tasks (of workloads this
                                                    // platform has none of, with two programs or more)
                                                    // CL drew a batch of per step
  double earlier_weight = 0;      // the weight their term had: CkdOptions::earlier_weight, scaled by
                                  // earlier_programs / batch_size when they are fewer than a batch
  int64_t kd_earlier_tasks = 0, kd_earlier_programs = 0;  // KD's: every earlier workload's tasks (of two
                                                          // programs or more); the same as CL's when the
                                                          // platforms share no workload
  double kd_earlier_weight = 0;   // KD's term weight, scaled alike
  // Where the KD phase loses: both models' top-1 (task mean) and pairwise accuracy on the programs
  // KD distilled on (the platform's measured training programs), after KD; valid figures above.
  double ac_train_top1 = 0, kb_train_top1 = 0, ac_train_pairwise = 0, kb_train_pairwise = 0;
  double seconds_cl = 0, seconds_kd = 0, seconds_fisher = 0;
  double fisher_mean = 0;
};

/// Scores programs (indices into `data`'s programs) with a model, no gradient: one score per program,
/// higher = predicted faster. What `after_cl` below receives for the active column.
using DatasetScorer = std::function<std::vector<float>(const Dataset& data, const std::vector<uint32_t>& programs)>;

/// Programs of the platforms learned before (their training programs; their labels are not used), for the
/// terms that keep those platforms (CkdOptions::earlier_weight; see the top of this file). Tasks of a
/// workload key the new platform has a training or validation task of are left out by learn_platform.
/// Empty for the first platform.
struct EarlierPrograms {
  const Dataset* data = nullptr;
  std::vector<uint32_t> tasks;  // tasks of *data, of any platforms learned before
};

/// The platform's candidate programs: its training tasks with every program the sampler chose from,
/// measured or not (their labels are not used). KD distils on them instead of on the measured programs
/// alone: programs cost nothing to sample, only measurements do. Empty: KD distils on the measured
/// training programs.
struct CandidatePrograms {
  const Dataset* data = nullptr;
  std::vector<uint32_t> tasks;  // tasks of *data, all of the platform learned
};

/// Learns one platform: Phi, CL, KD, Fisher update (see the top of this file). `train_tasks` and
/// `valid_tasks` index data.tasks() and must all be of one platform (named `platform` in the log).
/// `after_cl`, if set, is called once after the CL phase with a scorer of the trained active column
/// (its kept epoch), before KD distills it into the KB: the paper's Fig. 8 shows both models, and
/// comparing the two tells whether a platform is lost in CL or in KD. The scorer is valid only during
/// the call; it may score any dataset of the same encoding (with N processes, a shard of the same
/// records, and every process must call it with the same programs: it combines their scores).
/// Both phases keep the epoch chosen on `valid_tasks` (or `train_tasks` when there are none).
/// `earlier`: the platforms learned before (their data must be of the same encoding and, with N
/// processes, sharded like `data`). `candidates`: the platform's candidate pool for KD (the same
/// conditions, and of the platform learned).
/// Throws tclm::Error if train_tasks is empty, the tasks mix platforms, or the loss diverges.
CkdPhaseLog learn_platform(KnowledgeBase& kb, const Dataset& data, const std::vector<uint32_t>& train_tasks,
                           const std::vector<uint32_t>& valid_tasks, const std::string& platform,
                           const CkdOptions& options,
                           const std::function<void(const DatasetScorer& active_column)>& after_cl = {},
                           const EarlierPrograms& earlier = {}, const CandidatePrograms& candidates = {});

/// JSON of a phase log.
std::string to_json(const CkdPhaseLog& log);

}  // namespace tclm
