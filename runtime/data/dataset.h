// Data sets: in-memory examples addressed by index, a content digest that becomes part of a
// run's spec, and a deterministic sampler. Everything a batch contains is a pure function of
// (data set content, seed, step), so the trainer, auditor and judge build identical batches.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace vt::data {

struct Batch {
  at::Tensor inputs;   // images: float64 [B, C, H, W]; text: int64 [B, T]; features: float64 [B, D]
  at::Tensor targets;  // int64 [B] class labels, or [B, T] next tokens
};

class Dataset {
 public:
  virtual ~Dataset() = default;

  // Number of examples (for text: windows of `context` tokens).
  virtual int64_t size() const = 0;
  // A readable identity, e.g. "fashion-mnist:train" or "text:shakespeare.txt".
  virtual std::string name() const = 0;
  // Lowercase hex SHA-256 over the canonical content (see each implementation).
  virtual std::string digest() const = 0;
  // Classes (labels are 0..classes-1) or vocabulary size for text.
  virtual int64_t classes() const = 0;
  // The shape of one input, e.g. {1, 28, 28} or {64}.
  virtual std::vector<int64_t> input_shape() const = 0;
  // Settings beyond the content that change batches (augmentation, normalisation), as
  // canonical key/value strings for the spec.
  virtual std::map<std::string, std::string> settings() const { return {}; }

  // The examples at `indices` (each in [0, size)) as one batch. `epoch` and `seed` key any
  // augmentation. Throws vt::Error for an index out of range. Thread-safe (const).
  virtual Batch Get(const std::vector<int64_t>& indices, uint64_t seed, int64_t epoch) const = 0;
};

// The largest batch size and step BatchIndices accepts (the spec's ranges for batch and steps).
constexpr int64_t kMaxBatch = int64_t{1} << 24;
constexpr int64_t kMaxStep = int64_t{1} << 40;

// Which examples make up the batch of `step` (1-based, as steps are numbered in the protocol:
// step 1 is the first update): the training stream walks a fresh
// Philox permutation of [0, n) per epoch, keyed by (seed, epoch). Returns the indices and
// sets *epoch to the epoch of the batch's first example (a batch may straddle two epochs;
// each example uses its own epoch's permutation; augmentation is keyed by *epoch).
std::vector<int64_t> BatchIndices(uint64_t seed, int64_t n, int64_t batch, int64_t step,
                                  int64_t* epoch);

// Philox permutation of [0, n) for (seed, epoch): Fisher-Yates with portable integer draws.
std::vector<int64_t> Permutation(uint64_t seed, int64_t epoch, int64_t n);

// The batch of `step` from `data`.
Batch StepBatch(const Dataset& data, uint64_t seed, int64_t batch, int64_t step);

}  // namespace vt::data
