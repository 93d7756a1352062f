// Hand-written AVX-512 versions of the two kernels the trainer and auditor spend their time
// in: RoundSpan with classification and ReplaySpan (kernels.h). The auto-vectorized bodies
// in kernels.cc store one state byte per element, which makes the compiler process 64
// elements per iteration and spill most of its registers; these process 8 at a time with
// mask registers (about 3x faster on L2-resident tensors, scripts/bench/rounding.lua).
//
// They perform the same IEEE-754 operations as window.h in the same order, so every result,
// state and count is identical to the generic kernels (the precision tests compare every
// variant on the same inputs). Only called when the CPU has AVX-512 F/BW/DQ/VL, and only
// from kernels.cc's span functions, which hold kernels.h's KernelFpEnv: the kernels assume
// its environment (no flush-to-zero or denormals-are-zero, round to nearest).
#pragma once

#include <cstdint>

#include "runtime/precision/kernels.h"

namespace vt::precision::avx512 {

// RoundSpan with states != nullptr. `out` may equal `x` exactly.
void RoundLog(const KernelParams& p, const double* x, double* out, uint8_t* states, int64_t n,
              RoundTally* tally);

// ReplaySpan. `out` may equal `x` exactly.
void Replay(const KernelParams& p, const double* x, const uint8_t* states, double* out, int64_t n,
            ReplayTally* tally);

// Replay for a record whose states are all NONE under the zero window (band 0, alpha 0, no
// magnitudes), reading no states (kernels.h ReplayNoneZeroWindowSpan).
void ReplayNoneZeroWindow(const KernelParams& p, const double* x, double* out, int64_t n,
                          ReplayTally* tally);

// RoundSpan without states under the zero window (band 0, alpha_scale 0, no magnitudes): the
// rounding to nearest, ties to even, and its range check (kernels.h RoundZeroWindowSpan).
void RoundZeroWindow(const KernelParams& p, const double* x, double* out, int64_t n,
                     RoundTally* tally);

// RoundSpan with states / ReplaySpan under the absolute window (band 0) with per-element
// magnitudes from a filler, bounded by `bound` (kernels.h RoundLogBoundedSpan).
void RoundLogBounded(const KernelParams& p, const double* x, double* out, uint8_t* states,
                     int64_t n, RoundTally* tally, double bound, const MagnitudeFiller& f);
void ReplayBounded(const KernelParams& p, const double* x, const uint8_t* states, double* out,
                   int64_t n, ReplayTally* tally, double bound, const MagnitudeFiller& f);

// The same with per-element absolute terms: fl(alpha * magnitude[i]), or fl(alpha * |x[i]|)
// when `magnitude` is null (kernels.h KernelParams::own_magnitude); bad magnitudes set
// tally->bad_magnitude.
void RoundLogMagnitude(const KernelParams& p, const double* x, double* out, uint8_t* states,
                       int64_t n, RoundTally* tally, const double* magnitude);
void ReplayMagnitude(const KernelParams& p, const double* x, const uint8_t* states, double* out,
                     int64_t n, ReplayTally* tally, const double* magnitude);

}  // namespace vt::precision::avx512
