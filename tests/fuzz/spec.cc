// libFuzzer target for the spec parser (runtime/train/spec.h): the text a trainer discloses
// and every auditor and judge parses. Every input must either parse or raise vt::Error; a
// parsed spec is canonical (its canonical text is the input) and parses back to the same hash.
#include "runtime/train/spec.h"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "runtime/common/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    // Small models only, so that each input builds its model in well under a millisecond.
    constexpr double kModelValues = 1 << 18;
    const vt::train::Spec spec = vt::train::Spec::Parse(text, kModelValues);
    const std::string canonical = spec.Canonical();
    // Parse() adds a missing "version" field (the last key in sort order); otherwise the
    // canonical text is the input.
    const std::string version = std::string("version=") + vt::train::kSpecVersion + "\n";
    if (canonical != text && canonical != std::string(text) + version) std::abort();
    if (vt::train::Spec::Parse(canonical, kModelValues).Hash() != spec.Hash()) std::abort();
  } catch (const vt::Error&) {
  }
  return 0;
}
