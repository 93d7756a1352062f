#include "bindings/host.h"

#include <luajit.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "bindings/dist.h"
#include "bindings/module.h"
#include "bindings/repl.h"
#include "runtime/common/crash_report.h"
#include "runtime/common/error.h"
#include "runtime/common/init.h"
#include "runtime/common/version.h"
#include "runtime/profile/profile.h"
#include "store/version.h"

namespace vt::lua {
namespace {

constexpr const char* kProgram = "vtrun";

lua_State* g_crash_state = nullptr;             // the state whose Lua stack a crash report shows
pid_t g_crash_state_thread = 0;                 // the thread that runs it
lua_State* g_interruptible = nullptr;           // the state a Ctrl-C should interrupt, if any
volatile sig_atomic_t g_interrupt_pending = 0;  // Ctrl-C seen, not yet consumed
volatile sig_atomic_t g_interrupt_checked = 0;  // InterruptChecks alive: Ctrl-C only asks to stop

void InterruptHook(lua_State* L, lua_Debug*) {
  lua_sethook(L, nullptr, 0, 0);
  luaL_error(L, "interrupted!");
}

void OnInterrupt(int) {
  g_interrupt_pending = 1;
  if (g_interrupt_checked > 0) {
    static const char kNote[] = "\n(stopping after the step in progress)\n";
    ssize_t ignored = write(STDERR_FILENO, kNote, sizeof kNote - 1);
    (void)ignored;
    return;
  }
  // A second Ctrl-C before the hook fires (e.g. inside a long C++ call that does not check
  // ConsumeInterrupt) kills the process.
  signal(SIGINT, SIG_DFL);
  ssize_t ignored = write(STDERR_FILENO, "\n", 1);  // end the terminal's "^C" line
  (void)ignored;
  if (g_interruptible != nullptr) {
    lua_sethook(g_interruptible, InterruptHook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
  }
}

// Inside the crash report's signal handler: the Lua lines that were running (lua_getinfo with
// "Sl" reads the stack without allocating; best effort, the state may be mid-update).
void WriteLuaStack() {
  lua_State* L = g_crash_state;
  if (L == nullptr) return;
  if (static_cast<pid_t>(syscall(SYS_gettid)) != g_crash_state_thread) {
    // Another thread (a LibTorch worker) crashed while the Lua thread runs on: its stack
    // would be read mid-update.
    static const char kNote[] =
        "  lua: (the crash was not on the Lua thread; its stack is not read)\n";
    ssize_t ignored = write(STDERR_FILENO, kNote, sizeof kNote - 1);
    (void)ignored;
    return;
  }
  lua_Debug ar;
  char line[400];
  bool any = false;
  for (int level = 0; level < 32 && lua_getstack(L, level, &ar) == 1; ++level) {
    if (lua_getinfo(L, "Sl", &ar) == 0 || ar.currentline <= 0) continue;
    if (!any) {
      ssize_t ignored = write(STDERR_FILENO, "  lua:\n", 7);
      (void)ignored;
      any = true;
    }
    int n = std::snprintf(line, sizeof line, "    %s:%d\n", ar.short_src, ar.currentline);
    if (n > 0) {
      ssize_t ignored = write(STDERR_FILENO, line, std::min<size_t>(n, sizeof line - 1));
      (void)ignored;
    }
  }
}

bool IsFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string ExecutableDirectory() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  buf[n] = '\0';
  std::string path(buf);
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// package.path entries from VTRUN_PATH: colon-separated directories (or templates with '?').
std::string ExtraPathEntries() {
  const char* env = std::getenv("VTRUN_PATH");
  if (env == nullptr || *env == '\0') return "";
  std::string out, entry;
  std::string s(env);
  size_t start = 0;
  while (start <= s.size()) {
    size_t colon = s.find(':', start);
    entry = s.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    if (!entry.empty()) {
      out += entry.find('?') != std::string::npos ? entry + ";"
                                                  : entry + "/?.lua;" + entry + "/?/init.lua;";
    }
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return out;
}

void SetPackagePath(lua_State* L, const std::string& lib) {
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "path");
  std::string path =
      ExtraPathEntries() + lib + "/?.lua;" + lib + "/?/init.lua;" + lua_tostring(L, -1);
  lua_pop(L, 1);
  lua_pushstring(L, path.c_str());
  lua_setfield(L, -2, "path");
  // package.preload["vt.core"]: the C++ half of the module.
  lua_getfield(L, -1, "preload");
  lua_pushcfunction(L, OpenVtCore);
  lua_setfield(L, -2, "vt.core");
  lua_pop(L, 2);
}

void PrintVersion() {
  std::printf("vtrun %s\n  LuaJIT   %s\n  LibTorch %s\n  RocksDB  %s\n  OpenSSL  %s\n",
              VTRUN_VERSION, LUAJIT_VERSION + 7, TorchVersion().c_str(),
              store::RocksDbVersion().c_str(), store::OpenSslVersion().c_str());
}

void PrintUsage(FILE* out) {
  std::fprintf(out,
               "usage: vtrun [options] [script [args...]]\n"
               "  script       run a Lua file; it sees its arguments in `arg` and `...`\n"
               "  -            run standard input as a script\n"
               "  -e code      run a string of Lua (may be repeated)\n"
               "  -l name      require a module and set the global `name`\n"
               "  -i           enter the REPL after running the script or -e code\n"
               "  --profile NAME  run under a device profile (see vt.profiles()); profiles\n"
               "               with process-level settings re-execute vtrun with them\n"
               "  --nproc N    start N processes of this command as the ranks of one\n"
               "               data-parallel group on this host, and wait for them\n"
               "  --world N --rank R --rendezvous URL\n"
               "               join a data-parallel group as rank R of N; URL is\n"
               "               tcp://HOST:PORT (rank 0 listens there) or file:///PATH\n"
               "  --timeout S  seconds a rank waits for the others (default 300)\n"
               "  --gloo-host ADDR  the address this rank's Gloo transport binds to\n"
               "  -v, --version  print the versions of vtrun and its libraries\n"
               "  -h, --help     print this help\n"
               "  --           stop handling options\n"
               "With no script and no -e, vtrun opens the REPL on a terminal and runs\n"
               "standard input otherwise. The global `vt` is loaded everywhere.\n"
               "Environment: VTRUN_PATH (extra Lua module directories, ':'-separated),\n"
               "VTRUN_THREADS (LibTorch threads; default: 1).\n");
}

struct CommandLine {
  std::vector<std::pair<char, std::string>> actions;  // ('e', code) or ('l', module)
  bool interactive = false;
  bool version = false;
  bool help = false;
  std::string profile;                   // --profile NAME
  int script = 0;                        // argv index of the script (or "-"), 0 if none
  int nproc = 0;                         // --nproc N: launch N ranks
  dist::GroupOptions group;              // --world, --rank, --rendezvous, --timeout, --gloo-host
  bool in_group = false;                 // any of --world, --rank, --rendezvous given
  std::vector<std::string> passthrough;  // argv without --nproc and the group options
};

// Parses the integer or number after a group option; false after printing an error.
bool OptionNumber(const std::string& option, const std::string& text, double min, double max,
                  double* out) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end == nullptr || *end != '\0' || !(v >= min && v <= max)) {
    std::fprintf(stderr, "%s: '%s' must be a number in [%g, %g], got '%s'\n", kProgram,
                 option.c_str(), min, max, text.c_str());
    return false;
  }
  *out = v;
  return true;
}

// Returns false after printing an error for a malformed command line.
bool ParseCommandLine(int argc, char** argv, CommandLine* cl) {
  int i = 1;
  cl->passthrough.push_back(argv[0]);
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a.empty() || a[0] != '-' || a == "-") break;
    if (a == "--") {
      cl->passthrough.push_back(a);
      ++i;
      break;
    }
    const bool group_option = a == "--nproc" || a == "--world" || a == "--rank" ||
                              a == "--rendezvous" || a == "--timeout" || a == "--gloo-host";
    if (group_option) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s: '%s' needs a value\n", kProgram, a.c_str());
        return false;
      }
      const std::string v = argv[++i];
      double n = 0;
      if (a == "--nproc" || a == "--world" || a == "--rank") {
        if (!OptionNumber(a, v, a == "--rank" ? 0 : 1, a == "--nproc" ? 256 : 4096, &n))
          return false;
        if (n != static_cast<int>(n)) {
          std::fprintf(stderr, "%s: '%s' must be an integer, got '%s'\n", kProgram, a.c_str(),
                       v.c_str());
          return false;
        }
        if (a == "--nproc") {
          cl->nproc = static_cast<int>(n);
        } else {
          (a == "--world" ? cl->group.world : cl->group.rank) = static_cast<int>(n);
          cl->in_group = true;
        }
      } else if (a == "--rendezvous") {
        cl->group.rendezvous = v;
        cl->in_group = true;
      } else if (a == "--timeout") {
        if (!OptionNumber(a, v, 0.001, 86400, &cl->group.timeout_seconds)) return false;
      } else {
        cl->group.interface_host = v;
      }
      continue;
    }
    cl->passthrough.push_back(a);
    if (a == "-i") {
      cl->interactive = true;
    } else if (a == "-v" || a == "--version") {
      cl->version = true;
    } else if (a == "-h" || a == "--help") {
      cl->help = true;
    } else if (a == "--profile" || a.rfind("--profile=", 0) == 0) {
      if (a == "--profile") {
        if (i + 1 >= argc) {
          std::fprintf(stderr, "%s: '--profile' needs a profile name\n", kProgram);
          return false;
        }
        cl->profile = argv[++i];
        cl->passthrough.push_back(cl->profile);
      } else {
        cl->profile = a.substr(10);
      }
    } else if (a == "-e" || a == "-l") {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s: '%s' needs an argument\n", kProgram, a.c_str());
        return false;
      }
      cl->actions.emplace_back(a[1], argv[++i]);
      cl->passthrough.push_back(argv[i]);
    } else if ((a.rfind("-e", 0) == 0 || a.rfind("-l", 0) == 0) && a.size() > 2) {
      cl->actions.emplace_back(a[1], a.substr(2));
    } else {
      std::fprintf(stderr, "%s: unrecognized option '%s'\n", kProgram, a.c_str());
      PrintUsage(stderr);
      return false;
    }
  }
  cl->script = i < argc ? i : 0;
  for (int j = i; j < argc; ++j) cl->passthrough.push_back(argv[j]);
  if (cl->nproc > 0 && cl->in_group) {
    std::fprintf(
        stderr, "%s: --nproc starts the ranks itself: give it no --world, --rank or --rendezvous\n",
        kProgram);
    return false;
  }
  if ((cl->nproc > 0 || cl->in_group) && cl->script == 0 && cl->actions.empty()) {
    std::fprintf(stderr, "%s: a group of processes runs a script or -e code, not the REPL\n",
                 kProgram);
    return false;
  }
  if (cl->in_group) {
    try {
      if (cl->group.world > 1 && cl->group.rendezvous.empty()) {
        throw Error("--world " + std::to_string(cl->group.world) +
                    " needs --rendezvous tcp://HOST:PORT or file:///PATH");
      }
      dist::Validate(cl->group);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", kProgram, e.what());
      return false;
    }
  }
  return true;
}

// The global `arg`: arg[0] is the script, arg[1..] its arguments, negatives the interpreter
// and options (as lua.c does).
void SetArgTable(lua_State* L, int argc, char** argv, int script) {
  int base = script == 0 ? argc : script;
  lua_createtable(L, argc - base, base);
  for (int i = 0; i < argc; ++i) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - base);
  }
  lua_setglobal(L, "arg");
}

// Pushes the script's arguments (its `...`) and returns their count.
int PushScriptArgs(lua_State* L, int argc, char** argv, int script) {
  for (int i = script + 1; i < argc; ++i) lua_pushstring(L, argv[i]);
  return argc - script - 1;
}

// Runs a chunk loaded with `status` that sits below its `nargs` arguments.
int RunLoaded(lua_State* L, int status, int nargs) {
  if (status == 0) {
    status = CallInterruptible(L, nargs, 0);
  } else {
    lua_pop(L, nargs);
  }
  if (status != 0) ReportError(L);
  return status;
}

int RunString(lua_State* L, const std::string& code) {
  int status = luaL_loadbuffer(L, code.data(), code.size(), "=(command line)");
  return RunLoaded(L, status, 0);
}

int RequireModule(lua_State* L, const std::string& name) {
  lua_getglobal(L, "require");
  lua_pushstring(L, name.c_str());
  int status = CallInterruptible(L, 1, 1);
  if (status != 0) {
    ReportError(L);
    return status;
  }
  lua_setglobal(L, name.c_str());
  return 0;
}

// Applies --profile: an in-process profile is just named in VTRUN_PROFILE (inherited by child
// processes); a process-level one also sets its environment and re-executes this binary so
// that the dynamic loader and BLAS see it. Returns false after printing an error.
bool ApplyProfileOption(const std::string& name, char** argv) {
  const Profile* profile = nullptr;
  try {
    profile = &FindProfile(name);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: --profile: %s\n", kProgram, e.what());
    return false;
  }
  if (auto why = profile->Unavailable(); !why.empty()) {
    std::fprintf(stderr, "%s: --profile: %s\n", kProgram, why.c_str());
    return false;
  }
  const char* active = std::getenv("VTRUN_PROFILE");
  bool already = active != nullptr && name == active;
  setenv("VTRUN_PROFILE", name.c_str(), 1);
  if (!profile->process_level() || already) return true;
  for (const auto& [key, value] : profile->env) {
    std::string v = value;
    const char* old = std::getenv(key.c_str());
    if (key == "LD_LIBRARY_PATH" && old != nullptr && *old != '\0') v += std::string(":") + old;
    setenv(key.c_str(), v.c_str(), 1);
  }
  execv("/proc/self/exe", argv);
  std::fprintf(stderr, "%s: --profile %s: cannot re-execute: %s\n", kProgram, name.c_str(),
               std::strerror(errno));
  return false;
}

// libgomp reads OMP_WAIT_POLICY once, when it loads. Its default lets idle threads spin,
// which costs up to 8x when CPUs are shared (measured here with 2 threads on 2 vCPUs). When
// more than one thread is asked for and the user has not chosen a policy, re-execute with
// PASSIVE (idle threads sleep). One thread, the default, needs no re-execution.
bool PreferPassiveOpenMp(char** argv) {
  const char* threads = std::getenv("VTRUN_THREADS");
  if (threads == nullptr || std::atoi(threads) <= 1 || std::getenv("OMP_WAIT_POLICY") != nullptr)
    return true;
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  execv("/proc/self/exe", argv);
  std::fprintf(stderr, "%s: cannot re-execute with OMP_WAIT_POLICY=PASSIVE: %s\n", kProgram,
               std::strerror(errno));
  return false;
}

}  // namespace

std::string LibraryDirectory() {
  std::string installed = ExecutableDirectory() + "/../share/vtrun/lua";
  if (IsFile(installed + "/vt/init.lua")) return installed;
  std::string source = VTRUN_SOURCE_SCRIPTS;
  if (IsFile(source + "/vt/init.lua")) return source;
  throw std::runtime_error("cannot find the vt Lua library (looked for vt/init.lua in " +
                           installed + " and " + source + "); set VTRUN_PATH or reinstall");
}

lua_State* NewHostState(lua_Alloc alloc, void* ud) {
  std::string lib = LibraryDirectory();
  lua_State* L = alloc != nullptr ? lua_newstate(alloc, ud) : luaL_newstate();
  if (L == nullptr) throw std::runtime_error("cannot create a Lua state (out of memory)");
  luaL_openlibs(L);
  SetPackagePath(L, lib);
  lua_getglobal(L, "require");
  lua_pushstring(L, "vt");
  lua_pushcfunction(L, Traceback);
  lua_insert(L, -3);
  if (lua_pcall(L, 1, 1, -3) != 0) {
    std::string msg = lua_tostring(L, -1) ? lua_tostring(L, -1) : "(error object is not a string)";
    lua_close(L);
    throw std::runtime_error("loading the vt library failed: " + msg);
  }
  lua_setglobal(L, "vt");
  lua_pop(L, 1);
  return L;
}

int Traceback(lua_State* L) {
  if (!lua_isstring(L, 1)) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_isstring(L, -1)) return 1;
    lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    lua_replace(L, 1);
  }
  luaL_traceback(L, L, lua_tostring(L, 1), 1);
  return 1;
}

InterruptChecks::InterruptChecks() { g_interrupt_checked = g_interrupt_checked + 1; }
InterruptChecks::~InterruptChecks() {
  g_interrupt_checked = g_interrupt_checked - 1;
  // A Ctrl-C that came after the loop's last check interrupts the Lua code that follows.
  if (g_interrupt_checked == 0 && g_interrupt_pending && g_interruptible != nullptr) {
    lua_sethook(g_interruptible, InterruptHook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
  }
}

bool ConsumeInterrupt(lua_State* L) {
  if (!g_interrupt_pending) return false;
  g_interrupt_pending = 0;
  lua_sethook(L, nullptr, 0, 0);  // cancel the pending "interrupted!"
  if (g_interruptible != nullptr) {
    struct sigaction action {};
    action.sa_handler = OnInterrupt;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, nullptr);  // the next Ctrl-C interrupts again
  }
  return true;
}

int CallInterruptible(lua_State* L, int nargs, int nresults) {
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, Traceback);
  lua_insert(L, base);
  lua_State* previous = g_interruptible;
  g_interruptible = L;
  g_interrupt_pending = 0;
  struct sigaction action {
  }, old{};
  action.sa_handler = OnInterrupt;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &old);
  int status = lua_pcall(L, nargs, nresults, base);
  sigaction(SIGINT, &old, nullptr);
  lua_sethook(L, nullptr, 0, 0);
  g_interruptible = previous;
  lua_remove(L, base);
  return status;
}

void ReportError(lua_State* L) {
  const char* msg = lua_tostring(L, -1);
  const std::string who = DefaultGroup()
                              ? std::string(kProgram) + " (" + dist::Describe(*DefaultGroup()) + ")"
                              : kProgram;
  std::fprintf(stderr, "%s: %s\n", who.c_str(), msg ? msg : "(error object is not a string)");
  std::fflush(stderr);
  lua_pop(L, 1);
}

// os.exit([code [, close]]) ends the process as the end of a script does: the Lua state is
// closed first, so its objects are finalized (a store closes after the step it is still
// writing, a runner stops its background work). LuaJIT's own os.exit skips that unless asked,
// and a process that exits with a store write in flight loses the step or crashes inside it.
// `close` = false exits at once, as LuaJIT's does. `code`: true (0), false (1) or an integer.
int OsExit(lua_State* L) {
  int status = EXIT_SUCCESS;
  if (lua_isboolean(L, 1)) {
    status = lua_toboolean(L, 1) ? EXIT_SUCCESS : EXIT_FAILURE;
  } else {
    status = static_cast<int>(luaL_optinteger(L, 1, EXIT_SUCCESS));
  }
  const bool close = lua_isnoneornil(L, 2) || lua_toboolean(L, 2);
  std::fflush(stdout);
  if (close) {
    g_interruptible = nullptr;  // a Ctrl-C now must not hook a closed state
    SetCrashReportExtra(nullptr);
    g_crash_state = nullptr;
    lua_close(L);
    DefaultGroup().reset();
  }
  std::exit(status);
}

int HostMain(int argc, char** argv) {
  InstallCrashReport();
  LoadCudaKernels();  // before anything asks ATen about CUDA (it keeps the first answer)
  CommandLine cl;
  if (!ParseCommandLine(argc, argv, &cl)) return 1;
  if (cl.help) {
    PrintUsage(stdout);
    return 0;
  }
  if (cl.version) {
    PrintVersion();
    if (cl.actions.empty() && cl.script == 0 && !cl.interactive) return 0;
  }
  if (cl.nproc > 0) return LaunchRanks(cl.nproc, cl.group, cl.passthrough);
  if (!cl.profile.empty() && !ApplyProfileOption(cl.profile, argv)) return 1;
  if (!PreferPassiveOpenMp(argv)) return 1;
  lua_State* L = nullptr;
  try {
    InitializeRuntime();
    ActivateProfile(CurrentProfile());
    L = NewHostState();
    lua_getglobal(L, "os");
    lua_pushcfunction(L, OsExit);
    lua_setfield(L, -2, "exit");
    lua_pop(L, 1);
    g_crash_state = L;
    g_crash_state_thread = static_cast<pid_t>(syscall(SYS_gettid));
    SetCrashReportExtra(WriteLuaStack);
    if (cl.in_group && cl.group.world > 1) DefaultGroup() = dist::Group::Connect(cl.group);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", kProgram, e.what());
    SetCrashReportExtra(nullptr);  // the report must not read a closed state
    g_crash_state = nullptr;
    if (L != nullptr) lua_close(L);
    return 1;
  }
  int status = 0;
  SetArgTable(L, argc, argv, cl.script);
  for (const auto& [kind, text] : cl.actions) {
    status = kind == 'e' ? RunString(L, text) : RequireModule(L, text);
    if (status != 0) break;
  }
  if (status == 0 && cl.script != 0) {
    std::string script = argv[cl.script];
    int load = script == "-" ? luaL_loadfile(L, nullptr) : luaL_loadfile(L, script.c_str());
    status = RunLoaded(L, load, PushScriptArgs(L, argc, argv, cl.script));
  } else if (status == 0 && cl.actions.empty() && !cl.interactive && !cl.version) {
    if (isatty(STDIN_FILENO)) {
      cl.interactive = true;
    } else {
      status = RunLoaded(L, luaL_loadfile(L, nullptr), 0);
    }
  }
  if (status == 0 && cl.interactive) status = RunRepl(L);
  std::fflush(stdout);
  SetCrashReportExtra(nullptr);
  g_crash_state = nullptr;
  lua_close(L);
  DefaultGroup().reset();
  return status == 0 ? 0 : 1;
}

}  // namespace vt::lua
