// RFC 6962 Merkle trees: the Certificate Transparency known-answer vectors, and randomized
// trees against a naive recursive implementation of RFC 6962 section 2.1.
#include "store/merkle.h"

#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "store/error.h"
#include "store/sha256.h"
#include "tests/store/test_util.h"

namespace vt::store {
namespace {

// Naive RFC 6962 (section 2.1, the recursive definitions), over leaf data.
Digest NaiveRoot(const std::vector<std::string>& d, size_t begin, size_t end) {
  size_t n = end - begin;
  if (n == 0) return Sha256Of("");
  if (n == 1) return Sha256Of(std::string(1, '\0') + d[begin]);
  size_t k = 1;
  while (k * 2 < n) k *= 2;
  std::string buf(1, '\x01');
  buf += std::string(AsBytes(NaiveRoot(d, begin, begin + k)));
  buf += std::string(AsBytes(NaiveRoot(d, begin + k, end)));
  return Sha256Of(buf);
}

std::vector<Digest> NaivePath(const std::vector<std::string>& d, size_t m, size_t begin,
                              size_t end) {
  size_t n = end - begin;
  if (n <= 1) return {};
  size_t k = 1;
  while (k * 2 < n) k *= 2;
  std::vector<Digest> out;
  if (m < k) {
    out = NaivePath(d, m, begin, begin + k);
    out.push_back(NaiveRoot(d, begin + k, end));
  } else {
    out = NaivePath(d, m - k, begin + k, end);
    out.push_back(NaiveRoot(d, begin, begin + k));
  }
  return out;
}

std::vector<Digest> NaiveSubProof(const std::vector<std::string>& d, size_t m, size_t begin,
                                  size_t end, bool b) {
  size_t n = end - begin;
  if (m == n) {
    if (b) return {};
    return {NaiveRoot(d, begin, end)};
  }
  size_t k = 1;
  while (k * 2 < n) k *= 2;
  std::vector<Digest> out;
  if (m <= k) {
    out = NaiveSubProof(d, m, begin, begin + k, b);
    out.push_back(NaiveRoot(d, begin + k, end));
  } else {
    out = NaiveSubProof(d, m - k, begin + k, end, false);
    out.push_back(NaiveRoot(d, begin, begin + k));
  }
  return out;
}

Digest D(const char* hex) { return *DigestFromHex(hex); }

std::vector<Digest> Ds(std::initializer_list<const char*> hexes) {
  std::vector<Digest> out;
  for (const char* h : hexes) out.push_back(D(h));
  return out;
}

// The reference tree of google/certificate-transparency, cpp/merkletree/merkle_tree_test.cc
// (kInputs, kSHA256Roots, kSHA256Paths, kSHA256Proofs); the same values appear in RFC 9162's
// companion test data. CT numbers leaves from 1 in its path vectors; we number from 0.
const std::vector<std::string> kCtLeaves = {
    "",
    std::string("\x00", 1),
    "\x10",
    "\x20\x21",
    "\x30\x31",
    "\x40\x41\x42\x43",
    "\x50\x51\x52\x53\x54\x55\x56\x57",
    "\x60\x61\x62\x63\x64\x65\x66\x67\x68\x69\x6a\x6b\x6c\x6d\x6e\x6f",
};
const char* kCtRoots[8] = {
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
};
const char* kEmptyRoot = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

MemoryMerkleTree CtTree() {
  MemoryMerkleTree t;
  for (const std::string& l : kCtLeaves) t.Append(l);
  return t;
}

TEST_CASE("store: Merkle roots match the Certificate Transparency vectors", "[store][merkle]") {
  MemoryMerkleTree t;
  CHECK(ToHex(t.Root()) == kEmptyRoot);
  CHECK(ToHex(MerkleEmptyRoot()) == kEmptyRoot);
  for (size_t i = 0; i < kCtLeaves.size(); ++i) {
    CHECK(t.Append(kCtLeaves[i]) == i);
    CHECK(ToHex(t.Root()) == kCtRoots[i]);
    // The naive recursion agrees with the published values too.
    CHECK(ToHex(NaiveRoot(kCtLeaves, 0, i + 1)) == kCtRoots[i]);
  }
  for (size_t n = 0; n <= 8; ++n)
    CHECK(ToHex(t.RootAt(n)) == (n == 0 ? kEmptyRoot : kCtRoots[n - 1]));
  CHECK_THROWS_AS(t.RootAt(9), Error);
}

TEST_CASE("store: Merkle inclusion proofs match the CT vectors and verify", "[store][merkle]") {
  MemoryMerkleTree t = CtTree();
  struct Vector {
    uint64_t index, size;
    std::vector<Digest> path;
  };
  std::vector<Vector> vectors = {
      {0, 1, {}},
      {0, 8,
       Ds({"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
           "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
           "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"})},
      {5, 8,
       Ds({"bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
           "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
           "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"})},
      {2, 3, Ds({"fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"})},
      {1, 5,
       Ds({"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
           "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
           "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"})},
  };
  for (const Vector& v : vectors) {
    INFO("leaf " << v.index << " of " << v.size);
    CHECK(t.InclusionProof(v.index, v.size) == v.path);
    Digest root = D(kCtRoots[v.size - 1]);
    Digest leaf = MerkleLeafHash(kCtLeaves[v.index]);
    CHECK(VerifyInclusion(leaf, v.index, v.size, v.path, root));
    // Wrong index, size, leaf, root; modified, extended and shortened paths all fail.
    CHECK_FALSE(VerifyInclusion(leaf, v.index + 1, v.size, v.path, root));
    if (v.index > 0) CHECK_FALSE(VerifyInclusion(leaf, v.index - 1, v.size, v.path, root));
    CHECK_FALSE(VerifyInclusion(leaf, v.index, v.size * 2, v.path, root));
    if (v.size > 1) CHECK_FALSE(VerifyInclusion(leaf, v.index, v.size / 2, v.path, root));
    CHECK_FALSE(VerifyInclusion(MerkleLeafHash("WrongLeaf"), v.index, v.size, v.path, root));
    CHECK_FALSE(VerifyInclusion(leaf, v.index, v.size, v.path, D(kEmptyRoot)));
    for (size_t j = 0; j < v.path.size(); ++j) {
      std::vector<Digest> bad = v.path;
      bad[j] = D(kEmptyRoot);
      CHECK_FALSE(VerifyInclusion(leaf, v.index, v.size, bad, root));
    }
    std::vector<Digest> longer = v.path;
    longer.push_back(root);
    CHECK_FALSE(VerifyInclusion(leaf, v.index, v.size, longer, root));
    if (!v.path.empty()) {
      std::vector<Digest> shorter(v.path.begin(), v.path.end() - 1);
      CHECK_FALSE(VerifyInclusion(leaf, v.index, v.size, shorter, root));
    }
  }
  CHECK_FALSE(VerifyInclusion(MerkleLeafHash(""), 0, 0, {}, D(kEmptyRoot)));
  CHECK_THROWS_AS(t.InclusionProof(8, 8), Error);
  CHECK_THROWS_AS(t.InclusionProof(0, 9), Error);
}

TEST_CASE("store: Merkle consistency proofs match the CT vectors and verify", "[store][merkle]") {
  MemoryMerkleTree t = CtTree();
  struct Vector {
    uint64_t m, n;
    std::vector<Digest> proof;
  };
  std::vector<Vector> vectors = {
      {1, 1, {}},
      {1, 8,
       Ds({"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
           "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
           "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"})},
      {6, 8,
       Ds({"0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
           "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
           "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"})},
      {2, 5,
       Ds({"5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
           "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"})},
  };
  for (const Vector& v : vectors) {
    INFO("sizes " << v.m << " -> " << v.n);
    CHECK(t.ConsistencyProof(v.m, v.n) == v.proof);
    Digest rm = D(kCtRoots[v.m - 1]);
    Digest rn = D(kCtRoots[v.n - 1]);
    CHECK(VerifyConsistency(v.m, v.n, rm, rn, v.proof));
    if (v.proof.empty()) continue;
    CHECK_FALSE(VerifyConsistency(v.m - 1, v.n, rm, rn, v.proof));
    CHECK_FALSE(VerifyConsistency(v.m + 1, v.n, rm, rn, v.proof));
    CHECK_FALSE(VerifyConsistency(v.m, v.n * 2, rm, rn, v.proof));
    CHECK_FALSE(VerifyConsistency(v.m, v.n / 2, rm, rn, v.proof));
    CHECK_FALSE(VerifyConsistency(v.m, v.n, rn, rm, v.proof));
    CHECK_FALSE(VerifyConsistency(v.m, v.n, rm, D(kEmptyRoot), v.proof));
    CHECK_FALSE(VerifyConsistency(v.m, v.n, rm, rn, {}));
    for (size_t j = 0; j < v.proof.size(); ++j) {
      std::vector<Digest> bad = v.proof;
      bad[j] = D(kEmptyRoot);
      CHECK_FALSE(VerifyConsistency(v.m, v.n, rm, rn, bad));
    }
    std::vector<Digest> longer = v.proof;
    longer.push_back(v.proof.back());
    CHECK_FALSE(VerifyConsistency(v.m, v.n, rm, rn, longer));
    std::vector<Digest> shorter(v.proof.begin(), v.proof.end() - 1);
    CHECK_FALSE(VerifyConsistency(v.m, v.n, rm, rn, shorter));
  }
  // Edge conventions (merkle.h): the empty tree is a prefix of every tree; equal sizes need
  // equal roots and an empty proof; shrinking is never consistent.
  Digest r8 = D(kCtRoots[7]);
  CHECK(VerifyConsistency(0, 8, D(kEmptyRoot), r8, {}));
  CHECK_FALSE(VerifyConsistency(0, 8, r8, r8, {}));
  CHECK_FALSE(VerifyConsistency(0, 8, D(kEmptyRoot), r8, {r8}));
  CHECK(VerifyConsistency(8, 8, r8, r8, {}));
  CHECK_FALSE(VerifyConsistency(8, 8, r8, D(kCtRoots[6]), {}));
  CHECK_FALSE(VerifyConsistency(8, 8, r8, r8, {r8}));
  CHECK_FALSE(VerifyConsistency(8, 7, r8, D(kCtRoots[6]), {}));
  CHECK(t.ConsistencyProof(0, 8).empty());
  CHECK_THROWS_AS(t.ConsistencyProof(5, 4), Error);
  CHECK_THROWS_AS(t.ConsistencyProof(5, 9), Error);
}

TEST_CASE("store: Merkle randomized trees against the naive recursion", "[store][merkle]") {
  uint64_t seed = testing::TestSeed("merkle randomized");
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  auto random_leaf = [&] {
    std::string s(rng() % 40, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    return s;
  };
  // Every index and every earlier size, for all sizes up to 40.
  {
    std::vector<std::string> leaves;
    MemoryMerkleTree t;
    for (size_t n = 1; n <= 40; ++n) {
      leaves.push_back(random_leaf());
      t.Append(leaves.back());
      Digest root = NaiveRoot(leaves, 0, n);
      REQUIRE(t.Root() == root);
      for (size_t i = 0; i < n; ++i) {
        std::vector<Digest> path = t.InclusionProof(i, n);
        REQUIRE(path == NaivePath(leaves, i, 0, n));
        REQUIRE(VerifyInclusion(MerkleLeafHash(leaves[i]), i, n, path, root));
      }
      for (size_t m = 1; m <= n; ++m) {
        std::vector<Digest> proof = t.ConsistencyProof(m, n);
        REQUIRE(proof == NaiveSubProof(leaves, m, 0, n, true));
        REQUIRE(VerifyConsistency(m, n, NaiveRoot(leaves, 0, m), root, proof));
        if (m < n) REQUIRE_FALSE(VerifyConsistency(m, n, NaiveRoot(leaves, 0, m - 1), root, proof));
      }
    }
  }
  // Random queries on larger random sizes.
  for (int trial = 0; trial < 6; ++trial) {
    size_t n = 100 + rng() % 1500;
    std::vector<std::string> leaves;
    MemoryMerkleTree t;
    for (size_t i = 0; i < n; ++i) {
      leaves.push_back(random_leaf());
      t.Append(leaves.back());
    }
    for (int q = 0; q < 8; ++q) {
      size_t size = 1 + rng() % n;
      size_t i = rng() % size;
      size_t m = 1 + rng() % size;
      Digest root = NaiveRoot(leaves, 0, size);
      REQUIRE(t.RootAt(size) == root);
      std::vector<Digest> path = t.InclusionProof(i, size);
      REQUIRE(path == NaivePath(leaves, i, 0, size));
      REQUIRE(VerifyInclusion(MerkleLeafHash(leaves[i]), i, size, path, root));
      REQUIRE_FALSE(VerifyInclusion(MerkleLeafHash(leaves[i] + "x"), i, size, path, root));
      std::vector<Digest> proof = t.ConsistencyProof(m, size);
      REQUIRE(proof == NaiveSubProof(leaves, m, 0, size, true));
      REQUIRE(VerifyConsistency(m, size, NaiveRoot(leaves, 0, m), root, proof));
    }
  }
}

TEST_CASE("store: Merkle frontier reloaded at any size continues identically", "[store][merkle]") {
  MemoryMerkleTree full;
  std::vector<Digest> roots;
  for (int i = 0; i < 100; ++i) {
    full.Append(std::to_string(i));
    roots.push_back(full.Root());
  }
  for (uint64_t size = 0; size <= 100; ++size) {
    MerkleFrontier f = MerkleFrontier::Load(full, size);
    CHECK(f.size() == size);
    CHECK(f.Root() == full.RootAt(size));
    for (uint64_t i = size; i < 100; ++i) {
      std::vector<MerkleNode> created = f.Append(MerkleLeafHash(std::to_string(i)));
      REQUIRE(created.front().level == 0);
      REQUIRE(created.front().index == i);
      for (const MerkleNode& node : created)
        REQUIRE(node.hash == full.Node(node.level, node.index));
      REQUIRE(f.Root() == roots[i]);
    }
  }
}

}  // namespace
}  // namespace vt::store
