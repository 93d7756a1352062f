// Encodes a logging step's records on a background thread while the step goes on computing,
// instead of all of them after it: a record is final once its boundary has rounded (and, for
// a tampering trainer, tampered with) it, so it is queued then (nn::RecordSink) and the
// step's end waits only for the records still queued. The bytes are EncodeLog's, whatever
// thread made them.
//
// Runner::Step uses it unless RunnerOptions::encode_ahead or VTRUN_BACKGROUND says otherwise
// (train::UseBackground): with VTRUN_THREADS=1 on a 2-core machine, encoding costs the step
// almost nothing; with every core computing it still fills the gaps LibTorch's threads leave.
// Without it records are encoded after the step on LibTorch's threads.
//
// Thread safety: WillWrite and Written are called from the step's thread; Take and Reset
// from the thread that owns the encoder, never concurrently with a step writing records.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "runtime/nn/context.h"
#include "runtime/precision/log_record.h"

namespace vt::train {

class RecordEncoder final : public nn::RecordSink {
 public:
  RecordEncoder();
  ~RecordEncoder() override;  // drops what is queued, waits for the record in hand
  RecordEncoder(const RecordEncoder&) = delete;
  RecordEncoder& operator=(const RecordEncoder&) = delete;

  // Waits until the record at `key` is not being read (a second write to one key in a step).
  void WillWrite(const nn::RecordKey& key) override;
  // Queues the record; it must stay alive and unchanged until Take, Reset or WillWrite(key).
  void Written(const nn::RecordKey& key, const precision::LogRecord& record) override;

  // Waits for every queued record and returns the encodings by key, forgetting them. Throws
  // vt::Error naming the first record (in key order) that could not be encoded.
  std::map<nn::RecordKey, std::string> Take();
  // Forgets everything queued or encoded (a step that failed), after the record in hand.
  void Reset();

 private:
  void Work();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::pair<nn::RecordKey, const precision::LogRecord*>> queue_;
  std::set<nn::RecordKey> pending_;  // queued or in hand
  std::map<nn::RecordKey, std::string> encoded_;
  std::map<nn::RecordKey, std::string> errors_;
  // Elements queued since the worker was last woken. Written wakes it once a batch of
  // kWakeElements has queued (Take and WillWrite wake it for the rest): waking it for each of
  // a step's records (366 on the GPT, most of them small) cost a futex call and a context
  // switch each.
  static constexpr int64_t kWakeElements = int64_t{1} << 20;
  int64_t unsignaled_ = 0;
  bool busy_ = false;
  bool stop_ = false;
  std::thread worker_;  // last: started once the members above exist
};

}  // namespace vt::train
