// Checkpoints of a run's state: model parameters and buffers plus optimizer state, by name,
// as FP32 values in the store's canonical encoding (store/FORMAT.md), whose SHA-256 is the
// state digest committed in a leaf.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

#include "store/sha256.h"

namespace vt::train {

using NamedState = std::vector<std::pair<std::string, at::Tensor*>>;

// The canonical encoding of `state` as FP32. Throws vt::Error if a value is not on the FP32
// grid (a state that skipped its update boundary) or has an unsupported dtype.
std::string EncodeState(const NamedState& state);
// EncodeState into *out, resized and overwritten (a buffer of the same size is reused as it is).
void EncodeStateInto(const NamedState& state, std::string* out);

// Writes the encoded values back into `state` (float64 tensors keep their dtype). Throws
// vt::Error if names, shapes or dtypes differ, naming the first mismatch.
void DecodeStateInto(const std::string& bytes, const NamedState& state);

// Sets `state` (a model's parameters and buffers) from a safetensors file: every name must
// be present with the same shape, and the file may hold no other tensors. Values become
// FP32 (the model precision) held as float64. Throws vt::Error naming the first mismatch.
void LoadSafetensorsInto(const std::string& path, const NamedState& state);

// Lowercase hex SHA-256 of EncodeState(state): the identity of a model's initial weights.
std::string StateDigestHex(const NamedState& state);

}  // namespace vt::train
