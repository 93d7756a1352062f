// IDX files (the MNIST family's format), optionally gzip-compressed: a big-endian header
// (magic 0x0000 <type> <ndim>, then ndim uint32 sizes) followed by the values.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace vt::data {

// Reads an IDX file of unsigned bytes (type 0x08) into a uint8 tensor of its shape. Gzip is
// detected by its magic. Throws vt::Error naming the file on a bad magic, an unsupported
// type, a truncated body or trailing bytes.
at::Tensor ReadIdx(const std::string& path);

// Decompresses gzip data (or returns non-gzip data unchanged). `what` names the source in
// errors.
std::string MaybeGunzip(const std::string& bytes, const std::string& what);

// The whole file as bytes; throws vt::Error naming the path.
std::string ReadFileBytes(const std::string& path);

}  // namespace vt::data
