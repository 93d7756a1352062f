#include "bindings/repl.h"

#include <errno.h>
#include <fcntl.h>
#include <luajit.h>
#include <readline/history.h>
#include <readline/readline.h>
#include <signal.h>
#include <sys/select.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bindings/host.h"
#include "runtime/common/version.h"

namespace vt::lua {
namespace {

constexpr const char* kPrompt = "vt> ";
constexpr const char* kContinuation = "..> ";
constexpr int kHistoryLines = 2000;
constexpr double kReportSeconds = 1.0;  // commands at least this slow print their time

// Ctrl-C at the prompt writes a byte to this pipe (the self-pipe trick), so the select loop
// wakes even if the signal lands while readline is processing a key.
int g_interrupt_pipe[2] = {-1, -1};

void OnInputInterrupt(int) {
  char byte = 1;
  ssize_t ignored = write(g_interrupt_pipe[1], &byte, 1);
  (void)ignored;
}

std::string HistoryPath() {
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr && *home != '\0' ? home : ".") + "/.vtrun_history";
}

// The REPL's state; readline's callbacks are plain functions, so they reach it through
// g_repl.
class Repl {
 public:
  explicit Repl(lua_State* L) : L_(L), history_(HistoryPath()) {}

  int Run() {
    std::printf(
        "vtrun %s (%s, LibTorch %s). Ctrl-D exits; `vt.` + Tab lists the API; ?name shows its\n"
        "documentation; a trailing ; hides a line's values; vt.repl.options{precision = 17} shows "
        "more digits.\n",
        VTRUN_VERSION, LUAJIT_VERSION, TorchVersion().c_str());
    LoadHelpers();
    // LuaJIT's compiled loops never check the interrupt hook, so Ctrl-C could not stop
    // `while true do end`. The REPL therefore interprets Lua (the heavy work is C++ anyway)
    // unless VTRUN_REPL_JIT=1.
    const char* jit = std::getenv("VTRUN_REPL_JIT");
    if (jit == nullptr || std::string(jit) != "1")
      luaJIT_setmode(L_, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF);
    using_history();
    stifle_history(kHistoryLines);
    // append_history only appends to an existing file, so create it on first use.
    if (read_history(history_.c_str()) != 0) write_history(history_.c_str());
    rl_readline_name = "vtrun";
    rl_catch_signals = 0;  // our handler turns Ctrl-C into "cancel the line"
    rl_basic_word_break_characters = const_cast<char*>(" \t\n\"\\'`@$><=;|&{(,+-*/%^~#[]");
    rl_attempted_completion_function = Complete;
    if (pipe2(g_interrupt_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
      std::perror("vtrun: pipe");
      return 1;
    }
    Install(kPrompt);
    while (!done_) {
      fd_set fds;
      FD_ZERO(&fds);
      FD_SET(STDIN_FILENO, &fds);
      FD_SET(g_interrupt_pipe[0], &fds);
      int ready =
          select(std::max(STDIN_FILENO, g_interrupt_pipe[0]) + 1, &fds, nullptr, nullptr, nullptr);
      if (ready < 0) {
        if (errno == EINTR) continue;
        break;
      }
      if (FD_ISSET(g_interrupt_pipe[0], &fds)) {
        char drain[64];
        while (read(g_interrupt_pipe[0], drain, sizeof drain) > 0) {
        }
        CancelInput();
        continue;
      }
      rl_callback_read_char();
    }
    close(g_interrupt_pipe[0]);
    close(g_interrupt_pipe[1]);
    rl_callback_handler_remove();
    history_truncate_file(history_.c_str(), kHistoryLines);
    return 0;
  }

  static Repl* instance;

 private:
  void Install(const char* prompt) {
    struct sigaction action {};
    action.sa_handler = OnInputInterrupt;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, nullptr);  // no SA_RESTART: select returns EINTR
    rl_callback_handler_install(prompt, OnLine);
  }

  // Ctrl-C at the prompt: abandon the line (and any unfinished multi-line chunk).
  void CancelInput() {
    rl_point = rl_end;
    rl_redisplay();
    std::fputs("^C\n", stdout);
    std::fflush(stdout);
    rl_replace_line("", 0);
    rl_free_line_state();
    rl_callback_sigcleanup();
    rl_callback_handler_remove();
    buffer_.clear();
    Install(kPrompt);
  }

  // vt.repl (scripts/vt/repl.lua) formats values and completes names; without it the REPL
  // falls back to tostring and no completion.
  void LoadHelpers() {
    lua_getglobal(L_, "require");
    lua_pushstring(L_, "vt.repl");
    if (CallInterruptible(L_, 1, 1) != 0) {
      std::fprintf(stderr, "vtrun: REPL helpers unavailable: %s\n", lua_tostring(L_, -1));
      lua_pop(L_, 1);
      return;
    }
    helpers_ref_ = luaL_ref(L_, LUA_REGISTRYINDEX);
  }

  static void OnLine(char* line) { instance->HandleLine(line); }

  void HandleLine(char* line) {
    if (line == nullptr) {  // Ctrl-D
      std::fputs("\n", stdout);
      done_ = true;
      return;
    }
    std::string text(line);
    std::free(line);
    if (!text.empty()) {
      add_history(text.c_str());
      append_history(1, history_.c_str());
    }
    if (buffer_.empty() && text.find_first_not_of(" \t") == std::string::npos) return;
    buffer_ += buffer_.empty() ? text : "\n" + text;
    rl_callback_handler_remove();
    bool complete = Evaluate();
    if (complete) buffer_.clear();
    if (!done_) Install(complete ? kPrompt : kContinuation);
  }

  // Compiles buffer_ as an expression (printing its values) or a statement. Returns false if
  // the chunk is incomplete and more lines are needed.
  bool Evaluate() {
    std::string code = buffer_;
    // "?name": what the API reference says of name (vt.repl.help).
    const size_t first = code.find_first_not_of(" \t");
    if (first != std::string::npos && code[first] == '?') {
      CallHelper("help", code.substr(first + 1));
      return true;
    }
    // A trailing ';' runs the line without printing its values.
    bool quiet = false;
    const size_t last = code.find_last_not_of(" \t");
    if (last != std::string::npos && code[last] == ';') {
      quiet = true;
      code.erase(last);
    }
    if (!code.empty() && code[0] == '=') code = code.substr(1);  // Lua 5.1's "=expr"
    std::string as_expression = "return " + code;
    int top = lua_gettop(L_);
    int status = luaL_loadbuffer(L_, as_expression.data(), as_expression.size(), "=stdin");
    if (status != 0) {
      lua_pop(L_, 1);
      status = luaL_loadbuffer(L_, code.data(), code.size(), "=stdin");
      if (status == LUA_ERRSYNTAX && Incomplete()) {
        lua_pop(L_, 1);
        return false;
      }
      if (status != 0) {
        ReportError(L_);
        return true;
      }
    }
    const auto start = std::chrono::steady_clock::now();
    status = CallInterruptible(L_, 0, LUA_MULTRET);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (status != 0) {
      ReportError(L_);
      return true;
    }
    int results = lua_gettop(L_) - top;
    if (results > 0 && !quiet) PrintResults(top + 1, results);
    lua_settop(L_, top);
    // Slow commands say how long they took (a training run, a calibration).
    if (seconds >= kReportSeconds) {
      std::printf("(%.2f s)\n", seconds);
      std::fflush(stdout);
    }
    return true;
  }

  // Calls vt.repl.<name>(argument) for its output.
  void CallHelper(const char* name, const std::string& argument) {
    if (helpers_ref_ == LUA_NOREF) {
      std::fprintf(stderr, "vtrun: REPL helpers unavailable\n");
      return;
    }
    lua_rawgeti(L_, LUA_REGISTRYINDEX, helpers_ref_);
    lua_getfield(L_, -1, name);
    lua_remove(L_, -2);
    lua_pushlstring(L_, argument.data(), argument.size());
    if (CallInterruptible(L_, 1, 0) != 0) ReportError(L_);
    std::fflush(stdout);
  }

  bool Incomplete() {
    size_t len = 0;
    const char* msg = lua_tolstring(L_, -1, &len);
    static const char kEof[] = "'<eof>'";
    return msg != nullptr && len >= sizeof(kEof) - 1 &&
           std::strcmp(msg + len - (sizeof(kEof) - 1), kEof) == 0;
  }

  void PrintResults(int first, int count) {
    if (helpers_ref_ == LUA_NOREF) {
      for (int i = 0; i < count; ++i) {
        lua_getglobal(L_, "tostring");
        lua_pushvalue(L_, first + i);
        lua_call(L_, 1, 1);
        std::printf("%s%s", i > 0 ? "\t" : "", lua_tostring(L_, -1));
        lua_pop(L_, 1);
      }
      std::printf("\n");
      return;
    }
    lua_rawgeti(L_, LUA_REGISTRYINDEX, helpers_ref_);
    lua_getfield(L_, -1, "print_results");
    lua_remove(L_, -2);
    lua_pushnumber(L_, count);
    for (int i = 0; i < count; ++i) lua_pushvalue(L_, first + i);
    if (CallInterruptible(L_, count + 1, 0) != 0) ReportError(L_);
    std::fflush(stdout);
  }

  // Readline completion: candidates come from vt.repl.complete(word).
  static char** Complete(const char* text, int, int) {
    rl_attempted_completion_over = 1;  // never fall back to file names
    rl_completion_append_character = '\0';
    return rl_completion_matches(text, NextCandidate);
  }

  static char* NextCandidate(const char* text, int state) {
    Repl* self = instance;
    if (state == 0) self->Candidates(text);
    if (static_cast<size_t>(state) >= self->candidates_.size()) return nullptr;
    return strdup(self->candidates_[state].c_str());
  }

  void Candidates(const char* text) {
    candidates_.clear();
    if (helpers_ref_ == LUA_NOREF) return;
    int top = lua_gettop(L_);
    lua_rawgeti(L_, LUA_REGISTRYINDEX, helpers_ref_);
    lua_getfield(L_, -1, "complete");
    lua_pushstring(L_, text);
    if (lua_pcall(L_, 1, 1, 0) == 0 && lua_istable(L_, -1)) {
      int n = static_cast<int>(lua_objlen(L_, -1));
      for (int i = 1; i <= n; ++i) {
        lua_rawgeti(L_, -1, i);
        if (const char* s = lua_tostring(L_, -1)) candidates_.emplace_back(s);
        lua_pop(L_, 1);
      }
    }
    lua_settop(L_, top);
  }

  lua_State* L_;
  std::string history_;
  std::string buffer_;
  std::vector<std::string> candidates_;
  int helpers_ref_ = LUA_NOREF;
  bool done_ = false;
};

Repl* Repl::instance = nullptr;

}  // namespace

int RunRepl(lua_State* L) {
  Repl repl(L);
  Repl::instance = &repl;
  int status = repl.Run();
  Repl::instance = nullptr;
  return status;
}

}  // namespace vt::lua
