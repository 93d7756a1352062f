#include "runtime/nn/context.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <chrono>
#include <cmath>

#include "runtime/common/error.h"
#include "runtime/precision/codec.h"
#include "runtime/precision/divergence.h"
#include "runtime/precision/round.h"
#include "runtime/precision/window.h"
#include "store/crc32c.h"

namespace vt::nn {
namespace {

// The entry of `registry` (offers, rounded outputs: keyed by their first element's address)
// whose values x holds: x non-overlapping and dense, starting where the entry starts and as
// long (the entry itself or a permuted view of all of it), its memory still the entry's (not
// freed and reused at that address) and unchanged in place since (autograd's accumulation of
// gradients changes it). Null otherwise.
template <class Entry>
const Entry* EntryCovering(const std::map<const void*, Entry>& registry, const at::Tensor& x) {
  if (registry.empty() || !x.defined() || x.numel() == 0 || !x.is_non_overlapping_and_dense()) {
    return nullptr;
  }
  auto it = registry.find(x.data_ptr());
  if (it == registry.end()) return nullptr;
  const Entry& e = it->second;
  if (e.storage.expired() || e.numel != x.numel() || e.version != x._version()) return nullptr;
  return &e;
}

thread_local StepContext* g_current = nullptr;

constexpr const char* kModeNames[] = {"fp32", "fp64", "rounded", "log", "replay"};

// CRC-32C of n bytes: blocks of store::kCrc32cBlock checksummed on LibTorch's threads, joined
// in order, then the tail; the same value as one Crc32cExtend over the buffer.
uint32_t ParallelCrc32c(const uint8_t* p, size_t n) {
  const size_t blocks = n / store::kCrc32cBlock;
  if (blocks < 2) return store::Crc32cExtend(0, p, n);
  std::vector<uint32_t> crcs(blocks);
  at::parallel_for(0, static_cast<int64_t>(blocks), 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      crcs[b] = store::Crc32cExtend(0, p + b * store::kCrc32cBlock, store::kCrc32cBlock);
    }
  });
  uint32_t crc = crcs[0];
  for (size_t b = 1; b < blocks; ++b) crc = store::Crc32cAppendBlock(crc, crcs[b]);
  return store::Crc32cExtend(crc, p + blocks * store::kCrc32cBlock,
                             n - blocks * store::kCrc32cBlock);
}

}  // namespace

std::string ModeName(Mode mode) { return kModeNames[static_cast<int>(mode)]; }

Mode ParseMode(const std::string& name) {
  for (int i = 0; i < 5; ++i) {
    if (name == kModeNames[i]) return static_cast<Mode>(i);
  }
  throw Error("unknown mode '" + name + "' (valid: fp32, fp64, rounded, log, replay)");
}

BoundaryKind KindOf(const std::string& boundary) {
  const size_t colon = boundary.rfind(':');
  const std::string suffix = colon == std::string::npos ? "" : boundary.substr(colon + 1);
  if (suffix == "fwd") return BoundaryKind::kForward;
  if (suffix == "bwd") return BoundaryKind::kBackward;
  if (suffix == "grad") return BoundaryKind::kGradient;
  return BoundaryKind::kUpdate;
}

const char* KindName(BoundaryKind kind) {
  static const char* names[] = {"fwd", "bwd", "grad", "update"};
  return names[static_cast<int>(kind)];
}

int64_t ShardOf(const std::string& boundary, std::string* plain) {
  // "s" digits "/" rest; boundary names of models never start that way (module paths).
  size_t i = 1;
  while (i < boundary.size() && boundary[i] >= '0' && boundary[i] <= '9') ++i;
  if (boundary.size() < 4 || boundary[0] != 's' || i == 1 || i > 10 || i + 1 >= boundary.size() ||
      boundary[i] != '/') {
    if (plain != nullptr) *plain = boundary;
    return -1;
  }
  if (plain != nullptr) *plain = boundary.substr(i + 1);
  return std::stoll(boundary.substr(1, i - 1));
}

const Window& WindowTable::Lookup(const std::string& boundary) const {
  auto it = by_boundary.find(boundary);
  if (it != by_boundary.end()) return it->second;
  if (!by_boundary.empty() && !boundary.empty() && boundary[0] == 's') {
    std::string plain;
    if (ShardOf(boundary, &plain) >= 0) {
      it = by_boundary.find(plain);
      if (it != by_boundary.end()) return it->second;
    }
  }
  return by_kind[static_cast<int>(KindOf(boundary))];
}

int WindowTable::BitsFor(const std::string& boundary) const {
  return KindOf(boundary) == BoundaryKind::kUpdate ? 32 : bits;
}

void WindowTable::Validate() const {
  auto check = [&](const std::string& where, const Window& w) {
    precision::RoundOptions o;
    o.bits = bits;
    o.band = w.band;
    o.alpha = w.alpha;
    try {
      o.Validate();
    } catch (const Error& e) {
      throw Error("window for " + where + ": " + e.what());
    }
  };
  for (int k = 0; k < 4; ++k)
    check(std::string("kind '") + KindName(static_cast<BoundaryKind>(k)) + "'", by_kind[k]);
  for (const auto& [name, w] : by_boundary) check("boundary '" + name + "'", w);
}

StepContext::StepContext(Mode mode, const WindowTable* windows, int64_t step, StepLog* log)
    : mode_(mode), windows_(windows), step_(step), log_(log) {
  if ((mode == Mode::kLog || mode == Mode::kReplay) && log == nullptr) {
    throw Error("a " + ModeName(mode) + " step needs a step log");
  }
  if (mode != Mode::kFp32 && mode != Mode::kFp64 && windows == nullptr) {
    throw Error("a " + ModeName(mode) + " step needs a window table");
  }
  if (mode == Mode::kLog || mode == Mode::kReplay) {
    for (const Window& w : windows->by_kind) magnitudes_wanted_ |= w.alpha > 0.0;
    for (const auto& [name, w] : windows->by_boundary) magnitudes_wanted_ |= w.alpha > 0.0;
  }
}

void StepContext::OfferMagnitude(const at::Tensor& x, const at::Tensor& magnitude) {
  if (!magnitude.defined()) return;
  AddOffer(x, precision::Magnitude(magnitude));
}

void StepContext::OfferComputedMagnitude(const at::Tensor& x, precision::Magnitude magnitude) {
  if (!magnitude.defined()) return;
  AddOffer(x, std::move(magnitude));
}

void StepContext::AddOffer(const at::Tensor& x, precision::Magnitude magnitude) {
  if (!magnitudes_wanted_ || !x.defined() || !x.is_contiguous() || x.numel() == 0) return;
  // Offers whose memory was freed were never taken (the values went elsewhere): drop them.
  for (auto it = offers_.begin(); it != offers_.end();) {
    it = it->second.storage.expired() ? offers_.erase(it) : std::next(it);
  }
  offers_.erase(x.data_ptr());
  offers_.emplace(x.data_ptr(), Offer{x.storage().getWeakStorageImpl(), x.numel(),
                                      static_cast<uint32_t>(x._version()), std::move(magnitude)});
}

const StepContext::Offer* StepContext::ValidOffer(const at::Tensor& x) const {
  // An elementwise magnitude lines up with x's elements only in x's own (contiguous) order.
  return x.defined() && x.is_contiguous() ? OfferCovering(x) : nullptr;
}

const StepContext::Offer* StepContext::OfferCovering(const at::Tensor& x) const {
  return EntryCovering(offers_, x);
}

at::Tensor StepContext::OfferedFor(const at::Tensor& x) const {
  const Offer* o = ValidOffer(x);
  return o == nullptr ? at::Tensor() : o->magnitude.Materialize(x);
}

precision::Magnitude StepContext::OfferedMagnitudeFor(const at::Tensor& x) const {
  const Offer* o = ValidOffer(x);
  return o == nullptr ? precision::Magnitude() : o->magnitude;
}

void StepContext::AddGradMagnitude(const at::Tensor& parameter, const at::Tensor& magnitude) {
  if (!magnitudes_wanted_ || !magnitude.defined()) return;
  GradMagnitude& m = grad_magnitudes_[parameter.unsafeGetTensorImpl()];
  const at::Tensor add = magnitude.to(at::kDouble).reshape(parameter.sizes());
  if (m.computed.defined()) {  // a second contribution: the first is written out
    m.sum = m.computed.Materialize(add);
    m.owned = true;
    m.computed = precision::Magnitude();
  }
  if (!m.sum.defined()) {
    m.sum = add;  // the same bits as a copy, without the pass
  } else if (!m.owned) {
    m.sum = m.sum + add;
    m.owned = true;
  } else {
    m.sum.add_(add);
  }
}

void StepContext::AddGradMagnitude(const at::Tensor& parameter, precision::Magnitude magnitude) {
  if (!magnitudes_wanted_ || !magnitude.defined()) return;
  if (!magnitude.computed()) {
    AddGradMagnitude(parameter, magnitude.values());
    return;
  }
  if (magnitude.numel() != parameter.numel()) {
    throw Error("a gradient magnitude covers " + std::to_string(magnitude.numel()) +
                " elements, the parameter has " + std::to_string(parameter.numel()));
  }
  auto it = grad_magnitudes_.find(parameter.unsafeGetTensorImpl());
  if (it == grad_magnitudes_.end()) {
    grad_magnitudes_[parameter.unsafeGetTensorImpl()].computed = std::move(magnitude);
    return;
  }
  AddGradMagnitude(parameter, magnitude.Materialize(parameter));
}

precision::Magnitude StepContext::TakeGradMagnitudeAsIs(const at::Tensor& parameter) {
  auto it = grad_magnitudes_.find(parameter.unsafeGetTensorImpl());
  if (it == grad_magnitudes_.end()) return precision::Magnitude();
  precision::Magnitude m = it->second.computed.defined() ? std::move(it->second.computed)
                                                         : precision::Magnitude(it->second.sum);
  grad_magnitudes_.erase(it);
  return m;
}

at::Tensor StepContext::TakeGradMagnitude(const at::Tensor& parameter) {
  const precision::Magnitude m = TakeGradMagnitudeAsIs(parameter);
  if (!m.defined()) return at::Tensor();
  return m.computed() ? m.Materialize(parameter) : m.values();
}

at::ScalarType StepContext::dtype() const {
  return mode_ == Mode::kFp32 ? at::kFloat : at::kDouble;
}

void StepContext::set_shard(int64_t shard) {
  prefix_ = shard < 0 ? "" : "s" + std::to_string(shard) + "/";
}

int32_t StepContext::NextCall(const std::string& boundary) {
  return prefix_.empty() ? calls_[boundary]++ : calls_[prefix_ + boundary]++;
}

at::Tensor StepContext::Apply(const std::string& boundary, const at::Tensor& x, int32_t call,
                              const at::Tensor& magnitude) {
  return Rounded(boundary, x, call, /*owned=*/false, magnitude);
}

at::Tensor StepContext::ApplyGradient(const std::string& boundary, const at::Tensor& grad,
                                      int32_t call) {
  return Rounded(boundary, grad, call, /*owned=*/false, {}, nullptr, /*gradient=*/true);
}

void StepContext::ApplyInPlace(const std::string& boundary, at::Tensor* x,
                               const precision::Magnitude& magnitude) {
  *x = Rounded(boundary, *x, -1, /*owned=*/true, magnitude);
}

void StepContext::ApplyProduced(const std::string& boundary, at::Tensor* x,
                                precision::BlockProducer produce,
                                const precision::Magnitude& magnitude) {
  if (!x->defined() || !x->device().is_cpu() || x->scalar_type() != at::kDouble ||
      !x->is_contiguous()) {
    throw Error("boundary '" + boundary +
                "': a produced tensor must be a contiguous CPU float64 tensor");
  }
  if (!rounds()) {
    precision::RunProducer(x->numel(), produce);
    return;
  }
  *x = Rounded(boundary, *x, -1, /*owned=*/true, magnitude, &produce);
}

at::Tensor StepContext::Rounded(const std::string& boundary, const at::Tensor& x, int32_t call,
                                bool owned, const precision::Magnitude& magnitude,
                                const precision::BlockProducer* produce, bool gradient) {
  if (mode_ == Mode::kFp32 || mode_ == Mode::kFp64) return x;
  const precision::Magnitude m = magnitude.defined() ? magnitude : OfferedMagnitudeFor(x);
  return prefix_.empty() ? RoundedNamed(boundary, x, call, owned, m, produce, gradient)
                         : RoundedNamed(prefix_ + boundary, x, call, owned, m, produce, gradient);
}

precision::RoundOptions StepContext::OptionsFor(const std::string& boundary,
                                                const precision::Magnitude& offered,
                                                precision::Magnitude* magnitude, bool* agreed,
                                                bool* counted) const {
  const Window& w = windows_->Lookup(boundary);
  precision::RoundOptions options;
  options.bits = windows_->BitsFor(boundary);
  options.band = w.band;
  options.alpha = w.alpha;
  // The per-element magnitude counts where the window has an absolute term (and for
  // calibration); a window without one never reads it. A value no op gave a magnitude is
  // its own (ROUNDING.md "Magnitudes": such values are elementwise in values both parties
  // hold, since every order-dependent value is rounded where it is made).
  *magnitude = precision::Magnitude();
  *agreed = false;
  *counted = false;
  if (offered.defined() && (w.alpha > 0.0 || compare_ != nullptr)) {
    *counted = true;
    *agreed = !offered.computed() && offered.values().dim() == 0;
    if (!*agreed) *magnitude = offered;
  }
  options.own_magnitude = !magnitude->defined() && !*agreed;
  if (*agreed) options.alpha = 0.0;
  options.count_near_limit = count_near_limit_ && mode_ == Mode::kReplay;
  return options;
}

void StepContext::ApplyProducedChain(std::vector<ProducedLink> links) {
  for (const ProducedLink& l : links) {
    const at::Tensor& x = *l.x;
    if (!x.defined() || !x.device().is_cpu() || x.scalar_type() != at::kDouble ||
        !x.is_contiguous()) {
      throw Error("boundary '" + l.boundary +
                  "': a produced tensor must be a contiguous CPU float64 tensor");
    }
  }
  if (!rounds()) {
    for (const ProducedLink& l : links) precision::RunProducer(l.x->numel(), l.produce);
    return;
  }
  // Each link's boundary as Rounded would take it; a link that cannot join (its values read
  // before rounding, tampering, a record that does not fit, another size) makes every link
  // go through ApplyProduced in turn.
  struct Plan {
    std::string name;
    precision::RoundOptions options;
    precision::Magnitude magnitude;
    bool counted = false;
    precision::LogRecord* record = nullptr;
  };
  std::vector<Plan> plans(links.size());
  bool joins = links.size() > 1 && compare_ == nullptr;
  for (size_t j = 0; j < links.size() && joins; ++j) {
    const ProducedLink& l = links[j];
    Plan& p = plans[j];
    p.name = prefix_ + l.boundary;
    bool agreed = false;
    p.options = OptionsFor(p.name, l.magnitude.defined() ? l.magnitude : OfferedMagnitudeFor(*l.x),
                           &p.magnitude, &agreed, &p.counted);
    const bool captures =
        capture_ != nullptr && (capture_kinds_ >> static_cast<int>(KindOf(p.name)) & 1u) != 0;
    joins = l.x->numel() == links[0].x->numel() && !captures &&
            !(mode_ == Mode::kLog && Tampers(p.name)) &&
            precision::ChainNeedsNoScale(p.options, p.magnitude);
    // (Links share no memory: each is rounded in its own.)
    for (size_t i = 0; i < j && joins; ++i) {
      joins = !l.x->storage().is_alias_of(links[i].x->storage());
    }
    if (joins && mode_ == Mode::kReplay) {
      auto it = ReplayRecord({p.name, calls_.count(p.name) ? calls_.at(p.name) : 0}, l.x->numel());
      joins = it != log_->end() && it->second.size() == l.x->numel();
      if (joins) p.record = &it->second;
    }
  }
  if (!joins) {
    for (ProducedLink& l : links) ApplyProduced(l.boundary, l.x, l.produce, l.magnitude);
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  const int64_t n = links[0].x->numel();
  std::vector<precision::ChainLink> chain(links.size());
  std::vector<int32_t> calls(links.size());
  std::vector<uint32_t> crcs(links.size(), 0);
  std::vector<char> exact_boundary(links.size(), 0);
  for (size_t j = 0; j < links.size(); ++j) {
    Plan& p = plans[j];
    calls[j] = calls_[p.name]++;
    BoundaryStats& s = stats_[p.name];
    s.calls += 1;
    s.elements += n;
    if (p.counted) s.magnitudes += 1;
    precision::ChainLink& c = chain[j];
    c.out = *links[j].x;
    c.produce = links[j].produce;
    c.options = p.options;
    c.magnitude = p.magnitude;
    c.context = precision::BoundaryContext{p.name, step_};
    c.output_crc = mode_ == Mode::kRounded ? nullptr : &crcs[j];
    if (mode_ == Mode::kLog) {
      const RecordKey key{p.name, calls[j]};
      if (sink_ != nullptr) sink_->WillWrite(key);
      written_.insert(key);
      p.record = &(*log_)[key];
      // An exact boundary rounds to nearest and logs nothing (RoundedNamed).
      exact_boundary[j] = p.options.band == 0.0 && p.options.alpha == 0.0;
      c.log = exact_boundary[j] ? nullptr : p.record;
    } else if (mode_ == Mode::kReplay) {
      c.replay = p.record;
    }
  }
  if (mode_ == Mode::kReplay) {
    precision::ReplayChain(&chain);
  } else {
    precision::RoundChain(&chain);
  }
  for (size_t j = 0; j < links.size(); ++j) {
    const Plan& p = plans[j];
    BoundaryStats& s = stats_[p.name];
    if (mode_ == Mode::kLog) {
      if (exact_boundary[j]) p.record->ResetToNone(n);
      s.logged += p.record->counts().logged();
      s.exact += p.record->counts().exact;
      s.steerable += chain[j].stats.steerable;
      if (sink_ != nullptr) sink_->Written({p.name, calls[j]}, *p.record);
    } else if (mode_ == Mode::kReplay) {
      const precision::ReplayReport& r = chain[j].report;
      used_.insert({p.name, calls[j]});
      s.logged += r.logged;
      s.exact += p.record->counts().exact;
      s.corrections += r.corrections;
      s.illegitimate += r.illegitimate;
      s.near_misses += r.near_misses;
      s.near_limit += r.near_limit;
      s.steerable += r.steerable;
    }
    if (mode_ != Mode::kRounded) TraceCrc(p.name, calls[j], crcs[j]);
    AddGridOutput(*links[j].x, p.options.bits, crcs[j]);
  }
  // One pass for every link: its time is shared out among them.
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  boundary_seconds_ += seconds;
  for (const Plan& p : plans) stats_[p.name].seconds += seconds / static_cast<double>(links.size());
}

at::Tensor StepContext::RoundedNamed(const std::string& boundary, const at::Tensor& x, int32_t call,
                                     bool owned, const precision::Magnitude& offered,
                                     const precision::BlockProducer* produce, bool gradient) {
  struct Timer {
    double* total;
    double* per_boundary = nullptr;  // set once the boundary's statistics are found
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    ~Timer() {
      const double d =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      *total += d;
      if (per_boundary != nullptr) *per_boundary += d;
    }
  } timer{&boundary_seconds_};
  if (call < 0) {
    call = calls_[boundary]++;  // `boundary` has its shard prefix already
  } else {
    int32_t& next = calls_[boundary];
    next = std::max(next, call + 1);
  }
  BoundaryStats& s = stats_[boundary];
  timer.per_boundary = &s.seconds;
  s.calls += 1;
  s.elements += x.numel();
  precision::BoundaryContext where{boundary, step_};
  at::Tensor input = x.scalar_type() == at::kDouble ? x : x.to(at::kDouble);
  precision::Magnitude magnitude;
  bool agreed = false;  // a zero magnitude: values every party computes alike
  bool counted = false;
  const precision::RoundOptions options =
      OptionsFor(boundary, offered, &magnitude, &agreed, &counted);
  if (counted) s.magnitudes += 1;
  const bool tampers = mode_ == Mode::kLog && Tampers(boundary);
  const bool captures =
      capture_ != nullptr && (capture_kinds_ >> static_cast<int>(KindOf(boundary)) & 1u) != 0;
  if (gradient && !tampers && !captures && compare_ == nullptr) {
    at::Tensor same = GridShortcut(boundary, call, x, options);
    if (same.defined()) return same;
  }
  // Captures, comparisons and tampering read every unrounded value: the op's pass first.
  if (produce != nullptr && (captures || compare_ != nullptr || tampers)) {
    precision::RunProducer(x.numel(), *produce);
    produce = nullptr;
  }
  if (captures) {
    (*capture_)[{boundary, call}] = input.detach().clone();
  }
  if (compare_ != nullptr) {
    Compare(boundary, call, input,
            magnitude.defined() ? magnitude.Materialize(input)
            : agreed            ? at::zeros_like(input)
                                : input.abs());
  }
  // A tensor the caller hands over is rounded in its own storage: no allocation, and no
  // second pass over fresh memory. (Tampering needs the input after rounding.)
  const bool in_place = owned && input.is_same(x) && x.is_contiguous() && !tampers;
  if (produce != nullptr && !in_place) {  // (ApplyProduced's tensors are always in place)
    precision::RunProducer(x.numel(), *produce);
    produce = nullptr;
  }
  int64_t steerable = 0;  // the trainer's own estimate (RoundStats::steerable)
  double scale = 0.0;     // max |x| when alpha > 0 (RoundStats::scale)
  // The trace's checksum of the rounded values, computed as the kernels write them (a
  // tampering trainer changes them afterwards: Trace checksums those).
  uint32_t crc = 0;
  auto round = [&](precision::LogRecord* record, uint32_t* output_crc = nullptr) {
    if (!in_place) {
      precision::RoundResult r =
          precision::Round(input, options, record, where, magnitude, output_crc);
      steerable = r.stats.steerable;
      scale = r.stats.scale;
      return r.rounded;
    }
    const precision::RoundStats stats =
        produce != nullptr
            ? precision::RoundProduced(input, *produce, options, record, where, magnitude,
                                       output_crc)
            : precision::RoundInto(input, input, options, record, where, magnitude, output_crc);
    steerable = stats.steerable;
    scale = stats.scale;
    return input;
  };
  switch (mode_) {
    case Mode::kRounded: {
      at::Tensor rounded = round(nullptr);
      AddGridOutput(rounded, options.bits, 0);  // (no trace: the CRC is not used)
      return rounded.view(x.sizes());
    }
    case Mode::kLog: {
      const RecordKey key{boundary, call};
      if (sink_ != nullptr) sink_->WillWrite(key);
      written_.insert(key);
      precision::LogRecord& record = (*log_)[key];
      // An exact boundary (calibrated: no divergence between machines; or a value every party
      // computes alike under a window without a band) rounds to nearest, ties to even, and
      // logs nothing, so ties are not steerable either.
      const bool exact_boundary = options.band == 0.0 && options.alpha == 0.0;
      at::Tensor rounded = round(exact_boundary ? nullptr : &record, tampers ? nullptr : &crc);
      if (exact_boundary) record.ResetToNone(input.numel());
      // A tampering trainer ignores that rule too (its entries there are illegitimate).
      if (tampers) {
        ApplyTamper(boundary, input, options, scale,
                    magnitude.defined() ? magnitude.Materialize(input) : at::Tensor(), &rounded,
                    &record, &s);
      }
      s.logged += record.counts().logged();
      s.exact += record.counts().exact;
      s.steerable += steerable;
      if (sink_ != nullptr) sink_->Written(key, record);
      if (tampers) {
        Trace(boundary, call, rounded);
      } else {
        TraceCrc(boundary, call, crc);
        AddGridOutput(rounded, options.bits, crc);
      }
      return rounded.view(x.sizes());
    }
    case Mode::kReplay: {
      auto it = ReplayRecord({boundary, call}, input.numel());
      const std::string where_text = "boundary '" + boundary + "' call " + std::to_string(call) +
                                     " at step " + std::to_string(step_);
      if (it == log_->end() || it->second.size() != input.numel()) {
        Mismatch(boundary, it == log_->end()
                               ? "no log record for " + where_text
                               : "the log record for " + where_text + " has " +
                                     std::to_string(it->second.size()) + " elements, the tensor " +
                                     std::to_string(input.numel()));
        if (it != log_->end()) used_.insert(it->first);
        at::Tensor rounded = round(nullptr);
        Trace(boundary, call, rounded);
        return rounded.view(x.sizes());
      }
      precision::ReplayResult r;
      if (in_place) {
        r.report = produce != nullptr ? precision::ReplayProduced(input, *produce, it->second,
                                                                  options, where, magnitude, &crc)
                                      : precision::ReplayInto(input, it->second, input, options,
                                                              where, magnitude, &crc);
        r.rounded = input;
      } else {
        r = precision::Replay(input, it->second, options, where, magnitude, &crc);
      }
      used_.insert(it->first);
      s.logged += r.report.logged;
      s.exact += it->second.counts().exact;
      s.corrections += r.report.corrections;
      s.illegitimate += r.report.illegitimate;
      s.near_misses += r.report.near_misses;
      s.near_limit += r.report.near_limit;
      s.steerable += r.report.steerable;
      TraceCrc(boundary, call, crc);
      AddGridOutput(r.rounded, options.bits, crc);
      return r.rounded.view(x.sizes());
    }
    default:
      return x;
  }
}

void StepContext::AddGridOutput(const at::Tensor& rounded, int bits, uint32_t crc) {
  if (!grid_shortcut_ || !rounded.is_contiguous() || rounded.numel() == 0) return;
  for (auto it = grid_outputs_.begin(); it != grid_outputs_.end();) {
    it = it->second.storage.expired() ? grid_outputs_.erase(it) : std::next(it);
  }
  grid_outputs_.insert_or_assign(rounded.data_ptr(),
                                 GridOutput{rounded.storage().getWeakStorageImpl(), rounded.numel(),
                                            static_cast<uint32_t>(rounded._version()), bits, crc});
}

const StepContext::GridOutput* StepContext::GridOutputOf(const at::Tensor& x) const {
  return x.defined() && x.scalar_type() == at::kDouble ? EntryCovering(grid_outputs_, x) : nullptr;
}

int64_t StepContext::grid_shortcuts(const std::string& boundary) const {
  auto it = grid_shortcuts_by_boundary_.find(boundary);
  return it == grid_shortcuts_by_boundary_.end() ? 0 : it->second;
}

void StepContext::AddGridRearrangement(const at::Tensor& out,
                                       const std::vector<at::Tensor>& sources) {
  if (!grid_shortcut_ || !rounds() || sources.empty() || !out.is_contiguous() ||
      out.scalar_type() != at::kDouble) {
    return;
  }
  // `out` holds no value but the sources' ...
  int64_t numel = 0;
  for (const at::Tensor& source : sources) numel += source.numel();
  if (numel != out.numel()) return;
  // ... and each of them is a whole rounded output.
  int bits = 0;
  for (const at::Tensor& source : sources) {
    const GridOutput* g = GridOutputOf(source);
    if (g == nullptr) return;
    bits = std::max(bits, g->bits);
  }
  // The trace checksums a boundary's rounded values in memory order; these are in a new order.
  const bool traced = mode_ == Mode::kLog || mode_ == Mode::kReplay;
  const uint32_t crc =
      traced ? ParallelCrc32c(static_cast<const uint8_t*>(out.data_ptr()), out.nbytes()) : 0;
  AddGridOutput(out, bits, crc);
}

bool StepContext::AgreedValues(const at::Tensor& x) const {
  const Offer* o = OfferCovering(x);
  return o != nullptr && !o->magnitude.computed() && o->magnitude.values().dim() == 0;
}

at::Tensor StepContext::GridShortcut(const std::string& boundary, int32_t call, const at::Tensor& x,
                                     const precision::RoundOptions& options) {
  // Only where no value on the grid can take an entry (ROUNDING.md "Classification": a
  // direction needs a value off the grid, EXACT a window wider than a quarter of the step,
  // a near miss on the grid a midpoint nearer than the window, at least a quarter step away).
  if (!grid_shortcut_ || grid_outputs_.empty() || options.alpha != 0.0 || options.band > 0.25 ||
      x.scalar_type() != at::kDouble || !x.is_contiguous() || x.numel() == 0) {
    return {};
  }
  const GridOutput* found = GridOutputOf(x);
  // A grid of fewer bits lies on every grid of more.
  if (found == nullptr || found->bits > options.bits) return {};
  const GridOutput& g = *found;
  const RecordKey key{boundary, call};
  if (mode_ == Mode::kLog) {
    if (sink_ != nullptr) sink_->WillWrite(key);
    written_.insert(key);
    precision::LogRecord& record = (*log_)[key];
    record.ResetToNone(x.numel());
    if (sink_ != nullptr) sink_->Written(key, record);
    TraceCrc(boundary, call, g.crc);
  } else if (mode_ == Mode::kReplay) {
    // An entry the trainer wrote here is checked by the full pass (a direction or EXACT value
    // on the grid is illegitimate); a record that does not fit is its mismatch.
    auto r = ReplayRecord(key, x.numel());
    if (r == log_->end() || r->second.size() != x.numel() || r->second.counts().logged() != 0) {
      return {};
    }
    used_.insert(key);
    TraceCrc(boundary, call, g.crc);
  }
  ++grid_shortcuts_;
  ++grid_shortcuts_by_boundary_[boundary];
  return x;
}

void StepContext::Trace(const std::string& boundary, int32_t call, const at::Tensor& rounded) {
  TraceCrc(boundary, call,
           ParallelCrc32c(static_cast<const uint8_t*>(rounded.data_ptr()),
                          static_cast<size_t>(rounded.numel()) * rounded.element_size()));
}

void StepContext::TraceCrc(const std::string& boundary, int32_t call, uint32_t crc) {
  trace_[{boundary, call}] = crc;
  if (!divergence_.empty() || expected_trace_.empty()) return;
  auto it = expected_trace_.find({boundary, call});
  if (it != expected_trace_.end() && it->second != crc) {
    divergence_ = "boundary '" + boundary + "' call " + std::to_string(call) + " at step " +
                  std::to_string(step_);
  }
}

std::string EncodeTrace(const StepTrace& trace) {
  std::string out;
  auto put32 = [&](uint32_t v) {
    for (int i = 3; i >= 0; --i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  for (const auto& [key, crc] : trace) {
    out.push_back(static_cast<char>((key.first.size() >> 8) & 0xff));
    out.push_back(static_cast<char>(key.first.size() & 0xff));
    out += key.first;
    put32(static_cast<uint32_t>(key.second));
    put32(crc);
  }
  return out;
}

StepTrace DecodeTrace(const std::string& bytes) {
  StepTrace trace;
  size_t pos = 0;
  auto u8 = [&](size_t i) { return static_cast<uint32_t>(static_cast<uint8_t>(bytes[i])); };
  while (pos < bytes.size()) {
    if (bytes.size() - pos < 2)
      throw Error("trace record truncated at byte " + std::to_string(pos));
    const size_t len = (u8(pos) << 8) | u8(pos + 1);
    if (bytes.size() - pos < 2 + len + 8)
      throw Error("trace record truncated at byte " + std::to_string(pos));
    std::string name = bytes.substr(pos + 2, len);
    pos += 2 + len;
    const uint32_t call = (u8(pos) << 24) | (u8(pos + 1) << 16) | (u8(pos + 2) << 8) | u8(pos + 3);
    const uint32_t crc =
        (u8(pos + 4) << 24) | (u8(pos + 5) << 16) | (u8(pos + 6) << 8) | u8(pos + 7);
    pos += 8;
    // EncodeTrace writes the entries in the order of their keys, each once: any other bytes
    // are no trace an honest trainer writes.
    RecordKey key{std::move(name), static_cast<int32_t>(call)};
    if (!trace.empty() && !(std::prev(trace.end())->first < key)) {
      throw Error("trace record not canonical at byte " + std::to_string(pos - 10 - len) +
                  ": its entry for boundary '" + key.first + "' call " +
                  std::to_string(key.second) + " does not follow the one before in order");
    }
    trace.emplace_hint(trace.end(), std::move(key), crc);
  }
  return trace;
}

void StepContext::Compare(const std::string& boundary, int32_t call, const at::Tensor& input,
                          const at::Tensor& magnitude) {
  DivergenceStats& d = divergence_stats_[boundary];
  auto it = compare_->find({boundary, call});
  if (it == compare_->end() || !it->second.sizes().equals(input.sizes())) {
    ++d.missing;
    return;
  }
  const precision::Divergence m =
      precision::MeasureDivergence(it->second, input, windows_->BitsFor(boundary), magnitude);
  d.calls += 1;
  d.elements += m.elements;
  d.differ += m.differ;
  d.straddles += m.straddles;
  d.max_rel = std::max(d.max_rel, m.max_rel());
}

void StepContext::Mismatch(const std::string& boundary, const std::string& what) {
  if (!counts_shared_mismatches_ && ShardOf(boundary) < 0) return;
  if (log_mismatches_++ == 0) first_log_mismatch_ = what;
}

StepLog::iterator StepContext::ReplayRecord(const RecordKey& key, int64_t numel) {
  auto it = log_->find(key);
  if (it != log_->end() || deferred_.empty()) return it;
  auto d = deferred_.find(key);
  if (d == deferred_.end()) return it;
  const std::string bytes = std::move(d->second);
  deferred_.erase(d);
  it = log_->emplace(key, precision::LogRecord()).first;
  try {
    precision::DecodeLimits limits;
    limits.max_elements = numel;
    precision::DecodeLogInto(bytes, &it->second, limits);
  } catch (const std::exception& e) {
    log_->erase(it);
    Mismatch(key.first, "the log record for boundary '" + key.first + "' call " +
                            std::to_string(key.second) + " at step " + std::to_string(step_) +
                            " does not decode for its tensor of " + std::to_string(numel) +
                            " elements: " + e.what());
    return log_->end();
  }
  return it;
}

void StepContext::Finish() {
  if (mode_ == Mode::kLog) {
    // Records of an earlier step that this one did not write (their buffers were reused).
    // Only the records written count: a call number reserved in the forward for a backward
    // that did not run (an output off the loss's path) is below its counter but unwritten,
    // and the earlier step's record there is no record of this step.
    for (auto it = log_->begin(); it != log_->end();) {
      it = written_.count(it->first) != 0 ? std::next(it) : log_->erase(it);
    }
    return;
  }
  if (mode_ != Mode::kReplay) return;
  if (trace_expected_) CheckTraceCalls();
  for (const auto& [key, bytes] : deferred_) {
    Mismatch(key.first, "the log has a record for boundary '" + key.first + "' call " +
                            std::to_string(key.second) + " at step " + std::to_string(step_) +
                            " that this replay never reached");
  }
  deferred_.clear();
  if (used_.size() == log_->size()) return;
  // Every record no boundary call used: one past the calls the replay made, or one at a call
  // number the replay reserved but rounded without it.
  for (const auto& [key, record] : *log_) {
    if (used_.count(key) != 0) continue;
    auto it = calls_.find(key.first);
    const bool reached = it != calls_.end() && key.second < it->second;
    Mismatch(key.first, "the log has a record for boundary '" + key.first + "' call " +
                            std::to_string(key.second) + " at step " + std::to_string(step_) +
                            " that this replay " + (reached ? "did not use" : "never reached"));
  }
}

void StepContext::CheckTraceCalls() {
  // Both maps are sorted by key: one merge.
  auto want = expected_trace_.begin();
  auto made = trace_.begin();
  while (want != expected_trace_.end() || made != trace_.end()) {
    if (made == trace_.end() || (want != expected_trace_.end() && want->first < made->first)) {
      Mismatch(want->first.first, "the trace names boundary '" + want->first.first + "' call " +
                                      std::to_string(want->first.second) + " at step " +
                                      std::to_string(step_) + ", a call this replay never made");
      ++want;
    } else if (want == expected_trace_.end() || made->first < want->first) {
      Mismatch(made->first.first, "the trace has no entry for boundary '" + made->first.first +
                                      "' call " + std::to_string(made->first.second) + " at step " +
                                      std::to_string(step_) + ", a call this replay made");
      ++made;
    } else {
      ++want;
      ++made;
    }
  }
}

bool StepContext::Tampers(const std::string& boundary) const {
  switch (tamper_.kind) {
    case Tamper::Kind::kNone:
      return false;
    case Tamper::Kind::kSteer:
      return KindOf(boundary) == BoundaryKind::kUpdate;
    case Tamper::Kind::kToward:
      return tamper_.directions.count(boundary) > 0;
    default:
      return true;
  }
}

void StepContext::ApplyTamper(const std::string& boundary, const at::Tensor& input,
                              const precision::RoundOptions& options, double scale,
                              const at::Tensor& magnitude, at::Tensor* rounded,
                              precision::LogRecord* record, BoundaryStats* stats) const {
  using precision::LogState;
  const at::Tensor x = input.contiguous();
  precision::KernelParams p = precision::MakeKernelParams(options, scale);
  const at::Tensor mag = magnitude.defined() ? magnitude.contiguous() : magnitude;
  const double* mp = mag.defined() ? mag.data_ptr<double>() : nullptr;
  const double* xv = x.data_ptr<double>();
  double* out = rounded->data_ptr<double>();
  at::Tensor direction;  // kToward: where this boundary's values should move
  if (tamper_.kind == Tamper::Kind::kToward) {
    auto it = tamper_.directions.find(boundary);
    if (it == tamper_.directions.end() || it->second.numel() != x.numel()) return;
    direction = it->second.to(at::kDouble).contiguous();
  }
  const double* want = direction.defined() ? direction.data_ptr<double>() : nullptr;
  std::vector<uint8_t> states(record->states(), record->states() + record->size());
  std::vector<precision::ExactEntry> exact = record->exact();  // sorted by position
  const size_t honest_exact = exact.size();
  size_t cursor = 0;  // into the honest EXACT entries
  int64_t changed = 0, unlogged = 0;
  for (int64_t i = 0; i < x.numel() && (tamper_.count == 0 || changed < tamper_.count); ++i) {
    const uint8_t st = states[i];
    const bool within =
        tamper_.kind == Tamper::Kind::kFlipWithin || tamper_.kind == Tamper::Kind::kToward;
    if (st != 0 && !within) continue;  // logged: left as written
    const double a = std::fabs(xv[i]);
    const precision::Cell c = precision::CellOf(a, p.k);
    if (!(c.r < precision::kFp32Overflow)) continue;
    if (c.on_grid && !within) continue;
    // The neighbour rnd_b did not pick; on the grid, the next grid value away from zero
    // (kToward: in the direction wanted, when that is toward zero).
    double other = c.on_grid ? a + c.g : c.up ? c.r - c.g : c.r + c.g;
    if (want != nullptr && c.on_grid && a > 0.0 && (want[i] > 0.0) != (xv[i] > 0.0))
      other = a - precision::SpacingAt(std::nextafter(a, 0.0), p.k);
    if (!(other < precision::kFp32Overflow)) continue;
    double v = std::signbit(xv[i]) ? -other : other;
    if (want != nullptr && a == 0.0 && want[i] < 0.0) v = -other;      // a zero moves either way
    if (want != nullptr && !((v - out[i]) * want[i] > 0.0)) continue;  // not the way it should go
    const double d = std::fabs(a - c.mid);
    // This element's absolute term.
    if (mp != nullptr || p.own_magnitude) p.alpha_scale = options.alpha * (mp ? mp[i] : a);
    const double w = precision::Window(p.band, c.g, p.alpha_scale);
    bool as_exact = false;
    switch (tamper_.kind) {
      case Tamper::Kind::kSteer:
        if (!(d > 0.375 * c.g)) continue;
        break;
      case Tamper::Kind::kForgeExact: {
        if (!(d > 0.375 * c.g)) continue;
        const precision::ExactTolerance tol =
            precision::ExactToleranceAt(a, w, p.k, p.band, p.alpha_scale);
        const double low = a - tol.t;
        const double g_low = 0.5 * precision::SpacingAt(low > 0.0 ? low : 0.0, p.k);
        const bool never_exact = !(precision::Window(p.band, g_low, p.alpha_scale) > 0.25 * g_low);
        if (!(tol.t < 0.1875 * c.g || never_exact)) continue;
        as_exact = true;
        break;
      }
      case Tamper::Kind::kFlipWithin:
      case Tamper::Kind::kToward: {
        // A zero window (an exact boundary) accepts no entry at all, ties included.
        if (!(w > 0.0)) continue;
        // A direction that moves a value is accepted within w of its midpoint (the
        // auditor's value may lie up to half of that further off).
        const bool direction = !c.on_grid && w <= 0.25 * c.g && d <= 0.5 * w &&
                               st != static_cast<uint8_t>(LogState::kExact);
        if (!direction) {
          const float vf = static_cast<float>(v);
          const double margin = 0.5 * w;
          const bool legitimate =
              precision::ExactLegitimate(xv[i], vf, p.k, p.band, p.alpha_scale) &&
              precision::ExactLegitimate(xv[i] - margin, vf, p.k, p.band, p.alpha_scale) &&
              precision::ExactLegitimate(xv[i] + margin, vf, p.k, p.band, p.alpha_scale);
          if (!legitimate) continue;
          as_exact = true;
        }
        break;
      }
      case Tamper::Kind::kNone:
        return;
    }
    if (st == static_cast<uint8_t>(LogState::kExact)) {
      while (cursor < honest_exact && exact[cursor].position < i) ++cursor;
      if (cursor == honest_exact || exact[cursor].position != i)
        continue;  // (records keep them sorted)
      exact[cursor].fp32_bits =
          precision::FloatBits(static_cast<float>(v));  // the honest entry, overwritten
    } else if (as_exact) {
      states[i] = static_cast<uint8_t>(LogState::kExact);
      exact.push_back({i, precision::FloatBits(static_cast<float>(v))});
    } else if (!tamper_.silent) {
      states[i] = static_cast<uint8_t>(v > out[i] ? LogState::kUp : LogState::kDown);
    }
    out[i] = v;
    ++changed;
    unlogged += st == 0;
  }
  if (changed > 0) *record = precision::LogRecord::FromStates(std::move(states), std::move(exact));
  stats->steered += changed;
  stats->steered_unlogged += unlogged;
}

StepContext::Scope::Scope(StepContext* context) : previous_(g_current) { g_current = context; }
StepContext::Scope::~Scope() { g_current = previous_; }

StepContext* StepContext::Current() { return g_current; }

at::Tensor ApplyBoundary(const std::string& boundary, const at::Tensor& x, int32_t call,
                         const at::Tensor& magnitude) {
  StepContext* c = StepContext::Current();
  return c == nullptr ? x : c->Apply(boundary, x, call, magnitude);
}

at::Tensor ApplyGradientBoundary(const std::string& boundary, const at::Tensor& grad,
                                 int32_t call) {
  StepContext* c = StepContext::Current();
  return c == nullptr ? grad : c->ApplyGradient(boundary, grad, call);
}

void AddGridRearrangement(const at::Tensor& out, const std::vector<at::Tensor>& sources) {
  StepContext* c = StepContext::Current();
  if (c != nullptr) c->AddGridRearrangement(out, sources);
}

bool AgreedValues(const at::Tensor& x) {
  StepContext* c = StepContext::Current();
  return c != nullptr && c->magnitudes_wanted() && c->AgreedValues(x);
}

bool MagnitudesWanted() {
  StepContext* c = StepContext::Current();
  return c != nullptr && c->magnitudes_wanted();
}

void OfferMagnitude(const at::Tensor& x, const at::Tensor& magnitude) {
  StepContext* c = StepContext::Current();
  if (c != nullptr) c->OfferMagnitude(x, magnitude);
}

void OfferComputedMagnitude(const at::Tensor& x, precision::Magnitude magnitude) {
  StepContext* c = StepContext::Current();
  if (c != nullptr) c->OfferComputedMagnitude(x, std::move(magnitude));
}

void AddGradMagnitude(const at::Tensor& parameter, const at::Tensor& magnitude) {
  StepContext* c = StepContext::Current();
  if (c != nullptr) c->AddGradMagnitude(parameter, magnitude);
}

void AddGradMagnitude(const at::Tensor& parameter, precision::Magnitude magnitude) {
  StepContext* c = StepContext::Current();
  if (c != nullptr) c->AddGradMagnitude(parameter, std::move(magnitude));
}

void ApplyBoundaryInPlace(const std::string& boundary, at::Tensor* x,
                          const precision::Magnitude& magnitude) {
  StepContext* c = StepContext::Current();
  if (c != nullptr) c->ApplyInPlace(boundary, x, magnitude);
}

void ApplyBoundaryProduced(const std::string& boundary, at::Tensor* x,
                           precision::BlockProducer produce) {
  StepContext* c = StepContext::Current();
  if (c != nullptr) {
    c->ApplyProduced(boundary, x, produce);
  } else {
    precision::RunProducer(x->numel(), produce);
  }
}

void ApplyBoundaryChain(std::vector<StepContext::ProducedLink> links) {
  StepContext* c = StepContext::Current();
  if (c != nullptr) {
    c->ApplyProducedChain(std::move(links));
    return;
  }
  for (const StepContext::ProducedLink& l : links) precision::RunProducer(l.x->numel(), l.produce);
}

bool BoundariesRound() {
  StepContext* c = StepContext::Current();
  return c != nullptr && c->rounds();
}

}  // namespace vt::nn
