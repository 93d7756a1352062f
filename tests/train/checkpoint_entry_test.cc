// vt::train::CheckpointEntry: tensors as they are, as entries of the store's checkpoint
// encoding (vt.store.checkpoint_encode's tensor entries).
#include "runtime/train/checkpoint_entry.h"

#include <ATen/ATen.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "runtime/common/error.h"
#include "store/checkpoint_digest.h"

using Catch::Matchers::Contains;
using vt::store::DType;
using vt::train::CheckpointDType;
using vt::train::CheckpointEntry;

TEST_CASE("checkpoint entry: the store's dtype tag per tensor type", "[train]") {
  CHECK(CheckpointDType(at::kFloat) == static_cast<uint8_t>(DType::kFloat32));
  CHECK(CheckpointDType(at::kDouble) == static_cast<uint8_t>(DType::kFloat64));
  CHECK(CheckpointDType(at::kLong) == static_cast<uint8_t>(DType::kInt64));
  CHECK(CheckpointDType(at::kInt) == static_cast<uint8_t>(DType::kInt32));
  CHECK(CheckpointDType(at::kByte) == static_cast<uint8_t>(DType::kUInt8));
  CHECK(CheckpointDType(at::kBool) == static_cast<uint8_t>(DType::kUInt8));
  CHECK(CheckpointDType(at::kHalf) == 0);
  CHECK(CheckpointDType(at::kShort) == 0);
}

TEST_CASE("checkpoint entry: a non-contiguous tensor is encoded in row-major order", "[train]") {
  at::Tensor t = at::arange(6, at::kFloat).reshape({2, 3}).t();  // 3x2, not contiguous
  at::Tensor keep;
  vt::store::StateEntry e = CheckpointEntry("w", t, &keep);
  CHECK(e.name == "w");
  CHECK(e.dtype == static_cast<uint8_t>(DType::kFloat32));
  CHECK(e.shape == std::vector<int64_t>{3, 2});
  REQUIRE(e.bytes == 6 * sizeof(float));
  std::vector<float> values(6);
  std::memcpy(values.data(), e.data, e.bytes);
  CHECK(values == std::vector<float>{0, 3, 1, 4, 2, 5});
  CHECK(e.data == keep.data_ptr());
  // The same bytes as the entry spelled out by hand.
  vt::store::StateEntry by_hand{"w",
                                static_cast<uint8_t>(DType::kFloat32),
                                {3, 2},
                                values.data(),
                                values.size() * sizeof(float)};
  CHECK(vt::store::SerializeCheckpoint({e}) == vt::store::SerializeCheckpoint({by_hand}));

  at::Tensor flags = at::tensor(std::vector<int64_t>{1, 0, 1}).to(at::kBool);
  vt::store::StateEntry b = CheckpointEntry("flags", flags, &keep);
  CHECK(b.dtype == static_cast<uint8_t>(DType::kUInt8));
  CHECK(b.bytes == 3);
  CHECK(static_cast<const uint8_t*>(b.data)[1] == 0);
  CHECK(static_cast<const uint8_t*>(b.data)[2] == 1);
}

TEST_CASE("checkpoint entry: other tensor types are refused", "[train]") {
  at::Tensor keep;
  CHECK_THROWS_AS(CheckpointEntry("h", at::zeros({2}, at::kHalf), &keep), vt::Error);
  CHECK_THROWS_WITH(CheckpointEntry("h", at::zeros({2}, at::kHalf), &keep), Contains("entry 'h'"));
}
