// vt.zstd: zstd compression of byte strings, for measuring log sizes after compression (the
// store compresses its log family with zstd inside RocksDB; experiments compare encodings).
#include <zstd.h>

#include <string>

#include "bindings/lua_support.h"
#include "bindings/module.h"

namespace vt::lua {
namespace {

// vt.zstd.compress(bytes [, level=3]) -> compressed bytes
int Compress(lua_State* L) {
  size_t len = 0;
  const char* src = CheckStringArg(L, 1, &len);
  const int64_t level = lua_isnoneornil(L, 2) ? 3 : CheckInteger(L, 2);
  if (level < 1 || level > ZSTD_maxCLevel())
    ArgError(L, 2, "level must be in [1, " + std::to_string(ZSTD_maxCLevel()) + "]");
  std::string out(ZSTD_compressBound(len), '\0');
  const size_t n = ZSTD_compress(out.data(), out.size(), src, len, static_cast<int>(level));
  if (ZSTD_isError(n)) Fail(L, "vt.zstd.compress", ZSTD_getErrorName(n));
  lua_pushlstring(L, out.data(), n);
  return 1;
}

// vt.zstd.decompress(bytes) -> the original bytes (frames that record their size)
int Decompress(lua_State* L) {
  size_t len = 0;
  const char* src = CheckStringArg(L, 1, &len);
  const unsigned long long size = ZSTD_getFrameContentSize(src, len);
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN || size > (1ull << 32)) {
    Fail(L, "vt.zstd.decompress", "not a zstd frame with a known size of at most 4 GiB");
  }
  // The declared size is only a claim: allocate no more than the frame can produce. Every
  // block has a 3-byte header and yields at most 128 KiB (ZSTD_BLOCKSIZE_MAX) from at least
  // one byte of content, so `len` bytes decompress to at most len / 4 * 128 KiB.
  const unsigned long long most = static_cast<unsigned long long>(len) / 4 * ZSTD_BLOCKSIZE_MAX;
  if (size > most) {
    Fail(L, "vt.zstd.decompress",
         "the frame declares " + std::to_string(size) + " bytes of content, more than its " +
             std::to_string(len) + " bytes can hold (at most " + std::to_string(most) + ")");
  }
  std::string out(static_cast<size_t>(size), '\0');
  const size_t n = ZSTD_decompress(out.data(), out.size(), src, len);
  if (ZSTD_isError(n)) Fail(L, "vt.zstd.decompress", ZSTD_getErrorName(n));
  lua_pushlstring(L, out.data(), n);
  return 1;
}

}  // namespace

void OpenCompress(lua_State* L) {
  const luaL_Reg funcs[] = {{"compress", Compress}, {"decompress", Decompress}, {nullptr, nullptr}};
  lua_newtable(L);
  SetFuncs(L, funcs);
  lua_setfield(L, -2, "zstd");
}

}  // namespace vt::lua
