#include <ATen/ATen.h>

#include <mutex>
#include <unordered_map>

#include "runtime/common/error.h"
#include "runtime/data/dataset.h"
#include "runtime/random/philox.h"

namespace vt::data {
namespace {

// A uniform integer in [0, bound) from 64 random bits (multiply-high: unbiased enough for
// bound << 2^64, and exact integer arithmetic everywhere).
uint64_t Below(uint64_t bits, uint64_t bound) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(bits) * bound) >> 64);
}

uint64_t Bits64(uint64_t seed, uint32_t stream, uint64_t index, uint32_t lane) {
  const uint32_t counter[4] = {static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32),
                               stream, lane};
  uint32_t out[4];
  Philox4x32(static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), counter, out);
  return (uint64_t(out[0]) << 32) | out[1];
}

}  // namespace

std::vector<int64_t> Permutation(uint64_t seed, int64_t epoch, int64_t n) {
  std::vector<int64_t> perm(n);
  for (int64_t i = 0; i < n; ++i) perm[i] = i;
  // The epoch goes into the counter's high lane so epochs never share draws.
  for (int64_t i = n - 1; i > 0; --i) {
    uint64_t bits = Bits64(seed, static_cast<uint32_t>(RandomStream::kDataOrder),
                           static_cast<uint64_t>(i), static_cast<uint32_t>(epoch));
    int64_t j = static_cast<int64_t>(Below(bits, static_cast<uint64_t>(i) + 1));
    std::swap(perm[i], perm[j]);
  }
  return perm;
}

std::vector<int64_t> BatchIndices(uint64_t seed, int64_t n, int64_t batch, int64_t step,
                                  int64_t* epoch) {
  if (n <= 0) throw Error("cannot sample from an empty data set");
  // The spec's ranges (spec.cc); they also keep (step - 1) * batch from overflowing and a
  // hostile batch size from asking for terabytes of indices (std::bad_alloc).
  if (batch < 1 || batch > kMaxBatch) {
    throw Error("batch size must be an integer in [1, " + std::to_string(kMaxBatch) + "], got " +
                std::to_string(batch));
  }
  if (step < 1 || step > kMaxStep) {
    throw Error("step must be an integer in [1, " + std::to_string(kMaxStep) + "], got " +
                std::to_string(step));
  }
  // Permutations are cached per (seed, n, epoch): a run asks for the same few again and again.
  static std::mutex mutex;
  static std::unordered_map<std::string, std::shared_ptr<const std::vector<int64_t>>> cache;
  std::vector<int64_t> out;
  out.reserve(batch);
  for (int64_t k = 0; k < batch; ++k) {
    const int64_t global = (step - 1) * batch + k;
    const int64_t e = global / n, pos = global % n;
    if (k == 0 && epoch != nullptr) *epoch = e;
    std::string key = std::to_string(seed) + "/" + std::to_string(n) + "/" + std::to_string(e);
    std::shared_ptr<const std::vector<int64_t>> perm;
    {
      std::lock_guard<std::mutex> lock(mutex);
      auto it = cache.find(key);
      if (it != cache.end()) perm = it->second;
    }
    if (!perm) {
      perm = std::make_shared<const std::vector<int64_t>>(Permutation(seed, e, n));
      std::lock_guard<std::mutex> lock(mutex);
      if (cache.size() > 8) cache.clear();
      cache[key] = perm;
    }
    out.push_back((*perm)[pos]);
  }
  return out;
}

Batch StepBatch(const Dataset& data, uint64_t seed, int64_t batch, int64_t step) {
  int64_t epoch = 0;
  std::vector<int64_t> indices = BatchIndices(seed, data.size(), batch, step, &epoch);
  return data.Get(indices, seed, epoch);
}

}  // namespace vt::data
