#include "runtime/tensor/dtype.h"

#include "runtime/common/error.h"

namespace vt {
namespace {

struct Named {
  const char* name;
  at::ScalarType type;
};

constexpr Named kNames[] = {
    {"float32", at::kFloat}, {"float64", at::kDouble}, {"int64", at::kLong},
    {"uint8", at::kByte},    {"bool", at::kBool},      {"float16", at::kHalf},
    {"int8", at::kChar},     {"int16", at::kShort},    {"int32", at::kInt},
};

}  // namespace

std::string DtypeNames() {
  std::string out;
  for (const auto& n : kNames) out += (out.empty() ? "" : ", ") + std::string(n.name);
  return out;
}

at::ScalarType DtypeFromName(const std::string& name) {
  for (const auto& n : kNames) {
    if (name == n.name) return n.type;
  }
  throw Error("unknown dtype '" + name + "' (valid: " + DtypeNames() + ")");
}

std::string DtypeName(at::ScalarType type) {
  for (const auto& n : kNames) {
    if (type == n.type) return n.name;
  }
  throw Error(std::string("dtype ") + c10::toString(type) + " has no vtrun name");
}

}  // namespace vt
