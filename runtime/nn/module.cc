#include "runtime/nn/module.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "runtime/common/error.h"
#include "runtime/random/philox.h"

namespace vt::nn {
namespace {

// SplitMix64 finalizer: mixes a seed with a name hash into an independent Philox key.
uint64_t Mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

at::Tensor OnFp32Grid(const at::Tensor& t) { return t.to(at::kFloat).to(at::kDouble); }

}  // namespace

uint64_t NameHash(const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

at::Tensor InitNormal(at::IntArrayRef sizes, double std, uint64_t seed, const std::string& name) {
  at::Tensor z = NormalTensor(sizes, at::kDouble, Mix(seed ^ NameHash(name)),
                              static_cast<uint32_t>(RandomStream::kInit));
  return OnFp32Grid(z * std);
}

at::Tensor InitUniform(at::IntArrayRef sizes, double bound, uint64_t seed,
                       const std::string& name) {
  at::Tensor u = UniformTensor(sizes, at::kDouble, Mix(seed ^ NameHash(name)),
                               static_cast<uint32_t>(RandomStream::kInit));
  return OnFp32Grid((u * 2.0 - 1.0) * bound);
}

std::string Module::BoundaryName(const std::string& suffix) const {
  std::string base = name_.empty() ? "model" : name_;
  return suffix.empty() ? base : base + "." + suffix;
}

std::string Module::Qualify(const std::string& local) const {
  return name_.empty() ? local : name_ + "." + local;
}

void Module::Train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->Train(on);
}

at::Tensor& Module::RegisterParameter(const std::string& local, const at::Tensor& init) {
  parameters_.emplace_back(local, OnFp32Grid(init).set_requires_grad(true));
  return parameters_.back().second;
}

at::Tensor& Module::RegisterBuffer(const std::string& local, const at::Tensor& init) {
  buffers_.emplace_back(local, OnFp32Grid(init));
  return buffers_.back().second;
}

void Module::AdoptChild(const std::string& local, std::shared_ptr<Module> child) {
  if (child->name() != Qualify(local)) {
    throw Error("module '" + child->name() + "' registered as '" + Qualify(local) + "'");
  }
  children_.emplace_back(local, child);
}

std::vector<std::pair<std::string, at::Tensor*>> Module::NamedParameters() {
  std::vector<std::pair<std::string, at::Tensor*>> out;
  for (auto& [local, t] : parameters_) out.emplace_back(Qualify(local), &t);
  for (auto& [local, c] : children_) {
    auto sub = c->NamedParameters();
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

std::vector<std::pair<std::string, at::Tensor*>> Module::NamedBuffers() {
  std::vector<std::pair<std::string, at::Tensor*>> out;
  for (auto& [local, t] : buffers_) out.emplace_back(Qualify(local), &t);
  for (auto& [local, c] : children_) {
    auto sub = c->NamedBuffers();
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

std::vector<std::pair<std::string, at::Tensor*>> Module::NamedState() {
  auto out = NamedParameters();
  auto buffers = NamedBuffers();
  out.insert(out.end(), buffers.begin(), buffers.end());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 1; i < out.size(); ++i) {
    if (out[i].first == out[i - 1].first)
      throw Error("duplicate state name '" + out[i].first + "'");
  }
  return out;
}

int64_t Module::ParameterCount() {
  int64_t n = 0;
  for (auto& [name, t] : NamedParameters()) n += t->numel();
  return n;
}

void Module::To(at::ScalarType dtype) {
  for (auto& [local, t] : parameters_) t = t.detach().to(dtype).set_requires_grad(true);
  for (auto& [local, t] : buffers_) t = t.to(dtype);
  for (auto& [local, c] : children_) c->To(dtype);
}

}  // namespace vt::nn
