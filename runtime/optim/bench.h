// The optimizer benchmark behind scripts/bench/optimizer.lua (issue 17, "rounding fused into
// the ops"): one parameter of `elements` FP64 values, updated by SGD (momentum 0.9, weight
// decay 5e-4) and AdamW, timed per thread count as a plain FP64 step, as a trainer's step
// (paper window: every pass rounded, classified and logged) with each pass fused into its
// boundary's rounding pass and with the pass followed by the boundary
// (Optimizer::set_fuse_boundaries), and as the auditor's replay of that log both ways.
// A benchmark, not a test: it allocates about 6 x elements x 8 bytes.
// Not thread-safe: it changes LibTorch's intra-op thread count while running (restored).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vt::optim {

struct OptimizerBenchOptions {
  int64_t elements = int64_t{8} << 20;  // Values of the parameter, >= 1. Default: 8M.
  std::vector<int> threads = {1, 2};    // Thread counts to time, each >= 1. Default: {1, 2}.
  int repeats = 5;                      // Timed steps per arm (median kept), >= 1. Default: 5.
};

struct OptimizerTiming {
  std::string kind;  // "sgd" or "adamw"
  int threads = 1;
  double fp64 = 0;                                // plain FP64 step, seconds (median)
  double trainer_fused = 0, trainer_unfused = 0;  // logging steps
  double auditor_fused = 0, auditor_unfused = 0;  // replaying steps
};

// Runs the benchmark. Throws vt::Error on bad options.
std::vector<OptimizerTiming> RunOptimizerBench(const OptimizerBenchOptions& options);

}  // namespace vt::optim
