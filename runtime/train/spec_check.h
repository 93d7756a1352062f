// Checks that two parties hold the same spec, and says how they differ when they do not.
//
// An auditor replaying a trainer's logs under another spec (another learning rate, another
// window, another data set) would report a divergence that looks exactly like a cheating
// trainer: a false accusation. So an auditor given a trainer's store is refused at
// construction, with the differing fields named. A per-boundary window that names no
// boundary of the model (a typo) is refused at the first step, before anything is stored.
#pragma once

#include <map>
#include <string>

#include "runtime/data/dataset.h"
#include "runtime/train/spec.h"
#include "store/store.h"

namespace vt::train {

// "optim.lr is 0.20000000000000001 here, 0.10000000000000001 in the logs; round.fwd.band ..."
// for the first `limit` differing fields (and how many more), or "" when the specs are equal.
std::string SpecDifference(const Spec& here, const Spec& there, const std::string& there_name,
                           size_t limit = 4);

// Throws vt::Error unless `store` holds run `run` made with `spec` (the store's path, the run
// and the differing fields are named).
void CheckLogsSpec(store::Store& store, const std::string& run, const Spec& spec);

// "" when the spec's model takes the data set's examples and labels; else what does not fit
// ("model.input_shape 1,8,8 has 64 values, the data's examples [1, 28, 28] have 784"), so a
// spec that could never train is refused when it is made, not at its first step.
std::string ModelDataMisfit(const Spec& spec, const data::Dataset& data);

// "" when every per-boundary window override of `windows` names a boundary in `seen` (the
// boundaries of the run's first step, every shard's); else an error message naming the unknown
// ones and, for each, the model's nearest names.
std::string UnknownBoundaryOverrides(const nn::WindowTable& windows,
                                     const std::map<std::string, nn::BoundaryStats>& seen);

}  // namespace vt::train
