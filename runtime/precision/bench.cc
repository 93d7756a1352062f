#include "runtime/precision/bench.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <string>

#include "runtime/common/error.h"
#include "runtime/common/threads.h"
#include "runtime/precision/codec.h"
#include "runtime/precision/kernels.h"
#include "runtime/precision/round.h"
#include "runtime/precision/window.h"
#include "runtime/random/philox.h"

namespace vt::precision {
namespace {

constexpr int64_t kCopyGrain = int64_t{1} << 16;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Best wall time of `repeats` runs of fn, after one untimed warm-up run.
template <class Fn>
double Best(int repeats, Fn&& fn) {
  fn();
  double best = std::numeric_limits<double>::infinity();
  for (int r = 0; r < repeats; ++r) {
    const double t0 = Now();
    fn();
    best = std::min(best, Now() - t0);
  }
  return best;
}

}  // namespace

RoundingBenchResult RunRoundingBench(const RoundingBenchOptions& options) {
  if (options.elements < 1) throw Error("elements must be >= 1");
  if (options.repeats < 1) throw Error("repeats must be >= 1");
  for (int t : options.threads) {
    if (t < 1) throw Error("thread counts must be >= 1, got " + std::to_string(t));
  }
  for (int b : options.bits) {
    if (b < kMinBits || b > kMaxBits) {
      throw Error("bits must be integers in [10, 32], got " + std::to_string(b));
    }
  }
  const ThreadsRestorer restorer;
  const int64_t n = options.elements;
  const at::Tensor x =
      NormalTensor({n}, at::kDouble, options.seed, static_cast<uint32_t>(RandomStream::kUser));
  at::Tensor out = at::zeros_like(x);
  at::Tensor out2 = at::zeros_like(x);
  const double* xp = x.data_ptr<double>();
  double* op = out.data_ptr<double>();

  RoundingBenchResult result;
  result.isa = KernelIsaName(ActiveKernelIsa());
  result.elements = n;

  RoundOptions paper;  // band 0.25, alpha 0
  RoundOptions calibrated;
  calibrated.band = 0.0;
  calibrated.alpha = options.calibrated_alpha;
  calibrated.Validate();

  auto add = [&](const std::string& what, const std::string& mode, int threads, int bits,
                 double seconds) {
    KernelTiming k;
    k.what = what;
    k.mode = mode;
    k.threads = threads;
    k.bits = bits;
    k.seconds = seconds;
    k.elems_per_s = static_cast<double>(n) / seconds;
    result.kernels.push_back(k);
  };

  LogRecord paper_record, calibrated_record;
  for (int threads : options.threads) {
    at::set_num_threads(threads);
    add("memcpy", "", threads, 0, Best(options.repeats, [&] {
          at::parallel_for(0, n, kCopyGrain, [&](int64_t b, int64_t e) {
            std::memcpy(op + b, xp + b, static_cast<size_t>(e - b) * sizeof(double));
          });
        }));
    for (int bits : options.bits) {
      paper.bits = bits;
      calibrated.bits = bits;
      add("round_log", "paper", threads, bits,
          Best(options.repeats, [&] { RoundInto(x, out, paper, &paper_record); }));
      add("round_log", "calibrated", threads, bits,
          Best(options.repeats, [&] { RoundInto(x, out, calibrated, &calibrated_record); }));
      add("round", "", threads, bits,
          Best(options.repeats, [&] { RoundInto(x, out, paper, nullptr); }));
      add("replay", "paper", threads, bits,
          Best(options.repeats, [&] { ReplayInto(x, paper_record, out2, paper); }));
      add("replay", "calibrated", threads, bits,
          Best(options.repeats, [&] { ReplayInto(x, calibrated_record, out2, calibrated); }));
    }
  }

  // Encodings, single-threaded (the codec is sequential).
  at::set_num_threads(1);
  std::string bytes;
  LogRecord decoded;
  for (int bits : options.bits) {
    for (int m = 0; m < 2; ++m) {
      RoundOptions opts = m == 0 ? paper : calibrated;
      opts.bits = bits;
      LogRecord record;
      RoundInto(x, out, opts, &record);
      for (LogEncoding enc : {LogEncoding::kDense, LogEncoding::kSparse, LogEncoding::kAuto}) {
        EncodingTiming e;
        e.mode = m == 0 ? "paper" : "calibrated";
        e.bits = bits;
        e.encoding = LogEncodingName(enc);
        e.chosen = LogEncodingName(enc == LogEncoding::kAuto ? ChooseLogEncoding(record) : enc);
        e.logged_fraction = static_cast<double>(record.counts().logged()) / static_cast<double>(n);
        e.exact = record.counts().exact;
        const double te = Best(options.repeats, [&] { EncodeLogTo(record, enc, &bytes); });
        const double td = Best(options.repeats, [&] { DecodeLogInto(bytes, &decoded); });
        if (decoded != record) throw Error("internal error: benchmark round trip differs");
        e.bytes = static_cast<int64_t>(bytes.size());
        e.bits_per_element = BitsPerElement(record, enc);
        e.entropy_bits = record.EntropyBits();
        e.encode_elems_per_s = static_cast<double>(n) / te;
        e.decode_elems_per_s = static_cast<double>(n) / td;
        result.encodings.push_back(e);
      }
    }
  }
  return result;
}

}  // namespace vt::precision
