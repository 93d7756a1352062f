// Recursive removal of a file or directory tree, without std::filesystem::remove_all.
//
// Why not remove_all: a vtrun built against a PyTorch wheel's LibTorch binds that symbol to
// the copy libtorch.so exports, and that copy calls address 0 on a directory with entries
// (seen on the GPU machine: EXPERIMENTS.md E15). This one uses only POSIX calls.
#pragma once

#include <cstdint>
#include <string>
#include <system_error>

namespace vt {

// Removes `path` and, for a directory, everything under it; symbolic links are removed, never
// followed. Returns how many entries went (0 when nothing was there, which is no error). On
// failure sets `ec` (the first error) and returns what was removed before it.
std::uintmax_t RemoveTree(const std::string& path, std::error_code& ec);

}  // namespace vt
