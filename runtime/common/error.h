// vt::Error: the one exception type the runtime throws for errors a user can cause (bad
// arguments, bad files, values outside a range). Bindings turn it into a Lua error prefixed
// with the API name; tests match on its message.
#pragma once

#include <stdexcept>
#include <string>

namespace vt {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace vt
