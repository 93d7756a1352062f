// vt::train::EncodeState: a model's state as the store's checkpoint encoding, float64 state
// converted straight into it. The bytes are those of the tensors converted to FP32 and
// serialized (the encoding every stored checkpoint and its digest use); state off the FP32
// grid is refused, naming the tensor and the element.
#include <ATen/ATen.h>

#include <catch2/catch.hpp>
#include <cfloat>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "runtime/common/error.h"
#include "runtime/train/checkpoint.h"
#include "store/checkpoint_digest.h"

using Catch::Matchers::Contains;
using vt::train::EncodeState;
using vt::train::NamedState;

namespace {

// The reference: each tensor converted to FP32 by LibTorch, then serialized.
std::string Reference(const NamedState& state) {
  std::vector<at::Tensor> owned;
  std::vector<vt::store::StateEntry> entries;
  for (const auto& [name, t] : state) {
    at::Tensor f = t->to(at::kFloat).contiguous();
    owned.push_back(f);
    vt::store::StateEntry e;
    e.name = name;
    e.dtype = static_cast<uint8_t>(vt::store::DType::kFloat32);
    e.shape = f.sizes().vec();
    e.data = f.data_ptr();
    e.bytes = static_cast<size_t>(f.numel()) * sizeof(float);
    entries.push_back(e);
  }
  return vt::store::SerializeCheckpoint(entries);
}

}  // namespace

TEST_CASE("encode state: the bytes of FP32 conversion and serialization, in name order",
          "[train]") {
  at::manual_seed(3);
  // FP32 values held as float64 (large enough for several parallel chunks), a float32 tensor,
  // a non-contiguous one, a scalar, an empty one, and infinities and signed zeros.
  at::Tensor big = at::randn({300000}, at::kFloat).to(at::kDouble);
  at::Tensor f32 = at::randn({7, 5}, at::kFloat);
  at::Tensor strided = at::randn({6, 4}, at::kFloat).to(at::kDouble).t();
  at::Tensor scalar = at::scalar_tensor(0.5, at::kDouble);
  at::Tensor empty = at::empty({0, 3}, at::kDouble);
  at::Tensor specials = at::tensor(
      {std::numeric_limits<double>::infinity(), -0.0, 0.0, -std::numeric_limits<double>::infinity(),
       static_cast<double>(FLT_MAX), static_cast<double>(FLT_MIN)},
      at::kDouble);
  const NamedState state = {{"z.big", &big},       {"a.f32", &f32},     {"m.strided", &strided},
                            {"b.scalar", &scalar}, {"e.empty", &empty}, {"s.specials", &specials}};
  const std::string bytes = EncodeState(state);
  CHECK(bytes == Reference(state));
  // And it decodes back to the same values.
  at::Tensor big2 = at::zeros_like(big), f322 = at::zeros_like(f32);
  at::Tensor strided2 = at::zeros_like(strided), scalar2 = at::zeros_like(scalar);
  at::Tensor empty2 = at::zeros_like(empty), specials2 = at::zeros_like(specials);
  vt::train::DecodeStateInto(bytes, {{"z.big", &big2},
                                     {"a.f32", &f322},
                                     {"m.strided", &strided2},
                                     {"b.scalar", &scalar2},
                                     {"e.empty", &empty2},
                                     {"s.specials", &specials2}});
  CHECK(big2.equal(big));
  CHECK(f322.equal(f32));
  CHECK(strided2.equal(strided));
  CHECK(specials2.equal(specials));
  CHECK(std::signbit(specials2[1].item<double>()));
}

TEST_CASE("encode state: values off the FP32 grid are refused, naming the tensor and element",
          "[train]") {
  at::Tensor ok = at::ones({10}, at::kDouble);
  for (double bad :
       {1.0 + 0x1p-40, std::numeric_limits<double>::quiet_NaN(), 1e300, -1e39, 0x1p-160}) {
    INFO("value " << bad);
    at::Tensor t = at::zeros({200000}, at::kDouble);
    t[123457] = bad;
    t[190000] = bad;  // the first one is named
    CHECK_THROWS_WITH(
        EncodeState({{"ok", &ok}, {"w", &t}}),
        Contains("state 'w' holds values off the FP32 grid") && Contains("element 123457"));
  }
  // The same values on the grid pass.
  at::Tensor t = at::zeros({200000}, at::kDouble);
  t[123457] = 1.0 + 0x1p-23;
  CHECK_NOTHROW(EncodeState({{"ok", &ok}, {"w", &t}}));
  at::Tensor ints = at::zeros({3}, at::kLong);
  CHECK_THROWS_WITH(EncodeState({{"i", &ints}}), Contains("not a floating-point tensor"));
}
