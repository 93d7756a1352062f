// Rounding FP64 tensors onto the b-grid, with the logging window, and replaying a log:
// the tensor-level API of ROUNDING.md ("Primitives", "The logging window", "Log entries and
// replay"). This is what the trainer and the auditor call at every boundary.
//
//   Round(x, opts, &record)        y = rnd_b(x), and the record of per-element decisions
//   Replay(x', record, opts)       y' = the trainer's rounding applied to the auditor's x'
//   Grid(x, bits)                  lo_b(x), hi_b(x)
//
// Inputs are CPU float64 tensors of any shape (non-contiguous ones are copied first by
// Round/Replay/Grid; the *Into variants require contiguous tensors). Elements are addressed
// by their 0-based flat index in row-major order, in records and in error messages.
// Work is one vectorized pass over the elements (two when alpha > 0: the first finds the
// scale), split over LibTorch's intra-op threads; results never depend on the thread count.
//
// Errors (vt::Error), never silent: a NaN or infinite input, or a value whose rnd_b is
// beyond the FP32 range (it would round to 2^128), raises
//   "overflow at 'block3.attn.proj:fwd', step 41, index 1023: 4.1e+38 rounds beyond the FP32
//    range (largest value on the b = 32 grid: 3.4028235e+38)"
// naming the boundary and step from BoundaryContext (omitted when not given) and the first
// offending index. Bad options, dtypes, devices or sizes also raise vt::Error.
// Thread safety: the functions are reentrant; concurrent calls must use distinct outputs
// and records. A LogRecord must not be read while a call writes it.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/FunctionRef.h>

#include <cstdint>
#include <string_view>

#include "runtime/precision/kernels.h"
#include "runtime/precision/log_record.h"
#include "runtime/precision/magnitude_source.h"

namespace vt::precision {

// How to round and classify; the same fields configure the auditor's replay window.
struct RoundOptions {
  int bits = 32;       // b: leading bits of the FP32 word kept, in [10, 32]. Default: 32.
  double band = 0.25;  // Window term in units of spacing(x), in [0, 0.5]. Default: 0.25.
  double alpha = 0.0;  // Window term in units of the magnitude, finite, >= 0. Default: 0.
  // The magnitude alpha multiplies when no magnitude tensor is given: false, the tensor's
  // max |x| (its scale); true, each value's own |x| (ROUNDING.md "Magnitudes"). Default: false.
  bool own_magnitude = false;
  // Replay only, not part of the window: count the accepted entries in the outer part of the
  // window (ReplayReport::near_limit). A judge's replay sets it. Default: false.
  bool count_near_limit = false;

  // Throws vt::Error naming the field, the allowed range and the value.
  void Validate() const;
};

// Where a rounding happens, for error messages. The view must outlive the call.
struct BoundaryContext {
  std::string_view boundary;  // e.g. "layer2.0.conv1:fwd". Default: "" (not named).
  int64_t step = -1;          // Training step. Default: -1 (not named).
};

// A per-element magnitude (ROUNDING.md "The window"): `magnitude`, when defined, is a CPU
// float64 tensor with x's element count, or a magnitude computed block by block over as many
// elements (an outer product, absolute values: magnitude_source.h), whose element i bounds the size
// of the terms x[i] was computed from; the window's absolute term is then alpha * magnitude[i]
// instead of alpha * max|x|. It must be finite and >= 0; otherwise vt::Error names the boundary,
// step and index. The auditor's Replay widens its own magnitudes by kMagnitudeSlack for its checks
// (the parties' magnitudes differ by rounding).

struct RoundStats {
  double scale = 0.0;  // max |x| when alpha > 0 and no magnitude is given; else 0.
  StateCounts counts;  // The record's counts; all zero when no record was written.
  // With a record: the values whose rounding this caller could have chosen either way and
  // still passed an auditor holding exactly these values (the trainer's estimate of its
  // room to steer; an auditor's replay counts the authoritative number). 0 without a record.
  int64_t steerable = 0;
};

struct RoundResult {
  at::Tensor rounded;  // float64, same shape as x, contiguous.
  RoundStats stats;
};

// rnd_b of every element of `x`. If `log` is not null it is overwritten with the record of
// this call (its buffers are reused). Throws vt::Error (see the file comment); on error the
// contents of `*log` are unspecified.
// With `output_crc`, *output_crc is the CRC-32C (store/crc32c.h) of the rounded values' bytes,
// computed block by block as the blocks are written (cheaper than a pass over the output
// afterwards, which reads it back from memory).
RoundResult Round(const at::Tensor& x, const RoundOptions& options, LogRecord* log = nullptr,
                  const BoundaryContext& context = {}, const Magnitude& magnitude = {},
                  uint32_t* output_crc = nullptr);

// As Round, writing into `out`: contiguous CPU float64 with x's number of elements (any
// shape). `out` may be `x` itself (in place) but must not partially overlap it. On error the
// contents of `out` and `*log` are unspecified.
RoundStats RoundInto(const at::Tensor& x, const at::Tensor& out, const RoundOptions& options,
                     LogRecord* log = nullptr, const BoundaryContext& context = {},
                     const Magnitude& magnitude = {}, uint32_t* output_crc = nullptr);

// How many blocks of store::kCrc32cBlock output bytes Round/RoundInto/Replay/ReplayInto have
// checksummed in this process so far (all threads). Lets tests check that a replay
// re-checksums each block its EXACT entries changed once, not once per entry.
int64_t ChecksummedBlocks();

// What a replay found (ROUNDING.md). Each count is over this call's elements.
struct ReplayReport {
  int64_t elements = 0;      // Elements replayed.
  int64_t logged = 0;        // DOWN + UP + EXACT entries in the record.
  int64_t corrections = 0;   // Entries whose result differs (bitwise) from rnd_b(x').
  int64_t illegitimate = 0;  // Entries no honest trainer writes (docs/ROUNDING.md,
                             // "Legitimate entries"): DOWN/UP that fail
                             // DirectionLegitimate (|x'-mid(x')| > 2w'(x'), > w'(x') for one
                             // that moves x', w'(x') > spacing/2); EXACT values that fail
                             // ExactLegitimate (window.h). Neither is applied.
  int64_t near_misses = 0;   // NONE entries off the grid with |x'-mid(x')| <= w'(x'), or on
                             // the grid with the nearest midpoint closer than w'(x').
  // For x' on the grid, mid(x') is the nearest midpoint: half the grid step below x' away.
  int64_t steerable = 0;  // Values (logged or not) whose rounding the trainer could have
                          // chosen either way and passed these checks (window.h
                          // Steerable): the trainer's real room, >= its logged entries'.
  double scale = 0.0;     // The replayer's max |x'| (0 when alpha = 0).
  // With RoundOptions::count_near_limit: the legitimate entries in the outer part of the
  // replayer's window, where an honest replay on other hardware (whose x' differs by the
  // divergence) may find them illegitimate: a DOWN/UP that moves x' with |x' - mid| > w'/2,
  // one that does not with |x' - mid| > 1.5 w'; an EXACT whose adjacent midpoint is more than
  // 3t/4 away, or its facing end more than t/4 (window.h ExactNearLimit) (ROUNDING.md
  // "Legitimate entries"; the judge's use: docs/THREAT_MODEL.md). 0 otherwise.
  int64_t near_limit = 0;
};

struct ReplayResult {
  at::Tensor rounded;  // float64, same shape as x, contiguous.
  ReplayReport report;
};

// Applies `log` to the auditor's values `x` with the auditor's window `options` (bits must
// be the trainer's). NONE -> rnd_b(x'), DOWN -> lo_b(x'), UP -> hi_b(x'), EXACT -> the stored
// value. On the grid lo = hi = x'. Throws vt::Error if log.size() != x.numel() ("log record
// has N elements but the tensor has M"), on NaN/Inf/out-of-range values, and on bad options.
// An entry that asks for 2^128 is illegitimate: counted, not applied.
// `output_crc` as in Round: the CRC-32C of the replayed values (EXACT values included).
ReplayResult Replay(const at::Tensor& x, const LogRecord& log, const RoundOptions& options,
                    const BoundaryContext& context = {}, const Magnitude& magnitude = {},
                    uint32_t* output_crc = nullptr);

// As Replay, writing into `out` (same rules as RoundInto's `out`).
ReplayReport ReplayInto(const at::Tensor& x, const LogRecord& log, const at::Tensor& out,
                        const RoundOptions& options, const BoundaryContext& context = {},
                        const Magnitude& magnitude = {}, uint32_t* output_crc = nullptr);

// An op's elementwise pass over [begin, end) of a boundary's tensor: it computes those
// elements' unrounded values and writes them into the tensor (an in-place update may read the
// old values first). The *Produced functions call it on blocks of a few thousand elements,
// from LibTorch's threads, each element's block exactly once, and round each block right
// after it is written, while it is still in cache: the op and the boundary take one pass over
// memory instead of two (issue 17, "rounding fused into the ops").
using BlockProducer = c10::function_ref<void(int64_t begin, int64_t end)>;

// RoundInto(out, out, ...) on the values `produce` writes into `out` (contiguous CPU float64):
// the same results, stats, record and CRC as producing every block first and rounding after.
// A window whose absolute term needs the tensor's max |x| (alpha > 0 with no magnitude and
// own_magnitude false) needs every value first: then the producer runs over the whole tensor
// before the rounding pass. A range error names the value the producer wrote (overwritten).
RoundStats RoundProduced(const at::Tensor& out, BlockProducer produce, const RoundOptions& options,
                         LogRecord* log = nullptr, const BoundaryContext& context = {},
                         const Magnitude& magnitude = {}, uint32_t* output_crc = nullptr);

// ReplayInto(out, log, out, ...) on the values `produce` writes into `out`, likewise.
ReplayReport ReplayProduced(const at::Tensor& out, BlockProducer produce, const LogRecord& log,
                            const RoundOptions& options, const BoundaryContext& context = {},
                            const Magnitude& magnitude = {}, uint32_t* output_crc = nullptr);

// One boundary of a chain (RoundChain, ReplayChain): `out` (contiguous CPU float64, every
// link the same size) gets the values `produce` writes, rounded with `options` (and
// `magnitude`, optional) into `log` (RoundChain: may be null, no record) or replayed from
// `replay` (ReplayChain). The results go to `stats` / `report` and `*output_crc` (optional).
struct ChainLink {
  at::Tensor out;
  BlockProducer produce;
  RoundOptions options;
  Magnitude magnitude;
  LogRecord* log = nullptr;
  const LogRecord* replay = nullptr;
  BoundaryContext context;
  uint32_t* output_crc = nullptr;
  RoundStats stats;
  ReplayReport report;
};

// RoundProduced of every link in order, in one pass: block by block, each link's producer
// then its rounding, so a producer that reads, at each position, what earlier links wrote
// there (AdamW's update reads its moments) reads their rounded values while they are in
// cache. The same values, records, stats and CRCs as the links one after the other. Every
// link's window must not need its tensor's max |x| first (ChainNeedsNoScale), and the links'
// tensors must not overlap. Errors are those of the first link that has one (a link after it
// has been computed from that link's values too).
void RoundChain(std::vector<ChainLink>* links);
// ReplayProduced of every link in order, likewise (each link's EXACT values are in place
// before the next link's producer reads them).
void ReplayChain(std::vector<ChainLink>* links);
// Whether RoundChain/ReplayChain take a link with these options and magnitude.
bool ChainNeedsNoScale(const RoundOptions& options, const Magnitude& magnitude);

// Runs `produce` over [0, n) on LibTorch's threads without rounding (the plain modes, and
// the windows that need every value before rounding).
void RunProducer(int64_t n, BlockProducer produce);

struct GridResult {
  at::Tensor lo;  // lo_b(x): the largest grid value <= x. float64, x's shape.
  at::Tensor hi;  // hi_b(x): the smallest grid value >= x (+-2^128 beyond the largest).
};

// The b-grid neighbours of every element. Throws vt::Error for bits outside [10, 32] and
// for NaN, infinite or |x| >= 2^128 values (naming the first index).
GridResult Grid(const at::Tensor& x, int bits);

// rnd_b of one value. Throws vt::Error as Round does.
double RoundValue(double x, int bits);

// The kernel constants for `options` and a tensor scale (alpha_scale = alpha * scale).
KernelParams MakeKernelParams(const RoundOptions& options, double scale);

// The largest value on the b-grid: FLT_MAX with its low 32 - b bits cleared.
double LargestGridValue(int bits);

}  // namespace vt::precision
