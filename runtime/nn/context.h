// The rounding context of one training step: where every boundary of the forward pass, the
// backward pass, the parameter gradients and the optimizer update sends its FP64 values.
//
// A boundary is named ("layer2.0.conv1:fwd", "fc.weight:grad", "fc.weight:update"); its kind
// comes from the suffix after the last ':' (fwd, bwd, grad; anything else is an update-kind
// boundary rounded at b = 32 because model state is FP32). Each call at a boundary within a
// step gets a call counter, and the pair (boundary, call) keys its log record, so two
// machines whose autograd engines visit branches in another order still pair the right
// records (ROUNDING.md, "Where rounding happens").
//
// Modes (the experiments need all five):
//   kFp32, kFp64: plain training; boundaries pass values through.
//   kRounded:     rnd_b at every boundary, nothing logged.
//   kLog:         the trainer: rnd_b and a log record per call, kept in the step log.
//   kReplay:      the auditor/judge: the trainer's records applied to its own values.
//
// A StepContext is made per step and installed for the current thread with a Scope; the
// autograd boundary functions find it there. Not thread-safe: one step at a time per thread.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>

#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "runtime/precision/log_record.h"
#include "runtime/precision/magnitude_source.h"
#include "runtime/precision/round.h"

namespace vt::precision {
struct RoundOptions;
}

namespace vt::nn {

enum class Mode { kFp32, kFp64, kRounded, kLog, kReplay };

// "fp32", "fp64", "rounded", "log", "replay"; ParseMode throws vt::Error listing them.
std::string ModeName(Mode mode);
Mode ParseMode(const std::string& name);

enum class BoundaryKind { kForward = 0, kBackward = 1, kGradient = 2, kUpdate = 3 };

// The kind of a boundary name from its suffix (see the file comment).
BoundaryKind KindOf(const std::string& boundary);
const char* KindName(BoundaryKind kind);  // "fwd", "bwd", "grad", "update"

// A window with band 0 and alpha 0 marks an exact boundary (one whose values are the same
// on every machine, e.g. calibrated update boundaries): values are rounded to nearest, ties
// to even, and nothing is logged.
struct Window {
  double band = 0.25;  // in units of spacing(x), [0, 0.5]. Default: 0.25 (paper mode).
  double alpha = 0.0;  // in units of the tensor's max |x|, >= 0. Default: 0.
  bool operator==(const Window& o) const { return band == o.band && alpha == o.alpha; }
};

// The logging windows of a run: a default per boundary kind, and overrides per boundary name
// (calibration fills these). `bits` applies to fwd/bwd/grad boundaries; update-kind
// boundaries always round at b = 32.
struct WindowTable {
  int bits = 32;  // Default: 32.
  std::array<Window, 4> by_kind{};
  std::map<std::string, Window> by_boundary;

  // The window for `boundary`: its exact-name override, else (for a sharded name
  // "s<k>/name") the override of the plain name, else its kind's default.
  const Window& Lookup(const std::string& boundary) const;
  int BitsFor(const std::string& boundary) const;
  // Throws vt::Error naming the first invalid entry.
  void Validate() const;
};

// How far this machine's values at one boundary are from a reference's (calibration),
// over a step's calls: the largest max|x - x'| / scale of any call, and sums.
struct DivergenceStats {
  int64_t calls = 0, elements = 0, differ = 0, straddles = 0;
  int64_t missing = 0;  // calls the reference has no values for
  double max_rel = 0.0;
};

// What happened at one boundary over a step (summed over its calls).
struct BoundaryStats {
  int64_t calls = 0;
  int64_t elements = 0;
  int64_t logged = 0;        // DOWN + UP + EXACT entries (trainer) / in the applied records
  int64_t exact = 0;         // EXACT entries
  int64_t corrections = 0;   // replay only (ROUNDING.md)
  int64_t illegitimate = 0;  // replay only
  int64_t near_misses = 0;   // replay only
  int64_t near_limit = 0;    // replay with set_count_near_limit only
  // Values whose rounding the trainer could have chosen either way and still passed the
  // replay's checks (ROUNDING.md "steerable"; logged or not): counted by the auditor
  // against its own values, estimated by the trainer against its own.
  int64_t steerable = 0;
  // Trainer only: values a tampering trainer (Tamper) rounded against the honest rule, and
  // among them those an honest trainer would have left unlogged (NONE).
  int64_t steered = 0;
  int64_t steered_unlogged = 0;
  // Calls whose window's absolute term used a per-element magnitude (ROUNDING.md "The
  // window"); the others used each value's own |x|.
  int64_t magnitudes = 0;
  // Wall seconds spent at this boundary over the step's calls: rounding or replay, the
  // trace's checksum, and the bookkeeping around them (`times.boundaries` per boundary).
  double seconds = 0.0;
};

// How a dishonest trainer tampers with its own roundings, for the verification game's
// scenarios only (train/deviation.h). Logging mode only. Every tampered value is rounded to
// the b-grid neighbour that rnd_b did not pick (the other end of its cell; for a value on
// the grid, kFlipWithin only, the next grid value away from zero), and the record says so.
// With the trainer's own value x, window w, spacing g and d = |x - mid|:
//   kSteer       update-kind boundaries, exact ones included: unlogged values with
//                d > 3/8 g, logged DOWN/UP as if inside the window.
//   kForgeExact  every boundary: unlogged values with d > 3/8 g where no EXACT entry can be
//                legitimate (the auditor's tolerance t of window.h ExactTolerance is below
//                d/2, or its window admits EXACT nowhere near x even one binade lower),
//                logged EXACT with the other neighbour.
//   kFlipWithin  every boundary: every value the trainer can round the other way with a
//                legitimate entry (ROUNDING.md "steerable"), with a margin for the auditor's
//                own values. Where w <= g/4: d <= w/2 (logged DOWN/UP reversed; the replay
//                accepts a direction that moves a value up to d = w). Elsewhere, values on the grid
//                included (such as the exact zeros of a ReLU's gradient): an EXACT entry with the
//                other neighbour (replacing an honest EXACT value, or new) when ExactLegitimate
//                holds at x and at x -+ w/2. The steering ROUNDING.md admits by design; the
//                replay's `steerable` count bounds it.
//   kToward      the boundaries named in `directions` only: as kFlipWithin, but a value is
//                rounded the other way only where that moves it the way its direction
//                (same shape as the boundary's tensor) points, and a logged DOWN/UP entry
//                points that way. A greedy trainer steering with legitimate entries only
//                (E10): every value it flips is one the auditor accepts.
struct Tamper {
  enum class Kind { kNone, kSteer, kForgeExact, kFlipWithin, kToward };
  Kind kind = Kind::kNone;
  int64_t count = 0;  // at most this many values per boundary call; 0: no limit
  // kSteer only: the record keeps NONE where the value was rounded the other way (a cheat
  // no entry betrays: only a replay's result, and so the judge's leaf, shows it).
  bool silent = false;
  std::map<std::string, at::Tensor> directions;  // kToward: boundary -> wanted direction (float64)
};

using RecordKey = std::pair<std::string, int32_t>;  // (boundary, call)
using StepLog = std::map<RecordKey, precision::LogRecord>;
// CRC-32C of the rounded values of every boundary call of a step: the trainer commits it
// with its logs, so a replayer can name the first boundary whose values differ.
using StepTrace = std::map<RecordKey, uint32_t>;

// The trace's byte encoding (sorted entries: u16be name length, name, u32be call, u32be crc)
// and its parser (throws vt::Error on malformed bytes).
std::string EncodeTrace(const StepTrace& trace);
StepTrace DecodeTrace(const std::string& bytes);
constexpr const char* kTraceBoundary = "~trace";

// Told of each log record as the logging step finishes writing it, so that the record can be
// encoded while the step goes on (train/record_encoder.h). The record is not written again
// in the step unless WillWrite is called for its key first.
class RecordSink {
 public:
  virtual ~RecordSink() = default;
  // Before the record at `key` is (re)written: must not return while the record is read.
  virtual void WillWrite(const RecordKey& key) = 0;
  // The record at `key` is final for this step (it stays where it is until the step ends).
  virtual void Written(const RecordKey& key, const precision::LogRecord& record) = 0;
};

class StepContext {
 public:
  // `windows` must outlive the context. `log` is where kLog writes records and where
  // kReplay reads them; it may be null for the other modes. kLog overwrites the records it
  // finds (reusing their buffers across steps) and Finish() drops those it did not write.
  StepContext(Mode mode, const WindowTable* windows, int64_t step, StepLog* log);

  Mode mode() const { return mode_; }
  int64_t step() const { return step_; }
  // The run's seed, for dropout masks keyed by (seed, step, boundary). Default: 0.
  uint64_t seed() const { return seed_; }
  void set_seed(uint64_t seed) { seed_ = seed; }
  // The dtype tensors of this mode compute in (float32 for kFp32, float64 otherwise).
  at::ScalarType dtype() const;

  // Sharded steps (data parallelism, train/engine.h): while shard s >= 0 is computed, every
  // boundary name gets the prefix "s<s>/" ("s1/fc0:fwd"), so the shards' records, traces and
  // dropout masks are told apart; -1 (the default) is no prefix. Windows are looked up
  // under the prefixed name, then under the plain one (WindowTable::Lookup).
  void set_shard(int64_t shard);
  const std::string& name_prefix() const { return prefix_; }

  // Sends `x` through `boundary`: returns it unchanged in plain modes, else its rounded (or
  // replayed) FP64 value. `call` < 0 takes the next call number for this boundary; a
  // backward boundary passes the call number of its forward call. `magnitude` (optional):
  // x's per-element magnitude (ROUNDING.md "The window"); without one, a magnitude offered
  // for x (OfferMagnitude) is used, else each value is its own magnitude.
  // Throws vt::Error for NaN/Inf/overflow (naming boundary, step and index), a bad
  // magnitude, a missing record or a size mismatch.
  at::Tensor Apply(const std::string& boundary, const at::Tensor& x, int32_t call = -1,
                   const at::Tensor& magnitude = {});
  // Apply for a gradient that autograd hands from node to node (a boundary's backward): the
  // same results, but when `grad` is a rounded output of an earlier boundary of this step,
  // unchanged since, and the window gives values on its grid no entry, `grad` itself comes
  // back (see grid_shortcuts()), as LibTorch's own backward formulas pass a gradient on.
  at::Tensor ApplyGradient(const std::string& boundary, const at::Tensor& grad, int32_t call);
  // How many ApplyGradient calls returned their gradient as it was. Such a gradient holds
  // values on the boundary's grid (an earlier boundary of at most as many bits wrote them),
  // and with no absolute term and a band of at most 1/4 a value on the grid is NONE, not
  // steerable and never a near miss (ROUNDING.md): the full pass would write the same
  // values, an all-NONE record (a replay needs one) and the earlier boundary's trace CRC.
  // No pass is made. set_grid_shortcut(false) makes every call take the full pass (tests).
  int64_t grid_shortcuts() const { return grid_shortcuts_; }
  // Of those, the calls of `boundary` (prefixed, as in stats()).
  int64_t grid_shortcuts(const std::string& boundary) const;
  void set_grid_shortcut(bool on) { grid_shortcut_ = on; }
  // A rearranging op (heads split or merged, a transposed copy) wrote `out` from `sources`
  // (each read in full: `out` holds exactly their values, in another order). When every
  // source is an earlier boundary's rounded output, unchanged since (a permuted view of one
  // counts), `out` is one too, on the coarsest of their grids: a backward boundary that
  // receives it passes it on (ApplyGradient). Its trace CRC is taken here, in logging and
  // replay. Nothing happens otherwise, or with set_grid_shortcut(false).
  void AddGridRearrangement(const at::Tensor& out, const std::vector<at::Tensor>& sources);
  // Whether x's values are offered with a zero magnitude (every party computes them alike),
  // x being the offered tensor or a permuted view of all of it (ops that rearrange values
  // pass this on).
  bool AgreedValues(const at::Tensor& x) const;
  // Apply for a tensor the caller owns and hands over (an optimizer's fresh state, a
  // gradient): *x becomes its rounded value, in x's own storage when x is a contiguous
  // float64 tensor. Results are the same as Apply's.
  void ApplyInPlace(const std::string& boundary, at::Tensor* x,
                    const precision::Magnitude& magnitude = {});
  // ApplyInPlace of the values an elementwise pass writes into *x (a contiguous CPU float64
  // tensor; anything else is a vt::Error): `produce` (precision::BlockProducer) runs block by
  // block inside the rounding or replay pass, so each block is rounded while in cache. The
  // results (values, records, counts, trace) are those of running `produce` over the whole
  // tensor and then ApplyInPlace; the plain modes, calibration's captures and comparisons and
  // a tampering trainer do just that. The boundary's `seconds` then include the op's pass.
  void ApplyProduced(const std::string& boundary, at::Tensor* x, precision::BlockProducer produce,
                     const precision::Magnitude& magnitude = {});
  // ApplyProduced of several tensors of one size whose producers read, at each position, only
  // what the links before them wrote there (AdamW's moments, then its update): one pass
  // over memory, block by block, each link's producer then its rounding or replay
  // (precision::RoundChain). Records, trace, statistics and values are those of ApplyProduced
  // link after link, which is what runs when a link cannot join (captures, comparisons,
  // tampering, a replay record missing or of another size). The pass's seconds are shared
  // out among the links' statistics. A range error is the first failing link's.
  struct ProducedLink {
    std::string boundary;
    at::Tensor* x;
    precision::BlockProducer produce;
    precision::Magnitude magnitude = {};  // as ApplyProduced's
  };
  void ApplyProducedChain(std::vector<ProducedLink> links);
  // Whether boundaries change values in this mode (rounded, logging, replay), so that an op
  // gains from handing its pass to ApplyProduced.
  bool rounds() const { return mode_ != Mode::kFp32 && mode_ != Mode::kFp64; }

  // Per-element magnitudes (ROUNDING.md "The window"). An op whose output (or input
  // gradient) goes to a boundary computes, when magnitudes_wanted(), a bound m of the size of
  // the terms each element was computed from, and offers it for that very tensor; the
  // boundary that receives the tensor uses it. Offers live until taken or the tensor dies.
  // Parameter gradients accumulate over the ops that use a parameter (AddGradMagnitude) and
  // are taken at the ":grad" boundary (TakeGradMagnitude). Wanted when some window has an
  // absolute term (alpha > 0) in logging or replay, and while calibrating (set_compare).
  bool magnitudes_wanted() const { return magnitudes_wanted_; }
  void OfferMagnitude(const at::Tensor& x, const at::Tensor& magnitude);
  // A magnitude the boundary's kernels compute block by block instead of reading it from
  // memory (precision/magnitude_source.h: a product's outer product of its factors, an
  // activation's |input|); an op that asks for it as a tensor (OfferedFor) gets it written out.
  void OfferComputedMagnitude(const at::Tensor& x, precision::Magnitude magnitude);
  // The magnitude offered for x (undefined when none): boundaries read theirs, and ops that
  // pass a tensor's magnitude on. An offer holds while x's memory lives and x is not changed
  // in place (autograd's in-place accumulation of gradients changes it: the sum is another
  // value). A 0-dim zero magnitude (ZeroMagnitude) marks values every party computes alike.
  at::Tensor OfferedFor(const at::Tensor& x) const;
  // As OfferedFor, a computed magnitude left as it is.
  precision::Magnitude OfferedMagnitudeFor(const at::Tensor& x) const;
  // The first contribution is kept as given, not copied (callers hand over a tensor they no
  // longer change; a computed one, such as a product's outer product of its factors, stays
  // unwritten); a second starts a sum of the context's own, which later ones add to.
  void AddGradMagnitude(const at::Tensor& parameter, const at::Tensor& magnitude);
  void AddGradMagnitude(const at::Tensor& parameter, precision::Magnitude magnitude);
  // The accumulated magnitude of `parameter`'s gradient (undefined when no op added one);
  // it is removed from the context. TakeGradMagnitude writes a computed one out;
  // TakeGradMagnitudeAsIs leaves it computed (for a boundary's kernels to compute).
  at::Tensor TakeGradMagnitude(const at::Tensor& parameter);
  precision::Magnitude TakeGradMagnitudeAsIs(const at::Tensor& parameter);

  // The next call number `boundary` would get (and reserves it).
  int32_t NextCall(const std::string& boundary);

  // Logging and replay keep a trace of the rounded values (see StepTrace).
  const StepTrace& trace() const { return trace_; }
  // Replay: count the applied entries in the outer part of each window
  // (precision::ReplayReport::near_limit) into stats().near_limit. The judge's replay.
  void set_count_near_limit(bool count) { count_near_limit_ = count; }
  // Replay: the trainer's trace to compare against; the first boundary call whose values
  // differ is reported by divergence() ("" while none does). Its entries are the boundary
  // calls the trainer made (those of this process's shards, in a group): Finish() counts as a
  // log mismatch each entry this replay did not make and each call it made without one, since
  // an honest trainer's trace names exactly the calls its step made.
  void set_expected_trace(StepTrace trace) {
    expected_trace_ = std::move(trace);
    trace_expected_ = true;
  }
  // Replay: records left encoded (too large to decode before the step, see
  // Auditor::PrepareStep), decoded when their boundary call comes, with its tensor's size as
  // the limit on what they may declare: a record never makes the replay hold more states
  // than the tensor it is for. One its boundary never reaches is counted by Finish().
  void set_deferred_records(std::map<RecordKey, std::string> deferred) {
    deferred_ = std::move(deferred);
  }
  const std::string& divergence() const { return divergence_; }

  // Replay: records that do not fit this computation. A boundary call with no record, or
  // with a record of another size, is rounded to nearest (rnd_b(x')) and counted; a record no
  // boundary reached is counted by Finish(). An honest trainer's log always fits, so a
  // mismatch is evidence that the trainer computed something else (PROTOCOL.md). The first
  // one is described ("no log record for boundary 'fc0.weight:update' call 0 at step 7").
  //
  // Finish() ends the step: replay counts the records no boundary reached; logging drops
  // the records of an earlier step that this one did not write.
  void Finish();
  // Replay: counts a record of `boundary` that does not fit before any boundary looks for it
  // (one that could not be decoded, dropped from the step's log), described by `what`.
  void CountLogMismatch(const std::string& boundary, const std::string& what) {
    Mismatch(boundary, what);
  }
  // Replay in a group of ranks: whether this rank counts the mismatches of shared boundaries
  // (ShardOf < 0: every rank replays them alike and holds the same records of them), so that
  // the group's sum counts each once, as one process does. Default: true (rank 0 only in a
  // group).
  void set_counts_shared_mismatches(bool counts) { counts_shared_mismatches_ = counts; }
  int64_t log_mismatches() const { return log_mismatches_; }
  const std::string& first_log_mismatch() const { return first_log_mismatch_; }

  // Logging: told of every record as it is written (null: none, the default).
  void set_record_sink(RecordSink* sink) { sink_ = sink; }
  RecordSink* record_sink() const { return sink_; }

  // Logging, for the game's cheating scenarios only (train/deviation.h): from now on in this
  // step, roundings are tampered with as `tamper` says; stats().steered counts the values.
  void set_tamper(Tamper tamper) { tamper_ = std::move(tamper); }

  // Calibration: keep a copy of every boundary call's FP64 input (before rounding) in
  // `*capture`, keyed by (boundary, call), for the boundary kinds in `kinds` (bit 1 << kind;
  // default: all). Rounded, logging and replay modes.
  void set_capture(std::map<RecordKey, at::Tensor>* capture, unsigned kinds = 0xF) {
    capture_ = capture;
    capture_kinds_ = kinds;
  }
  // Calibration without keeping this machine's values: compare every boundary call's FP64
  // input with the reference's (same keys) as it happens; see divergence_stats().
  void set_compare(const std::map<RecordKey, at::Tensor>* reference) {
    compare_ = reference;
    magnitudes_wanted_ = magnitudes_wanted_ || reference != nullptr;
  }
  const std::map<std::string, DivergenceStats>& divergence_stats() const {
    return divergence_stats_;
  }

  const std::map<std::string, BoundaryStats>& stats() const { return stats_; }
  // Wall-clock seconds spent at boundaries in this step (rounding or replaying, classifying,
  // filling log records, the trace, captures and comparisons): what the step costs beyond
  // its arithmetic, for the time breakdowns of the benchmarks (StepReport::times).
  double boundary_seconds() const { return boundary_seconds_; }

  // Installs a context as the current thread's for its lifetime.
  class Scope {
   public:
    explicit Scope(StepContext* context);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    StepContext* previous_;
  };

  // The current thread's context, or nullptr outside a step.
  static StepContext* Current();

 private:
  Mode mode_;
  const WindowTable* windows_;
  int64_t step_;
  uint64_t seed_ = 0;
  std::string prefix_;  // set_shard
  StepLog* log_;
  std::map<std::string, int32_t> calls_;
  std::map<std::string, BoundaryStats> stats_;
  std::set<RecordKey> used_;     // replay: the records a boundary call used (or found unfit)
  std::set<RecordKey> written_;  // log: the records this step wrote (Finish drops the rest)
  StepTrace trace_;
  StepTrace expected_trace_;
  bool trace_expected_ = false;  // set_expected_trace was called (an empty trace is one too)
  bool count_near_limit_ = false;
  bool counts_shared_mismatches_ = true;
  std::map<RecordKey, std::string> deferred_;
  std::string divergence_;
  int64_t log_mismatches_ = 0;
  std::string first_log_mismatch_;
  Tamper tamper_;
  RecordSink* sink_ = nullptr;
  double boundary_seconds_ = 0.0;
  std::map<RecordKey, at::Tensor>* capture_ = nullptr;
  unsigned capture_kinds_ = 0xF;
  const std::map<RecordKey, at::Tensor>* compare_ = nullptr;
  std::map<std::string, DivergenceStats> divergence_stats_;
  void Compare(const std::string& boundary, int32_t call, const at::Tensor& input,
               const at::Tensor& magnitude);

  bool magnitudes_wanted_ = false;
  // Offers are keyed by the first element's address: a contiguous view or reshape of the
  // offered tensor (autograd's view backward makes one) holds the same values in the same
  // order, so it takes the same offer; the storage's weak reference tells a live tensor from
  // new memory at a reused address.
  struct Offer {
    c10::weak_intrusive_ptr<c10::StorageImpl> storage;
    int64_t numel = 0;
    uint32_t version = 0;  // x's version counter when offered
    precision::Magnitude magnitude;
  };
  std::map<const void*, Offer> offers_;
  struct GradMagnitude {
    at::Tensor sum;
    bool owned = false;             // `sum` is the context's own (it may be added to in place)
    precision::Magnitude computed;  // the only contribution so far, when a computed one
  };
  std::map<const c10::TensorImpl*, GradMagnitude> grad_magnitudes_;
  // The rounded outputs of this step's boundaries, keyed and checked as offers are: which
  // grid holds their values and, in logging and replay, their trace CRC (ApplyGradient).
  struct GridOutput {
    c10::weak_intrusive_ptr<c10::StorageImpl> storage;
    int64_t numel = 0;
    uint32_t version = 0;
    int bits = 32;
    uint32_t crc = 0;
  };
  std::map<const void*, GridOutput> grid_outputs_;
  bool grid_shortcut_ = true;
  int64_t grid_shortcuts_ = 0;
  std::map<std::string, int64_t> grid_shortcuts_by_boundary_;
  // The registry entry x is (or a permuted view of all of it, unchanged since); null if none.
  const GridOutput* GridOutputOf(const at::Tensor& x) const;
  void AddGridOutput(const at::Tensor& rounded, int bits, uint32_t crc);
  // The options of `boundary` (prefixed) for a value offered `offered`: the window, bits and
  // the magnitude its absolute term reads (*magnitude; undefined: none or the value's own),
  // whether the value is alike everywhere (*agreed: no absolute term) and whether an offer
  // counted (*counted, BoundaryStats::magnitudes).
  precision::RoundOptions OptionsFor(const std::string& boundary,
                                     const precision::Magnitude& offered,
                                     precision::Magnitude* magnitude, bool* agreed,
                                     bool* counted) const;
  // The gradient itself when ApplyGradient may return it unrounded (see grid_shortcuts()),
  // with the boundary's record and trace written or checked; undefined otherwise.
  at::Tensor GridShortcut(const std::string& boundary, int32_t call, const at::Tensor& x,
                          const precision::RoundOptions& options);

  // Counts a mismatch at `boundary` (a record's or trace entry's), unless it is shared and
  // this rank does not count those.
  void Mismatch(const std::string& boundary, const std::string& what);
  // Replay: the mismatches between the expected trace's entries and the calls made.
  void CheckTraceCalls();
  // Replay: the record of `key` in the step's log, decoding a deferred one for a tensor of
  // `numel` elements first (one that does not decode for it is a mismatch, and dropped);
  // log_->end() if there is none.
  StepLog::iterator ReplayRecord(const RecordKey& key, int64_t numel);
  bool Tampers(const std::string& boundary) const;
  // Tampers with one call's rounding; adds the values to stats.steered(_unlogged).
  void ApplyTamper(const std::string& boundary, const at::Tensor& x,
                   const precision::RoundOptions& options, double scale,
                   const at::Tensor& magnitude, at::Tensor* rounded, precision::LogRecord* record,
                   BoundaryStats* stats) const;

  void Trace(const std::string& boundary, int32_t call, const at::Tensor& rounded);
  // Trace with the rounded values' CRC-32C already computed (precision::RoundInto's output_crc).
  void TraceCrc(const std::string& boundary, int32_t call, uint32_t crc);
  // The offer for x that is still valid (null when none).
  const Offer* ValidOffer(const at::Tensor& x) const;
  // The offer whose values x holds: the offered tensor or a permuted view of all of it
  // (non-overlapping and dense, same start and size), unchanged since; null when none.
  const Offer* OfferCovering(const at::Tensor& x) const;
  void AddOffer(const at::Tensor& x, precision::Magnitude magnitude);
  // The magnitude given, else the one offered for x.
  // With `produce`, x is owned and its values are still to be written (ApplyProduced).
  // `gradient`: ApplyGradient's call (x may come back as it is).
  at::Tensor Rounded(const std::string& boundary, const at::Tensor& x, int32_t call, bool owned,
                     const precision::Magnitude& magnitude,
                     const precision::BlockProducer* produce = nullptr, bool gradient = false);
  at::Tensor RoundedNamed(const std::string& boundary, const at::Tensor& x, int32_t call,
                          bool owned, const precision::Magnitude& magnitude,
                          const precision::BlockProducer* produce, bool gradient);
};

// The shard of a sharded boundary name ("s3/fc0:fwd" -> 3), or -1 for a plain name; with
// `plain`, the name without its prefix.
int64_t ShardOf(const std::string& boundary, std::string* plain = nullptr);

// Sends `x` through `boundary` of the current context (identity when there is none).
at::Tensor ApplyBoundary(const std::string& boundary, const at::Tensor& x, int32_t call = -1,
                         const at::Tensor& magnitude = {});
// ApplyGradient of the current context (identity when there is none).
at::Tensor ApplyGradientBoundary(const std::string& boundary, const at::Tensor& grad, int32_t call);
// AddGridRearrangement of the current context (nothing when there is none).
void AddGridRearrangement(const at::Tensor& out, const std::vector<at::Tensor>& sources);
// The current context's AgreedValues (false outside a step or without magnitudes wanted).
bool AgreedValues(const at::Tensor& x);
// ApplyInPlace of the current context (nothing when there is none).
void ApplyBoundaryInPlace(const std::string& boundary, at::Tensor* x,
                          const precision::Magnitude& magnitude = {});
// ApplyProduced of the current context (without one, `produce` runs over the whole tensor).
void ApplyBoundaryProduced(const std::string& boundary, at::Tensor* x,
                           precision::BlockProducer produce);
// ApplyProducedChain of the current context (without one, each producer runs over its
// whole tensor, in order).
void ApplyBoundaryChain(std::vector<StepContext::ProducedLink> links);
// Whether the current context's boundaries change values (false outside a step).
bool BoundariesRound();

// The current context's magnitudes_wanted() (false outside a step).
bool MagnitudesWanted();
// OfferMagnitude / OfferComputedMagnitude / AddGradMagnitude of the current context (nothing
// outside a step).
void OfferMagnitude(const at::Tensor& x, const at::Tensor& magnitude);
void OfferComputedMagnitude(const at::Tensor& x, precision::Magnitude magnitude);
void AddGradMagnitude(const at::Tensor& parameter, const at::Tensor& magnitude);
void AddGradMagnitude(const at::Tensor& parameter, precision::Magnitude magnitude);

}  // namespace vt::nn
