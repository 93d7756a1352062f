// RFC 6962 Merkle trees: hashing, roots, inclusion and consistency proofs and their
// verification, an in-memory tree, and the append frontier the store persists.
//
// Hashing (RFC 6962 section 2.1, SHA-256): the leaf hash of data d is SHA-256(0x00 || d),
// the hash of an interior node is SHA-256(0x01 || left || right), the root of the empty
// tree is SHA-256(""). For n > 1 leaves the tree splits at k, the largest power of two
// smaller than n: MTH(D[0:n]) = H(0x01 || MTH(D[0:k]) || MTH(D[k:n])).
//
// Leaves are indexed from 0. Every subtree the RFC recursion visits is a sequence of
// complete, aligned subtrees: node (level h, index j) covers leaves [j*2^h, (j+1)*2^h). A
// MerkleNodes source provides those; roots at any size and both kinds of proof are computed
// from O(log n) of them, which is how the store answers proofs for millions of leaves with
// a few point reads.
//
// Proof generators throw Error for arguments out of range (index >= size, m > n, a size
// beyond the stored tree). Verifiers never throw: a malformed or wrong proof returns false.
// Pure functions are thread-safe; MemoryMerkleTree and MerkleFrontier are not (one thread
// per object, or external locking).
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "store/sha256.h"

namespace vt::store {

// RFC 6962 hashes.
Digest MerkleLeafHash(std::string_view leaf_data);               // SHA-256(0x00 || data)
Digest MerkleNodeHash(const Digest& left, const Digest& right);  // SHA-256(0x01 || l || r)
Digest MerkleEmptyRoot();                                        // SHA-256("")

// A source of complete-subtree hashes. Node(level, index) is the hash of the complete
// subtree over leaves [index << level, (index + 1) << level); level 0 holds leaf hashes.
// Implementations throw Error (or CorruptionError) if the node is not available.
class MerkleNodes {
 public:
  virtual ~MerkleNodes() = default;
  virtual Digest Node(unsigned level, uint64_t index) const = 0;
};

// MTH(D[begin:end]) for a subtree the RFC recursion visits (begin is a multiple of the
// smallest power of two >= end - begin); 1 <= end - begin. Throws Error otherwise.
Digest MerkleSubtreeHash(const MerkleNodes& nodes, uint64_t begin, uint64_t end);

// Root of the first `size` leaves (MerkleEmptyRoot() for size 0).
Digest MerkleRoot(const MerkleNodes& nodes, uint64_t size);

// RFC 6962 PATH(index, D[0:size]): sibling hashes from the leaf up. Requires index < size.
std::vector<Digest> MerkleInclusionProof(const MerkleNodes& nodes, uint64_t index, uint64_t size);

// RFC 6962 PROOF(m, D[0:n]); empty when m == 0 or m == n. Requires m <= n.
std::vector<Digest> MerkleConsistencyProof(const MerkleNodes& nodes, uint64_t m, uint64_t n);

// True iff `proof` shows that the leaf whose leaf hash is `leaf_hash` is at `index` in the
// tree of `size` leaves with root `root` (RFC 9162 section 2.1.3.2). False for index >= size.
bool VerifyInclusion(const Digest& leaf_hash, uint64_t index, uint64_t size,
                     const std::vector<Digest>& proof, const Digest& root);

// True iff `proof` shows that the tree of size m with root `root_m` is a prefix of the tree
// of size n with root `root_n` (RFC 9162 section 2.1.4.2). Conventions for the cases the
// RFC leaves out: m == n needs an empty proof and root_m == root_n; m == 0 needs an empty
// proof and root_m == MerkleEmptyRoot() (the empty tree is a prefix of every tree). False
// for m > n.
bool VerifyConsistency(uint64_t m, uint64_t n, const Digest& root_m, const Digest& root_n,
                       const std::vector<Digest>& proof);

// A new complete node produced by an append: (level, index, hash).
struct MerkleNode {
  unsigned level;
  uint64_t index;
  Digest hash;
};

// The right edge of a tree (RFC 6962 "compact range"): the roots of the complete subtrees
// that make up the first `size` leaves, largest first (one per set bit of size). Enough to
// append and to compute the current root without reading anything else.
class MerkleFrontier {
 public:
  MerkleFrontier() = default;
  // The frontier of the first `size` leaves of `nodes` (popcount(size) reads).
  static MerkleFrontier Load(const MerkleNodes& nodes, uint64_t size);

  // Appends a leaf hash; returns the nodes that became complete: the leaf itself (level 0)
  // and every parent it completes, bottom-up.
  std::vector<MerkleNode> Append(const Digest& leaf_hash);
  Digest Root() const;
  uint64_t size() const { return size_; }

 private:
  uint64_t size_ = 0;
  std::vector<Digest> roots_;  // largest subtree first
};

// A whole tree in memory: every complete node, by level. 64 bytes per leaf on average.
class MemoryMerkleTree : public MerkleNodes {
 public:
  // Appends a leaf with data `leaf_data` (hashed with MerkleLeafHash); returns its index.
  uint64_t Append(std::string_view leaf_data);
  // Appends an already-computed leaf hash; returns its index.
  uint64_t AppendLeafHash(const Digest& leaf_hash);

  uint64_t size() const { return frontier_.size(); }
  Digest Root() const { return frontier_.Root(); }
  Digest RootAt(uint64_t size) const;  // size <= this->size(), else Error
  std::vector<Digest> InclusionProof(uint64_t index, uint64_t size) const;
  std::vector<Digest> ConsistencyProof(uint64_t m, uint64_t n) const;

  Digest Node(unsigned level, uint64_t index) const override;

 private:
  MerkleFrontier frontier_;
  std::vector<std::vector<Digest>> levels_;
};

}  // namespace vt::store
