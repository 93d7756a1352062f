// libFuzzer target for the log record decoder (runtime/precision/codec.h). Built by the
// fuzz build (tests/fuzz/CMakeLists.txt, README "Sanitizers and fuzzers"):
//
//   build-fuzz/fuzz_log_decode -max_total_time=60 tests/fuzz/corpus/log_decode
//
// Every input must either decode or raise vt::Error (AddressSanitizer and UBSan catch any
// out-of-bounds read or undefined behaviour); a decoded record must re-encode to the very
// same bytes (the format is canonical) and round-trip through both encodings.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "runtime/common/error.h"
#include "runtime/precision/codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace prec = vt::precision;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  prec::DecodeLimits limits;
  limits.max_elements = int64_t{1} << 20;  // keep allocations small under the fuzzer
  try {
    const prec::LogRecord record = prec::DecodeLog(bytes, limits);
    const prec::LogEncoding encoding = prec::DecodeLogHeader(bytes, limits).encoding;
    if (prec::EncodeLog(record, encoding) != bytes) std::abort();
    for (prec::LogEncoding e : {prec::LogEncoding::kDense, prec::LogEncoding::kSparse}) {
      const std::string again = prec::EncodeLog(record, e);
      if (static_cast<int64_t>(again.size()) != prec::EncodedLogSize(record, e)) std::abort();
      if (!(prec::DecodeLog(again, limits) == record)) std::abort();
    }
  } catch (const vt::Error&) {
    // Invalid input, reported as it should be.
  }
  return 0;
}
