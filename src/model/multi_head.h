// model/multi_head.h: the multi-task baseline of the transfer study (MTL-TLP, TCL-SPEC §7): one Mamba
// trunk shared by every platform and one head per platform, trained jointly on all platforms' data.
// The platform of a batch is chosen with set_platform() before forward() (the trainer does it per
// batch; predict_programs per platform run). Not deployable in the inference engine.
#pragma once

#include <string>

#include "model/mamba.h"

namespace tclm {

inline constexpr char kMultiHeadModelKind[] = "mamba-mtl";

class MultiHeadMambaImpl : public CostModelImpl {
 public:
  /// cfg: the trunk and head sizes; n_platforms heads (>= 1).
  MultiHeadMambaImpl(const MambaConfig& cfg, int n_platforms);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask) override;  // head of the platform set
  torch::Tensor embed(const torch::Tensor& x, const torch::Tensor& mask) override;
  std::string kind() const override { return kMultiHeadModelKind; }
  /// {"mamba": <MambaConfig JSON>, "platforms": N}
  std::string config_json() const override;
  int n_features() const override { return trunk_->config().n_features; }
  void init_weights() override;
  void set_platform(int platform) override;
  /// Parses config_json()'s format; throws tclm::Error.
  static std::pair<MambaConfig, int> parse_config(const std::string& json);

 protected:
  bool is_no_decay(const std::string& name) const override;

 private:
  MambaCostModel trunk_{nullptr};  // its own head serves platform 0
  torch::nn::ModuleList heads_{nullptr};  // heads of platforms 1..N-1 (Linear, ReLU, Linear)
  int n_platforms_ = 1;
  int platform_ = 0;
};

}  // namespace tclm
