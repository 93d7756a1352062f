// Compares the CUDA precision kernels with the CPU kernels bit for bit: rnd_b outputs,
// states and tallies of RoundSpan (down/up/exact/steerable), outputs and tallies of
// ReplaySpan (corrections/illegitimate/near misses/steerable), and MaxAbsBits, for every b
// in [10, 32], several windows (narrow ones and ones wider than g/4 or g/2 over much of the
// range, where values on the grid and zeros are logged EXACT) and every CPU kernel variant
// this machine runs, on random and adversarial values (including NaN/Inf for the range
// flag). Exit status: 0 all equal, 1 a difference, 77 no CUDA device (ctest maps it to
// "skipped"). Usage: vt_precision_cuda_compare [values_per_b] [seed]
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/precision/cuda/round_cuda.h"
#include "runtime/precision/kernels.h"
#include "tests/precision/oracle.h"

namespace {

namespace prec = vt::precision;

int failures = 0;

void Fail(const std::string& what) {
  if (failures++ < 20) std::fprintf(stderr, "DIFFERENCE: %s\n", what.c_str());
}

std::string Hex(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

uint64_t Bits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, 8);
  return u;
}

std::string RoundCounts(const prec::RoundTally& t) {
  return std::to_string(t.down) + "/" + std::to_string(t.up) + "/" + std::to_string(t.exact) + "/" +
         std::to_string(t.steerable) + (t.out_of_range ? "/out_of_range" : "");
}

std::string ReplayCounts(const prec::ReplayTally& t) {
  return std::to_string(t.corrections) + "/" + std::to_string(t.illegitimate) + "/" +
         std::to_string(t.near_misses) + "/" + std::to_string(t.steerable) +
         (t.out_of_range ? "/out_of_range" : "");
}

bool SameRound(const prec::RoundTally& a, const prec::RoundTally& b) {
  return a.down == b.down && a.up == b.up && a.exact == b.exact && a.steerable == b.steerable &&
         a.out_of_range == b.out_of_range;
}

bool SameReplay(const prec::ReplayTally& a, const prec::ReplayTally& b) {
  return a.corrections == b.corrections && a.illegitimate == b.illegitimate &&
         a.near_misses == b.near_misses && a.steerable == b.steerable &&
         a.out_of_range == b.out_of_range;
}

// CPU totals over all comparisons, printed so that a run shows the paths were exercised.
prec::RoundTally round_total;
prec::ReplayTally replay_total;

void CompareRound(const prec::KernelParams& p, const std::vector<double>& x,
                  const std::string& label) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<double> cpu(x.size()), gpu(x.size());
  std::vector<uint8_t> cpu_s(x.size()), gpu_s(x.size());
  prec::RoundTally tc, tg;
  prec::RoundSpan(p, x.data(), cpu.data(), cpu_s.data(), n, &tc);
  prec::cuda::RoundHost(p, x.data(), gpu.data(), gpu_s.data(), n, &tg);
  if (!SameRound(tc, tg)) {
    Fail(label + ": round tallies (down/up/exact/steerable) differ: cpu " + RoundCounts(tc) +
         ", gpu " + RoundCounts(tg));
  }
  round_total.down += tc.down;
  round_total.up += tc.up;
  round_total.exact += tc.exact;
  round_total.steerable += tc.steerable;
  for (int64_t i = 0; i < n; ++i) {
    if (Bits(cpu[i]) != Bits(gpu[i]) || cpu_s[i] != gpu_s[i]) {
      Fail(label + ": x=" + Hex(x[i]) + " cpu " + Hex(cpu[i]) + "/" + std::to_string(cpu_s[i]) +
           " gpu " + Hex(gpu[i]) + "/" + std::to_string(gpu_s[i]));
    }
  }
  // Without a log the outputs are the same too, and nothing is counted.
  prec::RoundTally tc2, tg2;
  prec::RoundSpan(p, x.data(), cpu.data(), nullptr, n, &tc2);
  prec::cuda::RoundHost(p, x.data(), gpu.data(), nullptr, n, &tg2);
  if (!SameRound(tc2, tg2)) {
    Fail(label + ": round tallies without log differ: cpu " + RoundCounts(tc2) + ", gpu " +
         RoundCounts(tg2));
  }
  for (int64_t i = 0; i < n; ++i) {
    if (Bits(cpu[i]) != Bits(gpu[i])) Fail(label + ": round without log differs at x=" + Hex(x[i]));
  }
}

void CompareReplay(const prec::KernelParams& p, const std::vector<double>& x,
                   const std::vector<uint8_t>& states, const std::string& label) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<double> cpu(x.size()), gpu(x.size());
  prec::ReplayTally tc, tg;
  prec::ReplaySpan(p, x.data(), states.data(), cpu.data(), n, &tc);
  prec::cuda::ReplayHost(p, x.data(), states.data(), gpu.data(), n, &tg);
  if (!SameReplay(tc, tg)) {
    Fail(label + ": replay tallies (corrections/illegitimate/near misses/steerable) differ: cpu " +
         ReplayCounts(tc) + ", gpu " + ReplayCounts(tg));
  }
  replay_total.corrections += tc.corrections;
  replay_total.illegitimate += tc.illegitimate;
  replay_total.near_misses += tc.near_misses;
  replay_total.steerable += tc.steerable;
  for (int64_t i = 0; i < n; ++i) {
    if (Bits(cpu[i]) != Bits(gpu[i])) {
      Fail(label + ": replay x=" + Hex(x[i]) + " state " + std::to_string(states[i]) + " cpu " +
           Hex(cpu[i]) + " gpu " + Hex(gpu[i]));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string why;
  if (!prec::cuda::DeviceAvailable(&why)) {
    std::printf("skipped: %s\n", why.c_str());
    return 77;
  }
  const int per_b = argc > 1 ? std::atoi(argv[1]) : 200000;
  const uint64_t seed = argc > 2 ? std::strtoull(argv[2], nullptr, 0) : 20240601;
  std::printf("device: %s, %d values per b, seed %llu\n", prec::cuda::DeviceName().c_str(), per_b,
              static_cast<unsigned long long>(seed));
  vt::precision::oracle::ValueGenerator gen(seed);
  const std::vector<prec::KernelIsa> isas = prec::SupportedKernelIsas();
  const prec::KernelIsa active = prec::ActiveKernelIsa();
  int64_t compared = 0;
  for (int bits = 10; bits <= 32; ++bits) {
    std::vector<double> x;
    for (int i = 0; i < per_b; ++i) {
      double v = gen.Any(bits);
      if (vt::precision::oracle::GridOf(v, bits).out_of_range) v = 0.5;
      x.push_back(v);
    }
    double scale = 0;
    for (double v : x) scale = std::max(scale, std::fabs(v));
    const uint64_t max_cpu = prec::MaxAbsBits(x.data(), static_cast<int64_t>(x.size()));
    if (max_cpu != prec::cuda::MaxAbsBitsHost(x.data(), static_cast<int64_t>(x.size()))) {
      Fail("b=" + std::to_string(bits) + ": max |x| differs");
    }
    // Narrow windows, and wide ones: band > 1/4 (EXACT wherever logged), and alpha terms
    // that pass g/4 (on-grid values and zeros logged EXACT) and g/2 (DOWN/UP entries
    // illegitimate) at different magnitudes (scale is up to about 2^127 here).
    const double windows[][2] = {{0.25, 0},        {0.0, 0x1p-44},  {0.5, 0},
                                 {0.1, 0x1p-30},   {0.0, 0x1p-200}, {0.3, 0x1p-120},
                                 {0.25, 0x1p-100}, {0.05, 0x1p-140}};
    for (const auto& win : windows) {
      prec::KernelParams p;
      p.k = static_cast<uint64_t>(32 - bits);
      p.band = win[0];
      p.alpha_scale = win[1] * scale;
      std::vector<uint8_t> states(x.size());
      for (auto& s : states) s = static_cast<uint8_t>(gen.Int(0, 3));
      for (prec::KernelIsa isa : isas) {
        prec::SetKernelIsa(isa);
        const std::string label = "b=" + std::to_string(bits) + " band=" + std::to_string(win[0]) +
                                  " alpha=" + Hex(win[1]) + " cpu=" + prec::KernelIsaName(isa);
        CompareRound(p, x, label);
        CompareReplay(p, x, states, label);
        compared += static_cast<int64_t>(x.size());
      }
    }
  }
  prec::SetKernelIsa(active);
  // Out-of-range values set the flag on both sides.
  {
    std::vector<double> bad = {1.0, NAN, 2.0};
    prec::KernelParams p;
    prec::RoundTally tc, tg;
    std::vector<double> o(3);
    std::vector<uint8_t> s(3);
    prec::RoundSpan(p, bad.data(), o.data(), s.data(), 3, &tc);
    prec::cuda::RoundHost(p, bad.data(), o.data(), s.data(), 3, &tg);
    if (!tc.out_of_range || !tg.out_of_range) Fail("NaN not flagged on both sides");
    bad = {1.0, INFINITY, 3.5e38};
    prec::RoundTally tc2, tg2;
    prec::RoundSpan(p, bad.data(), o.data(), s.data(), 3, &tc2);
    prec::cuda::RoundHost(p, bad.data(), o.data(), s.data(), 3, &tg2);
    if (!tc2.out_of_range || !tg2.out_of_range) Fail("Inf/overflow not flagged on both sides");
  }
  std::printf(
      "cpu totals: round down/up/exact/steerable %s, replay "
      "corrections/illegitimate/near misses/steerable %s\n",
      RoundCounts(round_total).c_str(), ReplayCounts(replay_total).c_str());
  std::printf("%lld element comparisons (round + replay), %d differences\n",
              static_cast<long long>(compared), failures);
  return failures == 0 ? 0 : 1;
}
