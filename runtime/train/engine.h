// One training step of the rounded engine: batch -> forward -> loss -> backward -> parameter
// gradient boundaries -> optimizer update, all under one StepContext. The trainer, the
// auditor and the judge run exactly this function; only the context's mode differs.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>

#include "runtime/data/dataset.h"
#include "runtime/dist/group.h"
#include "runtime/nn/context.h"
#include "runtime/nn/models.h"
#include "runtime/optim/optimizer.h"
#include "runtime/train/deviation.h"

namespace vt::train {

struct StepResult {
  double loss = 0.0;     // the (rounded, in rounded modes) mean loss of the batch
  int64_t examples = 0;  // batch size
};

// Data parallelism (docs/ROUNDING.md, "Sharded steps"): a spec with `shards` k > 1 splits
// every batch into k equal, contiguous shards. Each shard's forward and backward pass runs
// with its boundaries named "s<i>/..." (StepContext::set_shard); the gradient the optimizer
// sees is the FP64 sum of the k shard gradients divided by k, rounded at "<param>:grad" (the
// shards' sum is part of the batch's sum, as in one process). Batch-norm running statistics
// are shard 0's (PyTorch DDP broadcasts rank 0's buffers). The sum is the one
// order-dependent step the shards add, and its boundary absorbs it: a run of k shards has
// one result whether one process computes all shards in turn or `group` spreads them over
// processes that each compute shards [first, first + count) and sum with Gloo.
struct ShardPlan {
  int64_t shards = 1;            // the spec's k
  int64_t first = 0, count = 1;  // the shards this process computes (all of them without a group)
  dist::Group* group = nullptr;  // the other processes' shards, or null
  // The plan of `rank` in a group of `world` processes (world divides shards).
  static ShardPlan For(int64_t shards, dist::Group* group);
};

// Runs step `step` (1-based) of a run with `seed` and `batch` examples per step, updating
// `model` and `optimizer` in place. `context` decides the mode (it is installed for the
// duration of the call). `deviation` (a dishonest trainer's, for the game's scenarios) changes
// the batch, tampers with roundings (nn::Tamper) or skips the update (a deviating optimizer
// setting is the caller's to set); null or kNone is the honest step.
// Throws vt::Error (e.g. NaN loss).
StepResult TrainStep(nn::Model& model, optim::Optimizer& optimizer, const data::Dataset& data,
                     uint64_t seed, int64_t batch, int64_t step, nn::StepContext& context,
                     const Deviation* deviation = nullptr, const ShardPlan* plan = nullptr);

}  // namespace vt::train
