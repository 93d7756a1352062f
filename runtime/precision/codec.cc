#include "runtime/precision/codec.h"

#include <array>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "runtime/common/error.h"
#include "runtime/precision/kernels.h"

namespace vt::precision {
namespace {

constexpr char kMagic[4] = {'V', 'T', 'L', 'G'};
constexpr int64_t kFixedHeaderBytes = 6;  // magic, version, encoding
constexpr int kMaxVarintBytes = 10;       // a 64-bit LEB128 value

// Our states (0 none, 1 down, 2 up, 3 exact) as the paper's dense symbols (0 down, 1 none,
// 2 up). EXACT positions are written as "none"; the side list marks them.
constexpr uint8_t kDenseSymbol[4] = {1, 0, 2, 1};
// The paper's symbols back to our states.
constexpr uint8_t kSymbolState[3] = {1, 0, 2};

struct DenseTables {
  std::array<std::array<uint8_t, 5>, 243> states;  // per byte: the 5 states
  std::array<uint8_t, 243> down;                   // per byte: how many are DOWN
  std::array<uint8_t, 243> up;                     // per byte: how many are UP
  std::array<uint8_t, 6 * 243> pad_ok;             // [filled * 243 + byte]: padding is NONE
  // Per byte, for the vector decoder's gathers: the 5 states in bytes 0-4, the DOWN count in
  // byte 5, the UP count in byte 6.
  std::array<uint64_t, 243> packed;
};

const DenseTables& Tables() {
  static const DenseTables tables = [] {
    DenseTables t{};
    for (int b = 0; b < 243; ++b) {
      int v = b;
      int digits[5];
      for (int i = 0; i < 5; ++i) {
        digits[i] = v % 3;
        v /= 3;
        t.states[b][i] = kSymbolState[digits[i]];
        t.down[b] += digits[i] == 0;
        t.up[b] += digits[i] == 2;
      }
      uint64_t packed = 0;
      for (int i = 0; i < 5; ++i) packed |= uint64_t{t.states[b][i]} << (8 * i);
      t.packed[b] = packed | uint64_t{t.down[b]} << 40 | uint64_t{t.up[b]} << 48;
      for (int filled = 0; filled <= 5; ++filled) {
        bool ok = true;
        for (int i = filled; i < 5; ++i) ok = ok && digits[i] == 1;
        t.pad_ok[filled * 243 + b] = ok;
      }
    }
    return t;
  }();
  return tables;
}

int VarintSize(uint64_t v) {
  int n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

uint8_t* PutVarint(uint8_t* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<uint8_t>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<uint8_t>(v);
  return p;
}

// Calls body(i) for every i in [0, n) in increasing order, except inside 8-byte runs of
// NONE states (which hold no DOWN/UP entry): sparse records are scanned at memory speed.
template <class Body>
void ForEachCandidate(const uint8_t* s, int64_t n, Body&& body) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t word;
    std::memcpy(&word, s + i, sizeof word);
    if (word == 0) continue;
    for (int64_t j = i; j < i + 8; ++j) body(j);
  }
  for (; i < n; ++i) body(i);
}

// 1 for DOWN (1) and UP (2), 0 for NONE (0) and EXACT (3); no branch.
inline int64_t IsDirectional(uint8_t v) { return static_cast<uint8_t>(v - 1) < 2; }

// VarintSize without branches: ceil(bit width / 7), at least 1.
inline int64_t VarintSizeFlat(uint64_t v) {
  const int64_t width = 64 - __builtin_clzll(v | 1);
  return (width + 6) / 7;
}

int64_t HeaderSize(const LogRecord& r) {
  const StateCounts& c = r.counts();
  return kFixedHeaderBytes + VarintSize(static_cast<uint64_t>(r.size())) +
         VarintSize(static_cast<uint64_t>(c.down)) + VarintSize(static_cast<uint64_t>(c.up)) +
         VarintSize(static_cast<uint64_t>(c.exact));
}

int64_t DensePayloadSize(const LogRecord& r) { return (r.size() + 4) / 5; }

int64_t SparsePayloadSize(const LogRecord& r) {
  const int64_t m = r.counts().down + r.counts().up;
  const uint8_t* s = r.states();
  int64_t bytes = (m + 7) / 8;
  int64_t prev = -1;
  if (m == 0) return 0;
  // Branch-free per element: in paper mode half the elements are entries, at random.
  ForEachCandidate(s, r.size(), [&](int64_t i) {
    const int64_t e = IsDirectional(s[i]);
    bytes += e * VarintSizeFlat(static_cast<uint64_t>(i - prev - 1));
    prev += (i - prev) & -e;
  });
  return bytes;
}

int64_t ExactListSize(const LogRecord& r) {
  int64_t bytes = 0;
  int64_t prev = -1;
  for (const ExactEntry& e : r.exact()) {
    bytes += VarintSize(static_cast<uint64_t>(e.position - prev - 1)) + 4;
    prev = e.position;
  }
  return bytes;
}

// Dense first if its payload is no larger; the sparse size needs a pass over the states,
// skipped when even one byte per entry would not beat dense.
LogEncoding Choose(const LogRecord& r, int64_t* payload_bytes) {
  const int64_t dense = DensePayloadSize(r);
  const int64_t m = r.counts().down + r.counts().up;
  if (m + (m + 7) / 8 >= dense) {
    *payload_bytes = dense;
    return LogEncoding::kDense;
  }
  const int64_t sparse = SparsePayloadSize(r);
  if (sparse < dense) {
    *payload_bytes = sparse;
    return LogEncoding::kSparse;
  }
  *payload_bytes = dense;
  return LogEncoding::kDense;
}

// The byte of five states s[0..4] (the low five bytes of `word`, little-endian): each state's
// symbol 1 - down + up is formed bytewise (a state's bits 0 and 1 are DOWN and UP; both set is
// EXACT, written as NONE), then one multiply by 81 + 27 * 2^8 + 9 * 2^16 + 3 * 2^24 + 2^32
// gathers sum_i 3^i sym_i into byte 4. No byte of the product carries into the next: the
// largest, byte 4, is at most 2 * 121 = 242.
inline uint8_t DenseByte(uint64_t word) {
  constexpr uint64_t kOnes = 0x0101010101ull;
  constexpr uint64_t kWeights = 81ull | 27ull << 8 | 9ull << 16 | 3ull << 24 | 1ull << 32;
  const uint64_t bit0 = word & kOnes;
  const uint64_t bit1 = (word >> 1) & kOnes;
  const uint64_t symbols = kOnes - (bit0 & ~bit1) + (bit1 & ~bit0);
  return static_cast<uint8_t>((symbols * kWeights) >> 32);
}

#if defined(__x86_64__)
// GCC 12 warns about the undefined upper lanes some intrinsics start from (clang has no
// -Wmaybe-uninitialized and does not warn).
#pragma GCC diagnostic push
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#define VT_CODEC_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))

// DenseByte for 8 groups (40 states at s, 46 bytes readable) in 64-bit lanes: each 128-bit
// lane takes two groups from a 16-byte load and a shuffle puts each group's 5 states in the
// low bytes of its own 64-bit lane; the 8 bytes go to p.
VT_CODEC_AVX512 inline void DenseBytes8(const uint8_t* s, uint8_t* p) {
  __m512i w = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s)));
  w = _mm512_inserti32x4(w, _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 10)), 1);
  w = _mm512_inserti32x4(w, _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 20)), 2);
  w = _mm512_inserti32x4(w, _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 30)), 3);
  const __m512i spread =
      _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 2, 3, 4, -1, -1, -1, 5, 6, 7, 8, 9, -1, -1, -1));
  w = _mm512_shuffle_epi8(w, spread);
  const __m512i ones = _mm512_set1_epi64(0x0101010101ll);
  const __m512i bit0 = _mm512_and_si512(w, ones);
  const __m512i bit1 = _mm512_and_si512(_mm512_srli_epi64(w, 1), ones);
  const __m512i symbols = _mm512_add_epi64(_mm512_sub_epi64(ones, _mm512_andnot_si512(bit1, bit0)),
                                           _mm512_andnot_si512(bit0, bit1));
  const __m512i weights = _mm512_set1_epi64(81ll | 27ll << 8 | 9ll << 16 | 3ll << 24 | 1ll << 32);
  const __m512i bytes = _mm512_srli_epi64(_mm512_mullo_epi64(symbols, weights), 32);
  _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm512_cvtepi64_epi8(bytes));
}

// The first groups of 8 WriteDense would write, as DenseByte does; returns how many groups.
VT_CODEC_AVX512 int64_t WriteDenseAvx512(const uint8_t* s, int64_t n, uint8_t* p) {
  int64_t j = 0;
  for (; 5 * j + 46 <= n; j += 8) DenseBytes8(s + 5 * j, p + j);
  return j;
}

// DecodeDense for groups of 8 bytes: one gather of DenseTables::packed per 8 bytes, the
// states compacted by a shuffle into 10 bytes per 128-bit lane, counts summed per lane. Each
// lane is stored whole (16 bytes), the next one overwriting its 6 spare bytes, so a group
// needs 46 states of room. Stops before a byte >= 243 (the caller reports it); returns how
// many bytes it decoded.
VT_CODEC_AVX512 int64_t DecodeDenseAvx512(const uint8_t* p, int64_t full, const uint64_t* packed,
                                          uint8_t* s, int64_t n, int64_t* down, int64_t* up) {
  const __m512i compact = _mm512_broadcast_i32x4(
      _mm_setr_epi8(0, 1, 2, 3, 4, 8, 9, 10, 11, 12, -1, -1, -1, -1, -1, -1));
  const __m512i limit = _mm512_set1_epi64(242);
  const __m512i byte = _mm512_set1_epi64(0xff);
  __m512i downs = _mm512_setzero_si512(), ups = _mm512_setzero_si512();
  int64_t j = 0;
  for (; j + 8 <= full && 5 * j + 46 <= n; j += 8) {
    const __m512i b =
        _mm512_cvtepu8_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + j)));
    if (_mm512_cmpgt_epu64_mask(b, limit) != 0) break;
    const __m512i e = _mm512_i64gather_epi64(b, reinterpret_cast<const long long*>(packed), 8);
    downs = _mm512_add_epi64(downs, _mm512_and_si512(_mm512_srli_epi64(e, 40), byte));
    ups = _mm512_add_epi64(ups, _mm512_srli_epi64(e, 48));
    const __m512i st = _mm512_shuffle_epi8(e, compact);
    uint8_t* out = s + 5 * j;
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm512_castsi512_si128(st));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 10), _mm512_extracti32x4_epi32(st, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 20), _mm512_extracti32x4_epi32(st, 2));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 30), _mm512_extracti32x4_epi32(st, 3));
  }
  alignas(64) int64_t lanes[8];
  _mm512_store_si512(lanes, downs);
  for (int64_t lane : lanes) *down += lane;
  _mm512_store_si512(lanes, ups);
  for (int64_t lane : lanes) *up += lane;
  return j;
}
#undef VT_CODEC_AVX512
#pragma GCC diagnostic pop
#endif

bool UseAvx512Codec() {
#if defined(__x86_64__)
  return ActiveKernelIsa() == KernelIsa::kAvx512;
#else
  return false;
#endif
}

uint8_t* WriteDense(const LogRecord& r, uint8_t* p) {
  const uint8_t* s = r.states();
  const int64_t n = r.size();
  const int64_t full = n / 5;
  // Eight-byte loads while they stay inside the states, the table for the last groups.
  const int64_t wide = n >= 8 ? (n - 8) / 5 + 1 : 0;
  int64_t j = 0;
#if defined(__x86_64__)
  if (UseAvx512Codec()) j = WriteDenseAvx512(s, n, p);
#endif
  for (; j < wide; ++j) {
    uint64_t word;
    std::memcpy(&word, s + 5 * j, sizeof(word));
    p[j] = DenseByte(word);
  }
  for (int64_t j = wide; j < full; ++j) {
    const uint8_t* g = s + 5 * j;
    p[j] =
        static_cast<uint8_t>(kDenseSymbol[g[0]] + 3 * kDenseSymbol[g[1]] + 9 * kDenseSymbol[g[2]] +
                             27 * kDenseSymbol[g[3]] + 81 * kDenseSymbol[g[4]]);
  }
  p += full;
  const int64_t rest = n - 5 * full;
  if (rest > 0) {
    int value = 0;
    int weight = 1;
    for (int i = 0; i < 5; ++i) {
      // Padding after the last element is the NONE symbol (1).
      value += weight * (i < rest ? kDenseSymbol[s[5 * full + i]] : 1);
      weight *= 3;
    }
    *p++ = static_cast<uint8_t>(value);
  }
  return p;
}

// Writes the sparse payload of `payload_bytes` bytes (from SparsePayloadSize) at p.
uint8_t* WriteSparse(const LogRecord& r, uint8_t* p, int64_t payload_bytes) {
  const int64_t m = r.counts().down + r.counts().up;
  if (m == 0) return p;
  const uint8_t* s = r.states();
  uint8_t* bits = p + payload_bytes - (m + 7) / 8;  // the direction bits follow the gaps
  uint8_t* const end = p + payload_bytes;
  uint8_t scratch = 0;  // where non-entries write their (ignored) gap byte
  uint64_t acc = 0;     // pending direction bits
  int nbits = 0;
  int64_t prev = -1;
  ForEachCandidate(s, r.size(), [&](int64_t i) {
    const uint8_t v = s[i];
    const int64_t e = IsDirectional(v);
    const uint64_t gap = static_cast<uint64_t>(i - prev - 1);
    if ((e & (gap >= 0x80)) != 0) {  // rare: a multi-byte gap
      p = PutVarint(p, gap);
    } else {
      uint8_t* dst = e != 0 ? p : &scratch;
      *dst = static_cast<uint8_t>(gap);
      p += e;
    }
    acc |= static_cast<uint64_t>(v == 2) << nbits;
    nbits += static_cast<int>(e);
    if (nbits == 64) {
      for (int k = 0; k < 8; ++k) *bits++ = static_cast<uint8_t>(acc >> (8 * k));
      acc = 0;
      nbits = 0;
    }
    prev += (i - prev) & -e;
  });
  for (int k = 0; k < (nbits + 7) / 8; ++k) *bits++ = static_cast<uint8_t>(acc >> (8 * k));
  if (bits != end || p != end - (m + 7) / 8) {
    throw Error("internal error: sparse payload size mismatch");
  }
  return end;
}

[[noreturn]] void Invalid(const std::string& what) { throw Error("invalid log record: " + what); }

// A bounds-checked reader over the record's bytes.
class Reader {
 public:
  // `base`: the offset of `begin` in the whole record, for error messages.
  Reader(const uint8_t* begin, const uint8_t* end, int64_t base = 0)
      : begin_(begin), p_(begin), end_(end), base_(base) {}

  int64_t offset() const { return base_ + (p_ - begin_); }
  int64_t remaining() const { return end_ - p_; }
  const uint8_t* pos() const { return p_; }
  void Skip(int64_t n) { p_ += n; }

  uint8_t Byte(const char* what) {
    if (p_ == end_)
      Invalid(std::string("truncated: ") + what + " at byte " + std::to_string(offset()) +
              " is missing");
    return *p_++;
  }

  // `name()` describes the field for an error message; it is only called on an error.
  template <class Name>
  uint32_t U32(const Name& name) {
    if (remaining() < 4) {
      Invalid("truncated: " + std::string(name()) + " at byte " + std::to_string(offset()) +
              " needs 4 bytes, " + std::to_string(remaining()) + " remain");
    }
    const uint32_t v =
        uint32_t{p_[0]} | uint32_t{p_[1]} << 8 | uint32_t{p_[2]} << 16 | uint32_t{p_[3]} << 24;
    p_ += 4;
    return v;
  }

  // An unsigned LEB128 value: at most 10 bytes, no bits beyond 64, minimal length.
  template <class Name>
  uint64_t Varint(const Name& name) {
    if (p_ != end_ && *p_ < 0x80) return *p_++;  // the common one-byte case
    return SlowVarint(std::string(name()));
  }

 private:
  uint64_t SlowVarint(const std::string& what) {
    const int64_t start = offset();
    uint64_t value = 0;
    for (int i = 0; i < kMaxVarintBytes; ++i) {
      if (p_ == end_) {
        Invalid("truncated: varint for " + what + " at byte " + std::to_string(start) +
                " ends after " + std::to_string(i) + " bytes");
      }
      const uint8_t b = *p_++;
      if (i == kMaxVarintBytes - 1 && b > 1) {  // a 10th byte may only hold bit 63
        Invalid("varint for " + what + " at byte " + std::to_string(start) +
                " is longer than 10 bytes or overflows 64 bits");
      }
      value |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
      if ((b & 0x80) == 0) {
        if (b == 0 && i > 0) {
          Invalid("varint for " + what + " at byte " + std::to_string(start) +
                  " is not minimal (trailing zero group)");
        }
        return value;
      }
    }
    Invalid("varint for " + what + " at byte " + std::to_string(start) +
            " is longer than 10 bytes or overflows 64 bits");  // not reached
  }

  const uint8_t* begin_;
  const uint8_t* p_;
  const uint8_t* end_;
  int64_t base_;
};

LogHeader ReadHeader(Reader& in, const DecodeLimits& limits) {
  LogHeader h;
  if (in.remaining() < kFixedHeaderBytes) {
    Invalid("truncated: " + std::to_string(in.remaining()) +
            " bytes, a record starts with at least 6 (magic, version, encoding)");
  }
  for (int i = 0; i < 4; ++i) {
    if (in.Byte("magic") != static_cast<uint8_t>(kMagic[i])) {
      Invalid("bad magic (expected the bytes 'VTLG')");
    }
  }
  h.version = in.Byte("version");
  if (h.version != kLogFormatVersion) {
    Invalid("unsupported format version " + std::to_string(h.version) + " (this build reads " +
            std::to_string(kLogFormatVersion) + ")");
  }
  const uint8_t encoding = in.Byte("encoding");
  if (encoding != static_cast<uint8_t>(LogEncoding::kDense) &&
      encoding != static_cast<uint8_t>(LogEncoding::kSparse)) {
    Invalid("unknown encoding " + std::to_string(encoding) + " (0 dense, 1 sparse)");
  }
  h.encoding = static_cast<LogEncoding>(encoding);
  const uint64_t n = in.Varint([] { return "the element count"; });
  const uint64_t down = in.Varint([] { return "the DOWN count"; });
  const uint64_t up = in.Varint([] { return "the UP count"; });
  const uint64_t exact = in.Varint([] { return "the EXACT count"; });
  const uint64_t max_elements = static_cast<uint64_t>(
      limits.max_elements < kMaxLogElements ? limits.max_elements : kMaxLogElements);
  if (n > max_elements) {
    Invalid("element count " + std::to_string(n) + " exceeds the limit " +
            std::to_string(max_elements));
  }
  // Each count <= n <= 2^32, so the sum cannot overflow.
  if (down > n || up > n || exact > n || down + up + exact > n) {
    Invalid("counts DOWN " + std::to_string(down) + " + UP " + std::to_string(up) + " + EXACT " +
            std::to_string(exact) + " exceed the element count " + std::to_string(n));
  }
  h.elements = static_cast<int64_t>(n);
  h.counts.down = static_cast<int64_t>(down);
  h.counts.up = static_cast<int64_t>(up);
  h.counts.exact = static_cast<int64_t>(exact);
  h.counts.none = h.elements - h.counts.down - h.counts.up - h.counts.exact;
  h.header_bytes = in.offset();
  return h;
}

void DecodeDense(Reader& in, const LogHeader& h, uint8_t* s) {
  const DenseTables& t = Tables();
  const int64_t n = h.elements;
  const int64_t bytes = (n + 4) / 5;
  const uint8_t* p = in.pos();
  int64_t down = 0, up = 0;
  const int64_t full = n / 5;
  int64_t j = 0;
#if defined(__x86_64__)
  if (UseAvx512Codec()) j = DecodeDenseAvx512(p, full, t.packed.data(), s, n, &down, &up);
#endif
  for (; j < full; ++j) {
    const uint8_t b = p[j];
    if (b >= 243) {
      Invalid("dense byte " + std::to_string(j) + " (at byte " + std::to_string(in.offset() + j) +
              ") is " + std::to_string(b) + ", must be < 243");
    }
    std::memcpy(s + 5 * j, t.states[b].data(), 5);
    down += t.down[b];
    up += t.up[b];
  }
  if (bytes > full) {
    const uint8_t b = p[full];
    const int64_t rest = n - 5 * full;
    if (b >= 243) {
      Invalid("dense byte " + std::to_string(full) + " (at byte " +
              std::to_string(in.offset() + full) + ") is " + std::to_string(b) + ", must be < 243");
    }
    if (!t.pad_ok[rest * 243 + b]) {
      Invalid("dense padding after the last element is not the NONE symbol (last byte " +
              std::to_string(b) + ")");
    }
    std::memcpy(s + 5 * full, t.states[b].data(), static_cast<size_t>(rest));
    down += t.down[b];
    up += t.up[b];
  }
  if (down != h.counts.down || up != h.counts.up) {
    Invalid("the header says DOWN " + std::to_string(h.counts.down) + ", UP " +
            std::to_string(h.counts.up) + " but the dense payload holds DOWN " +
            std::to_string(down) + ", UP " + std::to_string(up));
  }
  in.Skip(bytes);
}

void DecodeSparse(Reader& in, const LogHeader& h, uint8_t* s) {
  const int64_t n = h.elements;
  const int64_t m = h.counts.down + h.counts.up;
  // Find where the m gap varints end (a varint ends at a byte below 0x80), so that the
  // direction bits can be read alongside the gaps in one pass.
  const uint8_t* p = in.pos();
  const int64_t avail = in.remaining();
  int64_t gap_bytes = 0;
  for (int64_t ended = 0; ended < m; ++gap_bytes) {
    if (gap_bytes == avail) {
      Invalid("truncated: sparse gaps end after " + std::to_string(ended) + " of " +
              std::to_string(m) + " entries");
    }
    ended += p[gap_bytes] < 0x80;
  }
  const int64_t bit_bytes = (m + 7) / 8;
  if (avail - gap_bytes < bit_bytes) {
    Invalid("truncated: the sparse direction bits need " + std::to_string(bit_bytes) +
            " bytes at byte " + std::to_string(in.offset() + gap_bytes) + ", " +
            std::to_string(avail - gap_bytes) + " remain");
  }
  const uint8_t* bits = p + gap_bytes;
  Reader gaps(p, p + gap_bytes, in.offset());
  int64_t prev = -1;
  int64_t up = 0;
  for (int64_t i = 0; i < m; ++i) {
    const uint64_t gap =
        gaps.Varint([i] { return "the gap of sparse entry " + std::to_string(i); });
    // pos = prev + 1 + gap must be < n; compare without overflowing.
    if (gap >= static_cast<uint64_t>(n - (prev + 1))) {
      Invalid("sparse entry " + std::to_string(i) + " lies beyond the element count " +
              std::to_string(n) + " (gap " + std::to_string(gap) + " after position " +
              std::to_string(prev) + ")");
    }
    const int64_t pos = prev + 1 + static_cast<int64_t>(gap);
    const int bit = (bits[i >> 3] >> (i & 7)) & 1;
    s[pos] = static_cast<uint8_t>(1 + bit);
    up += bit;
    prev = pos;
  }
  if (m % 8 != 0 && (bits[bit_bytes - 1] >> (m % 8)) != 0) {
    Invalid("the padding bits after the last sparse direction bit are not zero");
  }
  if (up != h.counts.up) {
    Invalid("the header says UP " + std::to_string(h.counts.up) + ", DOWN " +
            std::to_string(h.counts.down) + " but the sparse direction bits hold UP " +
            std::to_string(up) + ", DOWN " + std::to_string(m - up));
  }
  in.Skip(gap_bytes + bit_bytes);
}

std::vector<ExactEntry> DecodeExact(Reader& in, const LogHeader& h, uint8_t* s) {
  const int64_t n = h.elements;
  std::vector<ExactEntry> exact(static_cast<size_t>(h.counts.exact));
  int64_t prev = -1;
  for (int64_t j = 0; j < h.counts.exact; ++j) {
    auto what = [j] { return "EXACT entry " + std::to_string(j); };
    const uint64_t gap = in.Varint([&] { return "the position gap of " + what(); });
    if (gap >= static_cast<uint64_t>(n - (prev + 1))) {
      Invalid(what() + " lies beyond the element count " + std::to_string(n) + " (gap " +
              std::to_string(gap) + " after position " + std::to_string(prev) + ")");
    }
    const int64_t pos = prev + 1 + static_cast<int64_t>(gap);
    const uint32_t bits = in.U32([&] { return "the FP32 value of " + what(); });
    if ((bits & 0x7f800000u) == 0x7f800000u) {
      Invalid(what() + " (position " + std::to_string(pos) + ") holds a non-finite FP32 value");
    }
    if (s[pos] != static_cast<uint8_t>(LogState::kNone)) {
      Invalid(what() + " (position " + std::to_string(pos) + ") is also " +
              (s[pos] == 1 ? "a DOWN" : "an UP") + " entry in the payload");
    }
    s[pos] = static_cast<uint8_t>(LogState::kExact);
    exact[static_cast<size_t>(j)] = ExactEntry{pos, bits};
    prev = pos;
  }
  return exact;
}

}  // namespace

LogEncoding ParseLogEncoding(std::string_view name) {
  if (name == "dense") return LogEncoding::kDense;
  if (name == "sparse") return LogEncoding::kSparse;
  if (name == "auto") return LogEncoding::kAuto;
  throw Error("unknown log encoding '" + std::string(name) + "' (valid: auto, dense, sparse)");
}

std::string LogEncodingName(LogEncoding encoding) {
  switch (encoding) {
    case LogEncoding::kDense:
      return "dense";
    case LogEncoding::kSparse:
      return "sparse";
    case LogEncoding::kAuto:
      return "auto";
  }
  return "unknown";
}

LogEncoding ChooseLogEncoding(const LogRecord& record) {
  int64_t payload = 0;
  return Choose(record, &payload);
}

int64_t EncodedLogSize(const LogRecord& record, LogEncoding encoding) {
  int64_t payload = 0;
  switch (encoding) {
    case LogEncoding::kDense:
      payload = DensePayloadSize(record);
      break;
    case LogEncoding::kSparse:
      payload = SparsePayloadSize(record);
      break;
    case LogEncoding::kAuto:
      Choose(record, &payload);
      break;
  }
  return HeaderSize(record) + payload + ExactListSize(record);
}

double BitsPerElement(const LogRecord& record, LogEncoding encoding) {
  if (record.size() == 0) return 0.0;
  return 8.0 * static_cast<double>(EncodedLogSize(record, encoding)) /
         static_cast<double>(record.size());
}

void EncodeLogTo(const LogRecord& record, LogEncoding encoding, std::string* out) {
  int64_t payload = 0;
  if (encoding == LogEncoding::kAuto) {
    encoding = Choose(record, &payload);
  } else if (encoding == LogEncoding::kDense) {
    payload = DensePayloadSize(record);
  } else if (encoding == LogEncoding::kSparse) {
    payload = SparsePayloadSize(record);
  } else {
    throw Error("unknown log encoding " + std::to_string(static_cast<int>(encoding)));
  }
  const int64_t total = HeaderSize(record) + payload + ExactListSize(record);
  out->resize(static_cast<size_t>(total));
  uint8_t* begin = reinterpret_cast<uint8_t*>(out->data());
  uint8_t* p = begin;
  std::memcpy(p, kMagic, 4);
  p += 4;
  *p++ = kLogFormatVersion;
  *p++ = static_cast<uint8_t>(encoding);
  const StateCounts& c = record.counts();
  p = PutVarint(p, static_cast<uint64_t>(record.size()));
  p = PutVarint(p, static_cast<uint64_t>(c.down));
  p = PutVarint(p, static_cast<uint64_t>(c.up));
  p = PutVarint(p, static_cast<uint64_t>(c.exact));
  p = encoding == LogEncoding::kDense ? WriteDense(record, p) : WriteSparse(record, p, payload);
  int64_t prev = -1;
  for (const ExactEntry& e : record.exact()) {
    p = PutVarint(p, static_cast<uint64_t>(e.position - prev - 1));
    prev = e.position;
    for (int i = 0; i < 4; ++i) *p++ = static_cast<uint8_t>(e.fp32_bits >> (8 * i));
  }
  if (p - begin != total) {
    throw Error("internal error: encoded " + std::to_string(p - begin) + " bytes, expected " +
                std::to_string(total));
  }
}

std::string EncodeLog(const LogRecord& record, LogEncoding encoding) {
  std::string out;
  EncodeLogTo(record, encoding, &out);
  return out;
}

LogHeader DecodeLogHeader(std::string_view bytes, const DecodeLimits& limits) {
  const uint8_t* begin = reinterpret_cast<const uint8_t*>(bytes.data());
  Reader in(begin, begin + bytes.size());
  return ReadHeader(in, limits);
}

void DecodeLogInto(std::string_view bytes, LogRecord* record, const DecodeLimits& limits) {
  const uint8_t* begin = reinterpret_cast<const uint8_t*>(bytes.data());
  Reader in(begin, begin + bytes.size());
  const LogHeader h = ReadHeader(in, limits);
  // Check that the bytes can hold what the header announces before allocating n states.
  const int64_t exact_min = 5 * h.counts.exact;  // >= 1 varint byte + 4 value bytes each
  int64_t payload_min = 0;
  if (h.encoding == LogEncoding::kDense) {
    payload_min = (h.elements + 4) / 5;
  } else {
    const int64_t m = h.counts.down + h.counts.up;
    payload_min = m + (m + 7) / 8;
  }
  if (in.remaining() < payload_min + exact_min) {
    Invalid("truncated: the " + LogEncodingName(h.encoding) +
            " payload and EXACT list need at least " + std::to_string(payload_min + exact_min) +
            " bytes after byte " + std::to_string(in.offset()) + ", " +
            std::to_string(in.remaining()) + " remain");
  }
  uint8_t* s = nullptr;
  try {
    // A sparse record's states start NONE (those a reused record knows to be NONE are kept).
    s = h.encoding == LogEncoding::kDense ? record->ResetForWrite(h.elements)
                                          : record->ResetToNoneForWrite(h.elements);
  } catch (const std::bad_alloc&) {
    throw Error("log record: cannot allocate the " + std::to_string(h.elements) +
                " element states it declares (use DecodeLimits to bound the element count)");
  }
  if (h.encoding == LogEncoding::kDense) {
    DecodeDense(in, h, s);
  } else {
    DecodeSparse(in, h, s);
  }
  std::vector<ExactEntry> exact = DecodeExact(in, h, s);
  if (in.remaining() != 0) {
    Invalid(std::to_string(in.remaining()) + " trailing bytes after the record (at byte " +
            std::to_string(in.offset()) + ")");
  }
  record->FinishWrite(h.counts, std::move(exact));
}

LogRecord DecodeLog(std::string_view bytes, const DecodeLimits& limits) {
  LogRecord record;
  DecodeLogInto(bytes, &record, limits);
  return record;
}

}  // namespace vt::precision
