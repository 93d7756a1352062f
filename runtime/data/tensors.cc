#include "runtime/data/tensors.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "runtime/common/error.h"
#include "runtime/tensor/dtype.h"
#include "runtime/tensor/npy.h"
#include "runtime/tensor/safetensors.h"
#include "store/sha256.h"

namespace vt::data {
namespace {

std::string ShapeText(at::IntArrayRef sizes) {
  std::string s;
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? "x" : "") + std::to_string(sizes[i]);
  return s;
}

bool IsInteger(const at::Tensor& t) {
  return !t.is_floating_point() && !t.is_complex() && t.scalar_type() != at::kBool;
}

class TensorDataset : public Dataset {
 public:
  explicit TensorDataset(const TensorSetOptions& o) {
    const std::string what = "tensor set";
    name_ = o.name.empty() ? "tensors" : "tensors:" + o.name;
    if (o.name.size() > 64) throw Error(what + ": name must be at most 64 bytes");
    for (char c : o.name) {
      if (c < 0x20 || c > 0x7e || c == '=' || c == ':') {
        throw Error(what + ": name must be printable ASCII without '=' or ':', got '" + o.name +
                    "'");
      }
    }
    if (!o.inputs.defined() || !o.targets.defined())
      throw Error(what + ": inputs and targets are required");
    if (o.inputs.is_complex() || o.targets.is_complex())
      throw Error(what + ": complex tensors are not data");
    if (o.inputs.dim() < 2) {
      throw Error(
          what +
          ": inputs must be [N, ...] with at least 2 dimensions (one example per row), got shape " +
          ShapeText(o.inputs.sizes()));
    }
    const int64_t n = o.inputs.size(0);
    if (n < 1) throw Error(what + ": inputs hold no example");
    if (o.targets.dim() < 1 || o.targets.size(0) != n) {
      throw Error(what + ": targets must have one row per example (" + std::to_string(n) +
                  "), got shape " + ShapeText(o.targets.sizes()));
    }
    if (!IsInteger(o.targets)) {
      throw Error(what + ": targets must be integer labels, got " +
                  DtypeName(o.targets.scalar_type()));
    }
    targets_ = o.targets.to(at::kLong).contiguous().clone();
    tokens_ = IsInteger(o.inputs);
    inputs_ = o.inputs.to(tokens_ ? at::kLong : at::kDouble).contiguous().clone();
    if (!tokens_ && !at::isfinite(inputs_).all().item<bool>()) {
      const int64_t bad =
          at::logical_not(at::isfinite(inputs_)).reshape(-1).nonzero()[0].item<int64_t>();
      throw Error(what + ": input value " + std::to_string(bad) +
                  " (flat index) is NaN or infinite");
    }
    int64_t largest = targets_.max().item<int64_t>();
    if (targets_.min().item<int64_t>() < 0) throw Error(what + ": labels must be >= 0 (0-based)");
    if (tokens_) {
      if (inputs_.min().item<int64_t>() < 0)
        throw Error(what + ": integer inputs (token ids) must be >= 0");
      largest = std::max(largest, inputs_.max().item<int64_t>());
    }
    if (o.classes < 0) throw Error(what + ": classes must be >= 0");
    classes_ = o.classes > 0 ? o.classes : largest + 1;
    if (largest >= classes_) {
      throw Error(what + ": a " + (tokens_ ? "label or token id" : "label") + " is " +
                  std::to_string(largest) + ", outside [0, classes = " + std::to_string(classes_) +
                  ")");
    }
    store::Sha256 h;
    const std::string header =
        "vtrun-tensors 1\ninputs " + std::string(tokens_ ? "int64 " : "float64 ") +
        ShapeText(inputs_.sizes()) + "\ntargets int64 " + ShapeText(targets_.sizes()) +
        "\nclasses " + std::to_string(classes_) + "\n";
    h.Update(header.data(), header.size());
    h.Update(inputs_.data_ptr(), static_cast<size_t>(inputs_.numel()) * inputs_.element_size());
    h.Update(targets_.data_ptr(), static_cast<size_t>(targets_.numel()) * targets_.element_size());
    digest_ = store::ToHex(h.Final());
  }

  int64_t size() const override { return inputs_.size(0); }
  std::string name() const override { return name_; }
  std::string digest() const override { return digest_; }
  int64_t classes() const override { return classes_; }
  std::vector<int64_t> input_shape() const override {
    auto s = inputs_.sizes();
    return std::vector<int64_t>(s.begin() + 1, s.end());
  }

  Batch Get(const std::vector<int64_t>& indices, uint64_t, int64_t) const override {
    for (int64_t i : indices) {
      if (i < 0 || i >= size()) {
        throw Error(name_ + ": example index " + std::to_string(i) + " out of range [0, " +
                    std::to_string(size()) + ")");
      }
    }
    at::Tensor idx = at::tensor(indices, at::kLong);
    return {inputs_.index_select(0, idx), targets_.index_select(0, idx)};
  }

 private:
  std::string name_, digest_;
  at::Tensor inputs_, targets_;
  bool tokens_ = false;
  int64_t classes_ = 0;
};

}  // namespace

std::shared_ptr<Dataset> Tensors(const TensorSetOptions& options) {
  return std::make_shared<TensorDataset>(options);
}

at::Tensor LoadTensorFile(const std::string& reference) {
  const size_t hash = reference.rfind('#');
  const std::string path = hash == std::string::npos ? reference : reference.substr(0, hash);
  auto ends_with = [&](const std::string& suffix) {
    return path.size() >= suffix.size() &&
           path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (hash == std::string::npos && ends_with(".npy")) return LoadNpy(path);
  if (hash != std::string::npos && ends_with(".safetensors")) {
    const std::string name = reference.substr(hash + 1);
    SafetensorsFile file = LoadSafetensors(path);
    std::string names;
    for (auto& [n, t] : file.tensors) {
      if (n == name) return t;
      names += (names.empty() ? "" : ", ") + n;
    }
    throw Error("safetensors file '" + path + "' has no tensor '" + name + "' (it has: " + names +
                ")");
  }
  throw Error("tensor file '" + reference + "': give a .npy file or FILE.safetensors#NAME");
}

}  // namespace vt::data
