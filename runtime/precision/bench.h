// The rounding benchmark behind scripts/bench/rounding.lua (issue 3, "Benchmark"): on
// Gaussian FP64 tensors it times, per thread count and b, round + classify + log, plain
// round, replay, and memcpy of the same bytes, and per window mode and encoding the
// encode/decode speed and bits per element next to the entropy floor. A benchmark, not a
// test: it allocates about 300 MB for 16M elements and runs for tens of seconds.
// Not thread-safe: it changes LibTorch's intra-op thread count while running (restored).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vt::precision {

struct RoundingBenchOptions {
  int64_t elements = int64_t{16} << 20;  // Elements per tensor, >= 1. Default: 16M.
  std::vector<int> threads = {1, 2};     // Thread counts to time, each >= 1. Default: {1, 2}.
  std::vector<int> bits = {32, 26};      // Rounding amounts, each in [10, 32]. Default: {32, 26}.
  int repeats = 5;                    // Timed runs per measurement (best kept), >= 1. Default: 5.
  uint64_t seed = 1;                  // Philox seed of the Gaussian data. Default: 1.
  double calibrated_alpha = 0x1p-44;  // alpha of the calibrated-like window. Default: 2^-44.
};

// One timed kernel: elements per second of the best run.
struct KernelTiming {
  std::string what;  // "memcpy", "round_log", "round", "replay"
  std::string
      mode;  // "paper" (band 0.25, alpha 0), "calibrated" (band 0, alpha), "" for memcpy/round
  int threads = 1;
  int bits = 32;
  double seconds = 0;  // best run
  double elems_per_s = 0;
};

// One encoding at one window mode (single-threaded codec).
struct EncodingTiming {
  std::string mode;  // "paper" or "calibrated"
  int bits = 32;
  std::string encoding;  // "dense", "sparse", "auto" (auto reports what it chose in `chosen`)
  std::string chosen;
  double logged_fraction = 0;  // (DOWN + UP + EXACT) / n
  int64_t exact = 0;           // EXACT entries
  int64_t bytes = 0;           // encoded size
  double bits_per_element = 0;
  double entropy_bits = 0;  // the record's entropy floor, bits per element
  double encode_elems_per_s = 0;
  double decode_elems_per_s = 0;
};

struct RoundingBenchResult {
  std::string isa;  // kernel variant used
  int64_t elements = 0;
  std::vector<KernelTiming> kernels;
  std::vector<EncodingTiming> encodings;
};

// Runs the benchmark. Throws vt::Error on bad options.
RoundingBenchResult RunRoundingBench(const RoundingBenchOptions& options);

}  // namespace vt::precision
