#include "runtime/train/rank_exchange.h"

#include <cstring>

#include "runtime/common/error.h"

namespace vt::train {
namespace {

void PutU64(std::string* out, uint64_t v) {
  for (int i = 7; i >= 0; --i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
void PutBytes(std::string* out, const std::string& s) {
  PutU64(out, s.size());
  out->append(s);
}

class Reader {
 public:
  explicit Reader(const std::string& bytes) : b_(bytes) {}
  uint64_t U64() {
    Need(8);
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i)
      v = (v << 8) | static_cast<unsigned char>(b_[pos_ + static_cast<size_t>(i)]);
    pos_ += 8;
    return v;
  }
  int64_t I64() { return static_cast<int64_t>(U64()); }
  std::string Bytes() {
    const uint64_t n = U64();
    Need(n);
    std::string s = b_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  bool done() const { return pos_ == b_.size(); }

 private:
  void Need(uint64_t n) const {
    if (n > b_.size() - pos_)
      throw Error("a message between ranks is cut short (" + std::to_string(b_.size()) + " bytes)");
  }
  const std::string& b_;
  size_t pos_ = 0;
};

}  // namespace

std::string EncodeRecords(const EncodedRecords& records) {
  std::string out;
  PutU64(&out, records.size());
  for (const auto& [key, value] : records) {
    PutBytes(&out, key.first);
    PutU64(&out, static_cast<uint64_t>(static_cast<uint32_t>(key.second)));
    PutBytes(&out, value);
  }
  return out;
}

EncodedRecords DecodeRecords(const std::string& bytes) {
  Reader r(bytes);
  const uint64_t n = r.U64();
  if (n > bytes.size())
    throw Error("a message between ranks announces " + std::to_string(n) + " records");
  EncodedRecords out;
  out.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    std::string boundary = r.Bytes();
    const int32_t call = static_cast<int32_t>(r.U64());
    out.emplace_back(nn::RecordKey{std::move(boundary), call}, r.Bytes());
  }
  if (!r.done()) throw Error("a message between ranks has trailing bytes");
  return out;
}

std::string EncodeRankReport(const RankReport& report) {
  std::string out;
  PutU64(&out, report.boundaries.size());
  for (const auto& [name, s] : report.boundaries) {
    PutBytes(&out, name);
    for (int64_t v :
         {s.calls, s.elements, s.logged, s.exact, s.corrections, s.illegitimate, s.near_misses,
          s.near_limit, s.steerable, s.steered, s.steered_unlogged, s.magnitudes}) {
      PutU64(&out, static_cast<uint64_t>(v));
    }
    uint64_t seconds_bits;
    std::memcpy(&seconds_bits, &s.seconds, sizeof(seconds_bits));
    PutU64(&out, seconds_bits);
  }
  PutBytes(&out, report.divergence);
  PutU64(&out, static_cast<uint64_t>(report.log_mismatches));
  PutBytes(&out, report.log_mismatch);
  return out;
}

RankReport DecodeRankReport(const std::string& bytes) {
  Reader r(bytes);
  RankReport report;
  const uint64_t n = r.U64();
  if (n > bytes.size())
    throw Error("a message between ranks announces " + std::to_string(n) + " boundaries");
  for (uint64_t i = 0; i < n; ++i) {
    nn::BoundaryStats& s = report.boundaries[r.Bytes()];
    for (int64_t* v : {&s.calls, &s.elements, &s.logged, &s.exact, &s.corrections, &s.illegitimate,
                       &s.near_misses, &s.near_limit, &s.steerable, &s.steered, &s.steered_unlogged,
                       &s.magnitudes}) {
      *v = r.I64();
    }
    const uint64_t seconds_bits = r.U64();
    std::memcpy(&s.seconds, &seconds_bits, sizeof(s.seconds));
  }
  report.divergence = r.Bytes();
  report.log_mismatches = r.I64();
  report.log_mismatch = r.Bytes();
  if (!r.done()) throw Error("a message between ranks has trailing bytes");
  return report;
}

int OwnerRank(const std::string& boundary, int64_t shards, int world) {
  const int64_t shard = nn::ShardOf(boundary);
  if (shard < 0) return -1;
  if (shard >= shards) return 0;
  return static_cast<int>(shard / (shards / world));
}

std::string Ok(const std::string& payload) { return "+" + payload; }
std::string Failed(const std::string& message) { return "-" + message; }

std::string PayloadOrThrow(const std::string& bytes) {
  if (bytes.empty() || (bytes[0] != '+' && bytes[0] != '-'))
    throw Error("a message between ranks has no status");
  if (bytes[0] == '-') throw Error(bytes.substr(1));
  return bytes.substr(1);
}

void AgreeOrThrow(dist::Group& group, const std::string& mine,
                  const std::function<std::string(const std::vector<std::string>&)>& verdict) {
  std::vector<std::string> all = group.GatherBytes(mine, 0);
  std::string message = group.rank() == 0 ? verdict(all) : std::string();
  group.BroadcastBytes(&message, 0);
  if (!message.empty()) throw Error(message);
}

}  // namespace vt::train
