// Data sets: content digests checked against an independent hash, permutations, batches.
#include <ATen/ATen.h>

#include <catch2/catch.hpp>
#include <set>

#include "runtime/common/error.h"
#include "runtime/data/dataset.h"
#include "runtime/data/idx.h"
#include "runtime/data/sources.h"
#include "tests/support/subprocess.h"

using Catch::Matchers::Contains;

namespace {

const char* kFashion = "/usr/share/datasets/fashion-mnist";

std::string ShellSha256(const std::string& command) {
  auto r = vt::testing::RunProcess({"/bin/sh", "-c", command + " | sha256sum"});
  return r.out.substr(0, 64);
}

}  // namespace

TEST_CASE("Fashion-MNIST digest equals sha256sum of the decompressed labels then images",
          "[data]") {
  auto d = vt::data::FashionMnist({kFashion, "test"});
  CHECK(d->size() == 10000);
  CHECK(d->input_shape() == std::vector<int64_t>{1, 28, 28});
  std::string expected = ShellSha256(std::string("(gzip -dc ") + kFashion +
                                     "/t10k-labels-idx1-ubyte.gz | tail -c +9; gzip -dc " +
                                     kFashion + "/t10k-images-idx3-ubyte.gz | tail -c +17)");
  CHECK(d->digest() == expected);
}

TEST_CASE("text digest is sha256sum of the file, windows and targets shift by one", "[data]") {
  std::string path = std::string(VTRUN_SOURCE_DIR) + "/data/shakespeare.txt";
  auto d = vt::data::TextCorpus({path, 64});
  CHECK(d->digest() == ShellSha256("cat '" + path + "'"));
  auto b = d->Get({0, 5}, 0, 0);
  CHECK(b.inputs.sizes() == at::IntArrayRef({2, 64}));
  CHECK(at::equal(b.inputs.narrow(1, 1, 63), b.targets.narrow(1, 0, 63)));
  std::string text = vt::data::ReadFileBytes(path);
  CHECK(b.inputs[1][0].item<int64_t>() == static_cast<uint8_t>(text[5 * 64]));
  CHECK_THROWS_WITH(d->Get({d->size()}, 0, 0), Contains("out of range"));
  CHECK_THROWS_WITH(vt::data::TextCorpus({path, 0}), Contains("context must be >= 1"));
  CHECK_THROWS_WITH(vt::data::TextCorpus({"/nonexistent.txt", 8}),
                    Contains("cannot open '/nonexistent.txt'"));
}

TEST_CASE("each epoch visits every example once in a seed-dependent order", "[data]") {
  const int64_t n = 1000, batch = 64;
  std::multiset<int64_t> seen;
  for (int64_t step = 1; step * batch <= n; ++step) {
    int64_t epoch = -1;
    for (int64_t i : vt::data::BatchIndices(7, n, batch, step, &epoch)) seen.insert(i);
    CHECK(epoch == 0);
  }
  CHECK(seen.size() == static_cast<size_t>((n / batch) * batch));
  CHECK(std::set<int64_t>(seen.begin(), seen.end()).size() == seen.size());
  CHECK(vt::data::Permutation(7, 0, n) != vt::data::Permutation(8, 0, n));
  CHECK(vt::data::Permutation(7, 0, n) != vt::data::Permutation(7, 1, n));
  CHECK(vt::data::Permutation(7, 3, n) == vt::data::Permutation(7, 3, n));
  int64_t epoch = 0;
  vt::data::BatchIndices(7, n, batch, 20, &epoch);  // examples 1216.. -> epoch 1
  CHECK(epoch == 1);
  CHECK_THROWS_AS(vt::data::BatchIndices(7, n, 0, 1, nullptr), vt::Error);
  CHECK_THROWS_AS(vt::data::BatchIndices(7, n, 4, 0, nullptr), vt::Error);
}

TEST_CASE("augmentation is a pure function of (seed, epoch, index)", "[data]") {
  vt::data::ImageOptions o{kFashion, "test"};
  o.limit = 100;
  o.crop_padding = 4;
  o.flip = true;
  auto d = vt::data::FashionMnist(o);
  auto plain = vt::data::FashionMnist({kFashion, "test", 100});
  auto a = d->Get({3, 4, 5}, 1, 0), b = d->Get({3, 4, 5}, 1, 0);
  CHECK(at::equal(a.inputs, b.inputs));
  CHECK_FALSE(at::equal(a.inputs, d->Get({3, 4, 5}, 1, 1).inputs));
  CHECK_FALSE(at::equal(a.inputs, plain->Get({3, 4, 5}, 1, 0).inputs));
  CHECK(at::equal(a.targets, plain->Get({3, 4, 5}, 1, 0).targets));
  CHECK(d->digest() == plain->digest());  // same content; settings() tells the difference
  CHECK(d->settings() != plain->settings());
}

TEST_CASE("synthetic data is reproducible and learnable-by-construction", "[data]") {
  vt::data::SyntheticOptions o;
  o.size = 200;
  o.classes = 4;
  o.seed = 3;
  auto a = vt::data::Synthetic(o), b = vt::data::Synthetic(o);
  CHECK(a->digest() == b->digest());
  auto batch = a->Get({0, 1, 2, 199}, 0, 0);
  CHECK(batch.inputs.sizes() == at::IntArrayRef({4, 32}));
  CHECK(batch.targets.max().item<int64_t>() < 4);
  o.seed = 4;
  CHECK(vt::data::Synthetic(o)->digest() != a->digest());
}

TEST_CASE("IDX errors name the file", "[data]") {
  vt::testing::TempDir dir;
  std::string path = dir.path() + "/bad.idx";
  FILE* f = std::fopen(path.c_str(), "wb");
  const unsigned char header[] = {0, 0, 8, 1, 0, 0, 0, 10, 1, 2, 3};
  std::fwrite(header, 1, sizeof header, f);
  std::fclose(f);
  CHECK_THROWS_WITH(vt::data::ReadIdx(path), Contains("IDX body has 3 bytes, header says 10"));
  CHECK_THROWS_WITH(vt::data::ReadIdx("/nonexistent.idx"), Contains("cannot open"));
  CHECK_THROWS_WITH(vt::data::FashionMnist({kFashion, "validation"}),
                    Contains("split must be 'train' or 'test'"));
}
