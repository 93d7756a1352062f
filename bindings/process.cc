// vt.process: child processes that exchange lines over pipes, with deadlines. The game runs
// a party (auditor, judge) in another vtrun process, possibly under another device profile,
// and talks to it in JSON lines; a party that does not answer in time loses.
//
//   local p = vt.process.spawn{vt.executable(), "--profile", "nofma", "party.lua"}
//   p:send(line); local reply, why = p:receive(30)   -- nil, "timeout" | "closed"
//   p:close_input(); local code = p:wait(5)          -- exit status, or nil on timeout
//
// The child's stdin and stdout are one socket; its stderr is the parent's. Lines may be up
// to 1 GiB.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bindings/lua_support.h"
#include "bindings/module.h"
#include "runtime/common/error.h"

namespace vt::lua {
namespace {

constexpr const char* kProcessMeta = "vt.Process";
constexpr size_t kMaxLine = size_t{1} << 30;

// This process's environment with `extra` ("NAME=value") set over it, as putenv would (of
// repeated names, the last wins).
std::vector<std::string> MergedEnvironment(const std::vector<std::string>& extra) {
  std::map<std::string, std::string> by_name;
  auto set = [&](const std::string& kv) { by_name[kv.substr(0, kv.find('='))] = kv; };
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) set(*e);
  for (const std::string& kv : extra) set(kv);
  std::vector<std::string> out;
  for (auto& [name, kv] : by_name) out.push_back(std::move(kv));
  return out;
}

class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
    // One socket pair is the child's stdin and stdout: writes to a child that died then
    // fail with EPIPE (MSG_NOSIGNAL) instead of killing this process with SIGPIPE.
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
      throw Error(std::string("socketpair: ") + std::strerror(errno));
    // posix_spawn, not fork: a child of a process with many threads, OpenMP pools and a
    // GPU context must not run the libraries' fork handlers or copy their state; it only
    // executes. Both socket ends are close-on-exec; the child's 0 and 1 are dups.
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 0);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    std::vector<std::string> environment = MergedEnvironment(env);
    std::vector<char*> envp;
    for (std::string& kv : environment) envp.push_back(kv.data());
    envp.push_back(nullptr);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const int err = posix_spawnp(&pid_, args[0], &actions, nullptr, args.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (err != 0) {
      close(fds[0]);
      close(fds[1]);
      throw Error("cannot run '" + argv[0] + "': " + std::strerror(err));
    }
    close(fds[1]);
    sock_ = fds[0];
  }
  ~Child() {
    if (sock_ >= 0) close(sock_);
    if (!reaped_) {
      kill(pid_, SIGKILL);
      int status = 0;
      waitpid(pid_, &status, 0);
    }
  }

  int pid() const { return pid_; }

  void Send(const std::string& line) {
    if (sock_ < 0 || input_closed_)
      throw Error("the input of process " + std::to_string(pid_) + " is closed");
    std::string data = line + "\n";
    size_t done = 0;
    while (done < data.size()) {
      ssize_t n = send(sock_, data.data() + done, data.size() - done, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0)
        throw Error("process " + std::to_string(pid_) + " does not read its input (" +
                    std::strerror(errno) + ")");
      done += static_cast<size_t>(n);
    }
  }

  // A line without its newline; nullopt with *why = "timeout" or "closed".
  std::optional<std::string> Receive(double timeout_s, std::string* why) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (true) {
      const size_t nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return line;
      }
      if (sock_ < 0 || eof_) {
        *why = "closed";
        return std::nullopt;
      }
      const double left =
          std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0) {
        *why = "timeout";
        return std::nullopt;
      }
      pollfd p{sock_, POLLIN, 0};
      const int r = poll(&p, 1, static_cast<int>(std::min(left * 1000.0 + 1, 2.0e9)));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) throw Error(std::string("poll: ") + std::strerror(errno));
      if (r == 0) continue;
      char chunk[65536];
      ssize_t n = read(sock_, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        eof_ = true;
        continue;
      }
      buffer_.append(chunk, static_cast<size_t>(n));
      if (buffer_.size() > kMaxLine)
        throw Error("process " + std::to_string(pid_) + " sent a line over 1 GiB");
    }
  }

  void CloseInput() {
    if (sock_ >= 0 && !input_closed_) shutdown(sock_, SHUT_WR);
    input_closed_ = true;
  }

  // The exit status (128 + signal for a killed child), or nullopt after `timeout_s`.
  std::optional<int> Wait(double timeout_s) {
    if (reaped_) return status_;
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (true) {
      int status = 0;
      pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        reaped_ = true;
        status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return status_;
      }
      if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
      usleep(5000);
    }
  }

  void Kill() {
    if (!reaped_) kill(pid_, SIGKILL);
  }

 private:
  pid_t pid_ = -1;
  int sock_ = -1;
  bool input_closed_ = false, eof_ = false;
  std::string buffer_;
  bool reaped_ = false;
  int status_ = 0;
};

using ChildPtr = std::shared_ptr<Child>;

ChildPtr& CheckChild(lua_State* L) {
  return CheckUserdata<ChildPtr>(L, 1, kProcessMeta, "vt.Process");
}

// vt.process.spawn({argv...} [, {env = {"K=V", ...}}])
int Spawn(lua_State* L) {
  const char* api = "vt.process.spawn";
  CheckTable(L, 1);
  std::vector<std::string> argv;
  for (int i = 1; i <= static_cast<int>(lua_objlen(L, 1)); ++i) {
    lua_rawgeti(L, 1, i);
    if (lua_type(L, -1) != LUA_TSTRING)
      Fail(L, api, "argv[" + std::to_string(i) + "] must be a string");
    argv.emplace_back(lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  if (argv.empty()) Fail(L, api, "argv must name a program");
  CheckOptions(L, 2, api, {"env"});
  std::vector<std::string> env;
  if (lua_istable(L, 2)) {
    lua_getfield(L, 2, "env");
    if (lua_istable(L, -1)) {
      for (int i = 1; i <= static_cast<int>(lua_objlen(L, -1)); ++i) {
        lua_rawgeti(L, -1, i);
        const char* kv = lua_tostring(L, -1);
        if (kv == nullptr || std::strchr(kv, '=') == nullptr)
          Fail(L, api, "env entries are strings \"NAME=value\"");
        env.emplace_back(kv);
        lua_pop(L, 1);
      }
    } else if (!lua_isnil(L, -1)) {
      Fail(L, api, "option 'env' must be an array of \"NAME=value\"");
    }
    lua_pop(L, 1);
  }
  return Protect(L, api, [&] {
    PushUserdata<ChildPtr>(L, std::make_shared<Child>(argv, env), kProcessMeta);
    return 1;
  });
}

int Send(lua_State* L) {
  ChildPtr& c = CheckChild(L);
  std::string line = CheckString(L, 2);
  if (line.find('\n') != std::string::npos) ArgError(L, 2, "a line must not contain a newline");
  return Protect(L, "vt.process.send", [&] {
    c->Send(line);
    return 0;
  });
}

int Receive(lua_State* L) {
  ChildPtr& c = CheckChild(L);
  const double timeout = lua_isnoneornil(L, 2) ? 1e9 : CheckNumber(L, 2);
  return Protect(L, "vt.process.receive", [&] {
    std::string why;
    auto line = c->Receive(timeout, &why);
    if (line) {
      lua_pushlstring(L, line->data(), line->size());
      return 1;
    }
    lua_pushnil(L);
    lua_pushstring(L, why.c_str());
    return 2;
  });
}

int CloseInput(lua_State* L) {
  CheckChild(L)->CloseInput();
  return 0;
}

int Wait(lua_State* L) {
  ChildPtr& c = CheckChild(L);
  const double timeout = lua_isnoneornil(L, 2) ? 1e9 : CheckNumber(L, 2);
  auto status = c->Wait(timeout);
  if (status) {
    lua_pushnumber(L, *status);
  } else {
    lua_pushnil(L);
  }
  return 1;
}

int KillChild(lua_State* L) {
  CheckChild(L)->Kill();
  return 0;
}

int Pid(lua_State* L) {
  lua_pushnumber(L, CheckChild(L)->pid());
  return 1;
}

int ToString(lua_State* L) {
  lua_pushfstring(L, "vt.Process(pid %d)", CheckChild(L)->pid());
  return 1;
}

// vt.executable(): the path of the running vtrun binary.
int Executable(lua_State* L) {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n < 0)
    Fail(L, "vt.executable", std::string("readlink /proc/self/exe: ") + std::strerror(errno));
  lua_pushlstring(L, buf, static_cast<size_t>(n));
  return 1;
}

}  // namespace

void OpenProcess(lua_State* L) {
  const luaL_Reg methods[] = {{"send", Send},    {"receive", Receive}, {"close_input", CloseInput},
                              {"wait", Wait},    {"kill", KillChild},  {"pid", Pid},
                              {nullptr, nullptr}};
  const luaL_Reg meta[] = {
      {"__gc", DestroyUserdata<ChildPtr>}, {"__tostring", ToString}, {nullptr, nullptr}};
  RegisterClass(L, kProcessMeta, methods, meta);
  const luaL_Reg funcs[] = {{"spawn", Spawn}, {nullptr, nullptr}};
  lua_newtable(L);
  SetFuncs(L, funcs);
  lua_setfield(L, -2, "process");
  const luaL_Reg top[] = {{"executable", Executable}, {nullptr, nullptr}};
  SetFuncs(L, top);
}

}  // namespace vt::lua
