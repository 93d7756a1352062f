#include "runtime/train/record_encoder.h"

#include "runtime/common/error.h"
#include "runtime/precision/codec.h"

namespace vt::train {

RecordEncoder::RecordEncoder() : worker_([this] { Work(); }) {}

RecordEncoder::~RecordEncoder() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    stop_ = true;
    queue_.clear();
  }
  changed_.notify_all();
  worker_.join();
}

void RecordEncoder::WillWrite(const nn::RecordKey& key) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (pending_.count(key) != 0) {
    unsignaled_ = 0;
    changed_.notify_all();  // the worker may be waiting for a batch to fill
  }
  changed_.wait(lock, [&] { return pending_.count(key) == 0; });
  encoded_.erase(key);
  errors_.erase(key);
}

void RecordEncoder::Written(const nn::RecordKey& key, const precision::LogRecord& record) {
  bool wake = false;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    queue_.emplace_back(key, &record);
    pending_.insert(key);
    unsignaled_ += record.size();
    if (unsignaled_ >= kWakeElements) {
      unsignaled_ = 0;
      wake = true;
    }
  }
  if (wake) changed_.notify_all();
}

std::map<nn::RecordKey, std::string> RecordEncoder::Take() {
  std::unique_lock<std::mutex> lock(mutex_);
  unsignaled_ = 0;
  changed_.notify_all();  // the rest of the queue, however small
  changed_.wait(lock, [&] { return queue_.empty() && !busy_; });
  std::map<nn::RecordKey, std::string> out = std::move(encoded_);
  encoded_.clear();
  if (!errors_.empty()) {
    const auto [key, what] = *errors_.begin();
    errors_.clear();
    throw Error("log record of boundary '" + key.first + "' call " + std::to_string(key.second) +
                ": " + what);
  }
  return out;
}

void RecordEncoder::Reset() {
  std::unique_lock<std::mutex> lock(mutex_);
  queue_.clear();
  changed_.wait(lock, [&] { return !busy_; });
  pending_.clear();
  encoded_.clear();
  errors_.clear();
}

void RecordEncoder::Work() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping
    auto [key, record] = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    std::string bytes, error;
    try {
      bytes = precision::EncodeLog(*record);
    } catch (const std::exception& e) {
      error = e.what()[0] != '\0' ? e.what() : "the record could not be encoded";
    }
    lock.lock();
    busy_ = false;
    pending_.erase(key);
    if (error.empty()) {
      encoded_[key] = std::move(bytes);
    } else {
      errors_[key] = std::move(error);
    }
    changed_.notify_all();
  }
}

}  // namespace vt::train
