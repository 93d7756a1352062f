// Portable counter-based random numbers (Philox4x32-10 from Random123).
//
// Every value is a pure function of (seed, stream, index): identical on every machine,
// compiler, thread count and device, which is what replay across device profiles needs.
// Only IEEE-754 +, -, *, / and sqrt are used to turn bits into numbers (no libm calls whose
// last bit differs between C libraries). Thread-safe: there is no state.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace vt {

// Streams separate the purposes that draw from one seed, so they never share counters.
enum class RandomStream : uint32_t {
  kUser = 0,       // vt.tensor.rand / randn
  kInit = 1,       // weight initialisation
  kDataOrder = 2,  // shuffling
  kAugment = 3,    // data augmentation
  kDropout = 4,    // dropout masks
};

// The raw Philox4x32-10 block for counter (c0, c1, c2, c3) under key (k0, k1).
void Philox4x32(uint32_t k0, uint32_t k1, const uint32_t counter[4], uint32_t out[4]);

// A uniform double in [0, 1) with 53 random bits, element `index` of `stream`.
double UniformAt(uint64_t seed, uint32_t stream, uint64_t index);

// A standard normal double (Marsaglia's polar method), element `index` of `stream`.
double NormalAt(uint64_t seed, uint32_t stream, uint64_t index);

// log(x) for finite x > 0, from IEEE arithmetic only (within ~2 ulp, bit-identical everywhere).
double PortableLog(double x);

// Fill a new contiguous CPU tensor of `sizes` (dtype float64 or float32; float32 values are the
// float64 draws rounded to nearest) with uniform [0, 1) / standard normal values.
at::Tensor UniformTensor(at::IntArrayRef sizes, at::ScalarType dtype, uint64_t seed,
                         uint32_t stream);
at::Tensor NormalTensor(at::IntArrayRef sizes, at::ScalarType dtype, uint64_t seed,
                        uint32_t stream);

}  // namespace vt
