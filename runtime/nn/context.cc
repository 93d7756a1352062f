#include "runtime/nn/context.h"

#include <ATen/ATen.h>

#include "runtime/common/error.h"
#include "runtime/precision/round.h"

namespace vt::nn {
namespace {

thread_local StepContext* g_current = nullptr;

constexpr const char* kModeNames[] = {"fp32", "fp64", "rounded", "log", "replay"};

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

const Window& WindowTable::Lookup(const std::string& boundary) const {
  auto it = by_boundary.find(boundary);
  if (it != by_boundary.end()) return it->second;
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
  for (int k = 0; k < 4; ++k) check(std::string("kind '") + KindName(static_cast<BoundaryKind>(k)) + "'", by_kind[k]);
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
  if (mode == Mode::kLog) log_->clear();
}

at::ScalarType StepContext::dtype() const { return mode_ == Mode::kFp32 ? at::kFloat : at::kDouble; }

int32_t StepContext::NextCall(const std::string& boundary) { return calls_[boundary]++; }

at::Tensor StepContext::Apply(const std::string& boundary, const at::Tensor& x, int32_t call) {
  if (mode_ == Mode::kFp32 || mode_ == Mode::kFp64) return x;
  if (call < 0) {
    call = NextCall(boundary);
  } else {
    int32_t& next = calls_[boundary];
    next = std::max(next, call + 1);
  }
  BoundaryStats& s = stats_[boundary];
  s.calls += 1;
  s.elements += x.numel();
  const Window& w = windows_->Lookup(boundary);
  precision::RoundOptions options;
  options.bits = windows_->BitsFor(boundary);
  options.band = w.band;
  options.alpha = w.alpha;
  precision::BoundaryContext where{boundary, step_};
  at::Tensor input = x.scalar_type() == at::kDouble ? x : x.to(at::kDouble);
  switch (mode_) {
    case Mode::kRounded:
      return precision::Round(input, options, nullptr, where).rounded.view(x.sizes());
    case Mode::kLog: {
      precision::LogRecord& record = (*log_)[{boundary, call}];
      precision::RoundResult r = precision::Round(input, options, &record, where);
      s.logged += r.stats.counts.logged();
      s.exact += r.stats.counts.exact;
      return r.rounded.view(x.sizes());
    }
    case Mode::kReplay: {
      auto it = log_->find({boundary, call});
      if (it == log_->end()) {
        throw Error("no log record for boundary '" + boundary + "' call " + std::to_string(call) +
                    " at step " + std::to_string(step_) +
                    " (the trainer's log has none: a different model, spec or code)");
      }
      precision::ReplayResult r = precision::Replay(input, it->second, options, where);
      ++used_records_;
      s.logged += r.report.logged;
      s.exact += it->second.counts().exact;
      s.corrections += r.report.corrections;
      s.illegitimate += r.report.illegitimate;
      s.near_misses += r.report.near_misses;
      return r.rounded.view(x.sizes());
    }
    default:
      return x;
  }
}

void StepContext::CheckAllRecordsUsed() const {
  if (mode_ != Mode::kReplay || used_records_ == static_cast<int64_t>(log_->size())) return;
  for (const auto& [key, record] : *log_) {
    auto it = calls_.find(key.first);
    if (it == calls_.end() || key.second >= it->second) {
      throw Error("step " + std::to_string(step_) + ": the log has a record for boundary '" + key.first +
                  "' call " + std::to_string(key.second) + " that this replay never reached");
    }
  }
}

StepContext::Scope::Scope(StepContext* context) : previous_(g_current) { g_current = context; }
StepContext::Scope::~Scope() { g_current = previous_; }

StepContext* StepContext::Current() { return g_current; }

at::Tensor ApplyBoundary(const std::string& boundary, const at::Tensor& x, int32_t call) {
  StepContext* c = StepContext::Current();
  return c == nullptr ? x : c->Apply(boundary, x, call);
}

}  // namespace vt::nn
