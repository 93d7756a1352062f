// CUDA kernels of the precision core (round_cuda.h). The per-element arithmetic mirrors
// runtime/precision/window.h step for step, with explicit round-to-nearest intrinsics, so
// that the results equal the CPU kernels bit for bit (checked by the comparison test).
#include <cuda_runtime.h>

#include <string>

#include "runtime/common/error.h"
#include "runtime/precision/cuda/round_cuda.h"

namespace vt::precision::cuda {
namespace {

constexpr int kThreads = 256;
constexpr uint64_t kSign = 0x8000000000000000ull;
constexpr uint64_t kMinNormalExponent = 1023 - 126;
constexpr double kOverflow = 0x1p128;

void Check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    throw Error(std::string("CUDA ") + what + ": " + cudaGetErrorString(err));
  }
}

__device__ __forceinline__ uint64_t Bits(double x) {
  return static_cast<uint64_t>(__double_as_longlong(x));
}

__device__ __forceinline__ double Dbl(uint64_t u) {
  return __longlong_as_double(static_cast<long long>(u));
}

struct DeviceCell {
  double r, g, mid;
  bool on_grid, up;
};

// window.h CellOf: r = (a + C) - C with C = g * 2^52.
__device__ __forceinline__ DeviceCell CellOf(double a, uint64_t k) {
  uint64_t e = Bits(a) >> 52;
  e = e < kMinNormalExponent ? kMinNormalExponent : e;
  const double c = Dbl((e + k + 29) << 52);
  const double g = Dbl((e + k - 23) << 52);
  const double r = __dsub_rn(__dadd_rn(a, c), c);
  DeviceCell cell;
  cell.r = r;
  cell.g = g;
  cell.up = r > a;
  cell.on_grid = r == a;
  cell.mid = __dadd_rn(r, Dbl(Bits(__dmul_rn(0.5, g)) ^ (static_cast<uint64_t>(cell.up) << 63)));
  return cell;
}

// window.h InWindow: |a - mid| <= w, exactly.
__device__ __forceinline__ bool InWindow(double a, double mid, double g, double w) {
  const bool tiny = a < __dmul_rn(0.25, g);
  const double d = Dbl(Bits(__dsub_rn(a, mid)) & ~kSign);
  return tiny ? (__dsub_rn(mid, w) <= a) : (d <= w);
}

// window.h OnGridMidDistance: half the spacing of the cell below an on-grid a.
__device__ __forceinline__ double OnGridMidDistance(double a, uint64_t k, double g) {
  const uint64_t ua = Bits(a);
  uint64_t e = (ua - 1) >> 52;
  e = e < kMinNormalExponent ? kMinNormalExponent : e;
  const double below = Dbl((e + k - 23) << 52);
  return __dmul_rn(0.5, ua == 0 ? g : below);
}

// window.h LowerMidDistance: (a - lo(a)) + half the grid step below lo(a).
__device__ __forceinline__ double LowerMidDistance(double a, const DeviceCell& c, uint64_t k) {
  const double lo = __dsub_rn(c.r, Dbl(Bits(c.g) & (0 - static_cast<uint64_t>(c.up))));
  return __dadd_rn(__dsub_rn(a, lo), OnGridMidDistance(lo, k, c.g));
}

// window.h SpacingAt: CellOf(a, k).g without the rounding.
__device__ __forceinline__ double SpacingAt(double a, uint64_t k) {
  uint64_t e = Bits(a) >> 52;
  e = e < kMinNormalExponent ? kMinNormalExponent : e;
  return Dbl((e + k - 23) << 52);
}

// window.h Window: fl(fl(band * g) + alpha_scale).
__device__ __forceinline__ double Window(double band, double g, double alpha_scale) {
  return __dadd_rn(__dmul_rn(band, g), alpha_scale);
}

// window.h ExactToleranceAt: the auditor's tolerance t for EXACT values and whether EXACT
// is eligible within t of a. The comparisons select exactly as the CPU's (a NaN top or low
// picks 2^127 or 0).
struct DeviceTolerance {
  double t;
  bool eligible;
};

__device__ __forceinline__ DeviceTolerance ExactToleranceAt(double a, double w, uint64_t k,
                                                            double band, double alpha_scale) {
  const double top = __dadd_rn(a, __dmul_rn(2.0, w));
  const double g_plus = SpacingAt(top < 0x1p127 ? top : 0x1p127, k);
  const double t = __dmul_rn(2.0, Window(band, g_plus, alpha_scale));
  const double low = __dsub_rn(a, t);
  const double g_minus = SpacingAt(low > 0.0 ? low : 0.0, k);
  DeviceTolerance tol;
  tol.t = t;
  tol.eligible = Window(band, g_minus, alpha_scale) > __dmul_rn(0.25, g_minus);
  return tol;
}

// window.h Steerable: a DOWN/UP entry that moves the value would pass (off the grid, |a -
// mid| <= w, w <= g/2), or an EXACT entry could name a grid value other than rnd_b (an end of
// rnd_b's cell within t/2: its midpoints, or 0 for a zero, the other zero's midpoint within t).
__device__ __forceinline__ bool Steerable(double a, const DeviceCell& c, double w, uint64_t k,
                                          double band, double alpha_scale) {
  const bool off = !c.on_grid;
  const bool dir_ok = off & InWindow(a, c.mid, c.g, w) & (w <= __dmul_rn(0.5, c.g)) & (w > 0.0);
  const DeviceTolerance tol = ExactToleranceAt(a, w, k, band, alpha_scale);
  const double half_t = __dmul_rn(0.5, tol.t);
  const double lower_mid = LowerMidDistance(a, c, k);
  const bool near_mid = (off & InWindow(a, c.mid, c.g, half_t)) | (lower_mid <= half_t) |
                        ((c.r == 0.0) & (a <= half_t) & (lower_mid <= tol.t));
  return dir_ok | (tol.eligible & near_mid);
}

__device__ __forceinline__ unsigned long long WarpSum(unsigned long long v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

// counters: [0] down, [1] up, [2] exact, [3] out of range, [4] steerable.
__global__ void RoundKernel(KernelParams p, const double* x, double* out, uint8_t* states,
                            int64_t n, unsigned long long* counters) {
  unsigned long long down = 0, up = 0, exact = 0, bad = 0, steerable = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const uint64_t ux = Bits(x[i]);
    const uint64_t sign = ux & kSign;
    const double a = Dbl(ux ^ sign);
    const DeviceCell c = CellOf(a, p.k);
    bad |= !(c.r < kOverflow);
    if (states != nullptr) {
      const double w = Window(p.band, c.g, p.alpha_scale);
      // kernels.cc RoundOne: logged when some midpoint is within w; one other than mid
      // (below lo, or the nearest of an on-grid value) only counts when w > g/4 (EXACT).
      const bool exact_window = w > __dmul_rn(0.25, c.g);
      const bool other =
          exact_window & (LowerMidDistance(a, c, p.k) < w) & (a != 0.0);  // zeros exempt
      const uint64_t logged =
          static_cast<uint64_t>(((!c.on_grid & InWindow(a, c.mid, c.g, w)) | other) & (w > 0.0));
      const uint64_t needs_exact = static_cast<uint64_t>(exact_window);
      steerable += Steerable(a, c, w, p.k, p.band, p.alpha_scale);
      const uint64_t dir_up = static_cast<uint64_t>(c.up) ^ (sign >> 63);
      const uint64_t s = logged * ((1 + dir_up) | (3 * needs_exact));
      down += s == 1;
      up += s == 2;
      exact += s == 3;
      states[i] = static_cast<uint8_t>(s);
    }
    out[i] = Dbl(Bits(c.r) | sign);
  }
  down = WarpSum(down);
  up = WarpSum(up);
  exact = WarpSum(exact);
  bad = WarpSum(bad);
  steerable = WarpSum(steerable);
  if ((threadIdx.x & 31) == 0) {
    if (down) atomicAdd(&counters[0], down);
    if (up) atomicAdd(&counters[1], up);
    if (exact) atomicAdd(&counters[2], exact);
    if (bad) atomicAdd(&counters[3], bad);
    if (steerable) atomicAdd(&counters[4], steerable);
  }
}

// counters: [0] corrections, [1] illegitimate, [2] near misses, [3] out of range,
// [4] steerable.
__global__ void ReplayKernel(KernelParams p, const double* x, const uint8_t* states, double* out,
                             int64_t n, unsigned long long* counters) {
  unsigned long long corrections = 0, illegitimate = 0, near_misses = 0, bad = 0, steerable = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const uint64_t ux = Bits(x[i]);
    const uint64_t st = states[i];
    const uint64_t sign = ux & kSign;
    const double a = Dbl(ux ^ sign);
    const DeviceCell c = CellOf(a, p.k);
    const double w = Window(p.band, c.g, p.alpha_scale);
    const bool off = !c.on_grid;
    const bool is_dir = st == 1 || st == 2;
    const bool want_hi = (st == 2) != (sign != 0);
    const bool asks_up = is_dir && want_hi && !c.up && off;
    const bool asks_down = is_dir && !want_hi && c.up;
    const bool asks = asks_up || asks_down;
    const double on_grid_mid = OnGridMidDistance(a, p.k, c.g);
    // kernels.cc ReplayOne (window.h DirectionLegitimate): a DOWN/UP entry on the grid, under
    // a zero window or one wider than g/2, more than 2w from the midpoint, or one that moves
    // the value from more than w or to 2^128, is no honest entry, and is not applied.
    const double reach = asks ? w : __dmul_rn(2.0, w);
    const bool beyond = !(__dadd_rn(c.r, c.g) < kOverflow);
    const bool far = !off || !InWindow(a, c.mid, c.g, reach) || w > __dmul_rn(0.5, c.g) ||
                     w == 0.0 || (asks_up && beyond);
    const bool move_up = asks_up && !far;
    const bool move_down = asks_down && !far;
    const uint64_t move = static_cast<uint64_t>(move_up || move_down);
    const uint64_t delta_bits = (Bits(c.g) ^ (static_cast<uint64_t>(move_down) << 63)) & (0 - move);
    const double result = __dadd_rn(c.r, Dbl(delta_bits));
    corrections += move;
    const bool near = off ? InWindow(a, c.mid, c.g, w) : on_grid_mid < w;
    illegitimate += is_dir && far;
    near_misses += st == 0 && near;
    steerable += Steerable(a, c, w, p.k, p.band, p.alpha_scale);
    bad |= !(c.r < kOverflow) || !(result < kOverflow);
    out[i] = Dbl(Bits(result) | sign);
  }
  corrections = WarpSum(corrections);
  illegitimate = WarpSum(illegitimate);
  near_misses = WarpSum(near_misses);
  bad = WarpSum(bad);
  steerable = WarpSum(steerable);
  if ((threadIdx.x & 31) == 0) {
    if (corrections) atomicAdd(&counters[0], corrections);
    if (illegitimate) atomicAdd(&counters[1], illegitimate);
    if (near_misses) atomicAdd(&counters[2], near_misses);
    if (bad) atomicAdd(&counters[3], bad);
    if (steerable) atomicAdd(&counters[4], steerable);
  }
}

__global__ void MaxAbsKernel(const double* x, int64_t n, unsigned long long* result) {
  unsigned long long m = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const unsigned long long v = Bits(x[i]) & ~kSign;
    m = v > m ? v : m;
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    const unsigned long long o = __shfl_down_sync(0xffffffffu, m, offset);
    m = o > m ? o : m;
  }
  if ((threadIdx.x & 31) == 0 && m != 0) atomicMax(result, m);
}

int Blocks(int64_t n) {
  int device = 0, sms = 0;
  Check(cudaGetDevice(&device), "cudaGetDevice");
  Check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
        "cudaDeviceGetAttribute");
  const int64_t needed = (n + kThreads - 1) / kThreads;
  const int64_t cap = static_cast<int64_t>(sms) * 32;
  return static_cast<int>(needed < cap ? (needed > 0 ? needed : 1) : cap);
}

// Device scratch for the kernels' counters, freed on scope exit.
constexpr int kCounters = 5;

class Counters {
 public:
  Counters() {
    Check(cudaMalloc(&ptr_, kCounters * sizeof(unsigned long long)), "cudaMalloc");
    Check(cudaMemset(ptr_, 0, kCounters * sizeof(unsigned long long)), "cudaMemset");
  }
  ~Counters() { cudaFree(ptr_); }
  unsigned long long* get() { return ptr_; }
  void Read(unsigned long long out[kCounters]) {
    Check(cudaMemcpy(out, ptr_, kCounters * sizeof(unsigned long long), cudaMemcpyDeviceToHost),
          "cudaMemcpy");
  }

 private:
  unsigned long long* ptr_ = nullptr;
};

// A device buffer freed on scope exit.
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(int64_t n) {
    if (n > 0) Check(cudaMalloc(&ptr_, static_cast<size_t>(n) * sizeof(T)), "cudaMalloc");
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  T* get() { return ptr_; }

 private:
  T* ptr_ = nullptr;
};

}  // namespace

bool DeviceAvailable(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (why != nullptr) *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err);
    return false;
  }
  if (count == 0) {
    if (why != nullptr) *why = "no CUDA device";
    return false;
  }
  return true;
}

std::string DeviceName() {
  int device = 0;
  Check(cudaGetDevice(&device), "cudaGetDevice");
  cudaDeviceProp prop;
  Check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  return prop.name;
}

void RoundDevice(const KernelParams& p, const double* x, double* out, uint8_t* states, int64_t n,
                 RoundTally* tally) {
  if (n <= 0) return;
  Counters counters;
  RoundKernel<<<Blocks(n), kThreads>>>(p, x, out, states, n, counters.get());
  Check(cudaGetLastError(), "RoundKernel launch");
  Check(cudaDeviceSynchronize(), "RoundKernel");
  unsigned long long c[kCounters];
  counters.Read(c);
  tally->down += static_cast<int64_t>(c[0]);
  tally->up += static_cast<int64_t>(c[1]);
  tally->exact += static_cast<int64_t>(c[2]);
  tally->steerable += static_cast<int64_t>(c[4]);
  tally->out_of_range |= c[3] != 0;
}

void ReplayDevice(const KernelParams& p, const double* x, const uint8_t* states, double* out,
                  int64_t n, ReplayTally* tally) {
  if (n <= 0) return;
  Counters counters;
  ReplayKernel<<<Blocks(n), kThreads>>>(p, x, states, out, n, counters.get());
  Check(cudaGetLastError(), "ReplayKernel launch");
  Check(cudaDeviceSynchronize(), "ReplayKernel");
  unsigned long long c[kCounters];
  counters.Read(c);
  tally->corrections += static_cast<int64_t>(c[0]);
  tally->illegitimate += static_cast<int64_t>(c[1]);
  tally->near_misses += static_cast<int64_t>(c[2]);
  tally->steerable += static_cast<int64_t>(c[4]);
  tally->out_of_range |= c[3] != 0;
}

uint64_t MaxAbsBitsDevice(const double* x, int64_t n) {
  if (n <= 0) return 0;
  Counters result;
  MaxAbsKernel<<<Blocks(n), kThreads>>>(x, n, result.get());
  Check(cudaGetLastError(), "MaxAbsKernel launch");
  Check(cudaDeviceSynchronize(), "MaxAbsKernel");
  unsigned long long c[kCounters];
  result.Read(c);
  return c[0];
}

void RoundHost(const KernelParams& p, const double* x, double* out, uint8_t* states, int64_t n,
               RoundTally* tally) {
  if (n <= 0) return;
  DeviceBuffer<double> dx(n), dout(n);
  DeviceBuffer<uint8_t> dstates(states != nullptr ? n : 0);
  const size_t bytes = static_cast<size_t>(n) * sizeof(double);
  Check(cudaMemcpy(dx.get(), x, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  RoundDevice(p, dx.get(), dout.get(), states != nullptr ? dstates.get() : nullptr, n, tally);
  Check(cudaMemcpy(out, dout.get(), bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  if (states != nullptr) {
    Check(cudaMemcpy(states, dstates.get(), static_cast<size_t>(n), cudaMemcpyDeviceToHost),
          "cudaMemcpy");
  }
}

void ReplayHost(const KernelParams& p, const double* x, const uint8_t* states, double* out,
                int64_t n, ReplayTally* tally) {
  if (n <= 0) return;
  DeviceBuffer<double> dx(n), dout(n);
  DeviceBuffer<uint8_t> dstates(n);
  const size_t bytes = static_cast<size_t>(n) * sizeof(double);
  Check(cudaMemcpy(dx.get(), x, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  Check(cudaMemcpy(dstates.get(), states, static_cast<size_t>(n), cudaMemcpyHostToDevice),
        "cudaMemcpy");
  ReplayDevice(p, dx.get(), dstates.get(), dout.get(), n, tally);
  Check(cudaMemcpy(out, dout.get(), bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
}

uint64_t MaxAbsBitsHost(const double* x, int64_t n) {
  if (n <= 0) return 0;
  DeviceBuffer<double> dx(n);
  Check(cudaMemcpy(dx.get(), x, static_cast<size_t>(n) * sizeof(double), cudaMemcpyHostToDevice),
        "cudaMemcpy");
  return MaxAbsBitsDevice(dx.get(), n);
}

}  // namespace vt::precision::cuda
