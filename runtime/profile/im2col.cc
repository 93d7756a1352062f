#include "runtime/profile/im2col.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

namespace vt {
namespace {

// The output columns ox in [*lo, *hi) whose input column ox*stride - pad + kj lies in [0, w).
void ValidRange(int64_t ow, int64_t w, int64_t stride, int64_t pad, int64_t kj, int64_t* lo,
                int64_t* hi) {
  const int64_t shift = pad - kj;  // ix = ox*stride - shift
  *lo = shift > 0 ? (shift + stride - 1) / stride : 0;
  *hi = w + shift > 0 ? std::min<int64_t>(ow, (w + shift - 1) / stride + 1) : 0;
  if (*hi < *lo) *hi = *lo;
}

template <typename T>
void Im2ColKernel(const T* x, T* cols, int64_t n, int64_t c, int64_t h, int64_t w, int64_t kh,
                  int64_t kw, int64_t stride, int64_t pad, int64_t oh, int64_t ow) {
  const int64_t l = oh * ow, row_len = n * l;
  at::parallel_for(0, c, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t ch = c0; ch < c1; ++ch) {
      for (int64_t ki = 0; ki < kh; ++ki) {
        for (int64_t kj = 0; kj < kw; ++kj) {
          T* row = cols + ((ch * kh + ki) * kw + kj) * row_len;
          int64_t lo, hi;
          ValidRange(ow, w, stride, pad, kj, &lo, &hi);
          for (int64_t img = 0; img < n; ++img) {
            const T* src = x + (img * c + ch) * h * w;
            T* dst = row + img * l;
            for (int64_t oy = 0; oy < oh; ++oy) {
              const int64_t iy = oy * stride - pad + ki;
              T* out = dst + oy * ow;
              if (iy < 0 || iy >= h) {
                for (int64_t ox = 0; ox < ow; ++ox) out[ox] = T(0);
                continue;
              }
              const T* in = src + iy * w - pad + kj;  // in[ox * stride] is column ox's input
              for (int64_t ox = 0; ox < lo; ++ox) out[ox] = T(0);
              if (stride == 1) {
                for (int64_t ox = lo; ox < hi; ++ox) out[ox] = in[ox];
              } else {
                for (int64_t ox = lo; ox < hi; ++ox) out[ox] = in[ox * stride];
              }
              for (int64_t ox = hi; ox < ow; ++ox) out[ox] = T(0);
            }
          }
        }
      }
    }
  });
}

// One tap's plane of one image in Col2Im: out[iy, ix] += in[oy, ox] for every output position
// (oy, ox) whose tap (ki, kj) reaches input (iy, ix) = (oy * stride - pad + ki, ox * stride -
// pad + kj); columns [lo, hi) are those inside the image.
template <typename T>
inline void AddTapPlane(T* dst, const T* src, int64_t h, int64_t w, int64_t oh, int64_t ow,
                        int64_t stride, int64_t pad, int64_t ki, int64_t kj, int64_t lo,
                        int64_t hi) {
  for (int64_t oy = 0; oy < oh; ++oy) {
    const int64_t iy = oy * stride - pad + ki;
    if (iy < 0 || iy >= h) continue;
    T* out = dst + iy * w - pad + kj;  // out[ox * stride] is column ox's input
    const T* in = src + oy * ow;
    if (stride == 1) {
      for (int64_t ox = lo; ox < hi; ++ox) out[ox] += in[ox];
    } else {
      for (int64_t ox = lo; ox < hi; ++ox) out[ox * stride] += in[ox];
    }
  }
}

// The float64 planes in the widest vectors this CPU has: the same bits on every ISA (each
// element takes additions, or products and additions never contracted: -ffp-contract=off).
#define VT_COL2IM_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
VT_COL2IM_CLONES void AddTapPlaneF64(double* dst, const double* src, int64_t h, int64_t w,
                                     int64_t oh, int64_t ow, int64_t stride, int64_t pad,
                                     int64_t ki, int64_t kj, int64_t lo, int64_t hi) {
  AddTapPlane<double>(dst, src, h, w, oh, ow, stride, pad, ki, kj, lo, hi);
}

// One channel's plane of Col2ImOuter: dst[q] = sum over taps t in order, from zero, of
// f[t] * taps[t][q], where taps[t] is the plane of values tap t carries to each input position
// (zero where it carries none, which adds +0 to a sum of non-negative terms: the same bits as
// skipping it). Long contiguous rows: the plane stays in L1 over the taps.
template <typename T>
inline void OuterTapsPlane(T* dst, const T* taps, const T* f, int64_t count, int64_t plane) {
  if (count == 9) {  // 3x3 kernels: one pass, the nine terms in registers
    const T* c[9];
    for (int t = 0; t < 9; ++t) c[t] = taps + t * plane;
    for (int64_t q = 0; q < plane; ++q) {
      dst[q] = ((((((((f[0] * c[0][q]) + f[1] * c[1][q]) + f[2] * c[2][q]) + f[3] * c[3][q]) +
                   f[4] * c[4][q]) +
                  f[5] * c[5][q]) +
                 f[6] * c[6][q]) +
                f[7] * c[7][q]) +
               f[8] * c[8][q];
    }
    return;
  }
  for (int64_t q = 0; q < plane; ++q) dst[q] = f[0] * taps[q];
  for (int64_t t = 1; t < count; ++t) {
    const T ft = f[t];
    const T* src = taps + t * plane;
    for (int64_t q = 0; q < plane; ++q) dst[q] += ft * src[q];
  }
}
VT_COL2IM_CLONES void OuterTapsPlaneF64(double* dst, const double* taps, const double* f,
                                        int64_t count, int64_t plane) {
  OuterTapsPlane<double>(dst, taps, f, count, plane);
}

// Col2Im of row_factor (x) cols, image by image: each tap's plane of the image's column
// factor added once into a zeroed plane (AddTapPlane: every tap reaches a position at most
// once), then each channel's plane as OuterTapsPlane over those kh*kw planes. Each element is
// 0 + f0 c0 + f1 c1 + ... in (ki, kj) order, as Col2Im adds the product's columns, for
// non-negative factors (magnitudes).
template <typename T>
void Col2ImOuterKernel(const T* cols, T* x, int64_t n, int64_t c, int64_t h, int64_t w, int64_t kh,
                       int64_t kw, int64_t stride, int64_t pad, int64_t oh, int64_t ow,
                       const T* row_factor) {
  const int64_t taps = kh * kw, plane = h * w, l = oh * ow;
  at::parallel_for(0, n, 1, [&](int64_t i0, int64_t i1) {
    std::vector<T> carried(static_cast<size_t>(taps * plane));
    for (int64_t img = i0; img < i1; ++img) {
      std::fill(carried.begin(), carried.end(), T(0));
      const T* src = cols + img * l;
      for (int64_t ki = 0; ki < kh; ++ki) {
        for (int64_t kj = 0; kj < kw; ++kj) {
          int64_t lo, hi;
          ValidRange(ow, w, stride, pad, kj, &lo, &hi);
          T* dst = carried.data() + (ki * kw + kj) * plane;
          if constexpr (std::is_same_v<T, double>) {
            AddTapPlaneF64(dst, src, h, w, oh, ow, stride, pad, ki, kj, lo, hi);
          } else {
            AddTapPlane<T>(dst, src, h, w, oh, ow, stride, pad, ki, kj, lo, hi);
          }
        }
      }
      for (int64_t ch = 0; ch < c; ++ch) {
        T* dst = x + (img * c + ch) * plane;
        const T* f = row_factor + ch * taps;
        if constexpr (std::is_same_v<T, double>) {
          OuterTapsPlaneF64(dst, carried.data(), f, taps, plane);
        } else {
          OuterTapsPlane<T>(dst, carried.data(), f, taps, plane);
        }
      }
    }
  });
}

// Col2Im of cols [C*kh*kw, N*oh*ow].
template <typename T>
void Col2ImKernel(const T* cols, T* x, int64_t n, int64_t c, int64_t h, int64_t w, int64_t kh,
                  int64_t kw, int64_t stride, int64_t pad, int64_t oh, int64_t ow) {
  const int64_t l = oh * ow, row_len = n * l;
  at::parallel_for(0, c, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t ch = c0; ch < c1; ++ch) {
      for (int64_t ki = 0; ki < kh; ++ki) {
        for (int64_t kj = 0; kj < kw; ++kj) {
          const T* row = cols + ((ch * kh + ki) * kw + kj) * row_len;
          int64_t lo, hi;
          ValidRange(ow, w, stride, pad, kj, &lo, &hi);
          for (int64_t img = 0; img < n; ++img) {
            T* dst = x + (img * c + ch) * h * w;
            const T* src = row + img * l;
            if constexpr (std::is_same_v<T, double>) {
              AddTapPlaneF64(dst, src, h, w, oh, ow, stride, pad, ki, kj, lo, hi);
            } else {
              AddTapPlane<T>(dst, src, h, w, oh, ow, stride, pad, ki, kj, lo, hi);
            }
          }
        }
      }
    }
  });
}

}  // namespace

int64_t ImagesPerChunk(int64_t c, int64_t kh, int64_t kw, int64_t l, int64_t element_size) {
  constexpr int64_t kChunkBytes = int64_t{16} << 20;
  const int64_t per_image = std::max<int64_t>(1, c * kh * kw * l * element_size);
  return std::max<int64_t>(1, kChunkBytes / per_image);
}

ConvGroups ConvGroupsFor(int64_t c, int64_t kh, int64_t kw, int64_t l, int64_t n, int64_t out_c,
                         int64_t element_size, bool serial) {
  constexpr int64_t kMinColumns = 256;
  // A group's GEMM packs the whole weight: its columns are at least the weight's size.
  const int64_t group_bytes = std::max(int64_t{1} << 20, out_c * c * kh * kw * element_size);
  const int64_t per_image = std::max<int64_t>(1, c * kh * kw * l * element_size);
  const int64_t min_images = (kMinColumns + l - 1) / std::max<int64_t>(1, l);
  const int64_t images = std::max<int64_t>(1, n);
  ConvGroups groups;
  groups.n = n;
  groups.serial = serial;
  if (serial) {
    const int64_t chunk = ImagesPerChunk(c, kh, kw, l, element_size);
    groups.groups = (images + chunk - 1) / chunk;
    return groups;
  }
  const int64_t most =
      std::min(images, std::max({int64_t{1}, group_bytes / per_image, min_images}));
  const int64_t fewest = (images + most - 1) / most;
  // Fewer than 8 groups: a power of two, up (smaller groups) unless that leaves a group fewer
  // than 256 columns, else down (groups up to twice the cache bound) where the images split
  // evenly. From 8 groups on, threads' shares differ by at most a group.
  int64_t count = fewest;
  int64_t up = 1;
  while (up < fewest) up *= 2;
  if (fewest < 8 && up != fewest) {
    if (up <= images && images / up >= min_images) {
      count = up;
    } else if (images % (up / 2) == 0) {
      count = up / 2;
    }
  }
  groups.groups = count;
  return groups;
}

void ConvGroups::ForEachRun(int64_t runs,
                            const std::function<void(int64_t, int64_t, int64_t)>& f) const {
  const int64_t total = count();
  runs = std::max<int64_t>(1, std::min(runs, total));
  auto run_range = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t g = r * total / runs; g < (r + 1) * total / runs; ++g) f(r, first(g), images(g));
    }
  };
  if (serial || runs < at::get_num_threads() || at::in_parallel_region()) {
    run_range(0, runs);
  } else {
    at::parallel_for(0, runs, 1, run_range);
  }
}

void ConvGroups::ForEach(const std::function<void(int64_t, int64_t)>& f) const {
  ForEachRun(count(), [&](int64_t, int64_t first, int64_t images) { f(first, images); });
}

at::Tensor Im2Col(const at::Tensor& input, int64_t kh, int64_t kw, int64_t stride,
                  int64_t padding) {
  at::Tensor x = input.contiguous();
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  const int64_t oh = (h + 2 * padding - kh) / stride + 1, ow = (w + 2 * padding - kw) / stride + 1;
  at::Tensor cols = at::empty({c * kh * kw, n * oh * ow}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "vt_im2col", [&] {
    Im2ColKernel<scalar_t>(x.data_ptr<scalar_t>(), cols.data_ptr<scalar_t>(), n, c, h, w, kh, kw,
                           stride, padding, oh, ow);
  });
  return cols;
}

void Col2ImInto(const at::Tensor& columns, at::Tensor& out, int64_t kh, int64_t kw, int64_t stride,
                int64_t padding) {
  TORCH_CHECK(out.dim() == 4 && out.is_contiguous() && out.scalar_type() == columns.scalar_type(),
              "Col2ImInto: want a contiguous [N, C, H, W] output of the columns' dtype");
  at::Tensor cols = columns.contiguous();
  const int64_t n = out.size(0), c = out.size(1), h = out.size(2), w = out.size(3);
  const int64_t oh = (h + 2 * padding - kh) / stride + 1, ow = (w + 2 * padding - kw) / stride + 1;
  TORCH_CHECK(cols.numel() == c * kh * kw * n * oh * ow, "Col2ImInto: ", cols.numel(),
              " column values for ", out.sizes(), ", want ", c * kh * kw * n * oh * ow);
  out.zero_();
  AT_DISPATCH_FLOATING_TYPES(cols.scalar_type(), "vt_col2im", [&] {
    Col2ImKernel<scalar_t>(cols.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), n, c, h, w, kh, kw,
                           stride, padding, oh, ow);
  });
}

at::Tensor Col2Im(const at::Tensor& columns, int64_t n, int64_t c, int64_t h, int64_t w, int64_t kh,
                  int64_t kw, int64_t stride, int64_t padding) {
  at::Tensor x = at::empty({n, c, h, w}, columns.options());
  Col2ImInto(columns, x, kh, kw, stride, padding);
  return x;
}

at::Tensor Col2ImOuter(const at::Tensor& row_factor, const at::Tensor& col_factor, int64_t n,
                       int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t stride,
                       int64_t padding) {
  at::Tensor rows = row_factor.contiguous(), cols = col_factor.contiguous();
  const int64_t oh = (h + 2 * padding - kh) / stride + 1, ow = (w + 2 * padding - kw) / stride + 1;
  TORCH_CHECK(rows.numel() == c * kh * kw && cols.numel() == n * oh * ow,
              "Col2ImOuter: factors of ", rows.numel(), " and ", cols.numel(), " values, want ",
              c * kh * kw, " and ", n * oh * ow);
  TORCH_CHECK(rows.scalar_type() == cols.scalar_type(), "Col2ImOuter: factors of two dtypes");
  at::Tensor x = at::empty({n, c, h, w}, cols.options());
  if (x.numel() == 0) return x;
  if (kh * kw == 0 || oh <= 0 || ow <= 0) return x.zero_();
  AT_DISPATCH_FLOATING_TYPES(cols.scalar_type(), "vt_col2im_outer", [&] {
    Col2ImOuterKernel<scalar_t>(cols.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), n, c, h, w, kh,
                                kw, stride, padding, oh, ow, rows.data_ptr<scalar_t>());
  });
  return x;
}

namespace {

// Each tap's norm over the positions it reaches, from sq [H, W], one channel's x^2 summed over
// the images: into out[ki * kw + kj], its positions rows then columns, as Im2Col lays them out.
template <typename T>
void TapNorms(const T* sq, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t stride,
              int64_t padding, int64_t oh, int64_t ow, T* out) {
  for (int64_t ki = 0; ki < kh; ++ki) {
    for (int64_t kj = 0; kj < kw; ++kj) {
      int64_t lo, hi;
      ValidRange(ow, w, stride, padding, kj, &lo, &hi);
      T sum = 0;
      for (int64_t oy = 0; oy < oh; ++oy) {
        const int64_t iy = oy * stride - padding + ki;
        if (iy < 0 || iy >= h) continue;
        const T* in = sq + iy * w - padding + kj;
        for (int64_t ox = lo; ox < hi; ++ox) sum += in[ox * stride];
      }
      out[ki * kw + kj] = std::sqrt(sum);
    }
  }
}

// a[i] += x[i]^2 and b[i] += x[i]^2 (ConvInputNormsOf's one pass over x), at every vector
// width the same IEEE operations.
// (The loop is inlined into one clone per element type: target_clones takes no templates.)
template <typename T>
__attribute__((always_inline)) inline void AddSquaresLoop(const T* __restrict x, int64_t n,
                                                          T* __restrict a, T* __restrict b) {
  for (int64_t i = 0; i < n; ++i) {
    const T v = x[i] * x[i];
    a[i] += v;
    b[i] += v;
  }
}
#define VT_SQUARES_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
VT_SQUARES_CLONES void AddSquares(const double* x, int64_t n, double* a, double* b) {
  AddSquaresLoop(x, n, a, b);
}
VT_SQUARES_CLONES void AddSquares(const float* x, int64_t n, float* a, float* b) {
  AddSquaresLoop(x, n, a, b);
}

}  // namespace

at::Tensor Im2ColRowNorms(const at::Tensor& input, int64_t kh, int64_t kw, int64_t stride,
                          int64_t padding) {
  at::Tensor x = input.contiguous();
  TORCH_CHECK(x.dim() == 4, "Im2ColRowNorms: want [N, C, H, W], got ", x.sizes());
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  const int64_t oh = (h + 2 * padding - kh) / stride + 1, ow = (w + 2 * padding - kw) / stride + 1;
  at::Tensor out = at::empty({c * kh * kw, 1}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "vt_im2col_row_norms", [&] {
    const scalar_t* px = x.data_ptr<scalar_t>();
    scalar_t* po = out.data_ptr<scalar_t>();
    at::parallel_for(0, c, 1, [&](int64_t c0, int64_t c1) {
      std::vector<scalar_t> sq(static_cast<size_t>(h * w));
      for (int64_t ch = c0; ch < c1; ++ch) {
        // x[:, ch]^2 summed over the images, in image order.
        std::fill(sq.begin(), sq.end(), scalar_t(0));
        for (int64_t img = 0; img < n; ++img) {
          const scalar_t* plane = px + (img * c + ch) * h * w;
          for (int64_t i = 0; i < h * w; ++i) sq[i] += plane[i] * plane[i];
        }
        TapNorms(sq.data(), h, w, kh, kw, stride, padding, oh, ow, po + ch * kh * kw);
      }
    });
  });
  return out;
}

ConvInputNorms ConvInputNormsOf(const at::Tensor& input, int64_t kh, int64_t kw, int64_t stride,
                                int64_t padding) {
  at::Tensor x = input.contiguous();
  TORCH_CHECK(x.dim() == 4, "ConvInputNormsOf: want [N, C, H, W], got ", x.sizes());
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3), hw = h * w;
  const int64_t oh = (h + 2 * padding - kh) / stride + 1, ow = (w + 2 * padding - kw) / stride + 1;
  // x^2 summed over the channels (per image) and over the images (per channel), in channel and
  // image order; the plane's positions split over threads, so no sum depends on them.
  at::Tensor over_channels = at::zeros({n, hw}, x.options());
  at::Tensor over_images = at::zeros({c, hw}, x.options());
  ConvInputNorms out{at::empty({n, 1, oh, ow}, x.options()),
                     at::empty({c * kh * kw, 1}, x.options())};
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "vt_conv_input_norms", [&] {
    const scalar_t* px = x.data_ptr<scalar_t>();
    scalar_t* sc = over_channels.data_ptr<scalar_t>();
    scalar_t* si = over_images.data_ptr<scalar_t>();
    const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(1, n * c));
    at::parallel_for(0, hw, grain, [&](int64_t p0, int64_t p1) {
      for (int64_t img = 0; img < n; ++img) {
        scalar_t* to_c = sc + img * hw;
        for (int64_t ch = 0; ch < c; ++ch) {
          const scalar_t* row = px + (img * c + ch) * hw;
          scalar_t* to_i = si + ch * hw;
          AddSquares(row + p0, p1 - p0, to_c + p0, to_i + p0);
        }
      }
    });
    // Each output position's window over over_channels, taps in (ki, kj) order, padding left
    // out (its zeros add nothing).
    scalar_t* pw = out.windows.data_ptr<scalar_t>();
    at::parallel_for(0, n, 1, [&](int64_t i0, int64_t i1) {
      for (int64_t img = i0; img < i1; ++img) {
        const scalar_t* sq = sc + img * hw;
        scalar_t* acc = pw + img * oh * ow;
        std::fill(acc, acc + oh * ow, scalar_t(0));
        for (int64_t ki = 0; ki < kh; ++ki) {
          for (int64_t kj = 0; kj < kw; ++kj) {
            int64_t lo, hi;
            ValidRange(ow, w, stride, padding, kj, &lo, &hi);
            for (int64_t oy = 0; oy < oh; ++oy) {
              const int64_t iy = oy * stride - padding + ki;
              if (iy < 0 || iy >= h) continue;
              const scalar_t* in = sq + iy * w - padding + kj;
              scalar_t* dst = acc + oy * ow;
              for (int64_t ox = lo; ox < hi; ++ox) dst[ox] += in[ox * stride];
            }
          }
        }
        for (int64_t i = 0; i < oh * ow; ++i) acc[i] = std::sqrt(acc[i]);
      }
    });
    scalar_t* pt = out.taps.data_ptr<scalar_t>();
    at::parallel_for(0, c, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t ch = c0; ch < c1; ++ch) {
        TapNorms(si + ch * hw, h, w, kh, kw, stride, padding, oh, ow, pt + ch * kh * kw);
      }
    });
  });
  return out;
}

}  // namespace vt
