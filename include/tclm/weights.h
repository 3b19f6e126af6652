// tclm/weights.h: the framework-independent, versioned weights file of a tclm model (".tclm").
//
// Layout (all integers little-endian):
//   0  char[8]  magic "TCLMWTS1"
//   8  u32      format version (kWeightsFormatVersion)
//   12 u32      feature-encoding version the model was trained on (tclm/feature.h)
//   16 str      model kind ("mamba", ...)          str = u32 byte length + bytes (no NUL)
//      str      model config, JSON
//      str      metadata, JSON (training data, metrics, date; informational)
//      u32      number of tensors
//      per tensor: str name, u32 ndim, i64[ndim] shape, f32[prod(shape)] data
//   end u32     CRC-32 (zlib crc32) of every byte before it
// Readers refuse another magic, another format version, a bad checksum, a truncated file, or
// shapes that do not match the data; the error names the file and the problem. A shape [] (ndim 0)
// holds one value, a shape with a 0 dimension none. Tensor names are unique: writers and readers
// refuse duplicates (find() would be ambiguous) and negative dimensions.
// Tensors whose names start with "trainer." are a training checkpoint's state (optimizer moments, the
// best model so far; src/train/checkpoint.h): model loaders ignore them, `tclm export` strips them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tclm {

inline constexpr uint32_t kWeightsFormatVersion = 1;

struct NamedTensor {
  std::string name;            // e.g. "mixers.0.in_proj.weight" (a Mamba model's: tclm/model_schema.h)
  std::vector<int64_t> shape;  // row-major
  std::vector<float> data;     // prod(shape) values
};

struct WeightsFile {
  std::string model_kind;
  uint32_t feature_version = 0;
  std::string config_json;
  std::string metadata_json;
  std::vector<NamedTensor> tensors;

  /// The tensor named `name`, or nullptr.
  const NamedTensor* find(const std::string& name) const;
  /// Total number of float parameters (training state excluded).
  int64_t num_parameters() const;
};

/// Prefix of the tensors that hold a training checkpoint's state rather than the model.
inline constexpr const char kTrainingStatePrefix[] = "trainer.";
inline bool is_training_state(const std::string& tensor_name) { return tensor_name.rfind(kTrainingStatePrefix, 0) == 0; }
/// The model alone: `weights` without its training-state tensors (a checkpoint made deployable).
WeightsFile without_training_state(const WeightsFile& weights);

/// Writes atomically: to "<path>.tmp.<pid>", fsync, then rename over `path`. Throws tclm::Error.
void save_weights(const WeightsFile& weights, const std::string& path);

/// Reads and verifies a weights file. Throws tclm::Error naming `path` and what is wrong.
WeightsFile load_weights(const std::string& path);

/// Serialises to / parses from memory (the same bytes as the file).
std::string serialize_weights(const WeightsFile& weights);
WeightsFile parse_weights(const std::string& bytes, const std::string& name_for_errors);

/// Throws tclm::Error (starting with `name`, saying what to do) unless the weights were trained on one
/// of this tclm's feature encodings (kFeatureVersion for Ansor steps, kTraceFeatureVersion for
/// MetaSchedule traces; tclm/feature.h): a model never reads features of another encoding version.
void check_feature_version(const WeightsFile& weights, const std::string& name);
/// Throws tclm::Error (starting with `name`, naming the tensor and the index) when a model tensor
/// holds NaN or an infinity: a model that diverged must not score programs. The file format itself
/// stores any float (round trips are bitwise); the model loaders (the inference engine,
/// load_cost_model) call this.
void check_finite_parameters(const WeightsFile& weights, const std::string& name);
/// Throws tclm::Error (starting with `name`) when a model trained on `model_version` is given programs
/// of the encoding `data_version` (e.g. an Ansor-trained model asked to score MetaSchedule traces).
void check_feature_family(uint32_t model_version, uint32_t data_version, const std::string& name);

}  // namespace tclm
