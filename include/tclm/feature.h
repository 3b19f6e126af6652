// tclm/feature.h: transform steps -> step feature matrices (the schedule-primitive sequence of
// TLP, Zhai et al. ASPLOS'23, re-encoded; TCL-SPEC §3). The layout is documented slot by slot in
// docs/feature-encoding.md; any change to it must bump kFeatureVersion, and models refuse features
// of another version.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tclm/record.h"

namespace tclm {

/// Version of the Ansor step encoding below. Stored in every weights file trained on Ansor records.
inline constexpr uint32_t kFeatureVersion = 2;
/// Version of the MetaSchedule trace encoding (the trace_feature slots below), stored in weights
/// trained on MetaSchedule databases. Its high half (1) names the trace family, so that no version
/// of one family equals a version of the other: a model reads only programs of its own family.
inline constexpr uint32_t kTraceFeatureVersion = 0x10001;
/// The encoding version that applies to a program whose first step is `first` (kTraceFeatureVersion
/// for MetaSchedule trace kinds, else kFeatureVersion).
inline uint32_t feature_version_of(StepKind first) {
  return is_trace_kind(first) ? kTraceFeatureVersion : kFeatureVersion;
}
/// "Ansor step encoding v2" / "MetaSchedule trace encoding v1" / "unknown encoding 0x..." (messages).
std::string feature_version_name(uint32_t version);
/// Floats per step (F).
inline constexpr int kStepFeatureDim = 55;
/// Default maximum number of steps per program (the longest program in ../shared/data has 70).
inline constexpr int kDefaultMaxSteps = 72;

/// Slot offsets of the encoding (docs/feature-encoding.md).
namespace slot {
inline constexpr int kKind = 0;          // 14: one-hot step kind, StepKind order
inline constexpr int kStage = 14;        // stage_id / 32
inline constexpr int kIter = 15;         // iter_id / 32 (kinds that have one)
inline constexpr int kAnnotation = 16;   // 12: one-hot annotation (AN)
inline constexpr int kUnroll = 28;       // log-magnitude of auto_unroll_max_step (PR)
inline constexpr int kOtherPragma = 29;  // 1 for any other pragma (PR)
inline constexpr int kScope = 30;        // 4: one-hot cache scope local/shared/global/other (CHR, CHW)
inline constexpr int kExtent = 34;       // log-magnitude of the split extent (SP)
inline constexpr int kNumLengths = 35;   // number of split lengths / 4 (SP)
inline constexpr int kLengths = 36;      // 4: log-magnitudes of the first 4 split lengths (SP)
inline constexpr int kInnerToOuter = 40; // inner_to_outer flag (SP)
inline constexpr int kLengthProduct = 41;// log-magnitude of the product of all lengths (SP)
inline constexpr int kListSize = 42;     // log-magnitude of the nested list's length (FU, RE, FFSP, CHR)
inline constexpr int kGeneric = 43;      // 10: the step's remaining integer arguments / 32, in record order
inline constexpr int kNumGeneric = 10;
inline constexpr int kLoopExtent = 53;   // log-magnitude of the extent of the loop an AN step annotates or
                                         // an FU step creates, when the program's splits determine it
inline constexpr int kExtentKnown = 54;  // 1 when kLoopExtent is known (program context), else 0
}  // namespace slot

/// Slot offsets of the MetaSchedule trace encoding (kTraceFeatureVersion; same width F, other
/// meaning; docs/feature-encoding.md "MetaSchedule traces"). One row per trace instruction, from the
/// resolved TransformStep layout of tclm/record.h (trace_slot).
namespace trace_feature {
inline constexpr int kKind = 0;         // 32: one-hot instruction kind (kind - kFirstTraceKind)
inline constexpr int kNumInputs = 32;   // log-magnitude of the number of inputs
inline constexpr int kNumOutputs = 33;  // log-magnitude of the number of outputs (GetLoops: loops)
inline constexpr int kValue = 34;       // log-magnitude of the resolved value (tclm/record.h)
inline constexpr int kValueKnown = 35;  // 1 when kValue is known
inline constexpr int kList = 36;        // 4: log-magnitudes of the first four list values (tile sizes)
inline constexpr int kListProduct = 40; // log-magnitude of the product of the list values
inline constexpr int kListSize = 41;    // number of list values / 4
inline constexpr int kAnnotationKey = 42;  // 8: one-hot annotation key (Annotate, Unannotate)
inline constexpr int kScope = 50;       // 4: shared*, local*, blockIdx.* or vthread*, threadIdx.*
inline constexpr int kInPostproc = 54;  // 1 after EnterPostproc
}  // namespace trace_feature

/// A read-only view of one transform step (from a TransformStep or from a dataset's packed store).
struct StepView {
  StepKind kind;
  const int64_t* ints;
  int32_t n_ints;
  int32_t list_pos;  // -1 if none
  int32_t n_list;    // -1 if none
  std::string_view str;
};

inline StepView view_of(const TransformStep& s) {
  return StepView{s.kind, s.ints.data(), static_cast<int32_t>(s.ints.size()), s.list_pos, s.n_list, s.str};
}

/// Writes the kStepFeatureDim floats of one step to out[0..F), without program context (the loop
/// extent slots stay 0). Never fails: arguments a step kind does not have are encoded as 0, surplus
/// ones are ignored.
void featurize_step(const StepView& step, float* out);

/// Featurizes a program into out[max_steps * F] (row-major [max_steps, F]); rows past the program's
/// length are zero. Unlike featurize_step it replays the steps on a loop tracker (which iterator of
/// which stage has which extent, as far as the split steps tell) to fill the loop-extent slots. Returns the number of real steps written, min(n_steps, max_steps): steps beyond
/// max_steps are cut (keep the first ones); callers count such programs.
int featurize_program(const StepView* steps, size_t n_steps, int max_steps, float* out);
int featurize_program(const std::vector<TransformStep>& steps, int max_steps, float* out);

/// Size of pool_step_features's output: mean and max of every slot, then log2(1 + n_steps).
inline constexpr int kPooledFeatureDim = 2 * kStepFeatureDim + 1;

/// Pools a featurized program x[n_steps, kStepFeatureDim] (real steps only) into out[kPooledFeatureDim]:
/// per-slot mean over steps, per-slot max over steps, log2(1 + n_steps). n_steps = 0 gives zeros.
void pool_step_features(const float* x, int n_steps, float* out);

/// The log-magnitude transform used for sizes: sign(x) * log2(1 + |x|) / 8; NaN gives 0 and +-inf
/// saturates at +-128 (the value of the largest double), so that no input yields a non-finite feature.
float log_magnitude(double x);

}  // namespace tclm
