// The models vtrun trains: an MLP, CIFAR-style ResNets (18 and 50, width multiplier, 1 or 3
// input channels) and GPT-2 (configurable; "small" is the 117M configuration). Parameter
// names follow PyTorch/torchvision/Hugging Face conventions so checkpoints map onto them.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/nn/layers.h"

namespace vt::nn {

class Model : public Module {
 public:
  Model() : Module("") {}
  // Logits: [N, classes] for classifiers, [N, T, vocab] for language models.
  virtual at::Tensor Forward(const at::Tensor& inputs) = 0;
  // Mean cross-entropy (sequences are flattened), through the "loss" boundary.
  at::Tensor Loss(const at::Tensor& logits, const at::Tensor& targets);
  // "mlp", "resnet", "gpt2".
  virtual std::string type() const = 0;
  // Everything that determines the architecture, as canonical key/value strings.
  virtual std::map<std::string, std::string> config() const = 0;
};

struct MlpConfig {
  std::vector<int64_t> input_shape = {1, 28, 28};  // flattened. Default: {1, 28, 28}.
  std::vector<int64_t> hidden = {128, 64};         // Default: {128, 64}.
  int64_t classes = 10;                            // Default: 10.
  double dropout = 0.0;                            // Default: 0.
};

struct ResNetConfig {
  int depth = 18;           // 18 (basic blocks) or 50 (bottlenecks). Default: 18.
  int64_t width = 64;       // channels of the first stage (64 is torchvision's). Default: 64.
  int64_t in_channels = 3;  // 1 (Fashion-MNIST) or 3. Default: 3.
  int64_t classes = 10;     // Default: 10.
};

struct Gpt2Config {
  int64_t layers = 12;     // Default: 12 (GPT-2 small).
  int64_t d_model = 768;   // Default: 768.
  int64_t heads = 12;      // Default: 12.
  int64_t vocab = 50257;   // Default: 50257.
  int64_t context = 1024;  // Default: 1024.
  double dropout = 0.0;    // Default: 0.
};

// Each configuration as the canonical "model.*" fields of a spec (without "model."), exactly
// as the built model's config() gives them. The one home of the models' defaults: vt.spec
// fills a field the script leaves out from DefaultModelFields.
std::map<std::string, std::string> ConfigFields(const MlpConfig& config);
std::map<std::string, std::string> ConfigFields(const ResNetConfig& config);
std::map<std::string, std::string> ConfigFields(const Gpt2Config& config);
// ConfigFields of the default configuration of "mlp", "resnet" or "gpt2"; throws vt::Error
// naming the valid types otherwise.
std::map<std::string, std::string> DefaultModelFields(const std::string& type);

// Each throws vt::Error naming an invalid field.
std::shared_ptr<Model> MakeMlp(const MlpConfig& config, uint64_t seed);
std::shared_ptr<Model> MakeResNet(const ResNetConfig& config, uint64_t seed);
std::shared_ptr<Model> MakeGpt2(const Gpt2Config& config, uint64_t seed);

}  // namespace vt::nn
