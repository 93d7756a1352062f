// The REPL driven through a pseudo-terminal: completion, multi-line chunks, printing of
// values, error recovery, Ctrl-C, persistent history and Ctrl-D.
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "tests/support/subprocess.h"

using vt::testing::PtySession;
using vt::testing::TempDir;

namespace {

// Bracketed paste off, so results follow the echoed line directly.
std::map<std::string, std::string> ReplEnv(const TempDir& home) {
  std::ofstream(home.path() + "/inputrc") << "set enable-bracketed-paste off\n";
  return {{"HOME", home.path()}, {"TERM", "xterm"}, {"INPUTRC", home.path() + "/inputrc"}};
}

// Waits for `text` in the REPL's output; on timeout fails with everything it printed.
#define EXPECT_OUTPUT(repl, text)                                                               \
  do {                                                                                          \
    if (!(repl).WaitFor(text)) FAIL("never saw " << (text) << " in:\n" << (repl).transcript()); \
  } while (0)

}  // namespace

// Types `line` and Enter, waits for `expected`, then for the next prompt (as a person would:
// keys typed before the prompt appears go to the terminal in cooked mode, not to readline).
void Enter(PtySession& repl, const std::string& line, const std::string& expected,
           const std::string& prompt = "vt> ") {
  repl.Send(line + "\r");
  EXPECT_OUTPUT(repl, expected);
  EXPECT_OUTPUT(repl, prompt);
}

TEST_CASE("REPL: completion, multi-line input, values, errors, Ctrl-C, history", "[repl]") {
  TempDir home;
  PtySession repl({VTRUN_BINARY}, ReplEnv(home));
  EXPECT_OUTPUT(repl, "vt> ");

  // Tab completes vt.ten -> vt.tensor and vt.tensor.ze -> vt.tensor.zeros.
  repl.Send("vt.ten\t");
  EXPECT_OUTPUT(repl, "vt.tensor");
  repl.Send(".ze\t");
  EXPECT_OUTPUT(repl, "zeros");
  Enter(repl, "(2, 2)", "vt.tensor float64 [2, 2]");

  // An incomplete chunk continues on the next line.
  Enter(repl, "function twice(x)", "\n", "..> ");
  Enter(repl, "return 2 * x", "\n", "..> ");
  Enter(repl, "end", "\n");
  Enter(repl, "twice(21)", "\n42\r\n");

  // Expressions print without '='; tables are pretty-printed; strings quoted.
  Enter(repl, "{a = 1, b = {c = 'x'}}", "{a = 1, b = {c = \"x\"}}");

  // An error prints message and traceback, and the session goes on.
  Enter(repl, "error('oops')", "oops");
  Enter(repl, "vt.tensor{1,2}:view(5)", "vt.tensor.view: shape '[5]' is invalid");
  Enter(repl, "1 + 2", "\n3\r\n");

  // Ctrl-C interrupts a running loop and returns to the prompt.
  repl.Send("while true do end\r");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  repl.Send("\x03");
  EXPECT_OUTPUT(repl, "interrupted!");
  EXPECT_OUTPUT(repl, "vt> ");
  Enter(repl, "6 * 7", "\n42\r\n");

  // Ctrl-C at the prompt abandons the line, including an unfinished chunk.
  Enter(repl, "for i = 1, 3 do", "\n", "..> ");
  repl.Send("abc\x03");
  EXPECT_OUTPUT(repl, "vt> ");
  Enter(repl, "5 + 5", "\n10\r\n");

  // Ctrl-D exits with status 0; the history file holds the lines typed.
  repl.Send("\x04");
  CHECK(repl.Wait() == 0);
  std::ifstream history(home.path() + "/.vtrun_history");
  std::stringstream lines;
  lines << history.rdbuf();
  CHECK(lines.str().find("twice(21)") != std::string::npos);
  CHECK(lines.str().find("6 * 7") != std::string::npos);
}

TEST_CASE("REPL: history persists into the next session", "[repl]") {
  TempDir home;
  { std::ofstream(home.path() + "/.vtrun_history") << "remembered = 99\n"; }
  PtySession repl({VTRUN_BINARY}, ReplEnv(home));
  EXPECT_OUTPUT(repl, "vt> ");
  Enter(repl, "\x1b[A", "remembered = 99");  // Up arrow recalls the previous session's line.
  Enter(repl, "remembered", "\n99\r\n");
  repl.Send("\x04");
  CHECK(repl.Wait() == 0);
}

TEST_CASE("vtrun -i runs the script, then the REPL sees its globals", "[repl]") {
  TempDir home;
  std::string script = home.path() + "/setup.lua";
  std::ofstream(script) << "answer = 41 + 1\n";
  PtySession repl({VTRUN_BINARY, "-i", script}, ReplEnv(home));
  EXPECT_OUTPUT(repl, "vt> ");
  Enter(repl, "answer", "\n42\r\n");
  repl.Send("\x04");
  CHECK(repl.Wait() == 0);
}

TEST_CASE("REPL: ?help, quiet lines, timing, digits and compact values", "[repl]") {
  TempDir home;
  PtySession repl({VTRUN_BINARY}, ReplEnv(home));
  EXPECT_OUTPUT(repl, "vt> ");

  // ?name prints the API reference's lines about name.
  Enter(repl, "?vt.tensor.zeros", "| `vt.tensor.zeros(2, 3)`");
  Enter(repl, "?no.such.thing", "no entry for 'no.such.thing' in the API reference");

  // A trailing ';' runs the line without printing its values; the next line prints as usual.
  Enter(repl, "quiet = 40 + 2;", "\n");
  Enter(repl, "quiet + 1;", "\n");
  Enter(repl, "quiet", "\n42\r\n");
  CHECK(repl.transcript().find("\n43\r\n") == std::string::npos);

  // A command that takes a second or more says how long it took.
  Enter(repl, "os.execute('sleep 1.1');", "(1.");

  // Numbers: 14 significant digits by default, every bit on request, or hex floats.
  Enter(repl, "0.1 + 0.2", "\n0.3\r\n");
  Enter(repl, "vt.repl.options{precision = 17};", "\n");
  Enter(repl, "0.1 + 0.2", "0.30000000000000004");
  Enter(repl, "vt.repl.options{hex = true};", "\n");
  Enter(repl, "0.5", "0x1p-1");
  Enter(repl, "vt.repl.options{precision = 99}", "precision must be an integer in [1, 17], got 99");

  // Long strings, binary data and large nested tables are shown compactly; vt.show prints all.
  Enter(repl, "string.rep('ab', 500)", "... (1000 bytes)");
  Enter(repl, "string.rep('\\0', 4096)", "<4096 bytes of binary data>");
  Enter(repl, "{step = 1, boundaries = {1,2,3,4,5,6,7,8,9,10,11,12,13}}",
        "boundaries = {... 13 entries}");
  Enter(repl, "vt.show({boundaries = {1,2,3,4,5,6,7,8,9,10,11,12,13}})", "11, 12, 13}");
  repl.Send("\x04");
  CHECK(repl.Wait() == 0);
}
