// Rounding fused into an op's pass (round.h RoundProduced / ReplayProduced): the producer runs
// block by block inside the rounding or replay pass, and everything that comes out (values,
// stats, records, replay reports, the output's CRC, errors) is what producing every value
// first and then rounding in place gives, for every window shape, magnitude kind, size, thread
// count and kernel variant. Each element is produced exactly once.
#include <ATen/ATen.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/common/error.h"
#include "runtime/common/helped_for.h"
#include "runtime/precision/round.h"
#include "runtime/precision/window.h"
#include "tests/precision/helpers.h"
#include "tests/precision/oracle.h"

namespace {

using vt::precision::BoundaryContext;
using vt::precision::LogRecord;
using vt::precision::Magnitude;
using vt::precision::ReplayReport;
using vt::precision::RoundOptions;
using vt::precision::RoundStats;
using vt::precision::testing::IsaGuard;
using vt::precision::testing::SameBits;
using vt::precision::testing::ThreadGuard;
namespace oracle = vt::precision::oracle;

RoundOptions Options(double band, double alpha = 0.0, int bits = 32, bool own = false) {
  RoundOptions o;
  o.bits = bits;
  o.band = band;
  o.alpha = alpha;
  o.own_magnitude = own;
  return o;
}

// A producer that writes out[i] = source[i] * factor (one product per element, like an
// optimizer's pass), and counts how often each element was produced.
struct Scaled {
  const double* source;
  double* out;
  double factor;
  std::vector<std::atomic<int>>* produced;
  void operator()(int64_t begin, int64_t end) const {
    for (int64_t i = begin; i < end; ++i) {
      out[i] = source[i] * factor;
      (*produced)[static_cast<size_t>(i)].fetch_add(1, std::memory_order_relaxed);
    }
  }
};

bool AllOnce(const std::vector<std::atomic<int>>& produced) {
  for (const auto& p : produced) {
    if (p.load() != 1) return false;
  }
  return true;
}

struct Case {
  std::string name;
  RoundOptions options;
  int magnitude = 0;  // 0 none, 1 array, 2 computed (outer product)
};

std::vector<Case> Cases() {
  return {{"paper window", Options(0.25)},
          {"exact boundary (zero window)", Options(0.0)},
          {"band 0.5 (EXACT entries)", Options(0.5)},
          {"absolute, own magnitude", Options(0.0, 1e-7, 32, true)},
          {"absolute, scale (producer runs first)", Options(0.0, 1e-7)},
          {"general, array magnitude", Options(0.1, 1e-7), 1},
          {"absolute, outer magnitude", Options(0.0, 1e-7), 2},
          {"paper window, b = 20", Options(0.25, 0.0, 20)}};
}

// The magnitude of case `kind` for n values laid out as [rows, cols].
Magnitude MakeMagnitude(int kind, const at::Tensor& values, int64_t rows, int64_t cols) {
  if (kind == 1) return Magnitude(values.abs() * 1.5 + 1e-3);
  if (kind == 2) {
    const at::Tensor row = at::rand({1, rows}, at::kDouble) + 0.5;
    const at::Tensor col = at::rand({1, cols}, at::kDouble) * 3.0;
    return Magnitude(vt::precision::OuterMagnitude{row, col, {}, false, 1.0, 1, rows, cols});
  }
  return Magnitude();
}

}  // namespace

TEST_CASE("produced rounding and replay equal producing first, then rounding in place") {
  const uint64_t seed = oracle::TestSeed("produced: equal to unfused");
  oracle::ValueGenerator gen(seed);
  IsaGuard isa_guard;
  ThreadGuard threads;
  // Sizes: empty, under one producer block, blocks and a part, over one checksummed block
  // (32768 values) and over the producer's parallel grain, with a ragged end.
  const int64_t cols = 97;
  for (int64_t rows : {int64_t{0}, int64_t{1}, int64_t{23}, int64_t{700}, int64_t{1500}}) {
    const int64_t n = rows * cols;
    std::vector<double> xs;
    for (int64_t i = 0; i < n; ++i) xs.push_back(gen.Any(32) * 1e-3);
    const at::Tensor source = vt::precision::testing::ToTensor(xs);
    const double factor = 1.0 + 0x1p-30;
    // The auditor's values: the trainer's, perturbed, so replays correct, miss and flag.
    const at::Tensor mine = source * (1.0 + 1e-9);
    for (const Case& c : Cases()) {
      const Magnitude magnitude = MakeMagnitude(c.magnitude, source, rows, cols);
      for (vt::precision::KernelIsa isa : vt::precision::SupportedKernelIsas()) {
        vt::precision::SetKernelIsa(isa);
        for (int t : {1, 2}) {
          at::set_num_threads(t);
          INFO(c.name << ", n " << n << ", " << vt::precision::KernelIsaName(isa) << ", threads "
                      << t);
          const BoundaryContext where{"fc:fwd", 3};
          // The trainer: unfused, then fused.
          at::Tensor want = source * factor;
          LogRecord want_record;
          uint32_t want_crc = 1;
          const RoundStats want_stats = vt::precision::RoundInto(
              want, want, c.options, &want_record, where, magnitude, &want_crc);
          at::Tensor got = at::full({n}, std::nan(""), at::kDouble);
          std::vector<std::atomic<int>> produced(static_cast<size_t>(n));
          const Scaled producer{source.data_ptr<double>(), got.data_ptr<double>(), factor,
                                &produced};
          LogRecord record;
          uint32_t crc = 2;
          const RoundStats stats = vt::precision::RoundProduced(got, producer, c.options, &record,
                                                                where, magnitude, &crc);
          CHECK(AllOnce(produced));
          CHECK(SameBits(got, want));
          CHECK(record == want_record);
          CHECK(crc == want_crc);
          CHECK(stats.steerable == want_stats.steerable);
          CHECK(stats.counts == want_stats.counts);
          CHECK(stats.scale == want_stats.scale);
          // The auditor replays the trainer's record on its own values, both ways.
          at::Tensor replay_want = mine * factor;
          uint32_t replay_want_crc = 3;
          const ReplayReport want_report = vt::precision::ReplayInto(
              replay_want, record, replay_want, c.options, where, magnitude, &replay_want_crc);
          at::Tensor replay_got = at::full({n}, std::nan(""), at::kDouble);
          std::vector<std::atomic<int>> replay_produced(static_cast<size_t>(n));
          const Scaled replay_producer{mine.data_ptr<double>(), replay_got.data_ptr<double>(),
                                       factor, &replay_produced};
          uint32_t replay_crc = 4;
          const ReplayReport report = vt::precision::ReplayProduced(
              replay_got, replay_producer, record, c.options, where, magnitude, &replay_crc);
          CHECK(AllOnce(replay_produced));
          CHECK(SameBits(replay_got, replay_want));
          CHECK(replay_crc == replay_want_crc);
          CHECK(report.corrections == want_report.corrections);
          CHECK(report.illegitimate == want_report.illegitimate);
          CHECK(report.near_misses == want_report.near_misses);
          CHECK(report.steerable == want_report.steerable);
          CHECK(report.logged == want_report.logged);
          CHECK(report.scale == want_report.scale);
        }
      }
    }
  }
}

TEST_CASE("rounding and replay give one thread's bits on any thread count, helpers or not") {
  // The passes split into chunks that the calling thread and helper threads claim as they
  // come (vt::HelpedFor): which thread rounds which chunk varies from run to run. Every
  // result of 2 and 3 threads must be the 1-thread result, and helpers must have run chunks
  // (else the comparison proved nothing).
  const uint64_t seed = oracle::TestSeed("produced: thread counts");
  oracle::ValueGenerator gen(seed);
  ThreadGuard threads;
  const int64_t rows = 2000, cols = 517, n = rows * cols;  // 31.6 checksummed blocks
  std::vector<double> xs;
  for (int64_t i = 0; i < n; ++i) xs.push_back(gen.Any(32) * 1e-3);
  const at::Tensor source = vt::precision::testing::ToTensor(xs);
  const at::Tensor mine = source * (1.0 + 1e-9);
  const double factor = 1.0 + 0x1p-30;
  const BoundaryContext where{"fc:fwd", 0};
  const int64_t helped_before = vt::HelpedChunks();
  for (const Case& c : Cases()) {
    const Magnitude magnitude = MakeMagnitude(c.magnitude, source, rows, cols);
    struct Result {
      at::Tensor rounded, produced, replayed;
      LogRecord record, produced_record;
      uint32_t crc = 0, produced_crc = 0, replay_crc = 0;
      RoundStats stats;
      ReplayReport report;
    };
    auto run = [&](int t) {
      at::set_num_threads(t);
      Result r;
      r.rounded = source * factor;
      r.stats = vt::precision::RoundInto(r.rounded, r.rounded, c.options, &r.record, where,
                                         magnitude, &r.crc);
      r.produced = at::empty({n}, at::kDouble);
      std::vector<std::atomic<int>> produced(static_cast<size_t>(n));
      vt::precision::RoundProduced(
          r.produced,
          Scaled{source.data_ptr<double>(), r.produced.data_ptr<double>(), factor, &produced},
          c.options, &r.produced_record, where, magnitude, &r.produced_crc);
      r.replayed = mine * factor;
      r.report = vt::precision::ReplayInto(r.replayed, r.record, r.replayed, c.options, where,
                                           magnitude, &r.replay_crc);
      return r;
    };
    const Result one = run(1);
    for (int t : {2, 3}) {
      INFO(c.name << ", threads " << t);
      const Result got = run(t);
      CHECK(SameBits(got.rounded, one.rounded));
      CHECK(got.record == one.record);
      CHECK(got.crc == one.crc);
      CHECK(got.stats.counts == one.stats.counts);
      CHECK(got.stats.steerable == one.stats.steerable);
      CHECK(got.stats.scale == one.stats.scale);
      CHECK(SameBits(got.produced, one.rounded));
      CHECK(got.produced_record == one.record);
      CHECK(got.produced_crc == one.crc);
      CHECK(SameBits(got.replayed, one.replayed));
      CHECK(got.replay_crc == one.replay_crc);
      CHECK(got.report.corrections == one.report.corrections);
      CHECK(got.report.illegitimate == one.report.illegitimate);
      CHECK(got.report.near_misses == one.report.near_misses);
      CHECK(got.report.steerable == one.report.steerable);
    }
  }
  CHECK(vt::HelpedChunks() > helped_before);
}

TEST_CASE("produced replay: EXACT entries replace the values the producer wrote") {
  // A record whose EXACT entries sit in several producer blocks and parallel tasks, with
  // values that differ from what rnd_b of the auditor's values gives: the replay must read
  // the auditor's value at each EXACT position after producing it and before rounding it.
  const int64_t n = 70001;
  const at::Tensor source = at::randn({n}, at::kDouble);
  at::Tensor trainer = source.clone();
  LogRecord record;
  vt::precision::RoundInto(trainer, trainer, Options(0.5), &record);
  std::vector<uint8_t> states(record.states(), record.states() + n);
  std::vector<vt::precision::ExactEntry> exact = record.exact();
  // Band 1/2 logs every value off the grid as EXACT. Forged values (the next FP32 value up)
  // at spread positions: corrections the report must count identically both ways.
  REQUIRE(exact.size() > static_cast<size_t>(n) / 2);
  int forged_entries = 0;
  for (auto& e : exact) {
    if (e.position % 4099 != 0 && e.position != n - 1) continue;
    e.fp32_bits = vt::precision::FloatBits(std::nextafter(static_cast<float>(e.value()), 1e30f));
    ++forged_entries;
  }
  REQUIRE(forged_entries > 10);
  const LogRecord forged = LogRecord::FromStates(states, exact);
  ThreadGuard threads;
  for (int t : {1, 2}) {
    at::set_num_threads(t);
    at::Tensor want = source.clone();
    const ReplayReport want_report = vt::precision::ReplayInto(want, forged, want, Options(0.5));
    at::Tensor got = at::empty({n}, at::kDouble);
    std::vector<std::atomic<int>> produced(static_cast<size_t>(n));
    const ReplayReport report = vt::precision::ReplayProduced(
        got, Scaled{source.data_ptr<double>(), got.data_ptr<double>(), 1.0, &produced}, forged,
        Options(0.5));
    CHECK(SameBits(got, want));
    CHECK(report.corrections == want_report.corrections);
    CHECK(report.illegitimate == want_report.illegitimate);
    CHECK(want_report.corrections > 0);
  }
}

TEST_CASE("produced rounding: errors name the value the producer wrote, and bad calls") {
  const int64_t n = 50000;
  const at::Tensor source = at::randn({n}, at::kDouble);
  at::Tensor out = at::empty({n}, at::kDouble);
  std::vector<std::atomic<int>> produced(static_cast<size_t>(n));
  auto poisoned = [&](int64_t at_index, double value) {
    return [&, at_index, value](int64_t begin, int64_t end) {
      Scaled{source.data_ptr<double>(), out.data_ptr<double>(), 1.0, &produced}(begin, end);
      if (at_index >= begin && at_index < end) out.data_ptr<double>()[at_index] = value;
    };
  };
  const BoundaryContext where{"h.0.mlp:update", 7};
  ThreadGuard threads;
  for (int t : {1, 2}) {
    at::set_num_threads(t);
    CHECK_THROWS_WITH(vt::precision::RoundProduced(out, poisoned(40000, std::nan("")),
                                                   Options(0.25), nullptr, where),
                      Catch::Equals("NaN at 'h.0.mlp:update', step 7, index 40000"));
    CHECK_THROWS_WITH(
        vt::precision::RoundProduced(out, poisoned(33, 1e39), Options(0.25), nullptr, where),
        Catch::Contains("overflow at 'h.0.mlp:update', step 7, index 33") &&
            Catch::Contains("overwritten in place"));
    LogRecord record;
    vt::precision::RoundInto(source, at::empty({n}, at::kDouble), Options(0.25), &record);
    CHECK_THROWS_WITH(vt::precision::ReplayProduced(out, poisoned(49999, -INFINITY), record,
                                                    Options(0.25), where),
                      Catch::Contains("index 49999"));
  }
  // The tensor must be contiguous CPU float64; the record must fit it.
  const auto nothing = [](int64_t, int64_t) {};
  CHECK_THROWS_WITH(
      vt::precision::RoundProduced(at::empty({4}, at::kFloat), nothing, Options(0.25)),
      Catch::Contains("float64"));
  CHECK_THROWS_WITH(
      vt::precision::RoundProduced(at::empty({4, 4}, at::kDouble).t(), nothing, Options(0.25)),
      Catch::Contains("contiguous"));
  LogRecord small;
  vt::precision::RoundInto(at::ones({3}, at::kDouble), at::empty({3}, at::kDouble), Options(0.25),
                           &small);
  CHECK_THROWS_WITH(
      vt::precision::ReplayProduced(at::empty({4}, at::kDouble), nothing, small, Options(0.25)),
      Catch::Equals("log record has 3 elements but the tensor has 4"));
  CHECK_THROWS_WITH(
      vt::precision::RoundProduced(at::empty({4}, at::kDouble), nothing, Options(0.7)),
      Catch::Contains("band must be in [0, 0.5]"));
}

namespace {

// A three-link chain as AdamW's: m from g, v from g, then x from x, m and v (reading the
// rounded m and v at the same positions).
struct ChainArrays {
  at::Tensor g, m, v, x;
};

ChainArrays StartArrays(const at::Tensor& g, double shift) {
  return {g * (1.0 + shift), g.abs() * 0.3, g * g * 0.01 + 1e-6, g * -2.0 + 0.5};
}

// The links over `a`, with their producers (the links' function_refs point into `fns`: a
// Chain stays where it was made).
struct Chain {
  std::vector<std::function<void(int64_t, int64_t)>> fns;
  std::vector<vt::precision::ChainLink> links;
};

std::unique_ptr<Chain> ChainOf(ChainArrays* a, const std::vector<Case>& cases,
                               const std::vector<Magnitude>& mags, std::vector<LogRecord>* logs,
                               std::vector<uint32_t>* crcs) {
  const double* g = a->g.data_ptr<double>();
  double *m = a->m.data_ptr<double>(), *v = a->v.data_ptr<double>(), *x = a->x.data_ptr<double>();
  auto chain = std::make_unique<Chain>();
  chain->fns = {[=](int64_t b, int64_t e) {
                  for (int64_t i = b; i < e; ++i) m[i] = 0.9 * m[i] + 0.1 * g[i];
                },
                [=](int64_t b, int64_t e) {
                  for (int64_t i = b; i < e; ++i) v[i] = 0.999 * v[i] + (0.001 * g[i]) * g[i];
                },
                [=](int64_t b, int64_t e) {
                  for (int64_t i = b; i < e; ++i) {
                    x[i] = x[i] * 0.99 - 1e-3 * m[i] / (std::sqrt(v[i]) + 1e-8);
                  }
                }};
  chain->links.resize(3);
  const at::Tensor outs[3] = {a->m, a->v, a->x};
  const char* names[3] = {"w:exp_avg", "w:exp_avg_sq", "w:update"};
  for (size_t j = 0; j < 3; ++j) {
    vt::precision::ChainLink& l = chain->links[j];
    l.out = outs[j];
    l.produce = chain->fns[j];
    l.options = cases[j].options;
    l.magnitude = mags[j];
    l.log = logs != nullptr ? &(*logs)[j] : nullptr;
    l.context = BoundaryContext{names[j], 2};
    l.output_crc = &(*crcs)[j];
  }
  return chain;
}

}  // namespace

TEST_CASE("a chain of produced boundaries equals its links one after the other") {
  const uint64_t seed = oracle::TestSeed("produced: chain");
  oracle::ValueGenerator gen(seed);
  IsaGuard isa_guard;
  ThreadGuard threads;
  const std::vector<Case> all = Cases();
  // Link windows: all paper; exact / EXACT-taking / absolute with a magnitude (entries of
  // every kind, EXACT values a later link reads); and without records (rounding alone).
  const std::vector<std::vector<int>> plans = {{0, 0, 0}, {1, 2, 5}, {3, 6, 7}};
  int64_t exact_entries = 0, corrections = 0;  // the controls: both kinds of entries applied
  for (int64_t n : {int64_t{0}, int64_t{5}, int64_t{2048 * 3 + 17}, int64_t{32768 * 2 + 999}}) {
    // Gradient-like values, some exactly zero (the update's EXACT and tie cases).
    at::manual_seed(static_cast<uint64_t>(gen.Any(32) * 0.0) + seed);
    at::Tensor g = at::randn({n}, at::kDouble) * 1e-2;
    if (n > 0) g.index_put_({at::arange(0, n, 7)}, 0.0);
    for (const auto& plan : plans) {
      std::vector<Case> cases;
      std::vector<Magnitude> mags;
      for (int k : plan) {
        cases.push_back(all[static_cast<size_t>(k)]);
        mags.push_back(MakeMagnitude(all[static_cast<size_t>(k)].magnitude, g, 1, n));
      }
      for (bool with_logs : {true, false}) {
        for (vt::precision::KernelIsa isa : vt::precision::SupportedKernelIsas()) {
          vt::precision::SetKernelIsa(isa);
          for (int t : {1, 2}) {
            at::set_num_threads(t);
            INFO("n " << n << ", links " << plan[0] << plan[1] << plan[2] << ", logs " << with_logs
                      << ", " << vt::precision::KernelIsaName(isa) << ", threads " << t);
            // The trainer: link by link, then chained.
            ChainArrays want = StartArrays(g, 0), got = StartArrays(g, 0);
            std::vector<LogRecord> want_logs(3), got_logs(3);
            std::vector<uint32_t> want_crcs(3, 1), got_crcs(3, 2);
            auto seq_chain =
                ChainOf(&want, cases, mags, with_logs ? &want_logs : nullptr, &want_crcs);
            auto& seq = seq_chain->links;
            for (auto& l : seq) {
              l.stats = vt::precision::RoundProduced(l.out, l.produce, l.options, l.log, l.context,
                                                     l.magnitude, l.output_crc);
            }
            auto got_chain = ChainOf(&got, cases, mags, with_logs ? &got_logs : nullptr, &got_crcs);
            auto& chain = got_chain->links;
            vt::precision::RoundChain(&chain);
            CHECK(SameBits(got.m, want.m));
            CHECK(SameBits(got.v, want.v));
            CHECK(SameBits(got.x, want.x));
            CHECK(got_crcs == want_crcs);
            for (size_t j = 0; j < 3; ++j) {
              CHECK(got_logs[j] == want_logs[j]);
              CHECK(chain[j].stats.counts == seq[j].stats.counts);
              CHECK(chain[j].stats.steerable == seq[j].stats.steerable);
            }
            if (!with_logs) continue;
            // The auditor, on other values, replays the trainer's records both ways.
            ChainArrays rwant = StartArrays(g, 1e-9), rgot = StartArrays(g, 1e-9);
            std::vector<uint32_t> rwant_crcs(3, 3), rgot_crcs(3, 4);
            auto rseq_chain = ChainOf(&rwant, cases, mags, nullptr, &rwant_crcs);
            auto rgot_chain = ChainOf(&rgot, cases, mags, nullptr, &rgot_crcs);
            auto& rseq = rseq_chain->links;
            auto& rchain = rgot_chain->links;
            for (size_t j = 0; j < 3; ++j) {
              rseq[j].replay = &want_logs[j];
              rchain[j].replay = &want_logs[j];
            }
            for (auto& l : rseq) {
              l.report = vt::precision::ReplayProduced(l.out, l.produce, *l.replay, l.options,
                                                       l.context, l.magnitude, l.output_crc);
            }
            vt::precision::ReplayChain(&rchain);
            CHECK(SameBits(rgot.m, rwant.m));
            CHECK(SameBits(rgot.v, rwant.v));
            CHECK(SameBits(rgot.x, rwant.x));
            CHECK(rgot_crcs == rwant_crcs);
            for (size_t j = 0; j < 3; ++j) {
              exact_entries += want_logs[j].counts().exact;
              corrections += rseq[j].report.corrections;
              CHECK(rchain[j].report.corrections == rseq[j].report.corrections);
              CHECK(rchain[j].report.illegitimate == rseq[j].report.illegitimate);
              CHECK(rchain[j].report.near_misses == rseq[j].report.near_misses);
              CHECK(rchain[j].report.steerable == rseq[j].report.steerable);
              CHECK(rchain[j].report.logged == rseq[j].report.logged);
            }
          }
        }
      }
    }
  }
  CHECK(exact_entries > 0);
  CHECK(corrections > 0);
}
