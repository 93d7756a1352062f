#include "runtime/train/checkpoint.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cstring>
#include <map>

#include "runtime/common/error.h"
#include "runtime/tensor/safetensors.h"
#include "store/checkpoint_digest.h"
#include "store/sha256.h"

namespace vt::train {

std::string EncodeState(const NamedState& state) {
  std::vector<at::Tensor> owned;
  owned.reserve(state.size());
  std::vector<store::StateEntry> entries;
  entries.reserve(state.size());
  at::NoGradGuard no_grad;
  for (const auto& [name, t] : state) {
    at::Tensor v = t->detach();
    if (!v.is_floating_point())
      throw Error("checkpoint: state '" + name + "' is not a floating-point tensor");
    at::Tensor f = v.to(at::kFloat).contiguous();
    if (v.scalar_type() == at::kDouble && !at::equal(f.to(at::kDouble), v)) {
      throw Error("checkpoint: state '" + name +
                  "' holds values off the FP32 grid (missed its update boundary?)");
    }
    owned.push_back(f);
    store::StateEntry e;
    e.name = name;
    e.dtype = static_cast<uint8_t>(store::DType::kFloat32);
    e.shape = f.sizes().vec();
    e.data = f.data_ptr();
    e.bytes = static_cast<size_t>(f.numel()) * sizeof(float);
    entries.push_back(std::move(e));
  }
  return store::SerializeCheckpoint(entries);
}

void DecodeStateInto(const std::string& bytes, const NamedState& state) {
  std::vector<store::StateEntry> entries = store::ParseCheckpoint(bytes);
  std::map<std::string, const store::StateEntry*> by_name;
  for (const auto& e : entries) by_name[e.name] = &e;
  if (by_name.size() != state.size()) {
    throw Error("checkpoint has " + std::to_string(by_name.size()) +
                " entries, the model and optimizer have " + std::to_string(state.size()));
  }
  at::NoGradGuard no_grad;
  for (const auto& [name, t] : state) {
    auto it = by_name.find(name);
    if (it == by_name.end()) throw Error("checkpoint lacks state '" + name + "'");
    const store::StateEntry& e = *it->second;
    if (e.dtype != static_cast<uint8_t>(store::DType::kFloat32) || e.shape != t->sizes().vec()) {
      throw Error("checkpoint entry '" + name + "' does not match the model's shape or dtype");
    }
    at::Tensor f = at::empty(e.shape, at::kFloat);
    if (e.bytes > 0) std::memcpy(f.data_ptr(), e.data, e.bytes);
    t->detach().copy_(f.to(t->scalar_type()));
  }
}

void LoadSafetensorsInto(const std::string& path, const NamedState& state) {
  SafetensorsFile file = LoadSafetensors(path);
  std::map<std::string, at::Tensor> by_name(file.tensors.begin(), file.tensors.end());
  at::NoGradGuard no_grad;
  for (const auto& [name, t] : state) {
    auto it = by_name.find(name);
    if (it == by_name.end()) throw Error("'" + path + "' has no tensor '" + name + "'");
    if (!it->second.sizes().equals(t->sizes())) {
      throw Error("'" + path + "': tensor '" + name + "' has shape " +
                  c10::str(it->second.sizes()) + ", the model needs " + c10::str(t->sizes()));
    }
    if (!it->second.is_floating_point())
      throw Error("'" + path + "': tensor '" + name + "' is not floating point");
    t->detach().copy_(it->second.to(at::kFloat).to(t->scalar_type()));
    by_name.erase(it);
  }
  if (!by_name.empty()) {
    throw Error("'" + path + "' has " + std::to_string(by_name.size()) +
                " tensor(s) the model does not, e.g. '" + by_name.begin()->first + "'");
  }
}

std::string StateDigestHex(const NamedState& state) {
  return store::ToHex(store::Sha256Of(EncodeState(state)));
}

}  // namespace vt::train
