#include "store/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace vt::store {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // CRC-32C, reflected

// Slicing-by-8 tables: kTables[0] is the byte-at-a-time table, kTables[k][b] advances the
// CRC of byte b followed by k zero bytes.
struct Tables {
  std::array<std::array<uint32_t, 256>, 8> t;
  Tables() {
    for (uint32_t b = 0; b < 256; ++b) {
      uint32_t c = b;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
      t[0][b] = c;
    }
    for (uint32_t b = 0; b < 256; ++b) {
      for (int k = 1; k < 8; ++k) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFF];
    }
  }
};

const Tables& GetTables() {
  static const Tables tables;
  return tables;
}

// Appending zero bytes to a message is a linear map on the 32-bit CRC register. ZeroShift
// holds it for a fixed number of zero bytes as four byte-indexed tables, so that the
// register of A || B is Shift(register of A) ^ (register of B started from 0): the hardware
// loop below runs three independent streams and joins them with it.
struct ZeroShift {
  std::array<std::array<uint32_t, 256>, 4> t;
  explicit ZeroShift(size_t zeros) {
    // The operator for one zero bit, as 32 columns (the image of each register bit).
    std::array<uint32_t, 32> op{}, sq{};
    op[0] = kPoly;
    for (int n = 1; n < 32; ++n) op[n] = 1u << (n - 1);
    auto apply = [](const std::array<uint32_t, 32>& m, uint32_t v) {
      uint32_t r = 0;
      for (int n = 0; v != 0; ++n, v >>= 1) {
        if (v & 1) r ^= m[n];
      }
      return r;
    };
    auto square = [&](const std::array<uint32_t, 32>& m) {
      std::array<uint32_t, 32> out{};
      for (int n = 0; n < 32; ++n) out[n] = apply(m, m[n]);
      return out;
    };
    // result = op^(8 * zeros), by squaring.
    std::array<uint32_t, 32> result{};
    for (int n = 0; n < 32; ++n) result[n] = 1u << n;
    std::array<uint32_t, 32> power = square(square(square(op)));  // one zero byte
    for (size_t k = zeros; k != 0; k >>= 1) {
      if (k & 1) {
        std::array<uint32_t, 32> next{};
        for (int n = 0; n < 32; ++n) next[n] = apply(power, result[n]);
        result = next;
      }
      sq = square(power);
      power = sq;
    }
    for (int byte = 0; byte < 4; ++byte) {
      for (uint32_t b = 0; b < 256; ++b) t[byte][b] = apply(result, b << (8 * byte));
    }
  }
  uint32_t operator()(uint32_t crc) const {
    return t[0][crc & 0xFF] ^ t[1][(crc >> 8) & 0xFF] ^ t[2][(crc >> 16) & 0xFF] ^ t[3][crc >> 24];
  }
};

constexpr size_t kLong = 8192;  // bytes per stream in the three-stream loop
constexpr size_t kShort = 256;

const ZeroShift& LongShift() {
  static const ZeroShift shift(kLong);
  return shift;
}
const ZeroShift& ShortShift() {
  static const ZeroShift shift(kShort);
  return shift;
}

#if defined(__x86_64__)
// Three independent CRC streams hide the 3-cycle latency of the crc32 instruction.
__attribute__((target("sse4.2"))) uint64_t ThreeStreams(uint64_t c, const uint8_t* p, size_t block,
                                                        const ZeroShift& shift) {
  uint64_t c1 = 0, c2 = 0;
  for (size_t i = 0; i < block; i += 8) {
    uint64_t w0, w1, w2;
    std::memcpy(&w0, p + i, 8);
    std::memcpy(&w1, p + block + i, 8);
    std::memcpy(&w2, p + 2 * block + i, 8);
    c = _mm_crc32_u64(c, w0);
    c1 = _mm_crc32_u64(c1, w1);
    c2 = _mm_crc32_u64(c2, w2);
  }
  c = shift(static_cast<uint32_t>(c)) ^ static_cast<uint32_t>(c1);
  return shift(static_cast<uint32_t>(c)) ^ static_cast<uint32_t>(c2);
}

__attribute__((target("sse4.2"))) uint32_t ExtendHardware(uint32_t crc, const uint8_t* p,
                                                          size_t n) {
  uint64_t c = ~crc;
  while (n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
    c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
    --n;
  }
  if (n >= 3 * kLong) {
    const ZeroShift& shift = LongShift();
    while (n >= 3 * kLong) {
      c = ThreeStreams(c, p, kLong, shift);
      p += 3 * kLong;
      n -= 3 * kLong;
    }
  }
  if (n >= 3 * kShort) {
    const ZeroShift& shift = ShortShift();
    while (n >= 3 * kShort) {
      c = ThreeStreams(c, p, kShort, shift);
      p += 3 * kShort;
      n -= 3 * kShort;
    }
  }
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = _mm_crc32_u64(c, word);
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
    --n;
  }
  return ~static_cast<uint32_t>(c);
}

bool DetectHardware() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("sse4.2");
}
#endif

}  // namespace

uint32_t Crc32cAppendBlock(uint32_t crc_a, uint32_t crc_block) {
  static const ZeroShift shift(kCrc32cBlock);
  return shift(crc_a) ^ crc_block;
}

uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t bytes) {
  const auto& t = GetTables().t;
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  while (bytes >= 8) {
    uint32_t lo;
    uint32_t hi;
    std::memcpy(&lo, p, 4);  // little-endian host assumed (x86-64, aarch64)
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;
    c = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^
        t[3][hi & 0xFF] ^ t[2][(hi >> 8) & 0xFF] ^ t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
    p += 8;
    bytes -= 8;
  }
  while (bytes > 0) {
    c = (c >> 8) ^ t[0][(c ^ *p++) & 0xFF];
    --bytes;
  }
  return ~c;
}

bool Crc32cHardware() {
#if defined(__x86_64__)
  static const bool hw = DetectHardware();
  return hw;
#else
  return false;
#endif
}

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t bytes) {
#if defined(__x86_64__)
  if (Crc32cHardware()) return ExtendHardware(crc, static_cast<const uint8_t*>(data), bytes);
#endif
  return Crc32cExtendPortable(crc, data, bytes);
}

}  // namespace vt::store
