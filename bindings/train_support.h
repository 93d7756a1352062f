// Shared by the files that bind runs of the rounded engine: train.cc (vt.models, vt.optim,
// vt.spec and the vt.Spec userdata) and runner.cc (vt.trainer, vt.auditor, the vt.Runner
// userdata and its methods, vt.train). Each registers its part from module.cc (OpenTrain,
// OpenRunner in module.h).
#pragma once

#include <memory>

#include "runtime/data/dataset.h"
#include "runtime/train/spec.h"

namespace vt::lua {

constexpr const char* kSpecMeta = "vt.Spec";        // train.cc
constexpr const char* kDatasetMeta = "vt.Dataset";  // defined by bindings/data.cc

using SpecPtr = std::shared_ptr<train::Spec>;
using DatasetPtr = std::shared_ptr<data::Dataset>;

}  // namespace vt::lua
