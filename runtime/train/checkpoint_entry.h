// A tensor as it is, as one entry of a checkpoint in the store's canonical encoding
// (store/FORMAT.md, "Checkpoint encoding"): the store's dtype tag for the tensor's type, its
// shape and its element bytes. vt.store's checkpoint functions map Lua tensors so; a run's
// own state goes through EncodeState (checkpoint.h), which converts to FP32 first.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

#include "store/checkpoint_digest.h"

namespace vt::train {

// The store's dtype tag (store::DType) for tensors of type `type`, kept as they are:
// float32, float64, int64, int32 and uint8, and bool as uint8 (0 or 1); 0 for any other.
uint8_t CheckpointDType(at::ScalarType type);

// Entry `name` viewing the CPU tensor `t`, whose type CheckpointDType knows: the tensor made
// contiguous is left in `*keep`, into which the entry points (it must outlive the entry).
// Throws vt::Error if `t` is not on the CPU or has another type.
store::StateEntry CheckpointEntry(const std::string& name, const at::Tensor& t, at::Tensor* keep);

}  // namespace vt::train
