#include "runtime/train/checkpoint.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>

#include <atomic>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <map>

#include "runtime/common/error.h"
#include "runtime/tensor/safetensors.h"
#include "store/checkpoint_digest.h"
#include "store/sha256.h"

namespace vt::train {

namespace {

// Writes the FP32 values of x's n doubles to dst, refusing the first value off the FP32 grid
// (NaN, a finite value beyond FP32's range, or one FP32 cannot hold): the state of a rounded
// step lies on it, so such a value is a boundary missed. One pass, on LibTorch's threads.
void DoublesToFloats(const std::string& name, const double* x, int64_t n, char* dst) {
  std::atomic<int64_t> first_bad{n};
  at::parallel_for(0, n, int64_t{1} << 16, [&](int64_t begin, int64_t end) {
    // (dst is where the entry's bytes start in the encoding: not 4-byte aligned in general,
    // so each value is copied in, not stored through a float pointer.)
    char* out = dst + begin * static_cast<int64_t>(sizeof(float));
    for (int64_t i = begin; i < end; ++i) {
      const double v = x[i];
      // (The cast of a finite double beyond FP32's range is undefined: refused first.)
      const bool fits = std::fabs(v) <= static_cast<double>(FLT_MAX) || std::isinf(v);
      const float f = fits ? static_cast<float>(v) : 0.0f;
      if (!fits || static_cast<double>(f) != v) {
        int64_t seen = first_bad.load();
        while (i < seen && !first_bad.compare_exchange_weak(seen, i)) {
        }
        return;
      }
      std::memcpy(out + (i - begin) * static_cast<int64_t>(sizeof(float)), &f, sizeof(float));
    }
  });
  const int64_t bad = first_bad.load();
  if (bad < n) {
    throw Error("checkpoint: state '" + name + "' holds values off the FP32 grid (element " +
                std::to_string(bad) + " is " + c10::str(x[bad]) + "; missed its update boundary?)");
  }
}

}  // namespace

std::string EncodeState(const NamedState& state) {
  std::string out;
  EncodeStateInto(state, &out);
  return out;
}

void EncodeStateInto(const NamedState& state, std::string* out) {
  // Float64 state converts straight into the encoding; other state is converted first.
  std::vector<at::Tensor> sources;
  sources.reserve(state.size());
  std::vector<store::StateEntry> entries;
  entries.reserve(state.size());
  at::NoGradGuard no_grad;
  for (const auto& [name, t] : state) {
    at::Tensor v = t->detach();
    if (!v.is_floating_point())
      throw Error("checkpoint: state '" + name + "' is not a floating-point tensor");
    v = v.scalar_type() == at::kDouble ? v.contiguous() : v.to(at::kFloat).contiguous();
    sources.push_back(v);
    store::StateEntry e;
    e.name = name;
    e.dtype = static_cast<uint8_t>(store::DType::kFloat32);
    e.shape = v.sizes().vec();
    e.bytes = static_cast<size_t>(v.numel()) * sizeof(float);
    entries.push_back(std::move(e));
  }
  store::SerializeCheckpointFilled(
      entries,
      [&](size_t i, char* dst) {
        const at::Tensor& v = sources[i];
        if (v.scalar_type() == at::kDouble) {
          DoublesToFloats(entries[i].name, v.data_ptr<double>(), v.numel(), dst);
        } else {
          std::memcpy(dst, v.data_ptr(), entries[i].bytes);
        }
      },
      out);
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
