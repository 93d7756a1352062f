// im2col / col2im in the layout one GEMM over several images wants: columns
// [C*kh*kw, N*oh*ow], so a convolution over a group of images is W[O, C*kh*kw] x cols (no
// per-image GEMMs, no transposing copies of the columns); ConvGroups splits a batch into such
// groups. Parallel over input channels (serial inside a parallel group); every output element
// is written by one thread in a fixed order, so results never depend on the thread count.
// float32/float64.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>

namespace vt {

// x [N, C, H, W] (contiguous or not) -> [C*kh*kw, N*oh*ow].
at::Tensor Im2Col(const at::Tensor& x, int64_t kh, int64_t kw, int64_t stride, int64_t padding);

// The adjoint: cols [C*kh*kw, N*oh*ow] -> [N, C, H, W], summing overlapping patches in the
// order (ki, kj) ascending. Col2ImInto writes it over `out` (contiguous [N, C, H, W]).
at::Tensor Col2Im(const at::Tensor& cols, int64_t n, int64_t c, int64_t h, int64_t w, int64_t kh,
                  int64_t kw, int64_t stride, int64_t padding);
void Col2ImInto(const at::Tensor& cols, at::Tensor& out, int64_t kh, int64_t kw, int64_t stride,
                int64_t padding);

// Col2Im(row_factor[:, None] * col_factor[None, :]) without the [C*kh*kw, N*oh*ow] product:
// row_factor has C*kh*kw values, col_factor N*oh*ow; the same bits as Col2Im of the product
// (the magnitude of a convolution's input gradient, nn/autograd.cc).
at::Tensor Col2ImOuter(const at::Tensor& row_factor, const at::Tensor& col_factor, int64_t n,
                       int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t stride,
                       int64_t padding);

// The norms of Im2Col(x)'s rows, [C*kh*kw, 1], without the columns: row (c, ki, kj) holds
// x[:, c] at the input positions tap (ki, kj) reaches (zeros in the padding), so its sum of
// squares is the sum, over those positions, of x[:, c]^2 summed over the images. The same
// terms as RowNorms(Im2Col(x)) in another order (a weight gradient's magnitude,
// nn/autograd.cc), read from x once instead of kh*kw times; the same bits on any thread count.
at::Tensor Im2ColRowNorms(const at::Tensor& x, int64_t kh, int64_t kw, int64_t stride,
                          int64_t padding);

// The norms a convolution's magnitudes take from its input x [N, C, H, W], from one pass over
// x (nn/autograd.cc):
//   windows [N, 1, oh, ow]: each output position's input window's norm over channels and taps,
//     the square root of the window sum (taps in order, the padding left out) of x^2 summed
//     over the channels in channel order;
//   taps [C*kh*kw, 1]: Im2ColRowNorms(x), the same bits.
// The same bits on any thread count; float32/float64.
struct ConvInputNorms {
  at::Tensor windows, taps;
};
ConvInputNorms ConvInputNormsOf(const at::Tensor& x, int64_t kh, int64_t kw, int64_t stride,
                                int64_t padding);

// How many images of a batch one im2col chunk holds: columns of at most ~16 MiB, so the
// buffers stay below glibc's mmap threshold and are reused instead of page-faulted in anew.
// A pure function of the shapes, so chunking is the same on every machine.
int64_t ImagesPerChunk(int64_t c, int64_t kh, int64_t kw, int64_t l, int64_t element_size);

// How a convolution splits its batch: `count` groups of consecutive images, group g the
// images [g n / count, (g + 1) n / count) (sizes differ by at most one), each group's columns
// about a core's cache (about 1 MiB, or the weight's size if larger: each GEMM packs it; at
// least one image and enough images for 256 columns). Fewer than 8 groups are a power of two,
// so that 2, 4 or 8 threads get equal shares (16 images of 7x7 outputs in three groups of 6, 6
// and 4 gave one of two threads three quarters of the work): rounded up, or down (where smaller
// groups would have fewer than 256 columns and the images split evenly). ForEach(f) calls f(first,
// count) for every group; ForEachRun(runs, f) calls f(run, first, count) for every group in order
// within `runs` contiguous runs of groups (run r: groups [r G / runs, (r + 1) G / runs)), so a
// caller can add results within a run. With at least as many tasks as LibTorch has threads they run
// in parallel (a BLAS call inside runs on its task's thread), else in order (a BLAS call uses every
// thread). The groups and runs are a pure function of the shapes, and a GEMM's element is the same
// dot product on any thread count, so no result depends on the threads.
struct ConvGroups {
  int64_t n = 0;        // images
  int64_t groups = 1;   // groups (at least 1; at most n when n > 0)
  bool serial = false;  // always in order (a device profile: one stream)

  int64_t count() const { return n == 0 ? 0 : groups; }
  int64_t first(int64_t g) const { return g * n / groups; }
  int64_t images(int64_t g) const { return first(g + 1) - first(g); }
  int64_t per_group() const { return n == 0 ? 0 : (n + groups - 1) / groups; }  // the largest
  void ForEach(const std::function<void(int64_t first, int64_t count)>& f) const;
  void ForEachRun(int64_t runs,
                  const std::function<void(int64_t run, int64_t first, int64_t count)>& f) const;
};

// The groups of a convolution of out_c filters over n images of c channels, a kh x kw kernel
// and l output positions; `serial` (a device profile) takes chunks of at most ImagesPerChunk
// images, in order.
ConvGroups ConvGroupsFor(int64_t c, int64_t kh, int64_t kw, int64_t l, int64_t n, int64_t out_c,
                         int64_t element_size, bool serial = false);

}  // namespace vt
