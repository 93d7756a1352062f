#include "store/merkle.h"

#include <algorithm>

#include "store/error.h"

namespace vt::store {
namespace {

// Largest power of two strictly smaller than n (n >= 2).
uint64_t SplitPoint(uint64_t n) {
  uint64_t k = uint64_t{1} << (63 - __builtin_clzll(n - 1));
  return k;
}

bool IsPowerOfTwo(uint64_t n) { return n != 0 && (n & (n - 1)) == 0; }

void InclusionPath(const MerkleNodes& nodes, uint64_t index, uint64_t begin, uint64_t end,
                   std::vector<Digest>* out) {
  uint64_t n = end - begin;
  if (n == 1) return;
  uint64_t k = SplitPoint(n);
  if (index < begin + k) {
    InclusionPath(nodes, index, begin, begin + k, out);
    out->push_back(MerkleSubtreeHash(nodes, begin + k, end));
  } else {
    InclusionPath(nodes, index, begin + k, end, out);
    out->push_back(MerkleSubtreeHash(nodes, begin, begin + k));
  }
}

// RFC 6962 SUBPROOF(m, D[begin:end], b), with m counted from `begin`.
void SubProof(const MerkleNodes& nodes, uint64_t m, uint64_t begin, uint64_t end, bool b,
              std::vector<Digest>* out) {
  uint64_t n = end - begin;
  if (m == n) {
    if (!b) out->push_back(MerkleSubtreeHash(nodes, begin, end));
    return;
  }
  uint64_t k = SplitPoint(n);
  if (m <= k) {
    SubProof(nodes, m, begin, begin + k, b, out);
    out->push_back(MerkleSubtreeHash(nodes, begin + k, end));
  } else {
    SubProof(nodes, m - k, begin + k, end, false, out);
    out->push_back(MerkleSubtreeHash(nodes, begin, begin + k));
  }
}

}  // namespace

Digest MerkleLeafHash(std::string_view leaf_data) {
  Sha256 h;
  h.UpdateU8(0x00).Update(leaf_data);
  return h.Final();
}

Digest MerkleNodeHash(const Digest& left, const Digest& right) {
  uint8_t buf[1 + 2 * kDigestBytes];
  buf[0] = 0x01;
  std::copy(left.begin(), left.end(), buf + 1);
  std::copy(right.begin(), right.end(), buf + 1 + kDigestBytes);
  return Sha256Of(std::string_view(reinterpret_cast<const char*>(buf), sizeof(buf)));
}

Digest MerkleEmptyRoot() {
  static const Digest empty = Sha256Of("");
  return empty;
}

Digest MerkleSubtreeHash(const MerkleNodes& nodes, uint64_t begin, uint64_t end) {
  if (end <= begin)
    throw Error("Merkle subtree [" + std::to_string(begin) + ", " + std::to_string(end) +
                ") is empty");
  uint64_t n = end - begin;
  if (IsPowerOfTwo(n)) {
    unsigned level = static_cast<unsigned>(__builtin_ctzll(n));
    if (begin % n != 0) {
      throw Error("Merkle subtree [" + std::to_string(begin) + ", " + std::to_string(end) +
                  ") is not aligned");
    }
    return nodes.Node(level, begin >> level);
  }
  uint64_t k = SplitPoint(n);
  if (begin % (2 * k) != 0) {
    throw Error("Merkle subtree [" + std::to_string(begin) + ", " + std::to_string(end) +
                ") is not aligned");
  }
  return MerkleNodeHash(MerkleSubtreeHash(nodes, begin, begin + k),
                        MerkleSubtreeHash(nodes, begin + k, end));
}

Digest MerkleRoot(const MerkleNodes& nodes, uint64_t size) {
  if (size == 0) return MerkleEmptyRoot();
  return MerkleSubtreeHash(nodes, 0, size);
}

std::vector<Digest> MerkleInclusionProof(const MerkleNodes& nodes, uint64_t index, uint64_t size) {
  if (index >= size) {
    throw Error("leaf index " + std::to_string(index) + " out of range for a tree of " +
                std::to_string(size) + " leaves (valid: 0.." +
                (size == 0 ? std::string("none") : std::to_string(size - 1)) + ")");
  }
  std::vector<Digest> out;
  InclusionPath(nodes, index, 0, size, &out);
  return out;
}

std::vector<Digest> MerkleConsistencyProof(const MerkleNodes& nodes, uint64_t m, uint64_t n) {
  if (m > n) {
    throw Error("consistency proof from size " + std::to_string(m) + " to the smaller size " +
                std::to_string(n));
  }
  std::vector<Digest> out;
  if (m == 0 || m == n) return out;
  SubProof(nodes, m, 0, n, true, &out);
  return out;
}

bool VerifyInclusion(const Digest& leaf_hash, uint64_t index, uint64_t size,
                     const std::vector<Digest>& proof, const Digest& root) {
  if (index >= size) return false;
  uint64_t fn = index;
  uint64_t sn = size - 1;
  Digest r = leaf_hash;
  for (const Digest& p : proof) {
    if (sn == 0) return false;
    if ((fn & 1) != 0 || fn == sn) {
      r = MerkleNodeHash(p, r);
      if ((fn & 1) == 0) {
        while ((fn & 1) == 0 && fn != 0) {
          fn >>= 1;
          sn >>= 1;
        }
      }
    } else {
      r = MerkleNodeHash(r, p);
    }
    fn >>= 1;
    sn >>= 1;
  }
  return sn == 0 && r == root;
}

bool VerifyConsistency(uint64_t m, uint64_t n, const Digest& root_m, const Digest& root_n,
                       const std::vector<Digest>& proof) {
  if (m > n) return false;
  if (m == 0) return proof.empty() && root_m == MerkleEmptyRoot();
  if (m == n) return proof.empty() && root_m == root_n;
  if (proof.empty()) return false;
  std::vector<Digest> path;
  path.reserve(proof.size() + 1);
  if (IsPowerOfTwo(m)) path.push_back(root_m);
  path.insert(path.end(), proof.begin(), proof.end());
  uint64_t fn = m - 1;
  uint64_t sn = n - 1;
  while ((fn & 1) != 0) {
    fn >>= 1;
    sn >>= 1;
  }
  Digest fr = path[0];
  Digest sr = path[0];
  for (size_t i = 1; i < path.size(); ++i) {
    const Digest& c = path[i];
    if (sn == 0) return false;
    if ((fn & 1) != 0 || fn == sn) {
      fr = MerkleNodeHash(c, fr);
      sr = MerkleNodeHash(c, sr);
      while ((fn & 1) == 0 && fn != 0) {
        fn >>= 1;
        sn >>= 1;
      }
    } else {
      sr = MerkleNodeHash(sr, c);
    }
    fn >>= 1;
    sn >>= 1;
  }
  return fr == root_m && sr == root_n && sn == 0;
}

MerkleFrontier MerkleFrontier::Load(const MerkleNodes& nodes, uint64_t size) {
  MerkleFrontier f;
  f.size_ = size;
  uint64_t begin = 0;
  for (int level = 63; level >= 0; --level) {
    uint64_t bit = uint64_t{1} << level;
    if ((size & bit) == 0) continue;
    f.roots_.push_back(nodes.Node(static_cast<unsigned>(level), begin >> level));
    begin += bit;
  }
  return f;
}

std::vector<MerkleNode> MerkleFrontier::Append(const Digest& leaf_hash) {
  std::vector<MerkleNode> created;
  Digest h = leaf_hash;
  unsigned level = 0;
  uint64_t index = size_;
  created.push_back({0, index, h});
  while ((index & 1) != 0) {
    h = MerkleNodeHash(roots_.back(), h);
    roots_.pop_back();
    ++level;
    index >>= 1;
    created.push_back({level, index, h});
  }
  roots_.push_back(h);
  ++size_;
  return created;
}

Digest MerkleFrontier::Root() const {
  if (roots_.empty()) return MerkleEmptyRoot();
  Digest r = roots_.back();
  for (size_t i = roots_.size() - 1; i-- > 0;) r = MerkleNodeHash(roots_[i], r);
  return r;
}

uint64_t MemoryMerkleTree::Append(std::string_view leaf_data) {
  return AppendLeafHash(MerkleLeafHash(leaf_data));
}

uint64_t MemoryMerkleTree::AppendLeafHash(const Digest& leaf_hash) {
  uint64_t index = frontier_.size();
  for (const MerkleNode& node : frontier_.Append(leaf_hash)) {
    if (levels_.size() <= node.level) levels_.resize(node.level + 1);
    levels_[node.level].push_back(node.hash);
  }
  return index;
}

Digest MemoryMerkleTree::RootAt(uint64_t size) const {
  if (size > this->size()) {
    throw Error("tree size " + std::to_string(size) + " is beyond the tree's " +
                std::to_string(this->size()) + " leaves");
  }
  return MerkleRoot(*this, size);
}

std::vector<Digest> MemoryMerkleTree::InclusionProof(uint64_t index, uint64_t size) const {
  if (size > this->size()) {
    throw Error("tree size " + std::to_string(size) + " is beyond the tree's " +
                std::to_string(this->size()) + " leaves");
  }
  return MerkleInclusionProof(*this, index, size);
}

std::vector<Digest> MemoryMerkleTree::ConsistencyProof(uint64_t m, uint64_t n) const {
  if (n > this->size()) {
    throw Error("tree size " + std::to_string(n) + " is beyond the tree's " +
                std::to_string(this->size()) + " leaves");
  }
  return MerkleConsistencyProof(*this, m, n);
}

Digest MemoryMerkleTree::Node(unsigned level, uint64_t index) const {
  if (level >= levels_.size() || index >= levels_[level].size()) {
    throw Error("Merkle node (level " + std::to_string(level) + ", index " + std::to_string(index) +
                ") is not in the tree");
  }
  return levels_[level][index];
}

}  // namespace vt::store
