#include "runtime/precision/round.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/common/error.h"
#include "runtime/common/helped_for.h"
#include "runtime/precision/window.h"
#include "runtime/tensor/dtype.h"
#include "store/crc32c.h"

namespace vt::precision {
namespace {

// Elements per parallel task of the grid pass (a diagnostic, on LibTorch's threads): 2 MiB of
// FP64. Waking a sleeping OpenMP thread (vtrun runs libgomp PASSIVE on more than one thread)
// costs 30-50 us on a VM's vCPUs; the boundaries' passes avoid waiting for it (HelpedFor).
constexpr int64_t kGrain = int64_t{1} << 18;

constexpr uint64_t kInfinityBits = 0x7ff0000000000000ull;

std::string FormatDouble(double v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

// Values on the FP32 grid print as their shortest FP32 form ("3.4028235e+38").
std::string FormatGridValue(double v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, static_cast<float>(v));
  return std::string(buf, res.ptr);
}

std::string TypeName(at::ScalarType type) {
  try {
    return DtypeName(type);
  } catch (const Error&) {
    return c10::toString(type);
  }
}

void CheckInput(const at::Tensor& x, const char* what) {
  if (!x.defined()) throw Error(std::string(what) + " is an undefined tensor");
  if (x.device().type() != at::kCPU) {
    throw Error(std::string(what) + " must be a CPU tensor, got one on " + x.device().str());
  }
  if (x.scalar_type() != at::kDouble) {
    throw Error(std::string(what) + " must be a float64 tensor, got " + TypeName(x.scalar_type()));
  }
}

// `out` must be a contiguous CPU float64 tensor with x's element count, equal to x or
// disjoint from it.
void CheckOutput(const at::Tensor& x, const at::Tensor& out) {
  CheckInput(out, "output");
  if (!out.is_contiguous()) throw Error("output must be contiguous");
  if (out.numel() != x.numel()) {
    throw Error("output has " + std::to_string(out.numel()) + " elements but the input has " +
                std::to_string(x.numel()));
  }
  if (x.numel() == 0) return;
  const char* xb = static_cast<const char*>(x.data_ptr());
  const char* ob = static_cast<const char*>(out.data_ptr());
  const size_t bytes = static_cast<size_t>(x.numel()) * sizeof(double);
  if (xb != ob && xb < ob + bytes && ob < xb + bytes) {
    throw Error("output partially overlaps the input (in place needs the very same elements)");
  }
}

void CheckContiguousInput(const at::Tensor& x) {
  CheckInput(x, "input");
  if (!x.is_contiguous()) throw Error("input must be contiguous (Round/Replay copy it for you)");
}

std::string Where(const BoundaryContext& context, int64_t index) {
  std::string s = " at ";
  if (!context.boundary.empty()) s += "'" + std::string(context.boundary) + "', ";
  if (context.step >= 0) s += "step " + std::to_string(context.step) + ", ";
  s += "index " + std::to_string(index);
  return s;
}

bool OutOfRange(double v, uint64_t k) {
  const double a = std::fabs(v);
  return !(CellOf(a, k).r < kFp32Overflow);
}

// The error for an out-of-range element `v` at `index`. `overwritten`: v is the rounded
// output of an in-place call (the input value is gone).
[[noreturn]] void ThrowRangeError(const BoundaryContext& context, int64_t index, double v, int bits,
                                  bool overwritten) {
  const std::string where = Where(context, index);
  if (std::isnan(v)) throw Error("NaN" + where);
  if (std::isinf(v) && !overwritten) throw Error("infinite value" + where + ": " + FormatDouble(v));
  const std::string limit = "largest value on the b = " + std::to_string(bits) +
                            " grid: " + FormatGridValue(LargestGridValue(bits));
  if (overwritten) {
    throw Error("overflow" + where + ": the value (overwritten in place) is infinite or its " +
                "result is " + FormatDouble(std::copysign(kFp32Overflow, v)) +
                " or beyond, outside the FP32 range (" + limit + ")");
  }
  throw Error("overflow" + where + ": " + FormatDouble(v) + " rounds beyond the FP32 range (" +
              limit + ")");
}

// Finds and reports the first element of x whose rnd_b is out of range. Must not return.
[[noreturn]] void ReportFirstOutOfRange(const double* x, int64_t n, int bits,
                                        const BoundaryContext& context, bool overwritten) {
  const uint64_t k = static_cast<uint64_t>(32 - bits);
  for (int64_t i = 0; i < n; ++i) {
    if (OutOfRange(x[i], k)) ThrowRangeError(context, i, x[i], bits, overwritten);
  }
  throw Error("internal error: the kernel reported an out-of-range value that a rescan missed");
}

// max |x| over the tensor; raises the range error for NaN/Inf.
double ComputeScale(const double* x, int64_t n, int bits, const BoundaryContext& context) {
  std::mutex mu;
  uint64_t max_bits = 0;
  HelpedFor(n, int64_t{1} << 15, [&](int64_t begin, int64_t end) {
    const uint64_t m = MaxAbsBits(x + begin, end - begin);
    std::lock_guard<std::mutex> lock(mu);
    if (m > max_bits) max_bits = m;
  });
  if (max_bits >= kInfinityBits) ReportFirstOutOfRange(x, n, bits, context, false);
  return BitsDouble(max_bits);
}

// The magnitude for x's n elements, checked (undefined stays undefined); an array is made
// contiguous.
Magnitude CheckedMagnitude(const Magnitude& magnitude, int64_t n) {
  if (!magnitude.defined()) return magnitude;
  if (magnitude.computed()) {
    if (magnitude.numel() != n) {
      throw Error("magnitude covers " + std::to_string(magnitude.numel()) +
                  " elements but the tensor has " + std::to_string(n));
    }
    return magnitude;
  }
  const at::Tensor& values = magnitude.values();
  CheckInput(values, "magnitude");
  if (values.numel() != n) {
    throw Error("magnitude has " + std::to_string(values.numel()) +
                " elements but the tensor has " + std::to_string(n));
  }
  return Magnitude(values.contiguous());
}

// Elements per block of a computed magnitude (an outer product, absolute values) filled into
// a buffer on the stack (16 KiB: it stays in the L1 cache between its stores and the
// kernel's loads).
constexpr int64_t kMagnitudeBlock = 2048;

// Calls span(offset, count, m) over [begin, end): m points into the magnitude array, or at a
// buffer holding the block's magnitudes for a computed one, or is null without magnitude.
template <class Span>
void ForMagnitudeBlocks(const Magnitude& mag, const double* array, int64_t begin, int64_t end,
                        Span span) {
  if (!mag.computed()) {
    span(begin, end - begin, array != nullptr ? array + begin : nullptr);
    return;
  }
  alignas(64) double buf[kMagnitudeBlock];
  for (int64_t s = begin; s < end; s += kMagnitudeBlock) {
    const int64_t count = std::min(kMagnitudeBlock, end - s);
    mag.Fill(s, count, buf);
    span(s, count, buf);
  }
}

// Magnitude::Fill as a MagnitudeFiller's function (ctx: the Magnitude).
void FillMagnitude(const void* ctx, int64_t begin, int64_t count, double* out) {
  static_cast<const Magnitude*>(ctx)->Fill(begin, count, out);
}

// Calls span(offset, count, bound, filler) over [begin, end) in blocks of kMagnitudeBlock,
// with the block's bound from `bound` and a filler of `mag` from the block's start.
template <class Span>
void ForBoundedBlocks(const Magnitude& mag, const OuterBound& bound, int64_t begin, int64_t end,
                      Span span) {
  for (int64_t s = begin; s < end; s += kMagnitudeBlock) {
    const int64_t count = std::min(kMagnitudeBlock, end - s);
    span(s, count, bound.Over(s, count), MagnitudeFiller{&FillMagnitude, &mag, s});
  }
}

// The bound that lets the kernels skip most of an outer magnitude's elements, under an
// absolute window (band 0) only: undefined (not valid) otherwise.
OuterBound BoundFor(const Magnitude& mag, double band) {
  return mag.defined() && mag.is_outer() && band == 0.0 ? OuterBound(mag.outer()) : OuterBound();
}

// Elements per checksummed block of an output: store::kCrc32cBlock bytes.
constexpr int64_t kCrcBlock = static_cast<int64_t>(store::kCrc32cBlock / sizeof(double));

std::atomic<int64_t> checksummed_blocks{0};

// crc extended over out's count doubles from begin.
uint32_t ExtendCrc(uint32_t crc, const double* out, int64_t begin, int64_t count) {
  return store::Crc32cExtend(crc, reinterpret_cast<const uint8_t*>(out + begin),
                             static_cast<size_t>(count) * sizeof(double));
}

// Elements a producer writes at a time before the kernels round them (16 KiB: the block is
// still in the L1 cache when the kernels read it back), and a span the kernels round before
// its output is checksummed.
constexpr int64_t kProduceBlock = 2048;

// Calls span(begin, end) over [0, n) in blocks of kCrcBlock elements, on the calling thread
// and on helpers that join as they wake (HelpedFor: a boundary's pass is too short to wait
// for a sleeping thread). With `crcs`, each full block is taken kProduceBlock elements at a
// time, and its checksum extended over each as soon as its span wrote it to `out`, while it
// is still in L1 (read back after the whole block, it comes from L2; after the whole output,
// from memory): crcs[b] is block b's CRC-32C, for the n / kCrcBlock full blocks (JoinCrcs
// adds the rest).
template <class Span>
void ForOutputBlocks(int64_t n, const double* out, std::vector<uint32_t>* crcs, Span span) {
  const int64_t full = n / kCrcBlock;
  if (crcs != nullptr) crcs->assign(static_cast<size_t>(full), 0);
  HelpedFor(n, kCrcBlock, [&](int64_t begin, int64_t end) {
    const KernelFpEnv env;  // on a helper thread too
    const int64_t b = begin / kCrcBlock;
    if (crcs == nullptr || b >= full) {
      span(begin, end);
      return;
    }
    uint32_t crc = 0;
    for (int64_t s = begin; s < end; s += kProduceBlock) {
      const int64_t e = std::min(end, s + kProduceBlock);
      span(s, e);
      crc = ExtendCrc(crc, out, s, e - s);
    }
    (*crcs)[static_cast<size_t>(b)] = crc;
    checksummed_blocks.fetch_add(1, std::memory_order_relaxed);
  });
}

// The CRC-32C of out's n doubles from the CRCs of its full blocks (ForOutputBlocks), the same
// value as one Crc32cExtend over them.
uint32_t JoinCrcs(const std::vector<uint32_t>& crcs, const double* out, int64_t n) {
  uint32_t crc = crcs.empty() ? 0 : crcs[0];
  for (size_t b = 1; b < crcs.size(); ++b) crc = store::Crc32cAppendBlock(crc, crcs[b]);
  const int64_t done = static_cast<int64_t>(crcs.size()) * kCrcBlock;
  return store::Crc32cExtend(crc, reinterpret_cast<const uint8_t*>(out + done),
                             static_cast<size_t>(n - done) * sizeof(double));
}

// Elements per parallel task of a producer run on its own (the elementwise kernels' grain).
constexpr int64_t kProducerGrain = int64_t{1} << 15;

// Calls span(s, e) over [begin, end): at once without a producer, else block by block, each
// block produced first.
template <class Span>
void ForProducedBlocks(const BlockProducer* produce, int64_t begin, int64_t end, Span span) {
  if (produce == nullptr) {
    span(begin, end);
    return;
  }
  for (int64_t s = begin; s < end; s += kProduceBlock) {
    const int64_t e = std::min(end, s + kProduceBlock);
    (*produce)(s, e);
    span(s, e);
  }
}

// Whether a window's absolute term needs the tensor's max |x| before any value is rounded.
bool NeedsScale(const RoundOptions& options, bool has_magnitude) {
  return options.alpha > 0.0 && !has_magnitude && !options.own_magnitude;
}

// Reports the first element whose magnitude breaks its contract (round.h). Must not return.
[[noreturn]] void ReportBadMagnitude(const Magnitude& mag, int64_t n,
                                     const BoundaryContext& context) {
  const double* array = mag.computed() ? nullptr : mag.values().data_ptr<double>();
  ForMagnitudeBlocks(mag, array, 0, n, [&](int64_t offset, int64_t count, const double* m) {
    for (int64_t i = 0; i < count; ++i) {
      if (m[i] >= 0.0 && m[i] < kInfinity) continue;
      throw Error("bad magnitude" + Where(context, offset + i) + ": " + FormatDouble(m[i]) +
                  " (a magnitude must be finite and >= 0)");
    }
  });
  throw Error("internal error: the kernel reported a bad magnitude that a rescan missed");
}

// The EXACT list of a record whose states were just written: the positions holding 3, with
// the FP32 bits of the rounded outputs there (exact: outputs are on the grid).
std::vector<ExactEntry> CollectExact(const uint8_t* states, const double* out, int64_t n,
                                     int64_t count) {
  std::vector<ExactEntry> exact;
  exact.reserve(static_cast<size_t>(count));
  const uint8_t* p = states;
  const uint8_t* end = states + n;
  while (p < end) {
    const void* hit =
        std::memchr(p, static_cast<int>(LogState::kExact), static_cast<size_t>(end - p));
    if (hit == nullptr) break;
    const uint8_t* q = static_cast<const uint8_t*>(hit);
    const int64_t pos = q - states;
    exact.push_back(ExactEntry{pos, FloatBits(static_cast<float>(out[pos]))});
    p = q + 1;
  }
  return exact;
}

}  // namespace

void RoundOptions::Validate() const {
  if (bits < kMinBits || bits > kMaxBits) {
    throw Error("bits must be an integer in [10, 32], got " + std::to_string(bits));
  }
  if (!(band >= 0.0 && band <= 0.5)) {
    throw Error("band must be in [0, 0.5], got " + FormatDouble(band));
  }
  if (!(alpha >= 0.0 && std::isfinite(alpha))) {
    throw Error("alpha must be finite and >= 0, got " + FormatDouble(alpha));
  }
}

KernelParams MakeKernelParams(const RoundOptions& options, double scale) {
  KernelParams p;
  p.k = static_cast<uint64_t>(32 - options.bits);
  p.band = options.band;
  p.alpha_scale = options.alpha * scale;
  p.alpha = options.alpha;
  p.own_magnitude = options.own_magnitude;
  return p;
}

double LargestGridValue(int bits) {
  if (bits < kMinBits || bits > kMaxBits) {
    throw Error("bits must be an integer in [10, 32], got " + std::to_string(bits));
  }
  const uint32_t mask = (uint32_t{1} << (32 - bits)) - 1;
  return static_cast<double>(BitsFloat(0x7f7fffffu & ~mask));
}

double RoundValue(double x, int bits) {
  const KernelFpEnv env;  // (kernels.h)
  RoundOptions options;
  options.bits = bits;
  options.Validate();
  const uint64_t k = static_cast<uint64_t>(32 - bits);
  if (OutOfRange(x, k)) ThrowRangeError(BoundaryContext{}, 0, x, bits, false);
  const uint64_t ux = DoubleBits(x);
  const uint64_t sign = ux & kSignBit;
  return BitsDouble(DoubleBits(CellOf(BitsDouble(ux ^ sign), k).r) | sign);
}

namespace {

// One boundary's rounding pass over n values at xp into op (equal to xp in place), in pieces:
// Span over blocks whose values are in place (any order, on any thread), then Finish. The
// options are validated and the magnitude checked; a window that needs the tensor's max |x|
// reads every value when the pass is made.
class RoundPass {
 public:
  RoundPass(const double* xp, double* op, int64_t n, const RoundOptions& options, LogRecord* log,
            const BoundaryContext& context, const Magnitude& mag)
      : xp_(xp), op_(op), n_(n), options_(options), log_(log), context_(context), mag_(mag) {
    mp_ = mag.defined() && !mag.computed() && n > 0 ? mag.values().data_ptr<double>() : nullptr;
    if (NeedsScale(options, mag.defined()))
      stats_.scale = ComputeScale(xp, n, options.bits, context);
    params_ = MakeKernelParams(options, stats_.scale);
    states_ = log != nullptr ? log->ResetForWrite(n) : nullptr;
    bound_ = states_ != nullptr ? BoundFor(mag, options.band) : OuterBound();
  }

  // Rounds [from, to), adding to `t`.
  void Span(int64_t from, int64_t to, RoundTally* t) const {
    if (bound_.valid()) {
      ForBoundedBlocks(mag_, bound_, from, to,
                       [&](int64_t at, int64_t count, double b, const MagnitudeFiller& f) {
                         RoundLogBoundedSpan(params_, xp_ + at, op_ + at, states_ + at, count, t, b,
                                             f);
                       });
    } else {
      ForMagnitudeBlocks(mag_, mp_, from, to, [&](int64_t at, int64_t count, const double* m) {
        RoundSpan(params_, xp_ + at, op_ + at, states_ != nullptr ? states_ + at : nullptr, count,
                  t, m);
      });
    }
  }

  // After every span, with their tallies summed: reports a range error or a bad magnitude
  // (throws) and fills the record.
  RoundStats Finish(const RoundTally& total) {
    const bool in_place = xp_ == op_;
    if (total.out_of_range) {
      ReportFirstOutOfRange(in_place ? op_ : xp_, n_, options_.bits, context_, in_place);
    }
    if (total.bad_magnitude) ReportBadMagnitude(mag_, n_, context_);
    if (log_ != nullptr) {
      stats_.counts.down = total.down;
      stats_.counts.up = total.up;
      stats_.counts.exact = total.exact;
      stats_.counts.none = n_ - total.down - total.up - total.exact;
      stats_.steerable = total.steerable;
      std::vector<ExactEntry> exact;
      if (total.exact > 0) exact = CollectExact(states_, op_, n_, total.exact);
      log_->FinishWrite(stats_.counts, std::move(exact));
    }
    return stats_;
  }

 private:
  const double* xp_;
  double* op_;
  int64_t n_;
  RoundOptions options_;
  LogRecord* log_;
  BoundaryContext context_;
  const Magnitude& mag_;
  const double* mp_ = nullptr;
  RoundStats stats_;
  KernelParams params_;
  uint8_t* states_ = nullptr;
  OuterBound bound_;
};

// RoundInto over n values at xp (equal to op in place), or, with `produce`, over the values it
// writes at op block by block (xp == op). The options are validated and the magnitude checked.
RoundStats RoundValues(const double* xp, double* op, int64_t n, const BlockProducer* produce,
                       const RoundOptions& options, LogRecord* log, const BoundaryContext& context,
                       const Magnitude& mag, uint32_t* output_crc) {
  RoundPass pass(xp, op, n, options, log, context, mag);
  std::mutex mu;
  RoundTally total;
  std::vector<uint32_t> crcs;
  ForOutputBlocks(n, op, output_crc != nullptr ? &crcs : nullptr, [&](int64_t begin, int64_t end) {
    RoundTally t;
    ForProducedBlocks(produce, begin, end,
                      [&](int64_t from, int64_t to) { pass.Span(from, to, &t); });
    std::lock_guard<std::mutex> lock(mu);
    total += t;
  });
  const RoundStats stats = pass.Finish(total);
  if (output_crc != nullptr) *output_crc = JoinCrcs(crcs, op, n);
  return stats;
}

}  // namespace

RoundStats RoundInto(const at::Tensor& x, const at::Tensor& out, const RoundOptions& options,
                     LogRecord* log, const BoundaryContext& context, const Magnitude& magnitude,
                     uint32_t* output_crc) {
  const KernelFpEnv env;  // (kernels.h)
  options.Validate();
  CheckContiguousInput(x);
  CheckOutput(x, out);
  const int64_t n = x.numel();
  const Magnitude mag = CheckedMagnitude(magnitude, n);
  const double* xp = n > 0 ? x.data_ptr<double>() : nullptr;
  double* op = n > 0 ? out.data_ptr<double>() : nullptr;
  return RoundValues(xp, op, n, nullptr, options, log, context, mag, output_crc);
}

void RunProducer(int64_t n, BlockProducer produce) {
  at::parallel_for(0, n, kProducerGrain, [&](int64_t begin, int64_t end) { produce(begin, end); });
}

RoundStats RoundProduced(const at::Tensor& out, BlockProducer produce, const RoundOptions& options,
                         LogRecord* log, const BoundaryContext& context, const Magnitude& magnitude,
                         uint32_t* output_crc) {
  const KernelFpEnv env;  // (kernels.h)
  options.Validate();
  CheckOutput(out, out);
  const int64_t n = out.numel();
  const Magnitude mag = CheckedMagnitude(magnitude, n);
  double* op = n > 0 ? out.data_ptr<double>() : nullptr;
  if (NeedsScale(options, mag.defined())) {
    RunProducer(n, produce);
    return RoundValues(op, op, n, nullptr, options, log, context, mag, output_crc);
  }
  return RoundValues(op, op, n, &produce, options, log, context, mag, output_crc);
}

RoundResult Round(const at::Tensor& x, const RoundOptions& options, LogRecord* log,
                  const BoundaryContext& context, const Magnitude& magnitude,
                  uint32_t* output_crc) {
  const KernelFpEnv env;  // (kernels.h)
  options.Validate();
  CheckInput(x, "input");
  const at::Tensor xc = x.contiguous();
  RoundResult result;
  result.rounded = at::empty(xc.sizes(), xc.options());
  result.stats = RoundInto(xc, result.rounded, options, log, context, magnitude, output_crc);
  return result;
}

namespace {

void CheckRecordSize(const LogRecord& log, int64_t n) {
  if (log.size() != n) {
    throw Error("log record has " + std::to_string(log.size()) + " elements but the tensor has " +
                std::to_string(n));
  }
}

// One boundary's replay pass over n values at xp into op (equal to xp in place), in pieces as
// RoundPass. Each span also puts the stored values of its EXACT entries in place, so a span's
// results are final when it returns (a chain's next producer reads them). Options, record
// size and magnitude are checked.
class ReplayPass {
 public:
  ReplayPass(const double* xp, double* op, int64_t n, const LogRecord& log,
             const RoundOptions& options, const BoundaryContext& context, const Magnitude& mag)
      : xp_(xp),
        op_(op),
        n_(n),
        options_(options),
        context_(context),
        mag_(mag),
        exact_(log.exact()),
        states_(log.states()) {
    mp_ = mag.defined() && !mag.computed() && n > 0 ? mag.values().data_ptr<double>() : nullptr;
    report_.elements = n;
    report_.logged = log.counts().logged();
    if (NeedsScale(options, mag.defined())) {
      report_.scale = ComputeScale(xp, n, options.bits, context);
    }
    params_ = MakeKernelParams(options, report_.scale);
    // The auditor's own magnitudes, widened by the slack that covers the trainer's (kernels.h).
    params_.alpha = options.alpha * kMagnitudeSlack;
    // An exact boundary's record (the zero window, every state NONE): the kernel that needs
    // neither the states nor the window's arithmetic, with the same results and counts.
    none_zero_window_ =
        report_.logged == 0 && !mag.defined() && options.band == 0.0 && options.alpha == 0.0;
    bound_ = none_zero_window_ ? OuterBound() : BoundFor(mag, options.band);
  }

  // Replays [from, to), adding to `t`, then writes the stored values of the EXACT entries
  // there (their legitimacy and corrections counted against the auditor's values, read before
  // an in-place kernel overwrites them).
  void Span(int64_t from, int64_t to, ReplayTally* t) const {
    auto first = std::lower_bound(exact_.begin(), exact_.end(), from,
                                  [](const ExactEntry& e, int64_t p) { return e.position < p; });
    auto last = first;
    while (last != exact_.end() && last->position < to) ++last;
    const size_t count = static_cast<size_t>(last - first);
    // The span's EXACT inputs: on the stack when few (as in almost every span).
    double small[64];
    std::vector<double> large;
    double* keep = small;
    if (count > 64) {
      large.resize(count);
      keep = large.data();
    }
    for (size_t j = 0; j < count; ++j) keep[j] = xp_[first[j].position];
    // Before an in-place kernel overwrites x'.
    if (options_.count_near_limit && report_.logged > 0) {
      t->near_limit += NearLimit(from, to, first, last);
    }
    const bool range_before = t->out_of_range;
    if (none_zero_window_) {
      ReplayNoneZeroWindowSpan(params_, xp_ + from, states_ + from, op_ + from, to - from, t);
    } else if (bound_.valid()) {
      ForBoundedBlocks(mag_, bound_, from, to,
                       [&](int64_t at, int64_t n, double b, const MagnitudeFiller& f) {
                         ReplayBoundedSpan(params_, xp_ + at, states_ + at, op_ + at, n, t, b, f);
                       });
    } else {
      ForMagnitudeBlocks(mag_, mp_, from, to, [&](int64_t at, int64_t n, const double* m) {
        ReplaySpan(params_, xp_ + at, states_ + at, op_ + at, n, t, m);
      });
    }
    // A span with a value out of range keeps the kernel's results, for Finish's rescan.
    if (t->out_of_range && !range_before) return;
    for (size_t j = 0; j < count; ++j) {
      const ExactEntry& e = first[j];
      const double xv = keep[j];
      const double v = e.value();
      const uint64_t ux = DoubleBits(xv);
      const uint64_t sign = ux & kSignBit;
      const Cell c = CellOf(BitsDouble(ux ^ sign), params_.k);
      const double rnd = BitsDouble(DoubleBits(c.r) | sign);
      if (!ExactLegitimate(xv, BitsFloat(e.fp32_bits), params_.k, params_.band,
                           AlphaScaleAt(e.position, xv))) {
        // Counted, not applied: the kernel left rnd_b(x') there. A value no honest trainer
        // writes never enters the replay (a forged 3e38 would overflow the next op and fail
        // the step before its entries were counted, leaving the dispute undecided).
        ++t->illegitimate;
        continue;
      }
      if (DoubleBits(v) != DoubleBits(rnd)) ++t->corrections;
      op_[e.position] = v;
    }
  }

  // The absolute term of the window at a value a = |x'| whose magnitude is *m (null without
  // a magnitude tensor): alpha m, alpha a (own magnitudes), or the tensor's alpha_scale.
  double AlphaScale(const double* m, double a) const {
    return m != nullptr            ? params_.alpha * *m
           : params_.own_magnitude ? params_.alpha * a
                                   : params_.alpha_scale;
  }
  // The same at element `position` (an EXACT entry's), for the auditor's x'.
  double AlphaScaleAt(int64_t position, double x) const {
    const double m = mag_.defined() ? mag_.At(position) : 0.0;
    return AlphaScale(mag_.defined() ? &m : nullptr, std::fabs(x));
  }

  // The legitimate entries of [from, to) in the outer part of the window
  // (ReplayReport::near_limit), by the scalar arithmetic of the generic kernel (window.h);
  // [first, last) are the span's EXACT entries. Only a judge asks for it, on the few steps of
  // one interval.
  int64_t NearLimit(int64_t from, int64_t to, std::vector<ExactEntry>::const_iterator first,
                    std::vector<ExactEntry>::const_iterator last) const {
    int64_t count = 0;
    ForMagnitudeBlocks(mag_, mp_, from, to, [&](int64_t at, int64_t n, const double* m) {
      for (int64_t i = 0; i < n; ++i) {
        const uint8_t st = states_[at + i];
        if (st != 1 && st != 2) continue;
        const double x = xp_[at + i];
        const bool negative = std::signbit(x);
        const double a = std::fabs(x);
        const Cell c = CellOf(a, params_.k);
        if (!(c.r < kFp32Overflow)) continue;  // the kernel reports the range error
        const double w = Window(params_.band, c.g, AlphaScale(m != nullptr ? m + i : nullptr, a));
        const bool off = !c.on_grid;
        const bool want_hi = (st == 2) != negative;
        const bool moves = (want_hi && !c.up && off) || (!want_hi && c.up);
        if (!DirectionLegitimate(a, c, w, moves)) continue;
        count += !InWindow(a, c.mid, c.g, moves ? 0.5 * w : 1.5 * w);
      }
    });
    for (auto e = first; e != last; ++e) {
      const double x = xp_[e->position];
      count += ExactNearLimit(x, BitsFloat(e->fp32_bits), params_.k, params_.band,
                              AlphaScaleAt(e->position, x));
    }
    return count;
  }

  // After every span, with their tallies summed: reports a bad magnitude or a range error
  // (throws), else the report.
  ReplayReport Finish(const ReplayTally& total) {
    if (total.bad_magnitude && !total.out_of_range) ReportBadMagnitude(mag_, n_, context_);
    if (total.out_of_range) ReportRange();
    report_.corrections = total.corrections;
    report_.illegitimate = total.illegitimate;
    report_.near_misses = total.near_misses;
    report_.near_limit = total.near_limit;
    report_.steerable = total.steerable;
    return report_;
  }

 private:
  // Either an input is out of range, or a DOWN/UP entry asked for +-2^128. Must not return.
  [[noreturn]] void ReportRange() const {
    const bool in_place = xp_ == op_;
    for (int64_t i = 0; i < n_; ++i) {
      if (in_place) {
        if (std::fabs(op_[i]) < kFp32Overflow) continue;
        ThrowRangeError(context_, i, op_[i], options_.bits, /*overwritten=*/true);
      }
      if (OutOfRange(xp_[i], params_.k)) {
        ThrowRangeError(context_, i, xp_[i], options_.bits, /*overwritten=*/false);
      }
      if (std::fabs(op_[i]) < kFp32Overflow) continue;
      throw Error(
          "overflow" + Where(context_, i) + ": replaying the " +
          std::string(states_[i] == 2 ? "UP" : "DOWN") + " entry on " + FormatDouble(xp_[i]) +
          " gives " + FormatDouble(op_[i]) +
          ", beyond the FP32 range (largest value on the b = " + std::to_string(options_.bits) +
          " grid: " + FormatGridValue(LargestGridValue(options_.bits)) + ")");
    }
    throw Error(
        "internal error: the replay kernel reported an out-of-range value that a rescan missed");
  }

  const double* xp_;
  double* op_;
  int64_t n_;
  RoundOptions options_;
  BoundaryContext context_;
  const Magnitude& mag_;
  const std::vector<ExactEntry>& exact_;
  const uint8_t* states_;
  const double* mp_ = nullptr;
  ReplayReport report_;
  KernelParams params_;
  bool none_zero_window_ = false;
  OuterBound bound_;
};

// ReplayInto over n values at xp (equal to op in place), or, with `produce`, over the values
// it writes at op block by block (xp == op). Options, record size and magnitude are checked.
ReplayReport ReplayValues(const double* xp, double* op, int64_t n, const BlockProducer* produce,
                          const LogRecord& log, const RoundOptions& options,
                          const BoundaryContext& context, const Magnitude& mag,
                          uint32_t* output_crc) {
  ReplayPass pass(xp, op, n, log, options, context, mag);
  std::mutex mu;
  ReplayTally total;
  std::vector<uint32_t> crcs;
  ForOutputBlocks(n, op, output_crc != nullptr ? &crcs : nullptr, [&](int64_t begin, int64_t end) {
    ReplayTally t;
    ForProducedBlocks(produce, begin, end,
                      [&](int64_t from, int64_t to) { pass.Span(from, to, &t); });
    std::lock_guard<std::mutex> lock(mu);
    total += t;
  });
  const ReplayReport report = pass.Finish(total);
  if (output_crc != nullptr) *output_crc = JoinCrcs(crcs, op, n);
  return report;
}

}  // namespace

ReplayReport ReplayInto(const at::Tensor& x, const LogRecord& log, const at::Tensor& out,
                        const RoundOptions& options, const BoundaryContext& context,
                        const Magnitude& magnitude, uint32_t* output_crc) {
  const KernelFpEnv env;  // (kernels.h)
  options.Validate();
  CheckContiguousInput(x);
  CheckOutput(x, out);
  const int64_t n = x.numel();
  CheckRecordSize(log, n);
  const Magnitude mag = CheckedMagnitude(magnitude, n);
  const double* xp = n > 0 ? x.data_ptr<double>() : nullptr;
  double* op = n > 0 ? out.data_ptr<double>() : nullptr;
  return ReplayValues(xp, op, n, nullptr, log, options, context, mag, output_crc);
}

ReplayReport ReplayProduced(const at::Tensor& out, BlockProducer produce, const LogRecord& log,
                            const RoundOptions& options, const BoundaryContext& context,
                            const Magnitude& magnitude, uint32_t* output_crc) {
  const KernelFpEnv env;  // (kernels.h)
  options.Validate();
  CheckOutput(out, out);
  const int64_t n = out.numel();
  CheckRecordSize(log, n);
  const Magnitude mag = CheckedMagnitude(magnitude, n);
  double* op = n > 0 ? out.data_ptr<double>() : nullptr;
  if (NeedsScale(options, mag.defined())) {
    RunProducer(n, produce);
    return ReplayValues(op, op, n, nullptr, log, options, context, mag, output_crc);
  }
  return ReplayValues(op, op, n, &produce, log, options, context, mag, output_crc);
}

namespace {

// Checks every link and returns their common size.
int64_t CheckChain(const std::vector<ChainLink>& links, bool replay) {
  if (links.empty()) throw Error("a chain of boundaries needs at least one link");
  const int64_t n = links[0].out.numel();
  for (const ChainLink& link : links) {
    link.options.Validate();
    CheckOutput(link.out, link.out);
    if (link.out.numel() != n) {
      throw Error("the links of a chain of boundaries differ in size: " + std::to_string(n) +
                  " and " + std::to_string(link.out.numel()) + " elements");
    }
    if (!ChainNeedsNoScale(link.options, link.magnitude)) {
      throw Error("a chained boundary's window needs its tensor's max |x| first");
    }
    if (replay) {
      if (link.replay == nullptr) throw Error("a chained replay needs a record for every link");
      CheckRecordSize(*link.replay, n);
    }
  }
  return n;
}

// Runs a chain with one pass per link (`make(link, out, n, magnitude)` makes it): chunk by
// chunk on the calling thread and helpers, block by block inside a chunk, every link's
// producer then its span; each link's full chunks checksummed while in cache. Then each pass
// finishes, in the links' order (the first error is thrown), and `keep(link, result)` keeps
// its result.
template <class Tally, class Make, class Keep>
void RunChain(std::vector<ChainLink>* links, bool replay, Make make, Keep keep) {
  const int64_t n = CheckChain(*links, replay);
  const size_t k = links->size();
  std::vector<Magnitude> mags;
  for (const ChainLink& link : *links) mags.push_back(CheckedMagnitude(link.magnitude, n));
  using Pass = decltype(make((*links)[0], nullptr, n, mags[0]));
  std::vector<Pass> passes;
  passes.reserve(k);
  for (size_t j = 0; j < k; ++j) {
    ChainLink& link = (*links)[j];
    passes.push_back(make(link, n > 0 ? link.out.data_ptr<double>() : nullptr, n, mags[j]));
  }
  const int64_t full = n / kCrcBlock;
  std::vector<std::vector<uint32_t>> crcs(k);
  for (size_t j = 0; j < k; ++j) {
    if ((*links)[j].output_crc != nullptr) crcs[j].assign(static_cast<size_t>(full), 0);
  }
  std::mutex mu;
  std::vector<Tally> totals(k);
  HelpedFor(n, kCrcBlock, [&](int64_t begin, int64_t end) {
    const KernelFpEnv env;  // on a helper thread too
    std::vector<Tally> t(k);
    // A full chunk's CRC is extended block by block, each block right after its span wrote
    // it (in L1): read back after the whole chunk, the links' chunks (k x 256 KiB) no longer
    // fit in L2.
    const int64_t b = begin / kCrcBlock;
    std::vector<uint32_t> running(k, 0);
    for (int64_t s = begin; s < end; s += kProduceBlock) {
      const int64_t e = std::min(end, s + kProduceBlock);
      for (size_t j = 0; j < k; ++j) {
        (*links)[j].produce(s, e);
        passes[j].Span(s, e, &t[j]);
        if ((*links)[j].output_crc != nullptr && b < full) {
          running[j] = ExtendCrc(running[j], (*links)[j].out.data_ptr<double>(), s, e - s);
        }
      }
    }
    for (size_t j = 0; j < k; ++j) {
      if ((*links)[j].output_crc == nullptr || b >= full) continue;
      crcs[j][static_cast<size_t>(b)] = running[j];
      checksummed_blocks.fetch_add(1, std::memory_order_relaxed);
    }
    std::lock_guard<std::mutex> lock(mu);
    for (size_t j = 0; j < k; ++j) totals[j] += t[j];
  });
  for (size_t j = 0; j < k; ++j) {
    ChainLink& link = (*links)[j];
    keep(link, passes[j].Finish(totals[j]));
    if (link.output_crc != nullptr) {
      *link.output_crc = JoinCrcs(crcs[j], n > 0 ? link.out.data_ptr<double>() : nullptr, n);
    }
  }
}

}  // namespace

bool ChainNeedsNoScale(const RoundOptions& options, const Magnitude& magnitude) {
  return !NeedsScale(options, magnitude.defined());
}

void RoundChain(std::vector<ChainLink>* links) {
  const KernelFpEnv env;  // (kernels.h)
  RunChain<RoundTally>(
      links, false,
      [](ChainLink& l, double* op, int64_t n, const Magnitude& m) {
        return RoundPass(op, op, n, l.options, l.log, l.context, m);
      },
      [](ChainLink& l, const RoundStats& stats) { l.stats = stats; });
}

void ReplayChain(std::vector<ChainLink>* links) {
  const KernelFpEnv env;  // (kernels.h)
  RunChain<ReplayTally>(
      links, true,
      [](ChainLink& l, double* op, int64_t n, const Magnitude& m) {
        return ReplayPass(op, op, n, *l.replay, l.options, l.context, m);
      },
      [](ChainLink& l, const ReplayReport& report) { l.report = report; });
}

int64_t ChecksummedBlocks() { return checksummed_blocks.load(std::memory_order_relaxed); }

ReplayResult Replay(const at::Tensor& x, const LogRecord& log, const RoundOptions& options,
                    const BoundaryContext& context, const Magnitude& magnitude,
                    uint32_t* output_crc) {
  const KernelFpEnv env;  // (kernels.h)
  options.Validate();
  CheckInput(x, "input");
  const at::Tensor xc = x.contiguous();
  ReplayResult result;
  result.rounded = at::empty(xc.sizes(), xc.options());
  result.report = ReplayInto(xc, log, result.rounded, options, context, magnitude, output_crc);
  return result;
}

GridResult Grid(const at::Tensor& x, int bits) {
  const KernelFpEnv env;  // (kernels.h)
  RoundOptions options;
  options.bits = bits;
  options.Validate();
  CheckInput(x, "input");
  const at::Tensor xc = x.contiguous();
  GridResult result;
  result.lo = at::empty(xc.sizes(), xc.options());
  result.hi = at::empty(xc.sizes(), xc.options());
  const int64_t n = xc.numel();
  if (n == 0) return result;
  const double* xp = xc.data_ptr<double>();
  double* lo = result.lo.data_ptr<double>();
  double* hi = result.hi.data_ptr<double>();
  const uint64_t k = static_cast<uint64_t>(32 - bits);
  std::mutex mu;
  bool bad = false;
  at::parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
    bool b = false;
    GridSpan(k, xp + begin, lo + begin, hi + begin, end - begin, &b);
    std::lock_guard<std::mutex> lock(mu);
    bad |= b;
  });
  if (bad) {
    for (int64_t i = 0; i < n; ++i) {
      const double v = xp[i];
      if (std::fabs(v) < kFp32Overflow) continue;
      const std::string where = Where(BoundaryContext{}, i);
      if (std::isnan(v)) throw Error("NaN" + where);
      if (std::isinf(v)) throw Error("infinite value" + where + ": " + FormatDouble(v));
      throw Error("overflow" + where + ": " + FormatDouble(v) +
                  " is beyond the FP32 range (|x| >= 2^128)");
    }
  }
  return result;
}

}  // namespace vt::precision
