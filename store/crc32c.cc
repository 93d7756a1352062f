#include "store/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
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

// The crc32 instruction 8 bytes at a time, then byte by byte; `c` is the raw register.
__attribute__((target("sse4.2"))) inline uint64_t HardwareTail(uint64_t c, const uint8_t* p,
                                                               size_t n) {
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
  return c;
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
  return ~static_cast<uint32_t>(HardwareTail(c, p, n));
}

// Folding with carry-less multiplication. Bits here are reflected like the CRC's: byte 0,
// bit 0 of the message is its highest power of x. A 128-bit lane loaded from 16 message
// bytes holds the polynomial H x^64 + L, H its first 8 bytes (the low quadword) and L its
// last 8. The CRC of a message depends only on its polynomial modulo P, so a lane may be
// replaced by anything congruent to it; moving a lane `bits` further down the message (to
// add it to the data there) multiplies it by x^bits, and
//   H x^(64 + bits) + L x^bits == H (x^(64 + bits) mod P) + L (x^bits mod P)  (mod P),
// two products of a 64-bit and a 32-bit polynomial that fit in 128 bits again. A run of
// data is so folded into a few lanes, the lanes into one, and the crc32 instruction over
// that lane's 16 bytes from a zero register gives the CRC register of the whole run.

// x^k mod P, reflected (bit 31 - i holds the coefficient of x^i): 1 multiplied by x k times.
constexpr uint32_t XPowModP(unsigned k) {
  uint32_t r = 0x80000000u;
  for (unsigned i = 0; i < k; ++i) r = (r & 1) ? (r >> 1) ^ kPoly : r >> 1;
  return r;
}
static_assert(XPowModP(31) == 1u && XPowModP(32) == kPoly, "x^31 and x^32 mod P");

// The multipliers that move a lane `bits` further, for its low and its high quadword.
// PCLMULQDQ of two reflected 64-bit operands gives their reflected 128-bit product times x,
// and a reflected 32-bit multiplier in the low half of a 64-bit operand stands for itself
// times x^32: hence x^(64 + bits - 33) and x^(bits - 33). Computed at compile time, not
// copied from elsewhere; the tests check every path against the table implementation.
struct Fold {
  uint64_t low, high;
};
constexpr Fold FoldBy(unsigned bits) { return {XPowModP(bits + 31), XPowModP(bits - 33)}; }

__attribute__((target("pclmul,sse4.2"))) inline __m128i Multipliers(Fold f) {
  return _mm_set_epi64x(static_cast<long long>(f.high), static_cast<long long>(f.low));
}

// Lane `x` moved by the distance of the multipliers `k`, plus `data` there.
__attribute__((target("pclmul,sse4.2"))) inline __m128i FoldInto(__m128i x, __m128i k,
                                                                 __m128i data) {
  return _mm_xor_si128(
      _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11)), data);
}

__attribute__((target("pclmul,sse4.2"))) inline __m128i Load128(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

// The CRC register (from zero) of 16 bytes congruent to lane `x`.
__attribute__((target("pclmul,sse4.2"))) inline uint64_t LaneRegister(__m128i x) {
  uint64_t c = _mm_crc32_u64(0, static_cast<uint64_t>(_mm_cvtsi128_si64(x)));
  return _mm_crc32_u64(c, static_cast<uint64_t>(_mm_extract_epi64(x, 1)));
}

// The AVX-512 path: four 512-bit registers of four lanes each, 256 bytes a round, outrun the
// crc32 instruction by far (57 GB/s against 28 on this project's AMD EPYC, in cache).
// Shorter inputs take the crc32 instruction. Folding in 128-bit registers (PCLMULQDQ without
// AVX-512) measured 14.6 GB/s there, half the three crc32 streams, and is not used.
constexpr size_t kFoldMin = 256;

#define VT_CRC_AVX512 "avx512f,avx512bw,avx512vl,vpclmulqdq,pclmul,sse4.2"

__attribute__((target(VT_CRC_AVX512))) inline __m512i FoldInto(__m512i z, __m512i k, __m512i data) {
  // 0x96: the three-way exclusive or.
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(z, k, 0x00),
                                   _mm512_clmulepi64_epi128(z, k, 0x11), data, 0x96);
}

// The multipliers in all four lanes.
__attribute__((target(VT_CRC_AVX512))) inline __m512i Multipliers512(Fold f) {
  const auto low = static_cast<long long>(f.low), high = static_cast<long long>(f.high);
  return _mm512_set_epi64(high, low, high, low, high, low, high, low);
}

__attribute__((target(VT_CRC_AVX512))) inline __m512i Load512(const uint8_t* p) {
  return _mm512_loadu_si512(p);
}

__attribute__((target(VT_CRC_AVX512))) uint32_t ExtendVpclmul(uint32_t crc, const uint8_t* p,
                                                              size_t n) {
  if (n < kFoldMin) return ExtendHardware(crc, p, n);
  // The register so far, added to the first 32 bits of the data, carries it into the fold.
  const __m128i reg = _mm_cvtsi32_si128(static_cast<int>(~crc));
  __m512i z0 = _mm512_xor_si512(Load512(p), _mm512_zextsi128_si512(reg));
  __m512i z1 = Load512(p + 64);
  __m512i z2 = Load512(p + 128);
  __m512i z3 = Load512(p + 192);
  p += 256;
  n -= 256;
  const __m512i k256 = Multipliers512(FoldBy(2048));
  while (n >= 256) {
    z0 = FoldInto(z0, k256, Load512(p));
    z1 = FoldInto(z1, k256, Load512(p + 64));
    z2 = FoldInto(z2, k256, Load512(p + 128));
    z3 = FoldInto(z3, k256, Load512(p + 192));
    p += 256;
    n -= 256;
  }
  // z0 lies 192 bytes before z3, z1 128 and z2 64.
  const __m512i k64 = Multipliers512(FoldBy(512));
  __m512i z = FoldInto(z2, k64, z3);
  z = FoldInto(z1, Multipliers512(FoldBy(1024)), z);
  z = FoldInto(z0, Multipliers512(FoldBy(1536)), z);
  while (n >= 64) {
    z = FoldInto(z, k64, Load512(p));
    p += 64;
    n -= 64;
  }
  // The four lanes of z into its last: lanes 0, 1 and 2 move by 48, 32 and 16 bytes; the
  // zero multipliers of lane 3 clear it, and the blend puts the lane itself back.
  constexpr Fold f48 = FoldBy(384), f32 = FoldBy(256), f16 = FoldBy(128);
  const __m512i lanes =
      _mm512_set_epi64(0, 0, static_cast<long long>(f16.high), static_cast<long long>(f16.low),
                       static_cast<long long>(f32.high), static_cast<long long>(f32.low),
                       static_cast<long long>(f48.high), static_cast<long long>(f48.low));
  __m512i t = _mm512_xor_si512(_mm512_clmulepi64_epi128(z, lanes, 0x00),
                               _mm512_clmulepi64_epi128(z, lanes, 0x11));
  t = _mm512_mask_blend_epi64(0xC0, t, z);
  // (The zero-masking extracts keep GCC 12 from warning about its own headers.)
  __m256i y = _mm256_xor_si256(_mm512_maskz_extracti64x4_epi64(0xF, t, 0),
                               _mm512_maskz_extracti64x4_epi64(0xF, t, 1));
  __m128i x = _mm_xor_si128(_mm256_castsi256_si128(y), _mm256_extracti128_si256(y, 1));
  const __m128i k16 = Multipliers(FoldBy(128));
  while (n >= 16) {
    x = FoldInto(x, k16, Load128(p));
    p += 16;
    n -= 16;
  }
  return ~static_cast<uint32_t>(HardwareTail(LaneRegister(x), p, n));
}

#undef VT_CRC_AVX512
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

namespace {

// The fastest path this CPU supports. Each needs the ones before it (the folding paths end
// with the crc32 instruction), so a path is supported when it is no later than this one.
Crc32cPath DetectPath() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("sse4.2")) return Crc32cPath::kTable;
  // avx512f is also reported only where the OS saves the 512-bit registers.
  if (__builtin_cpu_supports("pclmul") && __builtin_cpu_supports("vpclmulqdq") &&
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl")) {
    return Crc32cPath::kVpclmulAvx512;
  }
  return Crc32cPath::kSse42;
#else
  return Crc32cPath::kTable;
#endif
}

}  // namespace

const char* Crc32cPathName(Crc32cPath path) {
  switch (path) {
    case Crc32cPath::kTable:
      return "table";
    case Crc32cPath::kSse42:
      return "sse4.2";
    case Crc32cPath::kVpclmulAvx512:
      return "vpclmulqdq-avx512";
  }
  return "unknown";
}

Crc32cPath Crc32cActivePath() {
  static const Crc32cPath path = DetectPath();
  return path;
}

bool Crc32cPathSupported(Crc32cPath path) {
  return static_cast<int>(path) <= static_cast<int>(Crc32cActivePath());
}

namespace {

// `path` must be supported.
uint32_t ExtendOn(Crc32cPath path, uint32_t crc, const void* data, size_t bytes) {
#if defined(__x86_64__)
  const uint8_t* p = static_cast<const uint8_t*>(data);
  switch (path) {
    case Crc32cPath::kTable:
      break;
    case Crc32cPath::kSse42:
      return ExtendHardware(crc, p, bytes);
    case Crc32cPath::kVpclmulAvx512:
      return ExtendVpclmul(crc, p, bytes);
  }
#endif
  return Crc32cExtendPortable(crc, data, bytes);
}

}  // namespace

uint32_t Crc32cExtendWith(Crc32cPath path, uint32_t crc, const void* data, size_t bytes) {
  return ExtendOn(Crc32cPathSupported(path) ? path : Crc32cPath::kTable, crc, data, bytes);
}

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t bytes) {
  return ExtendOn(Crc32cActivePath(), crc, data, bytes);
}

}  // namespace vt::store
