// Tensor printing: header, alignment, summarization, number styles.
#include "runtime/tensor/format.h"

#include <ATen/ATen.h>

#include <catch2/catch.hpp>

TEST_CASE("tensors print like torch with a dtype and shape header", "[format]") {
  CHECK(vt::FormatTensor(at::arange(4, at::kDouble).reshape({2, 2})) ==
        "vt.tensor float64 [2, 2]\n[[0.0000, 1.0000],\n [2.0000, 3.0000]]");
  CHECK(vt::FormatTensor(at::tensor({-1.5, 10.25})) == "vt.tensor float64 [2]\n[-1.5000, 10.2500]");
  CHECK(vt::FormatTensor(at::arange(3, at::kLong)) == "vt.tensor int64 [3]\n[0, 1, 2]");
  CHECK(vt::FormatTensor(at::zeros({0}, at::kFloat)) == "vt.tensor float32 [0]\n[]");
  CHECK(vt::FormatTensor(at::scalar_tensor(2.0)) == "vt.tensor float64 []\n2.0000");
}

TEST_CASE("large tensors are summarized with edge items", "[format]") {
  std::string s = vt::FormatTensor(at::arange(2000, at::kLong));
  CHECK(s == "vt.tensor int64 [2000]\n[   0,    1,    2, ..., 1997, 1998, 1999]");
  std::string m = vt::FormatTensor(at::zeros({100, 100}, at::kLong));
  CHECK(m.find("...") != std::string::npos);
  CHECK(std::count(m.begin(), m.end(), '\n') == 7);  // header, 3 rows, "...", 3 rows
}

TEST_CASE("very small or large magnitudes switch to scientific notation", "[format]") {
  CHECK(vt::FormatTensor(at::tensor({1e-7, 1.0})) ==
        "vt.tensor float64 [2]\n[1.0000e-07, 1.0000e+00]");
  CHECK(vt::FormatTensor(at::tensor({1e9})) == "vt.tensor float64 [1]\n[1.0000e+09]");
  std::string nan = vt::FormatTensor(at::tensor({std::nan(""), INFINITY, 1.0}));
  CHECK(nan == "vt.tensor float64 [3]\n[   nan,    inf, 1.0000]");
}
