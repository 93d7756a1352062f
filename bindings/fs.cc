// vt.fs: the few file-system operations scripts need (make, list, remove directories, a
// fresh temporary directory, sizes), through std::filesystem: no shell, so no quoting to get
// wrong, and errors that name the path.
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "bindings/lua_support.h"
#include "bindings/module.h"
#include "runtime/common/error.h"
#include "store/remove_tree.h"

namespace vt::lua {
namespace {

namespace fs = std::filesystem;

void Check(const std::error_code& ec, const char* what, const std::string& path) {
  if (ec) throw Error(std::string(what) + " '" + path + "': " + ec.message());
}

// vt.fs.exists(path) -> "file" | "directory" | "other" | nil
int Exists(lua_State* L) {
  std::string path = CheckString(L, 1);
  std::error_code ec;
  fs::file_status st = fs::symlink_status(path, ec);
  if (ec || !fs::exists(st)) {
    lua_pushnil(L);
  } else {
    lua_pushstring(L, fs::is_directory(st)      ? "directory"
                      : fs::is_regular_file(st) ? "file"
                                                : "other");
  }
  return 1;
}

// vt.fs.realpath(path) -> the absolute path with every symlink resolved, or nil if it does
// not exist.
int Realpath(lua_State* L) {
  std::string path = CheckString(L, 1);
  std::error_code ec;
  fs::path real = fs::canonical(path, ec);
  if (ec) {
    lua_pushnil(L);
  } else {
    lua_pushstring(L, real.string().c_str());
  }
  return 1;
}

// vt.fs.mkdir(path): the directory and its parents; nothing if it exists.
int Mkdir(lua_State* L) {
  std::string path = CheckString(L, 1);
  return Protect(L, "vt.fs.mkdir", [&] {
    std::error_code ec;
    fs::create_directories(path, ec);
    Check(ec, "cannot make directory", path);
    if (!fs::is_directory(path))
      throw Error("cannot make directory '" + path + "': a file of that name exists");
    return 0;
  });
}

// vt.fs.list(path) -> sorted names of the directory's entries ({} for an empty one).
int List(lua_State* L) {
  std::string path = CheckString(L, 1);
  return Protect(L, "vt.fs.list", [&] {
    std::error_code ec;
    std::vector<std::string> names;
    for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
      names.push_back(it->path().filename().string());
    }
    Check(ec, "cannot list directory", path);
    std::sort(names.begin(), names.end());
    lua_createtable(L, static_cast<int>(names.size()), 0);
    for (size_t i = 0; i < names.size(); ++i) {
      lua_pushstring(L, names[i].c_str());
      lua_rawseti(L, -2, static_cast<int>(i + 1));
    }
    return 1;
  });
}

// vt.fs.remove(path) -> count of entries removed (0 if nothing was there). Recursive.
int Remove(lua_State* L) {
  std::string path = CheckString(L, 1);
  if (path.empty() || path == "/" || path == "." || path == "..") {
    ArgError(L, 1, "refusing to remove '" + path + "'");
  }
  return Protect(L, "vt.fs.remove", [&] {
    std::error_code ec;
    const std::uintmax_t n = RemoveTree(path, ec);
    Check(ec, "cannot remove", path);
    lua_pushnumber(L, static_cast<lua_Number>(n));
    return 1;
  });
}

// vt.fs.tmpdir([prefix [, base]]) -> a new empty directory named prefix.XXXXXX (mkdtemp) in
// `base` (made if missing), or in $TMPDIR or /tmp. A script that is given a directory works
// in such a subdirectory, so it never deletes anything it did not make.
int Tmpdir(lua_State* L) {
  std::string prefix = lua_isnoneornil(L, 1) ? "vtrun" : CheckString(L, 1);
  if (prefix.empty() || prefix.find('/') != std::string::npos)
    ArgError(L, 1, "the prefix is a name, not a path");
  std::string given = lua_isnoneornil(L, 2) ? "" : CheckString(L, 2);
  return Protect(L, "vt.fs.tmpdir", [&] {
    std::error_code ec;
    fs::path base = given;
    if (given.empty()) {
      base = fs::temp_directory_path(ec);
      if (ec) base = "/tmp";
    } else {
      fs::create_directories(base, ec);
      Check(ec, "cannot make directory", given);
    }
    std::string pattern = (base / (prefix + ".XXXXXX")).string();
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) == nullptr)
      throw Error("cannot make a temporary directory in '" + base.string() + "'");
    lua_pushstring(L, buf.data());
    return 1;
  });
}

// vt.fs.size(path) -> bytes of a file, or of every file under a directory.
int Size(lua_State* L) {
  std::string path = CheckString(L, 1);
  return Protect(L, "vt.fs.size", [&] {
    std::error_code ec;
    std::uintmax_t total = 0;
    if (fs::is_directory(path, ec)) {
      for (fs::recursive_directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
        std::error_code fe;
        if (it->is_regular_file(fe)) total += it->file_size(fe);
      }
    } else if (!ec) {
      total = fs::file_size(path, ec);
    }
    Check(ec, "cannot measure", path);
    lua_pushnumber(L, static_cast<lua_Number>(total));
    return 1;
  });
}

}  // namespace

void OpenFs(lua_State* L) {
  const luaL_Reg funcs[] = {
      {"exists", Exists}, {"realpath", Realpath}, {"mkdir", Mkdir}, {"list", List},
      {"remove", Remove}, {"tmpdir", Tmpdir},     {"size", Size},   {nullptr, nullptr},
  };
  lua_newtable(L);
  SetFuncs(L, funcs);
  lua_setfield(L, -2, "fs");
}

}  // namespace vt::lua
