// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78, initial value and final XOR
// 0xFFFFFFFF), the record checksum of the store's envelope (store/FORMAT.md).
//
// Long inputs are folded with carry-less multiplication where the CPU has it (VPCLMULQDQ on
// 512-bit registers, AVX-512), other inputs use the SSE4.2 crc32 instruction, and CPUs
// without SSE4.2 a table implementation; all give identical results. CRC-32C detects every error
// burst of up to 32 bits, so any single flipped byte in a record is always detected. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace vt::store {

// Extends `crc` (the value returned for the bytes so far; 0 for none) with `bytes` bytes
// at `data`. Crc32c(Crc32c(0, a), b) == Crc32c(0, a || b).
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t bytes);

inline uint32_t Crc32c(std::string_view bytes) {
  return Crc32cExtend(0, bytes.data(), bytes.size());
}

// The CRC of A || B from crc(A) and the CRC of a block B of exactly kCrc32cBlock bytes:
// crc(A || B) = Z(crc(A)) ^ crc(B), Z the linear map of appending kCrc32cBlock zero bytes.
// Lets callers checksum the blocks of a long buffer on several threads and join them in
// order to the same value as one Crc32cExtend over the whole buffer.
constexpr size_t kCrc32cBlock = size_t{1} << 18;
uint32_t Crc32cAppendBlock(uint32_t crc_a, uint32_t crc_block);

// The table implementation, whatever the CPU (tests compare it with the dispatched one).
uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t bytes);

// The implementations behind Crc32cExtend, slowest first. Crc32cExtend uses the fastest one
// the CPU supports, chosen once.
enum class Crc32cPath {
  kTable,          // Crc32cExtendPortable
  kSse42,          // crc32 instruction, three interleaved streams
  kVpclmulAvx512,  // VPCLMULQDQ folding of 4 x 512 bits (AVX-512), from 256 bytes
};

// "table", "sse4.2" or "vpclmulqdq-avx512".
const char* Crc32cPathName(Crc32cPath path);

// The path Crc32cExtend uses on this CPU.
Crc32cPath Crc32cActivePath();

// Whether this CPU (and OS) can run `path`.
bool Crc32cPathSupported(Crc32cPath path);

// Crc32cExtend through `path`, so that tests can check every path this CPU supports and
// benchmarks can compare them. An unsupported path runs the table implementation instead.
uint32_t Crc32cExtendWith(Crc32cPath path, uint32_t crc, const void* data, size_t bytes);

}  // namespace vt::store
