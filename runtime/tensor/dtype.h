// The dtype names used across vtrun's Lua surface and file formats.
#pragma once

#include <c10/core/ScalarType.h>

#include <string>

namespace vt {

// "float32" -> kFloat, "float64" -> kDouble, "int64" -> kLong, "uint8" -> kByte, "bool" -> kBool,
// and "float16", "int8", "int16", "int32". Throws vt::Error listing the valid names otherwise.
at::ScalarType DtypeFromName(const std::string& name);

// The inverse of DtypeFromName; throws vt::Error for a type without a vtrun name.
std::string DtypeName(at::ScalarType type);

// The valid names, comma-separated, for error messages.
std::string DtypeNames();

}  // namespace vt
