// libFuzzer target for Merkle proof verification (store/merkle.h): the proofs a party
// receives in the game. Input: u64 index, u64 size, u64 m, u8 leaf count, then 32-byte
// hashes (the first one the root). Hostile proofs, sizes and indices must return false,
// never crash; genuine proofs over a tree of the input's leaves must verify, and the same
// proofs with one bit flipped must not.
#include "store/merkle.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "store/sha256.h"

namespace {

using vt::store::Digest;

class VectorNodes : public vt::store::MerkleNodes {
 public:
  explicit VectorNodes(std::vector<Digest> leaves) : leaves_(std::move(leaves)) {}
  Digest Node(unsigned level, uint64_t index) const override {
    if (level == 0) return leaves_.at(index);
    return vt::store::MerkleNodeHash(Node(level - 1, 2 * index), Node(level - 1, 2 * index + 1));
  }

 private:
  std::vector<Digest> leaves_;
};

uint64_t ReadU64(const uint8_t* p) {
  uint64_t v = 0;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace store = vt::store;
  if (size < 25) return 0;
  const uint64_t index = ReadU64(data);
  const uint64_t tree_size = ReadU64(data + 8);
  const uint64_t m = ReadU64(data + 16);
  const unsigned count = data[24];
  std::vector<Digest> hashes;
  for (size_t at = 25; at + 32 <= size; at += 32) {
    Digest d;
    std::memcpy(d.data(), data + at, 32);
    hashes.push_back(d);
  }
  if (hashes.empty()) return 0;
  const Digest root = hashes[0];
  const std::vector<Digest> proof(hashes.begin() + 1, hashes.end());
  // Hostile input: any answer, but an answer.
  store::VerifyInclusion(hashes.back(), index, tree_size, proof, root);
  store::VerifyConsistency(m, tree_size, root, hashes.back(), proof);

  // A genuine tree of `count` leaves (1..64) from the input's hashes.
  const uint64_t n = count % 64 + 1;
  std::vector<Digest> leaves;
  for (uint64_t i = 0; i < n; ++i) {
    leaves.push_back(store::MerkleLeafHash(
        std::string(1, static_cast<char>(i)) +
        std::string(hashes[i % hashes.size()].begin(), hashes[i % hashes.size()].end())));
  }
  const VectorNodes nodes(leaves);
  const Digest full = store::MerkleRoot(nodes, n);
  const uint64_t i = index % n;
  std::vector<Digest> path = store::MerkleInclusionProof(nodes, i, n);
  if (!store::VerifyInclusion(leaves[i], i, n, path, full)) std::abort();
  if (!path.empty()) {
    path[index % path.size()][data[24] % 32] ^= static_cast<uint8_t>(1u << (m % 8));
    if (store::VerifyInclusion(leaves[i], i, n, path, full)) std::abort();
  }
  if (store::VerifyInclusion(leaves[i], i + n, n, store::MerkleInclusionProof(nodes, i, n), full))
    std::abort();
  const uint64_t k = m % (n + 1);
  std::vector<Digest> consistency = store::MerkleConsistencyProof(nodes, k, n);
  const Digest prefix = store::MerkleRoot(nodes, k);
  if (!store::VerifyConsistency(k, n, prefix, full, consistency)) std::abort();
  if (!consistency.empty()) {
    consistency[index % consistency.size()][0] ^= 1;
    if (store::VerifyConsistency(k, n, prefix, full, consistency)) std::abort();
  }
  return 0;
}
