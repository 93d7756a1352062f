#include "runtime/data/idx.h"

#include <ATen/ATen.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "runtime/common/error.h"

namespace vt::data {

std::string ReadFileBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot open '" + path + "': " + std::strerror(errno));
  std::ostringstream buffer;
  buffer << f.rdbuf();
  return buffer.str();
}

std::string MaybeGunzip(const std::string& bytes, const std::string& what) {
  if (bytes.size() < 2 || uint8_t(bytes[0]) != 0x1f || uint8_t(bytes[1]) != 0x8b) return bytes;
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) throw Error(what + ": zlib init failed");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  zs.avail_in = static_cast<uInt>(bytes.size());
  std::string out;
  char chunk[1 << 16];
  int status = Z_OK;
  while (status == Z_OK) {
    zs.next_out = reinterpret_cast<Bytef*>(chunk);
    zs.avail_out = sizeof chunk;
    status = inflate(&zs, Z_NO_FLUSH);
    if (status != Z_OK && status != Z_STREAM_END) {
      inflateEnd(&zs);
      throw Error(what + ": corrupt gzip data (" + (zs.msg ? zs.msg : "truncated") + ")");
    }
    out.append(chunk, sizeof chunk - zs.avail_out);
    if (status == Z_OK && zs.avail_in == 0 && zs.avail_out != 0) {
      inflateEnd(&zs);
      throw Error(what + ": truncated gzip data");
    }
  }
  inflateEnd(&zs);
  return out;
}

at::Tensor ReadIdx(const std::string& path) {
  const std::string what = "'" + path + "'";
  std::string bytes = MaybeGunzip(ReadFileBytes(path), what);
  if (bytes.size() < 4 || bytes[0] != 0 || bytes[1] != 0) throw Error(what + ": not an IDX file");
  const uint8_t type = static_cast<uint8_t>(bytes[2]);
  const int ndim = static_cast<uint8_t>(bytes[3]);
  if (type != 0x08) {
    throw Error(what + ": IDX element type 0x" + std::to_string(type) +
                " is not supported (only unsigned bytes, 0x08)");
  }
  if (ndim < 1 || ndim > 4 || bytes.size() < 4 + 4 * size_t(ndim))
    throw Error(what + ": bad IDX header");
  std::vector<int64_t> shape;
  size_t count = 1;
  for (int d = 0; d < ndim; ++d) {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(bytes.data()) + 4 + 4 * d;
    int64_t size = (int64_t(p[0]) << 24) | (p[1] << 16) | (p[2] << 8) | p[3];
    shape.push_back(size);
    count *= static_cast<size_t>(size);
  }
  const size_t offset = 4 + 4 * size_t(ndim);
  if (bytes.size() - offset != count) {
    throw Error(what + ": IDX body has " + std::to_string(bytes.size() - offset) +
                " bytes, header says " + std::to_string(count));
  }
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(at::kByte));
  std::memcpy(t.data_ptr(), bytes.data() + offset, count);
  return t;
}

}  // namespace vt::data
