// A minimal module system for the rounded engine: named parameters and buffers in a tree of
// modules with dotted names ("layer1.0.conv1.weight"), as PyTorch names them, so boundary
// names, checkpoints and safetensors files all use the same names.
//
// Parameters are leaf float64 tensors that require grad (float32 in the plain-FP32 mode),
// holding values on the FP32 grid. Not thread-safe.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace vt::nn {

class Module {
 public:
  // `full_name` is the module's dotted name in its model ("" for the root), known at
  // construction because initial values are keyed by parameter names.
  explicit Module(std::string full_name) : name_(std::move(full_name)) {}
  virtual ~Module() = default;

  // The module's full dotted name ("" for the root); boundaries are named after it.
  const std::string& name() const { return name_; }
  // The boundary of this module's output, e.g. "layer1.0.conv1" (the root: its `type`).
  std::string BoundaryName(const std::string& suffix = "") const;

  bool training() const { return training_; }
  void Train(bool on = true);  // recursively

  // All parameters / buffers with full names, in registration order (depth first).
  std::vector<std::pair<std::string, at::Tensor*>> NamedParameters();
  std::vector<std::pair<std::string, at::Tensor*>> NamedBuffers();
  // Parameters then buffers, sorted by name: the checkpoint's canonical order.
  std::vector<std::pair<std::string, at::Tensor*>> NamedState();
  int64_t ParameterCount();

  // Converts every parameter and buffer to `dtype` (parameters stay leaves requiring grad).
  void To(at::ScalarType dtype);

 protected:
  // Registration, called from constructors. `init` is the initial value (any dtype; stored
  // as float64 rounded to the FP32 grid). A child's full name must be Qualify(local).
  at::Tensor& RegisterParameter(const std::string& local, const at::Tensor& init);
  at::Tensor& RegisterBuffer(const std::string& local, const at::Tensor& init);
  template <class M>
  std::shared_ptr<M> RegisterModule(const std::string& local, std::shared_ptr<M> child) {
    AdoptChild(local, child);
    return child;
  }

  // Full name of a local name under this module ("layer1.0" + "conv1").
  std::string Qualify(const std::string& local) const;

 private:
  void AdoptChild(const std::string& local, std::shared_ptr<Module> child);

  std::string name_;
  bool training_ = true;
  // deques: RegisterParameter hands out references that must survive later registrations.
  std::deque<std::pair<std::string, at::Tensor>> parameters_;
  std::deque<std::pair<std::string, at::Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

// Initialisers: Philox draws keyed by (seed, the tensor's full name), so adding a layer never
// changes another layer's initial values; results are rounded to the FP32 grid.
at::Tensor InitNormal(at::IntArrayRef sizes, double std, uint64_t seed, const std::string& name);
at::Tensor InitUniform(at::IntArrayRef sizes, double bound, uint64_t seed, const std::string& name);

// 64-bit FNV-1a of a name (stable across platforms), for keying random streams by name.
uint64_t NameHash(const std::string& name);

}  // namespace vt::nn
