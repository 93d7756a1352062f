// Device profiles: named bundles of settings that change the order in which floating-point
// sums are computed, so that honest machines disagree in the last bits exactly as different
// GPUs do. The trainer, auditor and judge each run under a profile; replay must be bit-exact
// across every pair of them.
//
// Settings are of two kinds:
//  - in-process: intra-op thread count, the GEMM order (BLAS as is, split-K, or a pairwise
//    blocked order of our own) and the reduction order. ActivateProfile() switches them at any
//    time, so a trainer and an auditor on different profiles can live in one process.
//  - device: the "cuda" profile runs the same kernels on an NVIDIA GPU (cuBLAS for matrix
//    products, ATen's CUDA reductions and index-add) when this vtrun's LibTorch was built
//    with CUDA and a GPU is visible; values move to the GPU for each such op and back, and
//    rounding stays on the CPU. Elsewhere it is listed as unavailable, saying why.
//  - process-level: environment variables read when libraries load (which libblas.so.3 the
//    loader picks, OpenBLAS's kernel generation, ATen's vector width). They need a fresh
//    process: `vtrun --profile NAME` sets them and re-executes itself.
//
// All computation that the profile should affect goes through Matmul(), Linear(), Sum() and
// IndexAddRows() here (convolutions are im2col + Matmul; normalisations, softmax, the loss
// and broadcast gradients reduce through Sum, runtime/nn/reduce.h). Thread-safety: the active
// profile is process-wide; activate it from the thread that runs the step.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace vt {

enum class GemmOrder {
  kBlas,      // one BLAS call
  kSplitK,    // K split into `gemm_chunks` parts, partial products added left to right
  kPairwise,  // K split into `gemm_chunks` parts, partial products added as a balanced tree
};

enum class ReduceOrder {
  kAten,      // ATen's own (depends on the thread count); batch norm's fused sums: one range
  kChunked,   // the reduced extent split into `reduce_chunks` parts, added left to right
  kPairwise,  // split into `reduce_chunks` parts, added as a balanced tree
};

struct Profile {
  std::string name;
  std::string description;
  // Process-level environment, applied by `vtrun --profile` before re-executing. Empty for
  // in-process profiles.
  std::vector<std::pair<std::string, std::string>> env;
  int threads = 0;  // intra-op threads; 0 = DefaultThreadCount() (VTRUN_THREADS, else 1)
  GemmOrder gemm = GemmOrder::kBlas;
  int gemm_chunks = 1;
  ReduceOrder reduce = ReduceOrder::kAten;
  int reduce_chunks = 1;
  // CPU features the profile needs (names as __builtin_cpu_supports takes them), and the
  // ATen CPU capability it must run with ("AVX2", "AVX512", "NO AVX"; empty: any).
  std::vector<std::string> cpu_features;
  std::string aten_capability;
  // Runs Matmul, Sum, IndexAddRows (and Conv2d's product) on CUDA device 0 with the GPU's
  // own kernels; gemm and reduce orders are then the GPU's (cuBLAS, ATen's CUDA kernels).
  bool cuda = false;

  bool process_level() const { return !env.empty(); }
  // Empty when this machine can run the profile, else why not (a missing CPU feature, no
  // CUDA in this LibTorch, no GPU).
  std::string Unavailable() const;
  // "splitk:4", "pairwise:8", "blas" or "cublas".
  std::string GemmName() const;
  std::string ReduceName() const;
};

// The profiles vtrun ships, in a fixed order; "native" first.
const std::vector<Profile>& ShippedProfiles();

// The shipped profile called `name`; throws vt::Error listing the valid names.
const Profile& FindProfile(const std::string& name);

// Makes `profile` current: sets threads and kernel orders. For a process-level profile, first
// checks that this process was started with its environment (VTRUN_PROFILE=name, set by
// `vtrun --profile`), and throws vt::Error saying how to start it otherwise.
void ActivateProfile(const Profile& profile);

// The profile in effect: the last one activated, else the one named by VTRUN_PROFILE, else
// "native".
const Profile& CurrentProfile();

// The file the dynamic loader resolved for libblas.so.3 in this process (for diagnostics).
std::string LoadedBlasLibrary();

// Whether this process can run CUDA work: LibTorch built with CUDA (libtorch_cuda is loaded
// on first call if it was not linked) and at least one GPU. Empty when it can, else why not.
std::string CudaUnavailable();

// The vector width ATen's CPU kernels run with in this process ("AVX2", "AVX512", "NO AVX" for the
// scalar kernels), as at::show_config() reports it.
std::string AtenCpuCapability();

// ---- kernels whose summation order follows the current profile ----

// Matrix product with the semantics of at::matmul (1-d, 2-d and batched operands, broadcasting
// batch dimensions); the contraction is split per the profile's GemmOrder. float64 or float32.
at::Tensor Matmul(const at::Tensor& a, const at::Tensor& b);

// x @ w^T (+ bias), x [..., in], w [out, in], bias [out] or undefined.
at::Tensor Linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias);

// Sum over `dims` (empty: all) with the profile's ReduceOrder.
at::Tensor Sum(const at::Tensor& x, at::IntArrayRef dims = {}, bool keepdim = false);

// How a kernel that fuses sums into a pass of its own (batch norm's statistics and parameter
// gradients, nn/batch_norm.cc; layer norm's, nn/layer_norm.cc) orders them under the current
// profile, as Sum splits the first reduced dimension: the ranges (first, count) of that
// extent (a batch's images, a row's columns, a matrix's rows) whose partial sums it takes,
// added left to right or as a balanced tree (CombinePartialSums). kAten has one range, summed
// in the kernel's own order. No split (nullopt) under the CUDA profile, whose sums run on the
// GPU through Sum.
struct SumSplit {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  bool pairwise = false;
};
std::optional<SumSplit> FusedSumSplit(int64_t extent);

// Adds partial results of one shape left to right or as a balanced tree, as Sum and Matmul
// add theirs. `parts` must not be empty.
at::Tensor CombinePartialSums(std::vector<at::Tensor> parts, bool pairwise);

// out[index[i]] += values[i] for the rows of values [N, D] (index int64 [N], each in
// [0, rows)); returns [rows, D]. Rows that share an index are added in the profile's order
// (ATen's index_add, or the N rows split into reduce_chunks parts whose partial results
// are added left to right or as a tree), as an embedding's backward on a GPU adds them in
// its own order.
at::Tensor IndexAddRows(const at::Tensor& values, const at::Tensor& index, int64_t rows);

// 2-d convolution as im2col + one Matmul (groups = 1), x [N, C, H, W], w [O, C, kh, kw],
// bias [O] or undefined. Returns [N, O, H', W'].
at::Tensor Conv2d(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias,
                  at::IntArrayRef stride, at::IntArrayRef padding);

}  // namespace vt
