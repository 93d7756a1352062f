#include "runtime/train/runner.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "runtime/common/error.h"
#include "runtime/common/threads.h"
#include "runtime/precision/codec.h"
#include "runtime/profile/profile.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/engine.h"
#include "runtime/train/rank_exchange.h"
#include "runtime/train/spec_check.h"
#include "store/log_digest.h"
#include "store/pending_work.h"

namespace vt::train {
namespace {

using Encoded = std::vector<std::pair<nn::RecordKey, std::string>>;

std::vector<store::LogRecordView> Views(const Encoded& records) {
  std::vector<store::LogRecordView> views;
  views.reserve(records.size());
  for (const auto& [key, bytes] : records) {
    views.push_back({key.first, static_cast<uint32_t>(key.second), bytes});
  }
  return views;
}

// The records of `log` that `keep` selects, encoded on LibTorch's threads (each record is
// independent; the order is the log's).
template <class Keep>
Encoded EncodeRecordsOf(const nn::StepLog& log, Keep keep) {
  std::vector<const nn::StepLog::value_type*> chosen;
  chosen.reserve(log.size());
  for (const auto& entry : log) {
    if (keep(entry.first)) chosen.push_back(&entry);
  }
  Encoded out(chosen.size());
  at::parallel_for(0, static_cast<int64_t>(chosen.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      out[i] = {chosen[i]->first, precision::EncodeLog(chosen[i]->second)};
    }
  });
  return out;
}

}  // namespace

bool UseBackground(RunnerOptions::Background choice) {
  using B = RunnerOptions::Background;
  if (choice != B::kAuto) return choice == B::kOn;
  return BackgroundAllowedByEnvironment();
}

void StepReport::AddCounts(const StepReport& o) {
  elements += o.elements;
  logged += o.logged;
  exact += o.exact;
  steerable += o.steerable;
  steered += o.steered;
  steered_unlogged += o.steered_unlogged;
  corrections += o.corrections;
  illegitimate += o.illegitimate;
  near_misses += o.near_misses;
  near_limit += o.near_limit;
  log_bytes += o.log_bytes;
  log_mismatches += o.log_mismatches;
  if (divergence.empty()) divergence = o.divergence;
  if (log_mismatch.empty()) log_mismatch = o.log_mismatch;
}

Runner::Runner(Spec spec, RunnerOptions options, nn::Mode mode)
    : spec_(std::move(spec)), options_(std::move(options)), mode_(mode) {
  if (!options_.data) throw Error("a data set is required");
  const bool plain =
      mode == nn::Mode::kFp32 || mode == nn::Mode::kFp64 || mode == nn::Mode::kRounded;
  if (options_.group) {
    const dist::Group& g = *options_.group;
    ShardPlan::For(spec_.shards(), options_.group.get());  // world divides shards
    if (g.rank() != 0 && options_.store) {
      throw Error("on " + dist::Describe(g) +
                  " the runner keeps no store: rank 0 commits the run (pass no store here)");
    }
    if (options_.capture_kinds != 0)
      throw Error("calibration captures run in one process, not in a group of processes");
    if (plain)
      throw Error("a group of processes runs the logging trainer or an auditor, not mode '" +
                  nn::ModeName(mode) + "'");
  }
  // A trainer that logs needs a store (rank 0 of a group: the others send it their logs); an
  // auditor without one is a judge (see Auditor).
  if (!options_.store && !plain && mode != nn::Mode::kReplay && root_rank())
    throw Error("a store is required");
  spec_.CheckData(*options_.data);
  if (std::string misfit = ModelDataMisfit(spec_, *options_.data); !misfit.empty()) {
    throw Error("the spec's model does not fit the data: " + misfit);
  }
  options_.deviation.Validate(*options_.data);
  FindProfile(options_.profile);  // fail early on a bad name
  windows_ = spec_.Windows();
  model_ = spec_.BuildModel();
  const std::string init = spec_.InitDigest();
  if (!init.empty() || !options_.init_path.empty()) {
    if (init.empty())
      throw Error(
          "initial weights were given but the spec has no model.init (make the spec with them)");
    if (options_.init_path.empty())
      throw Error("the spec starts from imported weights (model.init " + init.substr(0, 12) +
                  "...); pass their safetensors file");
    LoadSafetensorsInto(options_.init_path, model_->NamedState());
    const std::string digest = StateDigestHex(model_->NamedState());
    if (digest != init) {
      throw Error("weights in '" + options_.init_path + "' have digest " + digest +
                  ", the spec requires " + init);
    }
  }
  if (mode == nn::Mode::kFp32) model_->To(at::kFloat);
  optimizer_ = std::make_unique<optim::Optimizer>(spec_.Optimizer());
  optimizer_->InitState(model_->NamedParameters());
}

std::vector<std::pair<std::string, at::Tensor*>> Runner::State() {
  auto state = model_->NamedState();
  auto optim_state = optimizer_->NamedState();
  state.insert(state.end(), optim_state.begin(), optim_state.end());
  return state;
}

std::string Runner::StateBytes() { return EncodeState(State()); }

void Runner::Checkpoint(uint64_t leaf) {
  // The state is encoded here, before the next step changes it; hashing and writing it
  // (most of a checkpoint's time) go behind, as a step's records do (the store writes a
  // run's last leaf at once: a finished run is whole in its store when training ends).
  if (UseBackground(options_.write_behind)) {
    // The last checkpoint's buffer, once the store has written it, takes this one: the same
    // size, so no fresh memory is touched (GPT 4x256: 39 MB of page faults a checkpoint).
    if (!checkpoint_bytes_ || checkpoint_bytes_.use_count() > 1)
      checkpoint_bytes_ = std::make_shared<std::string>();
    EncodeStateInto(State(), checkpoint_bytes_.get());
    options_.store->PutCheckpointBehind(options_.run, leaf, checkpoint_bytes_);
  } else {
    options_.store->PutCheckpoint(options_.run, leaf, StateBytes());
  }
}

void Runner::OpenAcrossRanks(const std::function<void()>& open) {
  if (!options_.group) {
    open();
    return;
  }
  dist::Group& g = *options_.group;
  // Rank 0 alone opens; its failure (another spec in the store, a damaged checkpoint) is
  // every rank's.
  std::string status = Ok("");
  if (g.rank() == 0) {
    try {
      open();
      status = Ok(std::to_string(step_));
    } catch (const std::exception& e) {
      status = Failed(e.what());
    }
  }
  g.BroadcastBytes(&status, 0);
  step_ = std::stoll(PayloadOrThrow(status));
  AgreeOrThrow(g, spec_.HashHex(), [](const std::vector<std::string>& hashes) {
    for (size_t r = 1; r < hashes.size(); ++r) {
      if (hashes[r] != hashes[0]) {
        return "rank " + std::to_string(r) + " runs spec " + hashes[r].substr(0, 12) +
               "..., rank 0 runs " + hashes[0].substr(0, 12) +
               "...: every rank of a group must run the same spec";
      }
    }
    return std::string();
  });
  std::string state = g.rank() == 0 ? StateBytes() : std::string();
  g.BroadcastBytes(&state, 0);
  if (g.rank() != 0) DecodeStateInto(state, State());
}

void Runner::GatherReports(const nn::StepContext& context, StepReport* report) {
  dist::Group& g = *options_.group;
  RankReport mine;
  for (const auto& [name, stats] : context.stats()) {
    // Every rank computes the shared boundaries alike; rank 0 reports them once.
    if (g.rank() == 0 || nn::ShardOf(name) >= 0) mine.boundaries[name] = stats;
  }
  mine.divergence = context.divergence();
  mine.log_mismatches = context.log_mismatches();
  mine.log_mismatch = context.first_log_mismatch();
  std::vector<std::string> parts = g.GatherBytes(EncodeRankReport(mine), 0);
  if (g.rank() != 0) return;
  for (size_t r = 1; r < parts.size(); ++r) {
    RankReport other = DecodeRankReport(parts[r]);
    for (const auto& [name, stats] : other.boundaries) report->boundaries[name] = stats;
    if (report->divergence.empty()) report->divergence = other.divergence;
    report->log_mismatches += other.log_mismatches;
    if (report->log_mismatch.empty()) report->log_mismatch = other.log_mismatch;
  }
}

std::string Runner::UnknownOverridesOfFirstStep(
    const std::map<std::string, nn::BoundaryStats>& seen) {
  if (!options_.group) return UnknownBoundaryOverrides(windows_, seen);
  std::string names;
  for (const auto& [name, stats] : seen) names += name + '\n';
  std::string error;
  try {
    AgreeOrThrow(*options_.group, names, [this](const std::vector<std::string>& per_rank) {
      std::map<std::string, nn::BoundaryStats> all;
      for (const std::string& part : per_rank) {
        for (size_t at = 0, end; (end = part.find('\n', at)) != std::string::npos; at = end + 1)
          all.emplace(part.substr(at, end - at), nn::BoundaryStats{});
      }
      return UnknownBoundaryOverrides(windows_, all);
    });
  } catch (const std::exception& e) {
    error = e.what();
  }
  return error;
}

void Runner::CheckRanksAgree(int64_t step) {
  dist::Group& g = *options_.group;
  AgreeOrThrow(g, store::ToHex(store::Sha256Of(StateBytes())),
               [step](const std::vector<std::string>& digests) {
                 for (size_t r = 1; r < digests.size(); ++r) {
                   if (digests[r] != digests[0]) {
                     return "after step " + std::to_string(step) + " rank " + std::to_string(r) +
                            "'s state differs from rank 0's (" + digests[r].substr(0, 12) + " vs " +
                            digests[0].substr(0, 12) +
                            "): the ranks did not receive the same gradient sum; the step is "
                            "not stored";
                   }
                 }
                 return std::string();
               });
}

void Runner::OpenOrResume() {
  store::Store& s = *options_.store;
  std::optional<store::RunInfo> info = s.GetRun(options_.run);
  if (!info) {
    store::RunConfig config;
    config.spec = spec_.Canonical();
    config.checkpoint_every = static_cast<uint64_t>(spec_.checkpoint_every());
    config.steps = static_cast<uint64_t>(spec_.steps());
    config.metadata = options_.metadata;
    s.CreateRun(options_.run, config);
  } else if (info->spec != spec_.Canonical()) {
    throw Error("store '" + s.path() + "' already holds run '" + options_.run +
                "' with another spec (hash " + store::ToHex(info->spec_hash) + ": " +
                SpecDifference(spec_, Spec::Parse(info->spec), "the store") +
                "); use another run id or store");
  }
  std::optional<store::LeafRecord> last = s.Rollback(options_.run);
  if (!last) {
    Checkpoint(0);
    step_ = 0;
    return;
  }
  std::optional<std::string> bytes = s.GetCheckpoint(options_.run, last->index);
  if (!bytes)
    throw Error("run '" + options_.run + "': checkpoint of leaf " + std::to_string(last->index) +
                " is missing");
  DecodeStateInto(*bytes, State());
  step_ = static_cast<int64_t>(last->step);
}

StepReport Runner::Step() {
  if (done())
    throw Error("run '" + options_.run + "' is complete (" + std::to_string(spec_.steps()) +
                " steps)");
  if (!broken_.empty()) throw Error(broken_);
  const auto start = std::chrono::steady_clock::now();
  const int64_t step = step_ + 1;
  ActivateProfile(FindProfile(options_.profile));
  nn::StepLog& log = step_log_;  // kept across steps: its records' buffers are reused
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  StepReport::Times times;
  auto phase = Clock::now();
  Encoded prepared = PrepareStep(step, &log);
  times.prepare = since(phase);
  nn::StepContext context(mode_, &windows_, step, &log);
  // A logging step without a group encodes its records as they are written, on a background
  // thread (record_encoder.h, UseBackground); a step that failed before may have left some
  // queued.
  if (encoder_) encoder_->Reset();
  if (mode_ == nn::Mode::kLog && !options_.group && UseBackground(options_.encode_ahead)) {
    if (!encoder_) encoder_ = std::make_unique<RecordEncoder>();
    context.set_record_sink(encoder_.get());
  }
  if (expected_trace_given_) context.set_expected_trace(std::move(expected_trace_));
  context.set_count_near_limit(options_.count_near_limit);
  // In a group each rank replays the shared boundaries and holds their records: rank 0
  // alone counts their mismatches (GatherReports sums the ranks').
  context.set_counts_shared_mismatches(!options_.group || options_.group->rank() == 0);
  expected_trace_given_ = false;
  for (const auto& [boundary, what] : undecodable_) context.CountLogMismatch(boundary, what);
  undecodable_.clear();
  if (!deferred_.empty()) context.set_deferred_records(std::move(deferred_));
  deferred_.clear();
  std::map<nn::RecordKey, at::Tensor> captured;
  if (options_.capture_kinds != 0) context.set_capture(&captured, options_.capture_kinds);
  std::map<nn::RecordKey, at::Tensor> reference = std::move(compare_next_);
  compare_next_.clear();
  if (!reference.empty() && options_.group)
    throw Error("calibration compares steps in one process, not in a group of processes");
  if (!reference.empty()) context.set_compare(&reference);
  expected_trace_.clear();
  const Deviation& deviation = options_.deviation;
  if (deviation.kind != Deviation::Kind::kNone)
    optimizer_->set_config(deviation.OptimizerAt(step, spec_.Optimizer()));
  const ShardPlan plan = ShardPlan::For(spec_.shards(), options_.group.get());
  StepResult result = TrainStep(*model_, *optimizer_, *options_.data, spec_.seed(), spec_.batch(),
                                step, context, &deviation, &plan);
  if (step == 1 && context.rounds() && !windows_.by_boundary.empty()) {
    // A window override that names no boundary of the model (a typo) would sit in the spec's
    // hash doing nothing. The run's first step decides, for every party alike: a model whose
    // boundaries depend on the batch reaches different ones at other steps, and a party that
    // starts later (a judge, a resumed runner) must not refuse what the one that took step 1
    // accepted. In a group, over the boundaries of every rank's shards. The model has taken
    // the step in memory, so the runner refuses to go on rather than store it.
    broken_ = UnknownOverridesOfFirstStep(context.stats());
    if (!broken_.empty()) throw Error(broken_);
  }
  phase = Clock::now();
  Encoded records = FinishStep(step, context, log, std::move(prepared));
  times.encode = since(phase);
  times.boundaries = context.boundary_seconds();

  StepReport report;
  report.step = step;
  report.loss = result.loss;
  report.boundaries = context.stats();
  report.divergence = context.divergence();
  report.log_mismatches = context.log_mismatches();
  report.log_mismatch = context.first_log_mismatch();
  report.captured = std::move(captured);
  report.divergence_stats = context.divergence_stats();
  if (options_.group) GatherReports(context, &report);
  for (const auto& [name, s] : report.boundaries) {
    StepReport part;
    part.elements = s.elements;
    part.logged = s.logged;
    part.exact = s.exact;
    part.steerable = s.steerable;
    part.steered = s.steered;
    part.steered_unlogged = s.steered_unlogged;
    part.corrections = s.corrections;
    part.illegitimate = s.illegitimate;
    part.near_misses = s.near_misses;
    part.near_limit = s.near_limit;
    report.AddCounts(part);
  }
  for (const auto& [key, bytes] : records) report.log_bytes += static_cast<int64_t>(bytes.size());
  step_ = step;
  const uint64_t k = static_cast<uint64_t>(spec_.checkpoint_every());
  const bool checkpoint = step % static_cast<int64_t>(k) == 0 || step == spec_.steps();
  if (options_.group && checkpoint) CheckRanksAgree(step);
  auto finish = [&] {
    report.seconds = since(start);
    times.compute = std::max(0.0, report.seconds - times.prepare - times.boundaries - times.encode -
                                      times.commit - times.checkpoint);
    report.times = times;
    return report;
  };
  if (!options_.store) return finish();
  phase = Clock::now();
  if (UseBackground(options_.write_behind)) {
    auto keep = std::make_shared<Encoded>(std::move(records));
    options_.store->WriteStepBehind(options_.run, static_cast<uint64_t>(step), Views(*keep), keep);
  } else {
    options_.store->WriteStep(options_.run, static_cast<uint64_t>(step), Views(records));
  }
  times.commit = since(phase);
  if (checkpoint) {
    phase = Clock::now();
    Checkpoint(store::LeafOfStep(static_cast<uint64_t>(step), k));
    times.checkpoint = since(phase);
    report.checkpoint = true;
  }
  return finish();
}

store::Digest Runner::Root() const {
  if (!options_.store)
    throw Error("a " + nn::ModeName(mode_) + " runner keeps no store and has no root");
  return options_.store->Root(options_.run);
}

Trainer::Trainer(Spec spec, RunnerOptions options, nn::Mode mode)
    : Runner(std::move(spec), std::move(options), mode) {
  if (mode == nn::Mode::kReplay) throw Error("a trainer cannot replay; use an auditor");
  if (mode == nn::Mode::kLog) {
    OpenAcrossRanks([this] { OpenOrResume(); });
  } else {
    options_.store = nullptr;  // plain runs commit nothing
  }
}

Encoded Trainer::PrepareStep(int64_t, nn::StepLog*) { return {}; }

Encoded Trainer::FinishStep(int64_t, const nn::StepContext& context, const nn::StepLog& log,
                            Encoded) {
  if (mode_ != nn::Mode::kLog) return {};
  if (!options_.group) {
    Encoded out;
    if (context.record_sink() != nullptr) {  // encoder_
      // Every record the step wrote was queued; the log holds no others (StepContext::Finish).
      std::map<nn::RecordKey, std::string> ahead = encoder_->Take();
      out.reserve(log.size() + 1);
      for (const auto& [key, record] : log) {
        auto it = ahead.find(key);
        out.emplace_back(key,
                         it != ahead.end() ? std::move(it->second) : precision::EncodeLog(record));
      }
    } else {
      out = EncodeRecordsOf(log, [](const nn::RecordKey&) { return true; });
    }
    out.emplace_back(nn::RecordKey{nn::kTraceBoundary, 0}, nn::EncodeTrace(context.trace()));
    return out;
  }
  // A group: every rank sends rank 0 the records and trace of its own shards; the shared
  // records (summed gradient, update) are alike on every rank and rank 0's are kept.
  dist::Group& g = *options_.group;
  nn::StepTrace trace;
  Encoded out = EncodeRecordsOf(
      log, [&](const nn::RecordKey& key) { return g.rank() == 0 || nn::ShardOf(key.first) >= 0; });
  for (const auto& [key, crc] : context.trace()) {
    if (g.rank() == 0 || nn::ShardOf(key.first) >= 0) trace[key] = crc;
  }
  if (g.rank() != 0) {
    out.emplace_back(nn::RecordKey{nn::kTraceBoundary, 0}, nn::EncodeTrace(trace));
    g.GatherBytes(EncodeRecords(out), 0);
    return {};
  }
  std::vector<std::string> parts = g.GatherBytes("", 0);
  for (size_t r = 1; r < parts.size(); ++r) {
    for (auto& [key, value] : DecodeRecords(parts[r])) {
      if (key.first == nn::kTraceBoundary) {
        for (const auto& [k, crc] : nn::DecodeTrace(value)) trace[k] = crc;
      } else {
        out.emplace_back(key, std::move(value));
      }
    }
  }
  out.emplace_back(nn::RecordKey{nn::kTraceBoundary, 0}, nn::EncodeTrace(trace));
  return out;
}

RecordSource StoreRecords(std::shared_ptr<store::Store> store, std::string run) {
  return [store, run](int64_t step) {
    store->Refresh();
    auto records = store->GetStepRecords(run, static_cast<uint64_t>(step));
    if (!records)
      throw Error("the trainer's run '" + run + "' has no logs for step " + std::to_string(step));
    return *records;
  };
}

Auditor::Auditor(Spec spec, RunnerOptions options, RecordSource records)
    : Runner(std::move(spec), std::move(options), nn::Mode::kReplay), records_(std::move(records)) {
  if (options_.deviation.kind != Deviation::Kind::kNone)
    throw Error("only a trainer can deviate from its spec");
  OpenAcrossRanks([this] {
    if (options_.store) {
      if (!options_.start_checkpoint.empty())
        throw Error("a start checkpoint is for an auditor without a store (a judge)");
      OpenOrResume();
      return;
    }
    if (options_.start_step < 0 || options_.start_step > spec_.steps()) {
      throw Error("start step must be in [0, " + std::to_string(spec_.steps()) + "], got " +
                  std::to_string(options_.start_step));
    }
    if (!options_.start_checkpoint.empty()) {
      DecodeStateInto(options_.start_checkpoint, State());
    } else if (options_.start_step != 0) {
      throw Error("start step " + std::to_string(options_.start_step) +
                  " needs the checkpoint after it");
    }
    step_ = options_.start_step;
  });
}

Encoded Auditor::PrepareStep(int64_t step, nn::StepLog* log) {
  // (Left by a step that failed before it ran, e.g. ranks that disagreed: not this step's.)
  undecodable_.clear();
  deferred_.clear();
  if (!options_.group) {
    if (ahead_job_.valid()) {
      ahead_job_.get();  // the job keeps its failures in ahead_
      if (ahead_.step == step && ahead_.read) {
        std::swap(*log, ahead_.log);  // the step's old buffers are the next read-ahead's
        deferred_ = std::move(ahead_.deferred);
        Encoded encoded = FinishDecoding(step, std::move(ahead_.records), ahead_.errors, log);
        StartReadAhead(step + 1);
        return encoded;
      }
    }
    Encoded encoded = DecodeAuditorRecords(step, records_(step), log);
    StartReadAhead(step + 1);
    return encoded;
  } else {
    // Rank 0 reads the trainer's records and sends each rank those of its shards, the
    // shared ones and the trace; it keeps them all to commit.
    std::vector<store::LogRecord> records;
    dist::Group& g = *options_.group;
    std::vector<std::string> parts(static_cast<size_t>(g.world()));
    Encoded all;
    if (g.rank() == 0) {
      try {
        std::vector<Encoded> per_rank(static_cast<size_t>(g.world()));
        for (store::LogRecord& r : records_(step)) {
          nn::RecordKey key{r.boundary, static_cast<int32_t>(r.call)};
          const int owner = OwnerRank(r.boundary, spec_.shards(), g.world());
          for (int to = 0; to < g.world(); ++to) {
            if (owner == to || owner < 0)
              per_rank[static_cast<size_t>(to)].emplace_back(key, r.value);
          }
          all.emplace_back(std::move(key), std::move(r.value));
        }
        for (size_t to = 0; to < parts.size(); ++to) parts[to] = Ok(EncodeRecords(per_rank[to]));
      } catch (const std::exception& e) {
        for (std::string& part : parts) part = Failed(e.what());
      }
    }
    Encoded mine = DecodeRecords(PayloadOrThrow(g.ScatterBytes(parts, 0)));
    if (g.rank() != 0) all.clear();
    for (auto& [key, value] : mine) {
      store::LogRecord r;
      r.boundary = key.first;
      r.call = static_cast<uint32_t>(key.second);
      r.value = std::move(value);
      records.push_back(std::move(r));
    }
    // Decode this rank's records; a record one rank cannot decode fails every rank (the
    // others would wait for it in the step's collectives). Rank 0 commits all of them.
    std::string failure;
    try {
      DecodeAuditorRecords(step, std::move(records), log);
    } catch (const std::exception& e) {
      failure = e.what();
      if (failure.empty()) failure = "a log record could not be decoded";
    }
    AgreeOrThrow(g, failure, [](const std::vector<std::string>& failures) {
      for (const std::string& f : failures) {
        if (!f.empty()) return f;
      }
      return std::string();
    });
    return all;
  }
}

namespace {

// Decodes `records` into `log` (the previous step's buffers reused, other entries dropped):
// on LibTorch's threads, or on the calling thread alone (`parallel` false: a background
// thread beside the step's). At most `eager_states` states are decoded here: records beyond
// them, and any declaring more than precision::kDefaultLogElements, go to `*deferred`, to be
// decoded at their boundary with its tensor's size as the limit. A hostile record then cannot
// make the replay hold more states than an honest one would (a record of a few bytes may
// declare 2^32 elements), and an honest record of any size decodes. Returns each record's
// decoding error ("" if none).
std::vector<std::string> DecodeRecordsInto(const std::vector<store::LogRecord>& records,
                                           nn::StepLog* log, bool parallel, int64_t eager_states,
                                           std::map<nn::RecordKey, std::string>* deferred) {
  const size_t n = records.size();
  std::vector<std::string> errors(n);
  // What each record declares, read from its header alone; the decode limit is that count.
  std::vector<int64_t> declared(n, -1);
  precision::DecodeLimits any;
  any.max_elements = precision::kMaxLogElements;
  int64_t eager = 0;
  std::set<nn::RecordKey> keys;
  for (size_t i = 0; i < n; ++i) {
    const store::LogRecord& r = records[i];
    const nn::RecordKey key{r.boundary, static_cast<int32_t>(r.call)};
    if (r.boundary == nn::kTraceBoundary) continue;
    if (keys.count(key) != 0 || deferred->count(key) != 0) {
      errors[i] = "the step holds two records for this boundary call";
      continue;
    }
    try {
      declared[i] = precision::DecodeLogHeader(r.value, any).elements;
    } catch (const std::exception& e) {
      errors[i] = e.what()[0] != '\0' ? e.what() : "the record could not be decoded";
      continue;
    }
    if (declared[i] > precision::kDefaultLogElements || eager + declared[i] > eager_states) {
      (*deferred)[key] = r.value;
      declared[i] = -1;
      continue;
    }
    eager += declared[i];
    keys.insert(key);
  }
  for (auto it = log->begin(); it != log->end();)
    it = keys.count(it->first) != 0 ? std::next(it) : log->erase(it);
  // Entries are made here, in order, and filled independently.
  std::vector<precision::LogRecord*> targets(n, nullptr);
  for (size_t i = 0; i < n; ++i) {
    if (declared[i] >= 0)
      targets[i] = &(*log)[{records[i].boundary, static_cast<int32_t>(records[i].call)}];
  }
  auto decode = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      if (targets[i] == nullptr) continue;
      try {
        precision::DecodeLimits limits;
        limits.max_elements = declared[i];
        precision::DecodeLogInto(records[i].value, targets[i], limits);
      } catch (const std::exception& e) {
        errors[i] = e.what()[0] != '\0' ? e.what() : "the record could not be decoded";
      }
    }
  };
  if (parallel) {
    at::parallel_for(0, static_cast<int64_t>(n), 1, decode);
  } else {
    decode(0, static_cast<int64_t>(n));
  }
  return errors;
}

}  // namespace

void Auditor::StartReadAhead(int64_t step) {
  if (options_.group || step > spec_.steps() || !UseBackground(options_.read_ahead)) return;
  ahead_.step = step;
  ahead_.read = false;
  store::PendingWork pending;  // the process's exit waits for the read (pending_work.h)
  ahead_job_ = std::async(std::launch::async, [this, step, pending = std::move(pending)]() mutable {
    const store::PendingWork counted = std::move(pending);  // until the job ends
    try {
      ahead_.records = records_(step);
    } catch (const std::exception&) {
      return;  // asked again when the step comes, which reports a lasting failure
    }
    ahead_.read = true;
    ahead_.deferred.clear();
    ahead_.errors = DecodeRecordsInto(ahead_.records, &ahead_.log, /*parallel=*/false,
                                      options_.eager_log_states, &ahead_.deferred);
  });
}

Encoded Auditor::DecodeAuditorRecords(int64_t step, std::vector<store::LogRecord> records,
                                      nn::StepLog* log) {
  // The first record (in the trainer's order) that fails is the one reported.
  deferred_.clear();
  const std::vector<std::string> errors =
      DecodeRecordsInto(records, log, /*parallel=*/true, options_.eager_log_states, &deferred_);
  return FinishDecoding(step, std::move(records), errors, log);
}

Encoded Auditor::FinishDecoding(int64_t step, std::vector<store::LogRecord> records,
                                const std::vector<std::string>& errors, nn::StepLog* log) {
  // A record that does not decode is one the trainer committed (the log digest covers its
  // bytes) and no honest trainer writes: evidence against the trainer, like a missing record,
  // never a failure of the replay (which would leave a dispute undecided). Its boundary call
  // then finds no record and rounds to nearest, as for a missing one.
  Encoded encoded;
  const size_t n = records.size();
  bool traced = false;
  for (size_t i = 0; i < n; ++i) {
    store::LogRecord& r = records[i];
    const nn::RecordKey key{r.boundary, static_cast<int32_t>(r.call)};
    std::string error = errors[i];
    if (r.boundary == nn::kTraceBoundary) {
      // An honest step writes one trace, at call 0: another is no honest record (it was
      // decoded over the first, and counted as nothing).
      if (r.call != 0 || traced) {
        error = "a step holds one trace record, at call 0";
      } else {
        traced = true;
        try {
          expected_trace_ = TraceOfMyShards(nn::DecodeTrace(r.value));
          expected_trace_given_ = true;
        } catch (const std::exception& e) {
          expected_trace_.clear();  // no divergence diagnostics for this step
          error = e.what();
        }
      }
    } else if (!error.empty()) {
      log->erase(key);
    }
    if (!error.empty()) {
      undecodable_.emplace_back(r.boundary, "step " + std::to_string(step) + ", record '" +
                                                r.boundary + "' call " + std::to_string(r.call) +
                                                " could not be decoded: " + error);
    }
    encoded.emplace_back(key, std::move(r.value));
  }
  // Every honest step commits its trace (an empty step an empty one): a step without one is
  // no step an honest trainer writes.
  if (!traced) {
    undecodable_.emplace_back(nn::kTraceBoundary,
                              "step " + std::to_string(step) + " has no trace record ('" +
                                  std::string(nn::kTraceBoundary) + "' call 0)");
  }
  return encoded;
}

nn::StepTrace Auditor::TraceOfMyShards(nn::StepTrace trace) const {
  if (!options_.group) return trace;
  const dist::Group& g = *options_.group;
  for (auto it = trace.begin(); it != trace.end();) {
    const int owner = OwnerRank(it->first.first, spec_.shards(), g.world());
    it = owner < 0 || owner == g.rank() ? std::next(it) : trace.erase(it);
  }
  return trace;
}

Encoded Auditor::FinishStep(int64_t, const nn::StepContext&, const nn::StepLog&, Encoded prepared) {
  return prepared;
}

std::optional<uint64_t> FirstDifferingLeaf(const store::Store& a, const std::string& run_a,
                                           const store::Store& b, const std::string& run_b) {
  const uint64_t n = std::min(a.TreeSize(run_a), b.TreeSize(run_b));
  for (uint64_t i = 0; i < n; ++i) {
    auto la = a.GetLeaf(run_a, i), lb = b.GetLeaf(run_b, i);
    if (!la || !lb || la->leaf != lb->leaf) return i;
  }
  return std::nullopt;
}

}  // namespace vt::train
