// libFuzzer target for the checkpoint decoder (store/checkpoint_digest.h, ParseCheckpoint)
// and for decoding a checkpoint into a model's state (runtime/train/checkpoint.h), which is
// what a judge does with the checkpoint a trainer hands over.
//
// Every input must either parse or raise vt::store::Error (vt::Error when decoding into the
// state). A parsed checkpoint is canonical: it
// serializes back to the very same bytes, and its digest is the SHA-256 of those bytes.
#include "runtime/train/checkpoint.h"

#include <ATen/ATen.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/error.h"
#include "store/checkpoint_digest.h"
#include "store/error.h"
#include "store/sha256.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace store = vt::store;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const std::vector<store::StateEntry> entries = store::ParseCheckpoint(bytes);
    if (store::SerializeCheckpoint(entries) != bytes) std::abort();
    if (store::CheckpointEncodedSize(entries) != bytes.size()) std::abort();
    if (store::CheckpointDigest(entries) != store::Sha256Of(bytes)) std::abort();
  } catch (const vt::store::Error&) {
    return 0;  // invalid input, reported as it should be
  }
  // A small model state: a float64 weight and a float32 scalar.
  static at::Tensor weight = at::zeros({2, 3}, at::kDouble);
  static at::Tensor scale = at::zeros({}, at::kFloat);
  const vt::train::NamedState state = {{"layer.weight", &weight}, {"scale", &scale}};
  try {
    vt::train::DecodeStateInto(bytes, state);
    if (vt::train::EncodeState(state) != bytes) std::abort();
  } catch (const vt::Error&) {
  } catch (const vt::store::Error&) {
  }
  return 0;
}
