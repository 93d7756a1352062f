// .npy encoding: NumPy's exact header layout, round trips, and every malformed-input error.
#include "runtime/tensor/npy.h"

#include <ATen/ATen.h>

#include <catch2/catch.hpp>

#include "runtime/common/error.h"

using Catch::Matchers::Contains;

TEST_CASE("npy header matches numpy.save byte for byte", "[npy]") {
  // numpy 1.24: np.save(f, np.arange(6, dtype='<f8').reshape(2, 3)) writes this 128-byte
  // header (magic, version 1.0, length 0x76, dict, growth padding, '\n').
  std::string bytes = vt::EncodeNpy(at::arange(6, at::kDouble).reshape({2, 3}));
  std::string dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }";
  std::string expected = std::string("\x93NUMPY\x01\x00\x76\x00", 10) + dict +
                         std::string(128 - 10 - dict.size() - 1, ' ') + "\n";
  REQUIRE(bytes.size() == 128 + 6 * 8);
  CHECK(bytes.substr(0, 128) == expected);
  double five;
  std::memcpy(&five, bytes.data() + 128 + 5 * 8, 8);
  CHECK(five == 5.0);
}

TEST_CASE("npy shapes are written as Python tuples", "[npy]") {
  CHECK_THAT(vt::EncodeNpy(at::zeros({}, at::kFloat)), Contains("'shape': (), }"));
  CHECK_THAT(vt::EncodeNpy(at::zeros({7}, at::kLong)), Contains("'descr': '<i8'"));
  CHECK_THAT(vt::EncodeNpy(at::zeros({7}, at::kLong)), Contains("'shape': (7,), }"));
  CHECK_THAT(vt::EncodeNpy(at::zeros({1, 2, 3}, at::kByte)), Contains("'descr': '|u1'"));
  CHECK_THAT(vt::EncodeNpy(at::zeros({2}, at::kBool)), Contains("'descr': '|b1'"));
  for (int64_t n : {0, 1, 9, 10, 12345}) {
    CHECK(vt::EncodeNpy(at::zeros({n, 3})).find('\n') % 64 == 63);
  }
}

TEST_CASE("npy round trips every supported dtype bit for bit", "[npy]") {
  for (auto type : {at::kDouble, at::kFloat, at::kHalf, at::kLong, at::kInt, at::kShort, at::kChar,
                    at::kByte, at::kBool}) {
    at::Tensor t = (at::arange(60, at::kDouble).reshape({3, 4, 5}) * 1.37 - 20).to(type);
    at::Tensor back = vt::DecodeNpy(vt::EncodeNpy(t), "test");
    CHECK(back.scalar_type() == type);
    CHECK(at::equal(back, t));
  }
  // Non-contiguous input is written in C order.
  at::Tensor m = at::arange(6, at::kDouble).reshape({2, 3}).t();
  CHECK(at::equal(vt::DecodeNpy(vt::EncodeNpy(m), "test"), m.contiguous()));
}

TEST_CASE("npy decoding rejects malformed files with a clear message", "[npy]") {
  std::string good = vt::EncodeNpy(at::zeros({4}, at::kDouble));
  auto with_dict = [&](const std::string& dict) {
    std::string b = good;
    std::string padded = dict + std::string(118 - dict.size() - 1, ' ') + "\n";
    return b.replace(10, 118, padded);
  };
  CHECK_THROWS_WITH(vt::DecodeNpy("hello", "f"), Contains("not a .npy file"));
  CHECK_THROWS_WITH(vt::DecodeNpy(good.substr(0, 50), "f"), Contains("truncated .npy header"));
  CHECK_THROWS_WITH(vt::DecodeNpy(good.substr(0, good.size() - 1), "f"), Contains("(truncated)"));
  CHECK_THROWS_WITH(vt::DecodeNpy(good + "x", "f"), Contains("data is 33 bytes"));
  // A shape far larger than the data is refused before anything is allocated (found by the
  // fuzzer: 2 x 444444444444444 x 3 int64 values, 21 PB, with 16 bytes of data).
  CHECK_THROWS_WITH(
      vt::DecodeNpy(
          with_dict(
              "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 444444444444444, 3), }") +
              std::string(16, '\0'),
          "f"),
      Contains("needs 21333333333333312"));
  std::string v9 = good;
  v9[6] = 9;
  CHECK_THROWS_WITH(vt::DecodeNpy(v9, "f"), Contains("unsupported .npy format version 9"));
  CHECK_THROWS_WITH(
      vt::DecodeNpy(with_dict("{'descr': '<f8', 'fortran_order': True, 'shape': (4,), }"), "f"),
      Contains("Fortran-order"));
  CHECK_THROWS_WITH(
      vt::DecodeNpy(with_dict("{'descr': '>f8', 'fortran_order': False, 'shape': (4,), }"), "f"),
      Contains("big-endian"));
  CHECK_THROWS_WITH(
      vt::DecodeNpy(with_dict("{'descr': '<c16', 'fortran_order': False, 'shape': (2,), }"), "f"),
      Contains("unsupported dtype '<c16'"));
  CHECK_THROWS_WITH(
      vt::DecodeNpy(with_dict("{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (4,), }"),
                    "f"),
      Contains("structured dtypes are not supported"));
  CHECK_THROWS_WITH(vt::DecodeNpy(with_dict("{'descr': '<f8', 'shape': (4,), }"), "f"),
                    Contains("header lacks"));
  CHECK_THROWS_WITH(
      vt::DecodeNpy(with_dict("{'descr': '<f8', 'fortran_order': False, 'shape': (x,), }"), "f"),
      Contains("shape must be a tuple of integers"));
  std::string bad_bool = vt::EncodeNpy(at::zeros({3}, at::kBool));
  bad_bool.back() = 7;
  CHECK_THROWS_WITH(vt::DecodeNpy(bad_bool, "f"), Contains("bool array holds byte 7"));
  CHECK_THROWS_AS(vt::LoadNpy("/nonexistent/file.npy"), vt::Error);
}
