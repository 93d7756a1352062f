// The vtrun command line: scripts and their arguments, -e, stdin, errors and exit codes.
#include <catch2/catch.hpp>
#include <fstream>

#include "tests/support/subprocess.h"

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using vt::testing::RunProcess;
using vt::testing::TempDir;

namespace {

std::string WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST_CASE("vtrun -e runs code with vt preloaded", "[cli]") {
  auto r = RunProcess({VTRUN_BINARY, "-e", "print(vt.tensor{{1,2},{3,4}}:sum())"});
  CHECK(r.exit_code == 0);
  CHECK(r.out == "10\n");
  CHECK(r.err.empty());
  r = RunProcess({VTRUN_BINARY, "-e", "x = 5", "-e", "print(x * 2, require('vt') == vt)"});
  CHECK(r.out == "10\ttrue\n");
}

TEST_CASE("script errors print vtrun: message and a traceback, exit 1", "[cli]") {
  auto r = RunProcess({VTRUN_BINARY, "-e", "error('boom')"});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, StartsWith("vtrun: "));
  CHECK_THAT(r.err, Contains("boom"));
  CHECK_THAT(r.err, Contains("stack traceback:"));
  TempDir dir;
  std::string script =
      WriteFile(dir.path() + "/bad.lua", "local function f()\n  error('deep')\nend\nf()\n");
  r = RunProcess({VTRUN_BINARY, script});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("bad.lua:2: deep"));
  CHECK_THAT(r.err, Contains("in function 'f'"));
  // C++ errors arrive as Lua errors with the API name, without a C++ backtrace.
  r = RunProcess({VTRUN_BINARY, "-e", "vt.tensor{1,2,3}:view(3,5)"});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("vt.tensor.view: shape '[3, 5]' is invalid for input of size 3"));
  CHECK_THAT(r.err, !Contains("Exception raised from"));
  // Syntax errors and non-string error values.
  r = RunProcess({VTRUN_BINARY, "-e", "x = = 1"});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("unexpected symbol"));
  r = RunProcess({VTRUN_BINARY, "-e", "error({})"});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("error object is a table value"));
}

TEST_CASE("scripts see their arguments in arg and ...", "[cli]") {
  TempDir dir;
  std::string script = WriteFile(dir.path() + "/args.lua",
                                 "print(select('#', ...), ...)\nprint(arg[0], arg[1], arg[2])\n");
  auto r = RunProcess({VTRUN_BINARY, script, "a", "b c"});
  CHECK(r.exit_code == 0);
  CHECK(r.out == "2\ta\tb c\n" + script + "\ta\tb c\n");
  // os.exit codes pass through.
  r = RunProcess({VTRUN_BINARY, "-e", "os.exit(3)"});
  CHECK(r.exit_code == 3);
}

TEST_CASE("vtrun - and a non-terminal stdin run standard input", "[cli]") {
  auto r = RunProcess({VTRUN_BINARY, "-"}, "print(6 * 7)\n");
  CHECK(r.out == "42\n");
  r = RunProcess({VTRUN_BINARY}, "print(vt.tensor{1,2}:sum())\n");
  CHECK(r.out == "3\n");
  r = RunProcess({VTRUN_BINARY, "-", "x"}, "print(...)\n");
  CHECK(r.out == "x\n");
}

TEST_CASE("vtrun --version names every library and --help the options", "[cli]") {
  auto r = RunProcess({VTRUN_BINARY, "--version"});
  CHECK(r.exit_code == 0);
  for (const char* lib : {"vtrun", "LuaJIT", "LibTorch", "RocksDB", "OpenSSL"})
    CHECK_THAT(r.out, Contains(lib));
  r = RunProcess({VTRUN_BINARY, "--help"});
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("usage: vtrun"));
  r = RunProcess({VTRUN_BINARY, "--frobnicate"});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("unrecognized option '--frobnicate'"));
  r = RunProcess({VTRUN_BINARY, "-e"});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("'-e' needs an argument"));
  r = RunProcess({VTRUN_BINARY, "/nonexistent/script.lua"});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("cannot open /nonexistent/script.lua"));
}

TEST_CASE(
    "VTRUN_PATH adds module directories, VTRUN_THREADS sets threads, VTRUN_BACKGROUND, "
    "VTRUN_ALLOC_CACHE",
    "[cli]") {
  TempDir dir;
  WriteFile(dir.path() + "/mymod.lua", "return {answer = 42}\n");
  auto r = RunProcess({VTRUN_BINARY, "-e", "print(require('mymod').answer)"}, "",
                      {{"VTRUN_PATH", dir.path()}});
  CHECK(r.out == "42\n");
  r = RunProcess({VTRUN_BINARY, "-e", "print(vt.threads())"}, "", {{"VTRUN_THREADS", "1"}});
  CHECK(r.out == "1\n");
  // vt.cpus() follows the affinity mask (scripts/bench/training.lua's drain=auto reads it).
  r = RunProcess({"/usr/bin/taskset", "-c", "0", VTRUN_BINARY, "-e", "print(vt.cpus())"});
  CHECK(r.out == "1\n");
  // More than one thread: vtrun re-executes itself so idle OpenMP threads sleep, not spin.
  r = RunProcess({VTRUN_BINARY, "-e", "print(vt.threads(), os.getenv('OMP_WAIT_POLICY'))"}, "",
                 {{"VTRUN_THREADS", "2"}});
  CHECK(r.out == "2\tPASSIVE\n");
  r = RunProcess({VTRUN_BINARY, "-e", "print(vt.threads(), os.getenv('OMP_WAIT_POLICY'))"}, "",
                 {{"VTRUN_THREADS", "2"}, {"OMP_WAIT_POLICY", "active"}});
  CHECK(r.out == "2\tactive\n");
  r = RunProcess({VTRUN_BINARY, "-e", "print(1)"}, "", {{"VTRUN_THREADS", "lots"}});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("VTRUN_THREADS must be an integer in [1, 1024], got 'lots'"));
  for (const char* ok : {"on", "idle", "off", ""}) {
    r = RunProcess({VTRUN_BINARY, "-e", "print(1)"}, "", {{"VTRUN_BACKGROUND", ok}});
    CHECK(r.out == "1\n");
  }
  r = RunProcess({VTRUN_BINARY, "-e", "print(1)"}, "", {{"VTRUN_BACKGROUND", "auto"}});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("VTRUN_BACKGROUND must be 'on', 'idle' or 'off', got 'auto'"));
  // VTRUN_ALLOC_CACHE: the caching allocator's limit (vt.memory() reports it).
  r = RunProcess({VTRUN_BINARY, "-e", "local m = vt.memory() print(m.caching, m.cache_limit)"}, "",
                 {{"VTRUN_ALLOC_CACHE", "256M"}});
  CHECK(r.out == "true\t268435456\n");
  r = RunProcess({VTRUN_BINARY, "-e", "print(vt.memory().caching)"}, "",
                 {{"VTRUN_ALLOC_CACHE", "off"}});
  CHECK(r.out == "false\n");
  r = RunProcess({VTRUN_BINARY, "-e", "print(1)"}, "", {{"VTRUN_ALLOC_CACHE", "lots"}});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("VTRUN_ALLOC_CACHE must be a byte count with an optional K, M or G "
                             "suffix, or 'off', got 'lots'"));
}

TEST_CASE("-l requires a module into a global", "[cli]") {
  auto r = RunProcess({VTRUN_BINARY, "-l", "vt.pretty", "-e", "print(type(vt.pretty.format))"});
  CHECK(r.out == "function\n");
}

TEST_CASE("a crash of vtrun reports the signal, the caller and the Lua lines, and dies of it",
          "[cli]") {
  // LuaJIT's FFI can call any address: here a null function pointer, as a broken library would.
  TempDir dir;
  std::string script = WriteFile(dir.path() + "/crash.lua",
                                 "local ffi = require('ffi')\n"
                                 "local function boom()\n"
                                 "  ffi.cast('void (*)(void)', 0)()\n"
                                 "end\n"
                                 "boom()\n");
  auto r = RunProcess({VTRUN_BINARY, script});
  INFO(r.err);
  CHECK(r.exit_code == -1);
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer's own SEGV handler was there first: the report leaves it in place.
  CHECK_THAT(r.err, Contains("AddressSanitizer: SEGV"));
  CHECK_THAT(r.err, !Contains("vtrun: crashed"));
  return;
#endif
  CHECK(r.signal == SIGSEGV);
  CHECK_THAT(r.err, Contains("vtrun: crashed: signal 11"));
  CHECK_THAT(r.err, Contains("  pc 0x0\n"));
  CHECK_THAT(r.err, Contains("top of stack"));
  CHECK_THAT(r.err, Contains("  lua:\n"));
  CHECK_THAT(r.err, Contains("crash.lua:3\n"));
  CHECK_THAT(r.err, Contains("crash.lua:5\n"));
}

TEST_CASE("os.exit right after a step keeps the step its store was still writing", "[cli]") {
  // A step of this MLP logs about 20 MB, which the store writes behind while the script goes
  // on: os.exit comes long before the write ends. Closing the Lua state (the default) closes
  // the store after it; os.exit(0, false) exits at once, and the exit waits for the write.
  // Without either the step was lost and the process crashed inside RocksDB.
  TempDir dir;
  const std::string writer = WriteFile(dir.path() + "/writer.lua", R"(
local data = vt.data.fashion_mnist{limit = 128}
local spec = vt.spec{model = vt.models.mlp{hidden = {4096, 4096}}, data = data,
                     optim = vt.optim.sgd{lr = 0.05}, steps = 4, batch = 64, checkpoint_every = 4}
local t = vt.trainer{spec = spec, data = data, store = vt.store.open(arg[1])}
t:step()
os.exit(3, arg[2] ~= "false")
)");
  const std::string reader = WriteFile(
      dir.path() + "/reader.lua", "print(vt.store.open(arg[1]):run('run'):info().steps_written)");
  for (const std::string close : {"true", "false"}) {
    INFO("close " << close);
    const std::string store = dir.path() + "/store-" + close;
    auto r = RunProcess({VTRUN_BINARY, writer, store, close}, "", {{"VTRUN_BACKGROUND", "on"}});
    CHECK(r.exit_code == 3);
    CHECK(r.err.empty());
    r = RunProcess({VTRUN_BINARY, reader, store});
    CHECK(r.err == "");
    CHECK(r.out == "1\n");
  }
}
