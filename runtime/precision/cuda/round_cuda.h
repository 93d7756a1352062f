// CUDA versions of the precision kernels (kernels.h): rnd_b + window classification,
// replay, and the max |x| used for the scale, bit-identical to the CPU kernels. Built only
// when nvcc is found (library vt_precision_cuda); the comparison test
// tests/precision/cuda_compare.cc checks them bit for bit against RoundSpan/ReplaySpan.
//
// Exactness: every floating-point operation is an explicit round-to-nearest intrinsic
// (__dadd_rn, __dsub_rn, __dmul_rn) and the file is compiled with --fmad=false, so no
// multiply-add is ever contracted; the integer steps are the CPU's bit for bit.
// Errors: CUDA failures throw vt::Error naming the call. Thread safety: calls use the
// default stream and synchronize before returning; do not run them concurrently with
// other work on the same buffers. This header needs no CUDA headers.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/precision/kernels.h"

namespace vt::precision::cuda {

// True if a CUDA device can run the kernels; otherwise false with the reason in `*why`.
bool DeviceAvailable(std::string* why);

// The device's name ("NVIDIA H100 80GB HBM3"). Throws vt::Error without a device.
std::string DeviceName();

// Device pointers (cudaMalloc'd), n elements each; semantics as RoundSpan / ReplaySpan
// (EXACT states are replayed as NONE; the caller writes the stored values and checks them
// with window.h ExactLegitimate on the host). Tallies, `steerable` included, are added to
// `*tally`. `states` may be null in RoundDevice (no classification, no counts).
void RoundDevice(const KernelParams& p, const double* x, double* out, uint8_t* states, int64_t n,
                 RoundTally* tally);
void ReplayDevice(const KernelParams& p, const double* x, const uint8_t* states, double* out,
                  int64_t n, ReplayTally* tally);
// max |x| as an FP64 bit pattern, as MaxAbsBits.
uint64_t MaxAbsBitsDevice(const double* x, int64_t n);

// Host-pointer conveniences: copy to the device, run, copy back.
void RoundHost(const KernelParams& p, const double* x, double* out, uint8_t* states, int64_t n,
               RoundTally* tally);
void ReplayHost(const KernelParams& p, const double* x, const uint8_t* states, double* out,
                int64_t n, ReplayTally* tally);
uint64_t MaxAbsBitsHost(const double* x, int64_t n);

}  // namespace vt::precision::cuda
