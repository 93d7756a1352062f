// The byte format of a log record (ROUNDING.md "Log encodings"): a versioned,
// self-describing encoding that the store keeps as values. LOG_FORMAT.md beside this file
// documents it byte by byte, with known-answer vectors that the tests check.
//
//   dense   the paper's packing, 5 states per byte (0 down, 1 none, 2 up; base 3)
//   sparse  the DOWN/UP positions as LEB128 gaps, plus one direction bit per entry
//   auto    whichever of the two is smaller for this record (dense on a tie)
// Both carry the EXACT entries as a side list of (position gap, FP32 bits).
//
// Encoding is deterministic and canonical: equal records give equal bytes, and
// EncodeLog(DecodeLog(b), encoding of b) == b for every valid b. Decoding validates
// everything and throws vt::Error("invalid log record: <what is wrong>") for bad magic,
// unknown version or encoding, truncation, malformed or non-minimal varints, positions out
// of range, counts that disagree with the payload, non-finite EXACT values and trailing
// bytes; it reads only inside the given bytes and allocates only after checking that the
// bytes can hold what the header announces. No ATen. Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/precision/log_record.h"

namespace vt::precision {

enum class LogEncoding : uint8_t {
  kDense = 0,   // The byte value in the format.
  kSparse = 1,  // The byte value in the format.
  kAuto = 255,  // Only as an argument: choose the smaller. Never written.
};

// The format version this code writes and reads.
constexpr uint8_t kLogFormatVersion = 1;

// The largest element count a record may declare (2^32): a decoded record holds one byte
// per element, so this bounds what a hostile record can make the decoder allocate (4 GiB).
constexpr int64_t kMaxLogElements = int64_t{1} << 32;

// The element limit a decoder uses when its caller names none (2^27: 128 MiB of states).
// A dense record must hold a byte per 5 elements, but a sparse one declares its element
// count in a varint: 14 bytes can announce 2^32 elements with no entry, and decoding
// allocates one byte per element. Nothing in the bytes bounds that, so the bound is the
// caller's: a replay passes the tensor's size; larger tensors need an explicit limit.
constexpr int64_t kDefaultLogElements = int64_t{1} << 27;

// "dense", "sparse", "auto" -> the encoding; throws vt::Error listing the valid names.
LogEncoding ParseLogEncoding(std::string_view name);
std::string LogEncodingName(LogEncoding encoding);

// The concrete encoding kAuto picks for `record` (kDense or kSparse; dense on a tie).
LogEncoding ChooseLogEncoding(const LogRecord& record);

// The encoded bytes of `record`. kAuto picks with ChooseLogEncoding.
std::string EncodeLog(const LogRecord& record, LogEncoding encoding = LogEncoding::kAuto);

// As EncodeLog, replacing the contents of `*out` (its capacity is reused).
void EncodeLogTo(const LogRecord& record, LogEncoding encoding, std::string* out);

// The exact size in bytes that EncodeLog would return, without building the bytes.
int64_t EncodedLogSize(const LogRecord& record, LogEncoding encoding = LogEncoding::kAuto);

// 8 * EncodedLogSize / size(): the bytes per element of the whole encoded record (header
// and EXACT list included), in bits. 0 for an empty record.
double BitsPerElement(const LogRecord& record, LogEncoding encoding = LogEncoding::kAuto);

struct DecodeLimits {
  // Reject records declaring more elements than this (bounds the memory a record may ask
  // for). Values above kMaxLogElements are clamped to it. Default: kDefaultLogElements.
  int64_t max_elements = kDefaultLogElements;
};

// The header fields of an encoded record.
struct LogHeader {
  uint8_t version = 0;
  LogEncoding encoding = LogEncoding::kDense;
  int64_t elements = 0;
  StateCounts counts;        // none = elements - down - up - exact.
  int64_t header_bytes = 0;  // Where the payload starts.
};

// Reads and validates the header only (magic, version, encoding, counts, limits).
LogHeader DecodeLogHeader(std::string_view bytes, const DecodeLimits& limits = {});

// Decodes and validates a whole record. Throws vt::Error naming what is wrong.
LogRecord DecodeLog(std::string_view bytes, const DecodeLimits& limits = {});

// As DecodeLog, into `*record` (its buffers are reused). On error `*record` is unspecified.
void DecodeLogInto(std::string_view bytes, LogRecord* record, const DecodeLimits& limits = {});

}  // namespace vt::precision
