// Shared by the files that bind runs of the rounded engine: train.cc (vt.models, vt.optim,
// vt.spec and the vt.Spec userdata), runner.cc (vt.trainer, vt.auditor, the vt.Runner
// userdata and its methods, vt.train) and evaluate.cc (runner:evaluate). Each registers its part
// from module.cc (OpenTrain, OpenRunner in module.h).
#pragma once

#include <lua.hpp>
#include <memory>

#include "runtime/data/dataset.h"
#include "runtime/train/runner.h"
#include "runtime/train/spec.h"

namespace vt::lua {

constexpr const char* kSpecMeta = "vt.Spec";        // train.cc
constexpr const char* kDatasetMeta = "vt.Dataset";  // defined by bindings/data.cc

constexpr const char* kRunnerMeta = "vt.Runner";  // runner.cc

using SpecPtr = std::shared_ptr<train::Spec>;
using DatasetPtr = std::shared_ptr<data::Dataset>;
using RunnerPtr = std::shared_ptr<train::Runner>;

// The vt.Runner at `idx` (a Lua error otherwise).
RunnerPtr& CheckRunner(lua_State* L, int idx);
// runner:evaluate (evaluate.cc).
int RunnerEvaluate(lua_State* L);

}  // namespace vt::lua
