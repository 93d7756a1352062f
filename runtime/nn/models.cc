#include "runtime/nn/models.h"

#include <ATen/ATen.h>

#include <cmath>

#include "runtime/common/error.h"
#include "runtime/nn/autograd.h"
#include "runtime/nn/reduce.h"

namespace vt::nn {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }
std::string Str(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}
std::string Join(const std::string& a, const std::string& b) { return a.empty() ? b : a + "." + b; }

std::string ShapeString(const std::vector<int64_t>& s) {
  std::string out;
  for (int64_t v : s) out += (out.empty() ? "" : ",") + std::to_string(v);
  return out;
}

class Mlp : public Model {
 public:
  Mlp(const MlpConfig& c, uint64_t seed) : config_(c) {
    int64_t in = 1;
    for (int64_t d : c.input_shape) {
      if (d < 1) throw Error("mlp: input_shape entries must be >= 1");
      in *= d;
    }
    if (c.classes < 2) throw Error("mlp: classes must be >= 2");
    if (c.dropout < 0 || c.dropout >= 1) throw Error("mlp: dropout must be in [0, 1)");
    int64_t i = 0;
    for (int64_t h : c.hidden) {
      if (h < 1) throw Error("mlp: hidden sizes must be >= 1");
      const std::string name = "fc" + std::to_string(i++);
      layers_.push_back(RegisterModule(name, std::make_shared<Linear>(in, h, true, seed, name)));
      in = h;
    }
    const std::string name = "fc" + std::to_string(i);
    layers_.push_back(
        RegisterModule(name, std::make_shared<Linear>(in, c.classes, true, seed, name)));
  }

  at::Tensor Forward(const at::Tensor& inputs) override {
    at::Tensor x = inputs.reshape({inputs.size(0), -1});
    for (size_t i = 0; i < layers_.size(); ++i) {
      x = layers_[i]->Forward(x);
      if (i + 1 < layers_.size()) {
        x = ReluOp(x);
        x = Dropout(x, config_.dropout, training(), layers_[i]->name() + ".dropout");
      }
    }
    return x;
  }

  std::string type() const override { return "mlp"; }
  std::map<std::string, std::string> config() const override { return ConfigFields(config_); }

 private:
  MlpConfig config_;
  std::vector<std::shared_ptr<Linear>> layers_;
};

// conv-bn pairs with a ReLU between them and a residual connection (exact additions).
class BasicBlock : public Module {
 public:
  BasicBlock(int64_t in, int64_t out, int64_t stride, uint64_t seed, const std::string& name)
      : Module(name) {
    conv1_ = RegisterModule(
        "conv1", std::make_shared<Conv2d>(in, out, 3, stride, 1, false, seed, Join(name, "conv1")));
    bn1_ = RegisterModule("bn1", std::make_shared<BatchNorm2d>(out, Join(name, "bn1")));
    conv2_ = RegisterModule(
        "conv2", std::make_shared<Conv2d>(out, out, 3, 1, 1, false, seed, Join(name, "conv2")));
    bn2_ = RegisterModule("bn2", std::make_shared<BatchNorm2d>(out, Join(name, "bn2")));
    if (stride != 1 || in != out) {
      down_conv_ = RegisterModule(
          "downsample.0",
          std::make_shared<Conv2d>(in, out, 1, stride, 0, false, seed, Join(name, "downsample.0")));
      down_bn_ = RegisterModule("downsample.1",
                                std::make_shared<BatchNorm2d>(out, Join(name, "downsample.1")));
    }
  }
  // ReluOp, AddOp and ForkOp are relu, + and two uses of x whose backward passes carry
  // magnitudes: the sums of rounded gradients along the shortcuts are known to be computed
  // alike by every party, and need no log entry at the batch norms' outputs.
  at::Tensor Forward(const at::Tensor& x) {
    auto [into, around] = ForkOp(x);
    at::Tensor out = ReluOp(bn1_->Forward(conv1_->Forward(into)));
    out = bn2_->Forward(conv2_->Forward(out));
    at::Tensor shortcut = down_conv_ ? down_bn_->Forward(down_conv_->Forward(around)) : around;
    return ReluOp(AddOp(out, shortcut));
  }

 private:
  std::shared_ptr<Conv2d> conv1_, conv2_, down_conv_;
  std::shared_ptr<BatchNorm2d> bn1_, bn2_, down_bn_;
};

class Bottleneck : public Module {
 public:
  static constexpr int64_t kExpansion = 4;
  Bottleneck(int64_t in, int64_t planes, int64_t stride, uint64_t seed, const std::string& name)
      : Module(name) {
    const int64_t out = planes * kExpansion;
    conv1_ = RegisterModule(
        "conv1", std::make_shared<Conv2d>(in, planes, 1, 1, 0, false, seed, Join(name, "conv1")));
    bn1_ = RegisterModule("bn1", std::make_shared<BatchNorm2d>(planes, Join(name, "bn1")));
    conv2_ = RegisterModule("conv2", std::make_shared<Conv2d>(planes, planes, 3, stride, 1, false,
                                                              seed, Join(name, "conv2")));
    bn2_ = RegisterModule("bn2", std::make_shared<BatchNorm2d>(planes, Join(name, "bn2")));
    conv3_ = RegisterModule(
        "conv3", std::make_shared<Conv2d>(planes, out, 1, 1, 0, false, seed, Join(name, "conv3")));
    bn3_ = RegisterModule("bn3", std::make_shared<BatchNorm2d>(out, Join(name, "bn3")));
    if (stride != 1 || in != out) {
      down_conv_ = RegisterModule(
          "downsample.0",
          std::make_shared<Conv2d>(in, out, 1, stride, 0, false, seed, Join(name, "downsample.0")));
      down_bn_ = RegisterModule("downsample.1",
                                std::make_shared<BatchNorm2d>(out, Join(name, "downsample.1")));
    }
  }
  at::Tensor Forward(const at::Tensor& x) {  // as BasicBlock's
    auto [into, around] = ForkOp(x);
    at::Tensor out = ReluOp(bn1_->Forward(conv1_->Forward(into)));
    out = ReluOp(bn2_->Forward(conv2_->Forward(out)));
    out = bn3_->Forward(conv3_->Forward(out));
    at::Tensor shortcut = down_conv_ ? down_bn_->Forward(down_conv_->Forward(around)) : around;
    return ReluOp(AddOp(out, shortcut));
  }

 private:
  std::shared_ptr<Conv2d> conv1_, conv2_, conv3_, down_conv_;
  std::shared_ptr<BatchNorm2d> bn1_, bn2_, bn3_, down_bn_;
};

class ResNet : public Model {
 public:
  ResNet(const ResNetConfig& c, uint64_t seed) : config_(c) {
    if (c.depth != 18 && c.depth != 50)
      throw Error("resnet: depth must be 18 or 50, got " + Str(int64_t{c.depth}));
    if (c.width < 1) throw Error("resnet: width must be >= 1");
    if (c.in_channels != 1 && c.in_channels != 3) throw Error("resnet: in_channels must be 1 or 3");
    if (c.classes < 2) throw Error("resnet: classes must be >= 2");
    // CIFAR-style stem: one 3x3 convolution, no max pooling.
    conv1_ = RegisterModule(
        "conv1", std::make_shared<Conv2d>(c.in_channels, c.width, 3, 1, 1, false, seed, "conv1"));
    bn1_ = RegisterModule("bn1", std::make_shared<BatchNorm2d>(c.width, "bn1"));
    const std::vector<int> blocks =
        c.depth == 18 ? std::vector<int>{2, 2, 2, 2} : std::vector<int>{3, 4, 6, 3};
    int64_t in = c.width;
    for (int stage = 0; stage < 4; ++stage) {
      const int64_t planes = c.width << stage;
      for (int b = 0; b < blocks[stage]; ++b) {
        const int64_t stride = (stage > 0 && b == 0) ? 2 : 1;
        const std::string name = "layer" + std::to_string(stage + 1) + "." + std::to_string(b);
        if (c.depth == 18) {
          basic_.push_back(
              RegisterModule(name, std::make_shared<BasicBlock>(in, planes, stride, seed, name)));
          in = planes;
        } else {
          bottleneck_.push_back(
              RegisterModule(name, std::make_shared<Bottleneck>(in, planes, stride, seed, name)));
          in = planes * Bottleneck::kExpansion;
        }
      }
    }
    fc_ = RegisterModule("fc", std::make_shared<Linear>(in, c.classes, true, seed, "fc"));
  }

  at::Tensor Forward(const at::Tensor& inputs) override {
    if (inputs.dim() != 4 || inputs.size(1) != config_.in_channels) {
      throw Error("resnet: expected inputs [N, " + Str(config_.in_channels) + ", H, W]");
    }
    at::Tensor x = ReluOp(bn1_->Forward(conv1_->Forward(inputs)));
    for (auto& b : basic_) x = b->Forward(x);
    for (auto& b : bottleneck_) x = b->Forward(x);
    return fc_->Forward(GlobalAvgPool(x, "avgpool"));
  }

  std::string type() const override { return "resnet"; }
  std::map<std::string, std::string> config() const override { return ConfigFields(config_); }

 private:
  ResNetConfig config_;
  std::shared_ptr<Conv2d> conv1_;
  std::shared_ptr<BatchNorm2d> bn1_;
  std::vector<std::shared_ptr<BasicBlock>> basic_;
  std::vector<std::shared_ptr<Bottleneck>> bottleneck_;
  std::shared_ptr<Linear> fc_;
};

class Gpt2Block : public Module {
 public:
  Gpt2Block(const Gpt2Config& c, uint64_t seed, const std::string& name)
      : Module(name), dropout_(c.dropout) {
    const double proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(c.layers));
    ln_1_ = RegisterModule("ln_1", std::make_shared<LayerNorm>(c.d_model, Join(name, "ln_1")));
    attn_ = RegisterModule(
        "attn", std::make_shared<CausalSelfAttention>(c.d_model, c.heads, c.dropout, seed,
                                                      Join(name, "attn"), proj_std));
    ln_2_ = RegisterModule("ln_2", std::make_shared<LayerNorm>(c.d_model, Join(name, "ln_2")));
    c_fc_ =
        RegisterModule("mlp.c_fc", std::make_shared<Linear>(c.d_model, 4 * c.d_model, true, seed,
                                                            Join(name, "mlp.c_fc"), 0.02));
    c_proj_ =
        RegisterModule("mlp.c_proj", std::make_shared<Linear>(4 * c.d_model, c.d_model, true, seed,
                                                              Join(name, "mlp.c_proj"), proj_std));
  }
  // The residual stream's two uses and sums go through ForkOp and AddOp (the same values as
  // x + ...): a stream every party holds alike stays known as such, forward and backward, so
  // the layer norms and the projections' output gradients get the zero window.
  at::Tensor Forward(const at::Tensor& x) {
    auto [into, around] = ForkOp(x);
    at::Tensor h = AddOp(around, attn_->Forward(ln_1_->Forward(into)));
    auto [into_mlp, around_mlp] = ForkOp(h);
    at::Tensor m =
        c_proj_->Forward(Gelu(c_fc_->Forward(ln_2_->Forward(into_mlp)), Join(name(), "mlp.gelu")));
    return AddOp(around_mlp, Dropout(m, dropout_, training(), Join(name(), "mlp.dropout")));
  }

 private:
  double dropout_;
  std::shared_ptr<LayerNorm> ln_1_, ln_2_;
  std::shared_ptr<CausalSelfAttention> attn_;
  std::shared_ptr<Linear> c_fc_, c_proj_;
};

class Gpt2 : public Model {
 public:
  Gpt2(const Gpt2Config& c, uint64_t seed) : config_(c) {
    if (c.layers < 1 || c.d_model < 1 || c.heads < 1 || c.vocab < 2 || c.context < 1) {
      throw Error("gpt2: layers, d_model, heads, context must be >= 1 and vocab >= 2");
    }
    if (c.d_model % c.heads != 0)
      throw Error("gpt2: d_model " + Str(c.d_model) + " is not divisible by heads " + Str(c.heads));
    if (c.dropout < 0 || c.dropout >= 1) throw Error("gpt2: dropout must be in [0, 1)");
    wte_ =
        RegisterModule("wte", std::make_shared<Embedding>(c.vocab, c.d_model, seed, "wte", 0.02));
    wpe_ =
        RegisterModule("wpe", std::make_shared<Embedding>(c.context, c.d_model, seed, "wpe", 0.01));
    for (int64_t i = 0; i < c.layers; ++i) {
      const std::string name = "h." + std::to_string(i);
      blocks_.push_back(RegisterModule(name, std::make_shared<Gpt2Block>(c, seed, name)));
    }
    ln_f_ = RegisterModule("ln_f", std::make_shared<LayerNorm>(c.d_model, "ln_f"));
  }

  at::Tensor Forward(const at::Tensor& tokens) override {
    if (tokens.dim() != 2) throw Error("gpt2: expected tokens [N, T]");
    const int64_t t = tokens.size(1);
    if (t > config_.context)
      throw Error("gpt2: sequence of " + Str(t) + " tokens exceeds the context " +
                  Str(config_.context));
    at::Tensor positions = at::arange(t, at::kLong);
    at::Tensor x = AddBroadcastOp(wte_->Forward(tokens), wpe_->Forward(positions));
    x = Dropout(x, config_.dropout, training(), "embd_dropout");
    for (auto& b : blocks_) x = b->Forward(x);
    x = ln_f_->Forward(x);
    // The language-model head shares the token embedding's weight (as GPT-2 does).
    return Boundary(LinearOp(InputGrad(x, "lm_head.dx"), wte_->weight(), at::Tensor()), "lm_head");
  }

  std::string type() const override { return "gpt2"; }
  std::map<std::string, std::string> config() const override { return ConfigFields(config_); }

 private:
  Gpt2Config config_;
  std::shared_ptr<Embedding> wte_, wpe_;
  std::vector<std::shared_ptr<Gpt2Block>> blocks_;
  std::shared_ptr<LayerNorm> ln_f_;
};

}  // namespace

std::map<std::string, std::string> ConfigFields(const MlpConfig& c) {
  return {{"input_shape", ShapeString(c.input_shape)},
          {"hidden", ShapeString(c.hidden)},
          {"classes", Str(c.classes)},
          {"dropout", Str(c.dropout)}};
}

std::map<std::string, std::string> ConfigFields(const ResNetConfig& c) {
  return {{"depth", Str(int64_t{c.depth})},
          {"width", Str(c.width)},
          {"in_channels", Str(c.in_channels)},
          {"classes", Str(c.classes)}};
}

std::map<std::string, std::string> ConfigFields(const Gpt2Config& c) {
  return {{"layers", Str(c.layers)}, {"d_model", Str(c.d_model)}, {"heads", Str(c.heads)},
          {"vocab", Str(c.vocab)},   {"context", Str(c.context)}, {"dropout", Str(c.dropout)}};
}

std::map<std::string, std::string> DefaultModelFields(const std::string& type) {
  if (type == "mlp") return ConfigFields(MlpConfig{});
  if (type == "resnet") return ConfigFields(ResNetConfig{});
  if (type == "gpt2") return ConfigFields(Gpt2Config{});
  throw Error("unknown model type '" + type + "' (valid: mlp, resnet, gpt2)");
}

at::Tensor Model::Loss(const at::Tensor& logits, const at::Tensor& targets) {
  return CrossEntropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
}

std::shared_ptr<Model> MakeMlp(const MlpConfig& config, uint64_t seed) {
  return std::make_shared<Mlp>(config, seed);
}
std::shared_ptr<Model> MakeResNet(const ResNetConfig& config, uint64_t seed) {
  return std::make_shared<ResNet>(config, seed);
}
std::shared_ptr<Model> MakeGpt2(const Gpt2Config& config, uint64_t seed) {
  return std::make_shared<Gpt2>(config, seed);
}

}  // namespace vt::nn
