// The project's convolution (im2col + GEMMs over groups of images, profile-ordered) against ATen's,
// forward and backward, over strides, paddings and kernel sizes; and im2col against ATen's layout.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/autograd.h>

#include <catch2/catch.hpp>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "runtime/nn/autograd.h"
#include "runtime/nn/context.h"
#include "runtime/profile/im2col.h"
#include "runtime/profile/profile.h"
#include "tests/precision/helpers.h"

TEST_CASE("Im2Col matches ATen's im2col rearranged to [C*kh*kw, N*L]", "[conv]") {
  at::Tensor x = at::randn({3, 4, 9, 8}, at::kDouble);
  for (int64_t stride : {1, 2, 3}) {
    for (int64_t pad : {0, 1, 2}) {
      at::Tensor ref = at::im2col(x, {3, 2}, {1, 1}, {pad, pad}, {stride, stride});  // [N, CKK, L]
      ref = ref.permute({1, 0, 2}).reshape({ref.size(1), -1});
      CHECK(at::equal(vt::Im2Col(x, 3, 2, stride, pad), ref));
    }
  }
}

TEST_CASE("Conv2dOp forward and backward match ATen's conv2d on every profile", "[conv]") {
  for (const char* profile : {"native", "splitk4", "blocked"}) {
    vt::ActivateProfile(vt::FindProfile(profile));
    for (int64_t k : {1, 3}) {
      for (int64_t stride : {1, 2}) {
        for (int64_t pad : {0, 1}) {
          INFO(profile << " k=" << k << " stride=" << stride << " pad=" << pad);
          at::Tensor x = at::randn({4, 5, 10, 9}, at::kDouble).set_requires_grad(true);
          at::Tensor w = at::randn({6, 5, k, k}, at::kDouble).set_requires_grad(true);
          at::Tensor b = at::randn({6}, at::kDouble).set_requires_grad(true);
          at::Tensor y = vt::nn::Conv2dOp(x, w, b, stride, pad);
          at::Tensor gy = at::randn(y.sizes(), at::kDouble);
          auto ours = torch::autograd::grad({y}, {x, w, b}, {gy});
          at::Tensor yr = at::conv2d(x, w, b, {stride, stride}, {pad, pad});
          auto ref = torch::autograd::grad({yr}, {x, w, b}, {gy});
          CHECK(at::allclose(y, yr, 1e-12, 1e-12));
          for (int i = 0; i < 3; ++i) CHECK(at::allclose(ours[i], ref[i], 1e-11, 1e-11));
        }
      }
    }
  }
  vt::ActivateProfile(vt::FindProfile("native"));
}

TEST_CASE("LinearOp and MatmulOp gradients match ATen's", "[conv]") {
  vt::ActivateProfile(vt::FindProfile("splitk4"));
  at::Tensor x = at::randn({3, 7, 11}, at::kDouble).set_requires_grad(true);
  at::Tensor w = at::randn({5, 11}, at::kDouble).set_requires_grad(true);
  at::Tensor b = at::randn({5}, at::kDouble).set_requires_grad(true);
  at::Tensor y = vt::nn::LinearOp(x, w, b);
  at::Tensor gy = at::randn(y.sizes(), at::kDouble);
  auto ours = torch::autograd::grad({y}, {x, w, b}, {gy});
  auto ref = torch::autograd::grad({at::linear(x, w, b)}, {x, w, b}, {gy});
  for (int i = 0; i < 3; ++i) CHECK(at::allclose(ours[i], ref[i], 1e-11, 1e-11));
  at::Tensor p = at::randn({2, 3, 6, 8}, at::kDouble).set_requires_grad(true);
  at::Tensor q = at::randn({2, 3, 8, 5}, at::kDouble).set_requires_grad(true);
  at::Tensor m = vt::nn::MatmulOp(p, q);
  at::Tensor gm = at::randn(m.sizes(), at::kDouble);
  auto mo = torch::autograd::grad({m}, {p, q}, {gm});
  auto mr = torch::autograd::grad({at::matmul(p, q)}, {p, q}, {gm});
  for (int i = 0; i < 2; ++i) CHECK(at::allclose(mo[i], mr[i], 1e-11, 1e-11));
  vt::ActivateProfile(vt::FindProfile("native"));
}

TEST_CASE("SplitHeadsOp and MergeHeadsOp equal ATen's views and copies, gradients too", "[conv]") {
  // Pure data movement: the values and gradients are the same bits as split, view, transpose
  // and contiguous under LibTorch's autograd (q, k and v not swapped, heads not interleaved).
  at::manual_seed(13);
  const int64_t b = 2, t = 5, heads = 3, hd = 4, d = heads * hd;
  at::Tensor qkv = at::randn({b, t, 3 * d}, at::kDouble).set_requires_grad(true);
  const std::vector<at::Tensor> ours = vt::nn::SplitHeadsOp(qkv, heads);
  std::vector<at::Tensor> ref;
  for (const at::Tensor& part : qkv.split(d, 2)) {
    ref.push_back(part.view({b, t, heads, hd}).transpose(1, 2).contiguous());
  }
  REQUIRE(ours.size() == 3);
  std::vector<at::Tensor> grads;
  for (int i = 0; i < 3; ++i) {
    CHECK(at::equal(ours[i], ref[i]));
    CHECK(ours[i].is_contiguous());
    grads.push_back(at::randn(ref[i].sizes(), at::kDouble));
  }
  const auto g_ours = torch::autograd::grad({ours[0], ours[1], ours[2]}, {qkv}, grads);
  const auto g_ref = torch::autograd::grad({ref[0], ref[1], ref[2]}, {qkv}, grads);
  CHECK(at::equal(g_ours[0], g_ref[0]));
  // One of the three unused: its gradient is zero.
  const auto g_two = torch::autograd::grad({ours[0], ours[2]}, {qkv}, {grads[0], grads[2]});
  const auto g_two_ref = torch::autograd::grad({ref[0], ref[2]}, {qkv}, {grads[0], grads[2]});
  CHECK(at::equal(g_two[0], g_two_ref[0]));

  at::Tensor x = at::randn({b, heads, t, hd}, at::kDouble).set_requires_grad(true);
  const at::Tensor merged = vt::nn::MergeHeadsOp(x);
  const at::Tensor merged_ref = x.transpose(1, 2).contiguous().view({b, t, d});
  CHECK(at::equal(merged, merged_ref));
  const at::Tensor gm = at::randn(merged.sizes(), at::kDouble);
  CHECK(at::equal(torch::autograd::grad({merged}, {x}, {gm})[0],
                  torch::autograd::grad({merged_ref}, {x}, {gm})[0]));
  // Shapes that are not an attention's: errors that name what was expected.
  CHECK_THROWS_WITH(vt::nn::SplitHeadsOp(at::zeros({2, 5, 10}, at::kDouble), 3),
                    Catch::Contains("D divisible by 3 heads") && Catch::Contains("[2, 5, 10]"));
  CHECK_THROWS_WITH(vt::nn::MergeHeadsOp(at::zeros({2, 5, 10}, at::kDouble)),
                    Catch::Contains("[B, H, T, hd]"));
}

// Convolution geometries for the col2im tests: kernel k x k, square stride and padding.
struct Geometry {
  int64_t n, c, h, w, k, stride, pad;
  int64_t oh() const { return (h + 2 * pad - k) / stride + 1; }
  int64_t ow() const { return (w + 2 * pad - k) / stride + 1; }
};
const Geometry kCol2ImGeometries[] = {
    {2, 3, 7, 9, 3, 1, 1}, {3, 2, 8, 8, 3, 2, 1}, {1, 4, 5, 6, 1, 2, 0}, {2, 1, 6, 5, 5, 1, 2}};

TEST_CASE("Col2Im adds each element's taps in (ki, kj) order from zero, bit for bit", "[conv]") {
  // The contract every profile's input gradient rests on (and the order a replay on another
  // version must meet): element (img, ch, y, x) is 0 + the terms of its taps, row by row of
  // the kernel, whatever order the kernel walks images and taps in.
  at::manual_seed(12);
  for (const Geometry& g : kCol2ImGeometries) {
    const int64_t oh = g.oh(), ow = g.ow();
    // Terms of mixed magnitudes, so that another order of additions shows in the bits.
    const at::Tensor cols =
        at::randn({g.c * g.k * g.k, g.n * oh * ow}, at::kDouble) *
        at::pow(10.0, at::randint(-8, 9, {g.c * g.k * g.k, g.n * oh * ow}, at::kDouble));
    const at::Tensor got = vt::Col2Im(cols, g.n, g.c, g.h, g.w, g.k, g.k, g.stride, g.pad);
    at::Tensor want = at::zeros({g.n, g.c, g.h, g.w}, at::kDouble);
    auto c = cols.accessor<double, 2>();
    auto o = want.accessor<double, 4>();
    for (int64_t img = 0; img < g.n; ++img) {
      for (int64_t ch = 0; ch < g.c; ++ch) {
        for (int64_t ki = 0; ki < g.k; ++ki) {
          for (int64_t kj = 0; kj < g.k; ++kj) {
            for (int64_t oy = 0; oy < oh; ++oy) {
              for (int64_t ox = 0; ox < ow; ++ox) {
                const int64_t y = oy * g.stride - g.pad + ki, x = ox * g.stride - g.pad + kj;
                if (y < 0 || y >= g.h || x < 0 || x >= g.w) continue;
                o[img][ch][y][x] += c[(ch * g.k + ki) * g.k + kj][(img * oh + oy) * ow + ox];
              }
            }
          }
        }
      }
    }
    CHECK(at::equal(got, want));
  }
}

TEST_CASE("Col2ImOuter equals Col2Im of the outer product, bit for bit, on any thread count",
          "[conv]") {
  at::manual_seed(11);
  // Non-negative factors (magnitudes) of mixed sizes, so that another order of the taps'
  // additions shows in the bits.
  auto factors = [](int64_t count) {
    return at::rand({count}, at::kDouble) * at::pow(10.0, at::randint(-8, 9, {count}, at::kDouble));
  };
  for (const Geometry& g : kCol2ImGeometries) {
    const int64_t oh = g.oh(), ow = g.ow();
    const at::Tensor rows = factors(g.c * g.k * g.k).view({-1, 1});
    const at::Tensor cols = factors(g.n * oh * ow).view({1, -1});
    const at::Tensor want = vt::Col2Im(rows * cols, g.n, g.c, g.h, g.w, g.k, g.k, g.stride, g.pad);
    for (int threads : {1, 3}) {
      vt::precision::testing::ThreadGuard restore_threads;
      at::set_num_threads(threads);
      CHECK(at::equal(vt::Col2ImOuter(rows, cols, g.n, g.c, g.h, g.w, g.k, g.k, g.stride, g.pad),
                      want));
    }
    const at::Tensor rf = rows.to(at::kFloat), cf = cols.to(at::kFloat);
    CHECK(at::equal(vt::Col2ImOuter(rf, cf, g.n, g.c, g.h, g.w, g.k, g.k, g.stride, g.pad),
                    vt::Col2Im(rf * cf, g.n, g.c, g.h, g.w, g.k, g.k, g.stride, g.pad)));
  }
  // 5 and 7 factors where one 3x3 channel over a 3x3 image (padding 1) needs 9 and 9.
  CHECK_THROWS(vt::Col2ImOuter(at::rand({5}, at::kDouble), at::rand({7}, at::kDouble), 1, 1, 3, 3,
                               3, 3, 1, 1));
}

TEST_CASE("Im2ColRowNorms equals the norms of Im2Col's rows, on any thread count", "[conv]") {
  at::manual_seed(12);
  struct Geometry {
    int64_t n, c, h, w, kh, kw, stride, pad;
  };
  for (const Geometry& g : {Geometry{2, 3, 7, 9, 3, 3, 1, 1}, Geometry{3, 2, 8, 8, 3, 3, 2, 1},
                            Geometry{1, 4, 5, 6, 1, 1, 2, 0}, Geometry{2, 1, 6, 5, 5, 5, 1, 2},
                            Geometry{2, 2, 9, 7, 7, 3, 2, 3}, Geometry{1, 1, 2, 2, 3, 3, 1, 1}}) {
    INFO("n " << g.n << " c " << g.c << " " << g.h << "x" << g.w << " kernel " << g.kh << "x"
              << g.kw << " stride " << g.stride << " padding " << g.pad);
    const at::Tensor x = at::randn({g.n, g.c, g.h, g.w}, at::kDouble);
    const at::Tensor cols = vt::Im2Col(x, g.kh, g.kw, g.stride, g.pad);
    const at::Tensor want = at::linalg_vector_norm(cols, 2, {1}, /*keepdim=*/true);
    const int before = at::get_num_threads();
    at::set_num_threads(1);
    const at::Tensor one = vt::Im2ColRowNorms(x, g.kh, g.kw, g.stride, g.pad);
    at::set_num_threads(2);
    const at::Tensor two = vt::Im2ColRowNorms(x, g.kh, g.kw, g.stride, g.pad);
    at::set_num_threads(before);
    REQUIRE(one.sizes() == want.sizes());
    CHECK(at::allclose(one, want, 1e-14, 0.0));
    CHECK(at::equal(one, two));
    // A channels-last input is read as its values, not its memory order.
    CHECK(at::equal(vt::Im2ColRowNorms(x.contiguous(at::MemoryFormat::ChannelsLast), g.kh, g.kw,
                                       g.stride, g.pad),
                    one));
  }
}

TEST_CASE("ConvInputNormsOf: window norms and tap norms from one pass, on any thread count",
          "[conv]") {
  vt::precision::testing::ThreadGuard threads;
  at::manual_seed(14);
  struct Geometry {
    int64_t n, c, h, w, kh, kw, stride, pad;
  };
  for (const Geometry& g : {Geometry{2, 3, 7, 9, 3, 3, 1, 1}, Geometry{3, 2, 8, 8, 3, 3, 2, 1},
                            Geometry{1, 4, 5, 6, 1, 1, 2, 0}, Geometry{2, 1, 6, 5, 5, 5, 1, 2},
                            Geometry{2, 2, 9, 7, 7, 3, 2, 3}, Geometry{1, 1, 2, 2, 3, 3, 1, 1},
                            Geometry{3, 5, 4, 4, 3, 3, 1, 1}}) {
    INFO("n " << g.n << " c " << g.c << " " << g.h << "x" << g.w << " kernel " << g.kh << "x"
              << g.kw << " stride " << g.stride << " padding " << g.pad);
    // Magnitudes far apart, so a sum in another order shows in the bits.
    const at::Tensor x = at::randn({g.n, g.c, g.h, g.w}, at::kDouble) *
                         at::exp(3.0 * at::randn({g.n, g.c, g.h, g.w}, at::kDouble));
    at::set_num_threads(1);
    const vt::ConvInputNorms one = vt::ConvInputNormsOf(x, g.kh, g.kw, g.stride, g.pad);
    at::set_num_threads(3);
    const vt::ConvInputNorms three = vt::ConvInputNormsOf(x, g.kh, g.kw, g.stride, g.pad);
    // The windows: the window sums of x^2 over the channels, as Im2Col of that one channel
    // lays them out.
    const at::Tensor sq = (x * x).sum(1, true);
    const int64_t oh = (g.h + 2 * g.pad - g.kh) / g.stride + 1;
    const int64_t ow = (g.w + 2 * g.pad - g.kw) / g.stride + 1;
    const at::Tensor want =
        vt::Im2Col(sq, g.kh, g.kw, g.stride, g.pad).sum(0).sqrt().view({g.n, 1, oh, ow});
    REQUIRE(one.windows.sizes() == want.sizes());
    CHECK(at::allclose(one.windows, want, 1e-14, 0.0));
    CHECK(at::equal(one.windows, three.windows));
    CHECK(at::equal(one.taps, vt::Im2ColRowNorms(x, g.kh, g.kw, g.stride, g.pad)));
    CHECK(at::equal(one.taps, three.taps));
    const vt::ConvInputNorms cl = vt::ConvInputNormsOf(x.contiguous(at::MemoryFormat::ChannelsLast),
                                                       g.kh, g.kw, g.stride, g.pad);
    CHECK(at::equal(cl.windows, one.windows));
  }
  // float32 too, and the window norms of an input of one position per channel.
  const at::Tensor xf = at::randn({2, 3, 5, 5}, at::kFloat);
  CHECK(at::allclose(vt::ConvInputNormsOf(xf, 3, 3, 1, 1).taps,
                     vt::Im2ColRowNorms(xf.to(at::kDouble), 3, 3, 1, 1).to(at::kFloat), 1e-6));
  const at::Tensor x1 = at::randn({4, 6, 1, 1}, at::kDouble);
  CHECK(at::allclose(vt::ConvInputNormsOf(x1, 1, 1, 1, 0).windows.view({4}),
                     at::linalg_vector_norm(x1.view({4, 6}), 2, {1}), 1e-14, 0.0));
}

TEST_CASE("ConvGroups: groups fit the cache, and every image is visited once, runs in order",
          "[conv]") {
  // 16 channels of 28x28, 3x3: 903 KB of columns per image, one image per group.
  CHECK(vt::ConvGroupsFor(16, 3, 3, 28 * 28, 64, 16, sizeof(double)).per_group() == 1);
  // 4x4 outputs: enough images for 256 columns, and columns at least the weight's 18.9 MB.
  CHECK(vt::ConvGroupsFor(64, 3, 3, 16, 64, 4, sizeof(double)).per_group() == 16);
  CHECK(vt::ConvGroupsFor(512, 3, 3, 16, 64, 512, sizeof(double)).per_group() == 32);
  // Never more images than the batch; a device profile keeps the 16 MiB chunks.
  CHECK(vt::ConvGroupsFor(1, 1, 1, 4, 3, 1, sizeof(double)).per_group() == 3);
  CHECK(vt::ConvGroupsFor(64, 3, 3, 40 * 40, 9, 8, sizeof(double), true).per_group() ==
        vt::ImagesPerChunk(64, 3, 3, 40 * 40, sizeof(double)));
  const int before = at::get_num_threads();
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    for (int64_t n : {1, 7, 10, 23}) {
      vt::ConvGroups groups;
      groups.n = n;
      groups.groups = (n + 2) / 3;
      for (int64_t runs : {1, 2, 3, 8}) {
        INFO("threads " << threads << " n " << n << " runs " << runs);
        // Per run, the groups it saw, in the order it saw them (each run is one task).
        std::vector<std::vector<std::pair<int64_t, int64_t>>> seen(static_cast<size_t>(runs));
        groups.ForEachRun(runs, [&](int64_t run, int64_t first, int64_t count) {
          REQUIRE(run >= 0);
          REQUIRE(run < runs);
          seen[static_cast<size_t>(run)].emplace_back(first, count);
        });
        int64_t next = 0, visited = 0;
        for (const auto& run : seen) {
          for (const auto& [first, count] : run) {
            CHECK(first == next);
            // Sizes differ by at most one: n / groups rounded down or up.
            CHECK(count >= n / groups.groups);
            CHECK(count <= groups.per_group());
            next = first + count;
            ++visited;
          }
        }
        CHECK(next == n);
        CHECK(visited == groups.count());
      }
    }
  }
  at::set_num_threads(before);
}

TEST_CASE(
    "ConvGroups: a batch splits into a power of two of even groups, equal shares for 2 "
    "threads",
    "[conv]") {
  // ResNet-50's 7x7 layers at batch 16: the cache bound allows 6 images (256 channels, 3x3)
  // and 5 (128 -> 512, 1x1 at 14x14), which made groups of 6, 6, 4 and 5, 5, 5, 1; 10 (1024 ->
  // 512 at 7x7) made 10 and 6.
  struct Case {
    int64_t c, k, l, out_c;
  };
  for (const Case& s : {Case{256, 3, 49, 256}, Case{128, 1, 196, 512}, Case{1024, 1, 49, 512},
                        Case{1024, 1, 49, 256}}) {
    INFO("c " << s.c << " k " << s.k << " l " << s.l << " out " << s.out_c);
    const vt::ConvGroups groups =
        vt::ConvGroupsFor(s.c, s.k, s.k, s.l, 16, s.out_c, sizeof(double));
    CHECK((groups.count() == 2 || groups.count() == 4));
    const int before = at::get_num_threads();
    at::set_num_threads(2);
    std::mutex mu;
    std::map<int, int64_t> images_by_thread;
    groups.ForEach([&](int64_t, int64_t count) {
      std::lock_guard<std::mutex> lock(mu);
      images_by_thread[at::get_thread_num()] += count;
    });
    at::set_num_threads(before);
    REQUIRE(images_by_thread.size() == 2);
    for (const auto& [thread, images] : images_by_thread) CHECK(images == 8);
  }
  // Rounding up would leave 12 images of 16 columns (192): rounded down, 2 groups of 24.
  const vt::ConvGroups down = vt::ConvGroupsFor(64, 3, 3, 16, 48, 4, sizeof(double));
  CHECK(down.count() == 2);
  CHECK(down.per_group() == 24);
  // 52 images, at most 16 a group: 4 groups of 13 (not 16, 16, 16 and 4).
  const vt::ConvGroups up = vt::ConvGroupsFor(64, 3, 3, 16, 52, 4, sizeof(double));
  CHECK(up.count() == 4);
  CHECK(up.images(0) == 13);
  CHECK(up.images(3) == 13);
  // An uneven batch: 11 images in 4 groups of 2 or 3 (the cache bound is 5 images of 14x14).
  const vt::ConvGroups odd = vt::ConvGroupsFor(128, 1, 1, 196, 11, 512, sizeof(double));
  CHECK(odd.count() == 4);
  for (int64_t g = 0; g < 4; ++g) CHECK((odd.images(g) == 2 || odd.images(g) == 3));
  CHECK(odd.first(2) == 5);
}

TEST_CASE("Conv2dOp's results are the same bits on 1 and 2 threads, over groups and runs",
          "[conv]") {
  // 12 images of 16 channels of 28x28: one image per group, 12 groups in 8 weight runs, run in
  // parallel on 2 threads (each GEMM on its task's thread) and in order on 1.
  vt::ActivateProfile(vt::FindProfile("native"));
  REQUIRE(vt::ConvGroupsFor(16, 3, 3, 28 * 28, 12, 8, sizeof(double)).count() == 12);
  at::manual_seed(52);
  at::Tensor x = at::randn({12, 16, 28, 28}, at::kDouble).set_requires_grad(true);
  at::Tensor w = at::randn({8, 16, 3, 3}, at::kDouble).set_requires_grad(true);
  at::Tensor b = at::randn({8}, at::kDouble).set_requires_grad(true);
  const at::Tensor gy = at::randn({12, 8, 28, 28}, at::kDouble);
  auto run = [&](int threads) {
    at::set_num_threads(threads);
    at::Tensor y = vt::nn::Conv2dOp(x, w, b, 1, 1);
    auto grads = torch::autograd::grad({y}, {x, w, b}, {gy});
    grads.insert(grads.begin(), y.detach());
    return grads;
  };
  const int before = at::get_num_threads();
  const auto one = run(1), two = run(2);
  at::set_num_threads(before);
  auto ref = torch::autograd::grad({at::conv2d(x, w, b, {1, 1}, {1, 1})}, {x, w, b}, {gy});
  for (int i = 0; i < 4; ++i) {
    INFO("output " << i << " (y, then the gradients of x, w, b)");
    CHECK(at::equal(one[static_cast<size_t>(i)], two[static_cast<size_t>(i)]));
    if (i > 0) CHECK(at::allclose(one[static_cast<size_t>(i)], ref[i - 1], 1e-11, 1e-11));
  }
}

TEST_CASE("Conv2dOp over an empty batch: empty output and input gradient, zero weight gradient",
          "[conv]") {
  vt::ActivateProfile(vt::FindProfile("native"));
  vt::nn::WindowTable windows;
  for (vt::nn::Window& win : windows.by_kind) win = {0.0625, 0x1p-40};
  for (bool magnitudes : {false, true}) {
    INFO("magnitudes " << magnitudes);
    vt::nn::StepLog log;
    vt::nn::StepContext c(vt::nn::Mode::kLog, &windows, 1, &log);
    std::optional<vt::nn::StepContext::Scope> scope;
    if (magnitudes) scope.emplace(&c);
    at::Tensor x = at::randn({0, 3, 6, 5}, at::kDouble).set_requires_grad(true);
    at::Tensor w = at::randn({4, 3, 3, 3}, at::kDouble).set_requires_grad(true);
    at::Tensor b = at::randn({4}, at::kDouble).set_requires_grad(true);
    at::Tensor y = vt::nn::Conv2dOp(x, w, b, 1, 1);
    CHECK(y.sizes() == at::IntArrayRef({0, 4, 6, 5}));
    auto grads = torch::autograd::grad({y}, {x, w, b}, {at::zeros_like(y)});
    CHECK(grads[0].sizes() == x.sizes());
    CHECK(at::equal(grads[1], at::zeros_like(w)));
    CHECK(at::equal(grads[2], at::zeros_like(b)));
  }
}

TEST_CASE("Col2ImInto overwrites its output (a part of a larger tensor)", "[conv]") {
  at::Tensor x = at::randn({2, 3, 6, 5}, at::kDouble);
  const at::Tensor cols = vt::Im2Col(x, 3, 3, 1, 1);
  at::Tensor all = at::full({4, 3, 6, 5}, 7.0, at::kDouble);
  at::Tensor part = all.narrow(0, 1, 2);
  vt::Col2ImInto(cols, part, 3, 3, 1, 1);
  CHECK(at::equal(part, vt::Col2Im(cols, 2, 3, 6, 5, 3, 3, 1, 1)));
  CHECK(at::equal(all.narrow(0, 0, 1), at::full({1, 3, 6, 5}, 7.0, at::kDouble)));
  at::Tensor wrong = at::empty({2, 3, 6, 4}, at::kDouble);
  CHECK_THROWS_WITH(vt::Col2ImInto(cols, wrong, 3, 3, 1, 1),
                    Catch::Contains("Col2ImInto") && Catch::Contains("column values"));
}

TEST_CASE("Conv2dOp backward over several groups of images: gradients and their magnitudes",
          "[conv]") {
  // 64 channels of 40x40 with a 3x3 kernel: 7.4 MB of columns per image, so the backward
  // pass works on groups of one image and writes each into place.
  vt::ActivateProfile(vt::FindProfile("native"));
  REQUIRE(vt::ConvGroupsFor(64, 3, 3, 40 * 40, 3, 8, sizeof(double)).per_group() == 1);
  at::manual_seed(51);
  at::Tensor x = at::randn({3, 64, 40, 40}, at::kDouble).set_requires_grad(true);
  at::Tensor w = at::randn({8, 64, 3, 3}, at::kDouble).set_requires_grad(true);
  at::Tensor b = at::randn({8}, at::kDouble).set_requires_grad(true);
  const at::Tensor gy = at::randn({3, 8, 40, 40}, at::kDouble);
  // The input gradient's magnitude, as the step's boundary would take it.
  vt::nn::WindowTable windows;
  for (vt::nn::Window& win : windows.by_kind) win = {0.0625, 0x1p-40};
  auto run = [&](const at::Tensor& input, const at::Tensor& g) {
    vt::nn::StepLog log;
    vt::nn::StepContext c(vt::nn::Mode::kLog, &windows, 1, &log);
    vt::nn::StepContext::Scope scope(&c);
    at::Tensor y = vt::nn::Conv2dOp(input, w, b, 1, 1);
    auto grads = torch::autograd::grad({y}, {input, w, b}, {g});
    at::Tensor m = c.OfferedFor(grads[0]);
    REQUIRE(m.defined());
    return std::make_pair(grads, m.reshape(input.sizes()).clone());
  };
  const auto [ours, m_all] = run(x, gy);
  auto ref = torch::autograd::grad({at::conv2d(x, w, b, {1, 1}, {1, 1})}, {x, w, b}, {gy});
  for (int i = 0; i < 3; ++i) CHECK(at::allclose(ours[i], ref[i], 1e-11, 1e-11));
  // Each image's magnitude is its own sums, in the same order in any batch: image by image
  // gives the same bits.
  for (int64_t img = 0; img < 3; ++img) {
    INFO("image " << img);
    at::Tensor xi = x.detach().narrow(0, img, 1).clone().set_requires_grad(true);
    const auto [one, m_one] = run(xi, gy.narrow(0, img, 1).contiguous());
    CHECK(at::equal(m_one, m_all.narrow(0, img, 1)));
    CHECK(at::allclose(one[0], ours[0].narrow(0, img, 1), 1e-11, 1e-11));
  }
}

TEST_CASE("Conv2dOp's magnitudes bound the sums of |terms| of its outputs and gradients",
          "[conv]") {
  // Each magnitude must be at least the sum of the absolute values of the terms its value
  // adds (what the order of a sum can change), for the forward, the input gradient (the
  // transposed product over filters and taps) and the weight and bias gradients; computed
  // here as the same convolutions of |x|, |w| and |g|.
  vt::ActivateProfile(vt::FindProfile("native"));
  vt::nn::WindowTable windows;
  for (vt::nn::Window& win : windows.by_kind) win = {0.0625, 0x1p-40};
  at::manual_seed(53);
  for (int64_t k : {1, 2, 3}) {
    for (int64_t stride : {1, 2}) {
      for (int64_t pad : {0, 1}) {
        INFO("k=" << k << " stride=" << stride << " pad=" << pad);
        at::Tensor x = at::randn({5, 6, 11, 9}, at::kDouble).set_requires_grad(true);
        at::Tensor w = at::randn({7, 6, k, k}, at::kDouble).set_requires_grad(true);
        at::Tensor b = at::randn({7}, at::kDouble).set_requires_grad(true);
        vt::nn::StepLog log;
        vt::nn::StepContext c(vt::nn::Mode::kLog, &windows, 1, &log);
        vt::nn::StepContext::Scope scope(&c);
        at::Tensor y = vt::nn::Conv2dOp(x, w, b, stride, pad);
        const at::Tensor gy = at::randn(y.sizes(), at::kDouble);
        auto grads = torch::autograd::grad({y}, {x, w, b}, {gy});
        const at::Tensor m_y = c.OfferedFor(y).reshape(y.sizes());
        const at::Tensor m_x = c.OfferedFor(grads[0]).reshape(x.sizes());
        const at::Tensor m_w = c.TakeGradMagnitude(w).reshape(w.sizes());
        const at::Tensor m_b = c.TakeGradMagnitude(b).reshape(b.sizes());
        // The sums of |terms|: the same convolution of the absolute values.
        at::Tensor ax = x.detach().abs().set_requires_grad(true);
        at::Tensor aw = w.detach().abs().set_requires_grad(true);
        at::Tensor ab = b.detach().abs().set_requires_grad(true);
        at::Tensor ay = at::conv2d(ax, aw, ab, {stride, stride}, {pad, pad});
        auto sums = torch::autograd::grad({ay}, {ax, aw, ab}, {gy.abs()});
        const double slack = 1 - 1e-12;
        CHECK(at::all(m_y >= ay.detach() * slack).item<bool>());
        CHECK(at::all(m_x >= sums[0] * slack).item<bool>());
        CHECK(at::all(m_w >= sums[1] * slack).item<bool>());
        CHECK(at::all(m_b >= sums[2] * slack).item<bool>());
        // And, tap by tap, not far above them: over random values a Cauchy-Schwarz bound over
        // 7 filters is about pi/2 times the sum of |terms| on average. A bound over all taps
        // at once would be about sqrt(kh*kw / taps that reach) times wider still at the edges
        // and at strided positions, and give the trainer that much more room.
        const at::Tensor reached = sums[0] > 0;
        CHECK(at::equal(reached, m_x > 0));
        const double mean_ratio =
            (m_x.masked_select(reached) / sums[0].masked_select(reached)).mean().item<double>();
        CHECK(mean_ratio < 2.2);
      }
    }
  }
}
