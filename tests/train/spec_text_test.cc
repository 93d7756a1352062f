// Text in spec values (a Lua model's source, string arguments): one spelling per text.
#include <ATen/ATen.h>  // before Catch: glog (in ATen, via spec.h) has a CHECK macro of its own

#include <catch2/catch.hpp>
#include <string>

#include "runtime/common/error.h"
#include "runtime/train/spec.h"

using vt::train::EscapeSpecText;
using vt::train::UnescapeSpecText;

TEST_CASE("spec text escapes every byte and reads back", "[spec]") {
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  const std::string escaped = EscapeSpecText(all);
  CHECK(escaped.find('\n') == std::string::npos);
  CHECK(escaped.find('\r') == std::string::npos);
  for (unsigned char c : escaped) CHECK(!(c < 0x20 || c == 0x7f));
  CHECK(UnescapeSpecText(escaped, "model.source") == all);
  CHECK(EscapeSpecText("a\\b\nc\td\r") == "a\\\\b\\nc\\td\\r");
  CHECK(EscapeSpecText(std::string("\x01\x7f", 2)) == "\\x01\\x7f");
}

TEST_CASE("spec text refuses every other spelling", "[spec]") {
  auto refused = [](const std::string& s, const std::string& what) {
    try {
      UnescapeSpecText(s, "model.source");
    } catch (const vt::Error& e) {
      CHECK_THAT(e.what(), Catch::Contains(what));
      return;
    }
    FAIL("accepted '" << s << "'");
  };
  refused("a\\x0a", "non-canonical escape \\x0a");  // a newline is \n
  refused("a\\x41", "non-canonical escape \\x41");  // printable bytes are themselves
  refused("a\\x0A", "non-canonical");               // lowercase hex only
  refused("a\\x0", "unknown escape");               // too short
  refused("a\\q", "unknown escape \\q");
  refused("a\\", "lone backslash");
  refused(std::string("a\nb"), "unescaped control byte at character 2");
  CHECK(UnescapeSpecText("\\x00\\x1f", "x") == std::string("\0\x1f", 2));
}
