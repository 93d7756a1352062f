#include "runtime/profile/profile.h"

#include <ATen/ATen.h>
#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "runtime/common/error.h"
#include "runtime/common/init.h"
#include "runtime/common/threads.h"
#include "runtime/common/version.h"
#include "runtime/profile/im2col.h"

namespace vt {
namespace {

// Debian's multiarch library folder, where the BLAS variants live side by side.
constexpr const char* kLibDir = "/usr/lib/x86_64-linux-gnu";

std::vector<Profile> MakeShipped() {
  std::vector<Profile> p;
  {
    Profile n;
    n.name = "native";
    n.description =
        "OpenBLAS as installed, ATen's own reductions, VTRUN_THREADS threads (default 1)";
    p.push_back(n);
  }
  {
    Profile s;
    s.name = "splitk4";
    s.description =
        "GEMM with K split in 4 parts added in order (as split-K GPU kernels do), "
        "reductions in 4 chunks, 1 thread";
    s.threads = 1;
    s.gemm = GemmOrder::kSplitK;
    s.gemm_chunks = 4;
    s.reduce = ReduceOrder::kChunked;
    s.reduce_chunks = 4;
    p.push_back(s);
  }
  {
    Profile b;
    b.name = "blocked";
    b.description =
        "GEMM over 8 K-blocks added as a balanced tree, pairwise reductions over "
        "8 blocks, 1 thread";
    b.threads = 1;
    b.gemm = GemmOrder::kPairwise;
    b.gemm_chunks = 8;
    b.reduce = ReduceOrder::kPairwise;
    b.reduce_chunks = 8;
    p.push_back(b);
  }
  {
    Profile r;
    r.name = "refblas";
    r.description =
        "Netlib reference BLAS (no vector kernels; ~15x slower GEMM), reductions "
        "in 3 chunks, 1 thread";
    r.env = {{"LD_LIBRARY_PATH", std::string(kLibDir) + "/blas"}};
    r.threads = 1;
    r.reduce = ReduceOrder::kChunked;
    r.reduce_chunks = 3;
    p.push_back(r);
  }
  {
    Profile s;
    s.name = "nofma";
    s.description =
        "OpenBLAS with its Sandy Bridge kernels (AVX, no FMA), GEMM with K split "
        "in 2, pairwise reductions over 5 blocks, 1 thread";
    s.env = {{"OPENBLAS_CORETYPE", "Sandybridge"}};
    s.threads = 1;
    // Without the split, short contractions (K < 256) give the same bits as reference BLAS:
    // both add products one by one without FMA.
    s.gemm = GemmOrder::kSplitK;
    s.gemm_chunks = 2;
    s.reduce = ReduceOrder::kPairwise;
    s.reduce_chunks = 5;
    p.push_back(s);
  }
  {
    Profile t;
    t.name = "threads2";
    t.description =
        "2 threads (OpenBLAS and ATen's parallel loops split the work), GEMM with K "
        "split in 3, reductions in 2 chunks added in order (each thread's half)";
    t.threads = 2;
    t.gemm = GemmOrder::kSplitK;
    t.gemm_chunks = 3;
    t.reduce = ReduceOrder::kChunked;
    t.reduce_chunks = 2;
    p.push_back(t);
  }
  {
    Profile s;
    s.name = "scalar";
    s.description =
        "ATen's scalar kernels (ATEN_CPU_CAPABILITY=default: other exp, tanh, log), "
        "GEMM over 4 K-blocks added as a tree, pairwise reductions over 4 blocks, 1 thread";
    s.env = {{"ATEN_CPU_CAPABILITY", "default"}};
    s.aten_capability = "NO AVX";  // as at::show_config() names the scalar kernels
    s.threads = 1;
    s.gemm = GemmOrder::kPairwise;
    s.gemm_chunks = 4;
    s.reduce = ReduceOrder::kPairwise;
    s.reduce_chunks = 4;
    p.push_back(s);
  }
  {
    Profile b;
    b.name = "blis";
    b.description =
        "BLIS (Debian's libblis4-openmp, 1 thread) as libblas.so.3 with GEMM over 6 "
        "K-blocks added as a tree, pairwise reductions over 6 blocks, 1 thread";
    b.env = {{"LD_LIBRARY_PATH", std::string(kLibDir) + "/blis-openmp"}, {"BLIS_NUM_THREADS", "1"}};
    b.threads = 1;
    // Some short contractions give the same bits in BLIS as in another profile's split.
    b.gemm = GemmOrder::kPairwise;
    b.gemm_chunks = 6;
    b.reduce = ReduceOrder::kPairwise;
    b.reduce_chunks = 6;
    p.push_back(b);
  }
  {
    Profile a;
    a.name = "avx512";
    a.description =
        "ATen's AVX-512 kernels (8-wide reductions, other exp, tanh, log), "
        "OpenBLAS's Haswell (AVX2) GEMM kernels with K split in 5, reductions in 5 chunks, 1 "
        "thread; "
        "needs AVX-512";
    // OpenBLAS already picks its AVX-512 kernels on an AVX-512 CPU (native), so this profile
    // takes the AVX2 ones; the chunks make column sums differ too, which the vector width
    // alone does not (each column is added in row order at any width).
    a.env = {{"ATEN_CPU_CAPABILITY", "avx512"}, {"OPENBLAS_CORETYPE", "Haswell"}};
    a.cpu_features = {"avx512f", "avx512bw", "avx512vl", "avx512dq"};
    a.aten_capability = "AVX512";
    a.threads = 1;
    a.gemm = GemmOrder::kSplitK;  // short contractions (K < 256) give OpenBLAS's bits otherwise
    a.gemm_chunks = 5;
    a.reduce = ReduceOrder::kChunked;
    a.reduce_chunks = 5;
    p.push_back(a);
  }
  {
    Profile c;
    c.name = "cuda";
    c.description =
        "NVIDIA GPU (CUDA device 0, LibTorch's CUDA build): matrix products and convolutions "
        "as cuBLAS DGEMM, reductions and index-add as ATen's CUDA kernels (index-add with "
        "atomics: its order changes from run to run), rounding on the CPU, 1 CPU thread; "
        "needs a GPU";
    c.threads = 1;
    c.cuda = true;
    p.push_back(c);
  }
  return p;
}

bool CpuSupports(const std::string& feature) {
  __builtin_cpu_init();
  if (feature == "avx512f") return __builtin_cpu_supports("avx512f");
  if (feature == "avx512bw") return __builtin_cpu_supports("avx512bw");
  if (feature == "avx512vl") return __builtin_cpu_supports("avx512vl");
  if (feature == "avx512dq") return __builtin_cpu_supports("avx512dq");
  if (feature == "avx2") return __builtin_cpu_supports("avx2");
  if (feature == "fma") return __builtin_cpu_supports("fma");
  return false;
}

std::mutex g_mutex;
const Profile* g_current = nullptr;

// Chunk boundaries splitting `n` into `parts` nearly equal pieces (fewer if n < parts).
std::vector<std::pair<int64_t, int64_t>> Chunks(int64_t n, int parts) {
  std::vector<std::pair<int64_t, int64_t>> out;
  int64_t k = std::max<int64_t>(1, std::min<int64_t>(parts, n));
  for (int64_t i = 0; i < k; ++i) {
    int64_t begin = n * i / k, end = n * (i + 1) / k;
    out.emplace_back(begin, end - begin);
  }
  return out;
}

// Adds partial results left to right or as a balanced tree.
at::Tensor Combine(std::vector<at::Tensor> parts, bool pairwise) {
  if (!pairwise) {
    at::Tensor acc = parts[0];
    for (size_t i = 1; i < parts.size(); ++i) acc = acc + parts[i];
    return acc;
  }
  while (parts.size() > 1) {
    std::vector<at::Tensor> next;
    for (size_t i = 0; i + 1 < parts.size(); i += 2) next.push_back(parts[i] + parts[i + 1]);
    if (parts.size() % 2 == 1) next.push_back(parts.back());
    parts = std::move(next);
  }
  return parts[0];
}

int ResolveThreads(const Profile& p) { return p.threads > 0 ? p.threads : DefaultThreadCount(); }

// Whether this process really runs with `profile`'s process-level settings: started by
// `vtrun --profile` (VTRUN_PROFILE), each variable in effect, and the BLAS it names loaded.
void CheckProcessLevel(const Profile& profile) {
  auto hint = "; start the process with `vtrun --profile " + profile.name + "`";
  const char* active = std::getenv("VTRUN_PROFILE");
  if (active == nullptr || profile.name != active) {
    throw Error("profile '" + profile.name + "' sets process-level options (" +
                profile.env.front().first + "=" + profile.env.front().second + ")" + hint);
  }
  if (auto why = profile.Unavailable(); !why.empty()) throw Error(why);
  for (const auto& [key, value] : profile.env) {
    const char* now = std::getenv(key.c_str());
    bool ok = now != nullptr &&
              (key == "LD_LIBRARY_PATH" ? std::string(now).rfind(value, 0) == 0 : value == now);
    if (!ok) throw Error("profile '" + profile.name + "' needs " + key + "=" + value + hint);
    if (key == "LD_LIBRARY_PATH" && LoadedBlasLibrary().rfind(value + "/", 0) != 0) {
      throw Error("profile '" + profile.name + "' expects libblas.so.3 from " + value +
                  ", but this process loaded " + LoadedBlasLibrary());
    }
  }
  if (!profile.aten_capability.empty() && AtenCpuCapability() != profile.aten_capability) {
    throw Error("profile '" + profile.name + "' expects ATen's " + profile.aten_capability +
                " kernels, but this process runs its " + AtenCpuCapability() + " kernels");
  }
}

}  // namespace

std::string Profile::Unavailable() const {
  if (cuda) {
    if (auto why = CudaUnavailable(); !why.empty()) return "profile '" + name + "' " + why;
  }
  for (const auto& f : cpu_features) {
    if (!CpuSupports(f))
      return "profile '" + name + "' needs a CPU with " + f + ", which this CPU lacks";
  }
  return "";
}

std::string Profile::GemmName() const {
  switch (gemm) {
    case GemmOrder::kBlas:
      return cuda ? "cublas" : "blas";
    case GemmOrder::kSplitK:
      return "splitk:" + std::to_string(gemm_chunks);
    case GemmOrder::kPairwise:
      return "pairwise:" + std::to_string(gemm_chunks);
  }
  return "?";
}

std::string Profile::ReduceName() const {
  switch (reduce) {
    case ReduceOrder::kAten:
      return cuda ? "aten-cuda" : "aten";
    case ReduceOrder::kChunked:
      return "chunked:" + std::to_string(reduce_chunks);
    case ReduceOrder::kPairwise:
      return "pairwise:" + std::to_string(reduce_chunks);
  }
  return "?";
}

const std::vector<Profile>& ShippedProfiles() {
  static const std::vector<Profile> profiles = MakeShipped();
  return profiles;
}

const Profile& FindProfile(const std::string& name) {
  std::string names;
  for (const auto& p : ShippedProfiles()) {
    if (p.name == name) return p;
    names += (names.empty() ? "" : ", ") + p.name;
  }
  throw Error("unknown profile '" + name + "' (valid: " + names + ")");
}

void ActivateProfile(const Profile& profile) {
  if (profile.process_level()) CheckProcessLevel(profile);
  if (auto why = profile.Unavailable(); !why.empty()) throw Error(why);
  std::lock_guard<std::mutex> lock(g_mutex);
  SetThreads(ResolveThreads(profile));
  g_current = &profile;
}

const Profile& CurrentProfile() {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_current != nullptr) return *g_current;
  }
  const char* env = std::getenv("VTRUN_PROFILE");
  const Profile& p = FindProfile(env != nullptr && *env != '\0' ? env : "native");
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_current == nullptr) g_current = &p;
  return *g_current;
}

std::string LoadedBlasLibrary() {
  std::string found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        const char* name = info->dlpi_name;
        if (name != nullptr && std::strstr(name, "libblas.so") != nullptr) {
          char resolved[4096];
          *static_cast<std::string*>(data) = realpath(name, resolved) ? resolved : name;
          return 1;
        }
        return 0;
      },
      &found);
  return found;
}

std::string AtenCpuCapability() {
  static const std::string capability = [] {
    const std::string config = at::show_config();
    const std::string key = "CPU capability usage: ";
    auto at = config.find(key);
    if (at == std::string::npos) return std::string("unknown");
    auto end = config.find('\n', at);
    return config.substr(at + key.size(),
                         end == std::string::npos ? std::string::npos : end - at - key.size());
  }();
  return capability;
}

std::string CudaUnavailable() {
  static const std::string why = [] {
    LoadCudaKernels();
    if (!at::hasCUDA()) {
      return std::string(
                 "needs a LibTorch built with CUDA and an NVIDIA GPU; this vtrun runs "
                 "LibTorch ") +
             TorchVersion() +
             (dlopen("libtorch_cuda.so", RTLD_NOW | RTLD_NOLOAD) != nullptr
                  ? " with CUDA, but no GPU is visible"
                  : " without CUDA (build one against a CUDA LibTorch: README, \"GPU profile\")");
    }
    return std::string();
  }();
  return why;
}

namespace {

const at::Device kGpu(at::kCUDA, 0);

// The result of a CUDA op, brought back to the CPU (synchronously: the caller rounds it).
at::Tensor Back(const at::Tensor& t) { return t.to(at::kCPU); }

}  // namespace

at::Tensor Matmul(const at::Tensor& a, const at::Tensor& b) {
  const Profile& p = CurrentProfile();
  if (p.cuda) return Back(at::matmul(a.to(kGpu), b.to(kGpu)));
  if (p.gemm == GemmOrder::kBlas || a.dim() == 0 || b.dim() == 0) return at::matmul(a, b);
  const int64_t k = a.size(-1);
  const int64_t b_dim = b.dim() == 1 ? 0 : b.dim() - 2;
  if (b.size(b_dim) != k) return at::matmul(a, b);  // let ATen report the shape error
  auto chunks = Chunks(k, p.gemm_chunks);
  if (chunks.size() == 1) return at::matmul(a, b);
  std::vector<at::Tensor> parts;
  parts.reserve(chunks.size());
  for (const auto& [begin, length] : chunks) {
    parts.push_back(at::matmul(a.narrow(-1, begin, length), b.narrow(b_dim, begin, length)));
  }
  return Combine(std::move(parts), p.gemm == GemmOrder::kPairwise);
}

at::Tensor Linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias) {
  const Profile& p = CurrentProfile();
  if (p.gemm == GemmOrder::kBlas && !p.cuda && bias.defined() && x.dim() == 2 && bias.dim() == 1) {
    // One BLAS call that starts from the bias (as at::linear does): no pass zeroing the
    // output before the product and none adding the bias after it (GPT 4x256's FP64 step
    // 0.8-1.7% faster, paired steps).
    return at::addmm(bias, x, w.t());
  }
  at::Tensor y = Matmul(x, w.t());
  return bias.defined() ? y + bias : y;
}

at::Tensor Sum(const at::Tensor& x, at::IntArrayRef dims, bool keepdim) {
  const Profile& p = CurrentProfile();
  if (p.cuda || p.reduce == ReduceOrder::kAten) {  // the device's own kernel decides the order
    const at::Tensor in = p.cuda ? x.to(kGpu) : x;
    at::Tensor out = dims.empty() ? (keepdim ? in.sum(c10::IntArrayRef{}, true) : in.sum())
                                  : in.sum(dims, keepdim);
    return p.cuda ? Back(out) : out;
  }
  // Normalize the reduced dimensions; split the first of them into chunks.
  std::vector<int64_t> reduce;
  if (dims.empty()) {
    for (int64_t d = 0; d < x.dim(); ++d) reduce.push_back(d);
  } else {
    for (int64_t d : dims) reduce.push_back(d < 0 ? d + x.dim() : d);
  }
  if (x.dim() == 0 || reduce.empty()) return x.clone();
  const int64_t split_dim = *std::min_element(reduce.begin(), reduce.end());
  auto chunks = Chunks(x.size(split_dim), p.reduce_chunks);
  std::vector<at::Tensor> parts;
  parts.reserve(chunks.size());
  for (const auto& [begin, length] : chunks) {
    parts.push_back(x.narrow(split_dim, begin, length).sum(reduce, keepdim));
  }
  return Combine(std::move(parts), p.reduce == ReduceOrder::kPairwise);
}

std::optional<SumSplit> FusedSumSplit(int64_t extent) {
  const Profile& p = CurrentProfile();
  if (p.cuda) return std::nullopt;
  SumSplit split;
  if (p.reduce == ReduceOrder::kAten) {
    split.ranges.emplace_back(0, extent);
  } else {
    split.ranges = Chunks(extent, p.reduce_chunks);
    split.pairwise = p.reduce == ReduceOrder::kPairwise;
  }
  return split;
}

at::Tensor CombinePartialSums(std::vector<at::Tensor> parts, bool pairwise) {
  if (parts.empty()) throw Error("internal error: no partial sums to combine");
  return Combine(std::move(parts), pairwise);
}

at::Tensor IndexAddRows(const at::Tensor& values, const at::Tensor& index, int64_t rows) {
  if (values.dim() != 2 || index.dim() != 1 || index.size(0) != values.size(0)) {
    throw Error("index_add_rows: expected values [N, D] and index [N], got " +
                std::to_string(values.dim()) + "-d values and " + std::to_string(index.dim()) +
                "-d index");
  }
  const Profile& p = CurrentProfile();
  auto add = [&](const at::Tensor& v, const at::Tensor& i) {
    return at::zeros({rows, values.size(1)}, v.options()).index_add_(0, i, v);
  };
  if (p.cuda) return Back(add(values.to(kGpu), index.to(kGpu)));
  if (p.reduce == ReduceOrder::kAten) return add(values, index);
  // Only the rows that occur are accumulated per chunk, so the partial results stay small
  // for a large vocabulary.
  at::Tensor unique, inverse;
  std::tie(unique, inverse, std::ignore) =
      at::_unique2(index, /*sorted=*/true, /*return_inverse=*/true);
  const int64_t u = unique.size(0);
  auto chunks = Chunks(values.size(0), p.reduce_chunks);
  std::vector<at::Tensor> parts;
  parts.reserve(chunks.size());
  for (const auto& [begin, length] : chunks) {
    parts.push_back(
        at::zeros({u, values.size(1)}, values.options())
            .index_add_(0, inverse.narrow(0, begin, length), values.narrow(0, begin, length)));
  }
  at::Tensor compact = Combine(std::move(parts), p.reduce == ReduceOrder::kPairwise);
  return at::zeros({rows, values.size(1)}, values.options()).index_copy_(0, unique, compact);
}

at::Tensor Conv2d(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias,
                  at::IntArrayRef stride, at::IntArrayRef padding) {
  if (x.dim() != 4 || w.dim() != 4) {
    throw Error("conv2d expects input [N, C, H, W] and weight [O, C, kh, kw], got " +
                std::to_string(x.dim()) + "-d and " + std::to_string(w.dim()) + "-d");
  }
  if (x.size(1) != w.size(1)) {
    throw Error("conv2d: input has " + std::to_string(x.size(1)) + " channels, weight expects " +
                std::to_string(w.size(1)));
  }
  const int64_t n = x.size(0), out_c = w.size(0), kh = w.size(2), kw = w.size(3);
  const int64_t oh = (x.size(2) + 2 * padding[0] - kh) / stride[0] + 1;
  const int64_t ow = (x.size(3) + 2 * padding[1] - kw) / stride[1] + 1;
  if (oh <= 0 || ow <= 0) throw Error("conv2d: kernel larger than the padded input");
  if (stride[0] != stride[1] || padding[0] != padding[1])
    throw Error("conv2d: stride and padding must be square");
  // GEMMs over groups of images: W [O, C*kh*kw] x cols [C*kh*kw, n_g*L] -> [O, n_g*L]. Every
  // output column is one dot product over C*kh*kw, so grouping changes no result. The groups'
  // columns fit a core's cache and run in parallel, each GEMM on one thread.
  const at::Tensor w2d = w.reshape({out_c, -1});
  const ConvGroups groups =
      ConvGroupsFor(x.size(1), kh, kw, oh * ow, n, out_c, x.element_size(), CurrentProfile().cuda);
  at::Tensor out = at::empty({n, out_c, oh, ow}, x.options());
  groups.ForEach([&](int64_t first, int64_t count) {
    at::Tensor cols = Im2Col(x.narrow(0, first, count), kh, kw, stride[0], padding[0]);
    out.narrow(0, first, count)
        .copy_(Matmul(w2d, cols).view({out_c, count, oh, ow}).permute({1, 0, 2, 3}));
  });
  return bias.defined() ? out + bias.view({1, out_c, 1, 1}) : out;
}

}  // namespace vt
