#include "runtime/nn/autograd.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "runtime/common/error.h"
#include "runtime/nn/context.h"
#include "runtime/nn/gelu.h"
#include "runtime/nn/magnitude.h"
#include "runtime/profile/im2col.h"
#include "runtime/profile/profile.h"

namespace vt::nn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// A boundary's rounded output is what every party computes (the auditor copies the trainer's
// rounding): offered with a zero magnitude, so that masks, copies and sums of it (Fork,
// AddOp, ReluOp, pooling's backward) stay known as such.
at::Tensor Agreed(at::Tensor rounded) {
  if (MagnitudesWanted()) OfferMagnitude(rounded, ZeroMagnitude());
  return rounded;
}

struct BoundaryFn : public torch::autograd::Function<BoundaryFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const std::string& name) {
    StepContext* step = StepContext::Current();
    if (step == nullptr) return x.clone();
    const int32_t call = step->NextCall(name + ":fwd");
    ctx->saved_data["name"] = name;
    ctx->saved_data["call"] = static_cast<int64_t>(call);
    return Agreed(step->Apply(name + ":fwd", x, call));
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    StepContext* step = StepContext::Current();
    if (step == nullptr || !ctx->saved_data.count("name")) return {grads[0], at::Tensor()};
    const std::string name = ctx->saved_data["name"].toStringRef();
    const auto call = static_cast<int32_t>(ctx->saved_data["call"].toInt());
    return {Agreed(step->ApplyGradient(name + ":bwd", grads[0].contiguous(), call)), at::Tensor()};
  }
};

struct InputGradFn : public torch::autograd::Function<InputGradFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const std::string& name,
                            int64_t call) {
    ctx->saved_data["name"] = name;
    ctx->saved_data["call"] = call;
    return x.view_as(x);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const std::string name = ctx->saved_data["name"].toStringRef();
    const auto call = static_cast<int32_t>(ctx->saved_data["call"].toInt());
    return {Agreed(ApplyGradientBoundary(name + ":bwd", grads[0].contiguous(), call)), at::Tensor(),
            at::Tensor()};
  }
};

// LibTorch 1.13's custom functions cannot take undefined tensors, so "no bias" travels as an
// empty placeholder.
at::Tensor BiasOrPlaceholder(const at::Tensor& bias, const at::Tensor& like) {
  return bias.defined() ? bias : at::empty({0}, like.options());
}
at::Tensor RealBias(const at::Tensor& bias) { return bias.numel() == 0 ? at::Tensor() : bias; }

// Flattens leading dimensions: [..., k] -> [rows, k].
at::Tensor Rows(const at::Tensor& t) { return t.reshape({-1, t.size(-1)}); }

// A tensor the forward kept for the backward's magnitudes, else `compute()` (a forward that
// wanted no magnitudes kept none).
template <class Compute>
at::Tensor SavedOr(AutogradContext* ctx, const char* key, Compute&& compute) {
  const auto it = ctx->saved_data.find(key);
  return it != ctx->saved_data.end() ? it->second.toTensor() : compute();
}

// The ops below offer a per-element magnitude (magnitude.h) for their output and their input
// gradients when the step wants them, and add their parameter gradients' magnitudes.
struct LinearFn : public torch::autograd::Function<LinearFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w,
                            const at::Tensor& bias) {
    ctx->save_for_backward({x, w, bias});
    ctx->saved_data["has_bias"] = bias.numel() > 0;
    std::vector<int64_t> out_shape = x.sizes().vec();
    out_shape.back() = w.size(0);
    // [rows, out]: ||x_i|| ||w_j|| + |bias_j|. The column norms the backward wants are taken
    // in the same passes over x and w, and kept. (Norms first, while x is in the cache.)
    const bool magnitudes = MagnitudesWanted();
    const at::Tensor rows = Rows(x);
    MatrixNorms xn, wn;
    if (magnitudes) {
      at::NoGradGuard no_grad;
      xn = NormsOf(rows, kRowNorms | kColNorms);
      wn = NormsOf(w, kRowNorms | kColNorms);
    }
    at::Tensor y = vt::Linear(rows, w, RealBias(bias)).view(out_shape);
    if (magnitudes) {
      at::NoGradGuard no_grad;
      ctx->saved_data["x_cols"] = xn.cols;
      ctx->saved_data["w_cols"] = wn.cols;
      OfferProductMagnitude(y, rows.size(0), w.size(0), xn.rows, wn.rows.t(),
                            bias.numel() > 0 ? bias.abs() : at::Tensor());
    }
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& w = saved[1];
    at::Tensor g = Rows(grads[0].contiguous());
    const bool has_bias = ctx->saved_data["has_bias"].toBool();
    // One pass over g for its row and column norms (and the bias's sums of |g|), first, while
    // g is in the cache.
    const bool magnitudes = MagnitudesWanted();
    MatrixNorms gn;
    if (magnitudes) {
      at::NoGradGuard no_grad;
      gn = NormsOf(g, kRowNorms | kColNorms | (has_bias ? kColAbsSums : 0u));
    }
    at::Tensor gx = vt::Matmul(g, w).view(x.sizes());
    at::Tensor gw = vt::Matmul(g.t(), Rows(x));
    at::Tensor gb = has_bias ? vt::Sum(g, {0}) : at::Tensor();
    if (magnitudes) {
      at::NoGradGuard no_grad;
      OfferProductMagnitude(gx, g.size(0), w.size(1), gn.rows,
                            SavedOr(ctx, "w_cols", [&] { return ColNorms(w); }));
      AddGradOuterMagnitude(w, gn.cols, SavedOr(ctx, "x_cols", [&] { return ColNorms(Rows(x)); }));
      if (has_bias) AddGradMagnitude(saved[2], gn.col_abs);
    }
    return {gx, gw, gb};
  }
};

struct Conv2dFn : public torch::autograd::Function<Conv2dFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w,
                            const at::Tensor& bias, int64_t stride, int64_t padding) {
    ctx->save_for_backward({x, w, bias});
    ctx->saved_data["has_bias"] = bias.numel() > 0;
    ctx->saved_data["stride"] = stride;
    ctx->saved_data["padding"] = padding;
    // ||x window|| per output position: the window sums of x^2 over channels and taps; the
    // backward's tap norms come from the same pass over x, and are kept. Taken before the
    // convolution, while x (the op before's output) is still in the cache.
    const bool magnitudes = MagnitudesWanted();
    vt::ConvInputNorms norms;
    if (magnitudes) {
      at::NoGradGuard no_grad;
      norms = vt::ConvInputNormsOf(x.detach(), w.size(2), w.size(3), stride, padding);
    }
    at::Tensor y = vt::Conv2d(x, w, RealBias(bias), {stride, stride}, {padding, padding});
    if (magnitudes) {
      at::NoGradGuard no_grad;
      ctx->saved_data["tap_norms"] = norms.taps;
      const at::Tensor& win = norms.windows;                 // [N, 1, oh, ow]
      at::Tensor wn = RowNorms(w.reshape({w.size(0), -1}));  // [O, 1]
      // y [N, O, oh, ow] as [N, O rows, oh*ow columns]: ||w_o|| ||x window|| + |bias_o|.
      OfferProductMagnitude(y, w.size(0), y.size(2) * y.size(3), wn.view({1, -1, 1, 1}), win,
                            bias.numel() > 0 ? bias.abs().view({1, -1, 1, 1}) : at::Tensor(),
                            /*add_per_row=*/true);
    }
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& w = saved[1];
    const int64_t stride = ctx->saved_data["stride"].toInt();
    const int64_t padding = ctx->saved_data["padding"].toInt();
    const at::Tensor g = grads[0].contiguous();  // [N, O, oh, ow]
    const int64_t n = x.size(0), c = x.size(1), h = x.size(2), wd = x.size(3);
    const int64_t out_c = w.size(0), kh = w.size(2), kw = w.size(3);
    const int64_t l = g.size(2) * g.size(3);
    const bool has_bias = ctx->saved_data["has_bias"].toBool();
    // The magnitudes' norms of g, taken first, while g (the op after's input gradient) is
    // still in the cache: one pass for its row and column norms (and the bias's sums).
    const bool magnitudes = MagnitudesWanted();
    MatrixNorms gn;
    if (magnitudes) {
      at::NoGradGuard no_grad;
      gn = NormsOf(g.view({n, out_c, l}), kRowNorms | kColNorms | (has_bias ? kRowAbsSums : 0u));
    }
    // The forward's groups of images: per group, g2d [O, n_g*L] against cols [C*kh*kw, n_g*L].
    // The weight gradient's groups are added in order within a fixed number of runs of groups
    // (a function of the shapes), and the runs' sums in order: the same bits on any threads.
    const at::Tensor w2d_t = w.reshape({out_c, -1}).t();
    const vt::ConvGroups groups =
        vt::ConvGroupsFor(c, kh, kw, l, n, out_c, x.element_size(), vt::CurrentProfile().cuda);
    constexpr int64_t kWeightRuns = 8;
    const int64_t runs = std::min(groups.count(), kWeightRuns);
    std::vector<at::Tensor> gw_runs(static_cast<size_t>(runs));
    at::Tensor gx = at::empty_like(x, at::MemoryFormat::Contiguous);
    groups.ForEachRun(runs, [&](int64_t run, int64_t first, int64_t count) {
      at::Tensor g2d = g.narrow(0, first, count)
                           .reshape({count, out_c, l})
                           .permute({1, 0, 2})
                           .reshape({out_c, count * l});
      at::Tensor cols = vt::Im2Col(x.narrow(0, first, count), kh, kw, stride, padding);
      at::Tensor part = vt::Matmul(g2d, cols.t());
      at::Tensor& acc = gw_runs[static_cast<size_t>(run)];
      acc = acc.defined() ? acc.add_(part) : part;
      at::Tensor gx_part = gx.narrow(0, first, count);
      vt::Col2ImInto(vt::Matmul(w2d_t, g2d), gx_part, kh, kw, stride, padding);
    });
    at::Tensor gw = runs == 0 ? at::zeros({out_c, c * kh * kw}, w.options()) : gw_runs[0];
    for (size_t r = 1; r < gw_runs.size(); ++r) gw = gw + gw_runs[r];
    gw = gw.view(w.sizes());
    at::Tensor gb = has_bias ? vt::Sum(g, {0, 2, 3}) : at::Tensor();
    if (magnitudes) {
      // Over the whole batch (the same on every profile, whatever its groups): the input
      // gradient's columns gcols_(r, p) <= ||w_:,r|| ||g_:,p||, gathered back like gcols (tap
      // by tap: a bound over all taps at once would count taps that do not reach an edge or a
      // strided position); the weight gradient's <= ||g_o,:|| ||cols_r,:||; the bias's, the sum
      // of |g|.
      at::NoGradGuard no_grad;
      const at::Tensor w_cols = ColNorms(w.reshape({out_c, -1})).t();  // [R, 1]
      OfferMagnitude(gx, vt::Col2ImOuter(w_cols, gn.cols, n, c, h, wd, kh, kw, stride, padding));
      at::Tensor g_rows = gn.rows.square().sum(0).sqrt_();  // [O, 1]
      const at::Tensor taps = ctx->saved_data.count("tap_norms") != 0
                                  ? ctx->saved_data["tap_norms"].toTensor()
                                  : vt::Im2ColRowNorms(x, kh, kw, stride, padding);
      AddGradOuterMagnitude(w, g_rows, taps);
      if (has_bias) AddGradMagnitude(saved[2], gn.row_abs.sum(0));
    }
    return {gx, gw, gb, at::Tensor(), at::Tensor()};
  }
};

struct MatmulFn : public torch::autograd::Function<MatmulFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b) {
    ctx->save_for_backward({a, b});
    // The backward's norms of a and b come from the same passes, and are kept. (Norms first,
    // while a and b are in the cache.)
    const bool magnitudes = MagnitudesWanted();
    MatrixNorms an, bn;
    if (magnitudes) {
      at::NoGradGuard no_grad;
      an = NormsOf(a, kRowNorms | kColNorms);
      bn = NormsOf(b, kRowNorms | kColNorms);
    }
    at::Tensor y = vt::Matmul(a, b);
    if (magnitudes) {
      at::NoGradGuard no_grad;
      ctx->saved_data["a_cols"] = an.cols;
      ctx->saved_data["b_rows"] = bn.rows;
      OfferProductMagnitude(y, y.size(-2), y.size(-1), an.rows, bn.cols);
    }
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const at::Tensor g = grads[0].contiguous();
    const at::Tensor &a = saved[0], &b = saved[1];
    // g's norms first, while g is in the cache.
    const bool magnitudes = MagnitudesWanted();
    MatrixNorms gn;
    if (magnitudes) {
      at::NoGradGuard no_grad;
      gn = NormsOf(g, kRowNorms | kColNorms);
    }
    at::Tensor ga = vt::Matmul(g, b.transpose(-1, -2));
    at::Tensor gb = vt::Matmul(a.transpose(-1, -2), g);
    if (magnitudes) {
      at::NoGradGuard no_grad;
      OfferProductMagnitude(ga, ga.size(-2), ga.size(-1), gn.rows,
                            SavedOr(ctx, "b_rows", [&] { return RowNorms(b); }).transpose(-1, -2));
      OfferProductMagnitude(gb, gb.size(-2), gb.size(-1),
                            SavedOr(ctx, "a_cols", [&] { return ColNorms(a); }).transpose(-1, -2),
                            gn.cols);
    }
    return {ga, gb};
  }
};

// GELU (tanh form) with vtrun's own kernels (gelu.h): the forward keeps t = tanh(k (x + c
// x^3)) for the backward. vtrun's tanh is IEEE operations only (the same bits on every CPU and
// vector width), so GELU of a value every party holds alike is alike too (zero magnitude), and
// so is its input gradient from a gradient held alike. Otherwise (an input that is not a
// boundary's output): the derivative 0.5 + 0.5 t + 0.5 x (1 - t^2) k (1 + 3 c x^2) cancels
// near x = -0.75 and, in 1 + t, for x << 0, and the input gradient's magnitude is |g| times the
// sum of the three terms' sizes, gelu'(|x|) (t is odd in x), computed in the backward's pass.
struct GeluFn : public torch::autograd::Function<GeluFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x) {
    GeluForwardResult r = GeluTanhForward(x);
    // (Only where vtrun's kernel ran: ATen's, for other dtypes, uses SLEEF's tanh.)
    const bool agreed = r.t.defined() && IsAgreed(x);
    ctx->saved_data["agreed"] = agreed;
    // |gelu(x)| <= |x|, and x (1 + t) / 2 is relative to |x| where t nears -1.
    if (agreed) {
      OfferMagnitude(r.y, ZeroMagnitude());
    } else if (MagnitudesWanted()) {
      OfferAbsMagnitude(r.y, x);
    }
    // A placeholder where ATen computed the forward (not CPU float64): its backward then.
    ctx->save_for_backward({x, r.t.defined() ? r.t : at::empty({0}, x.options())});
    return r.y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &t = saved[1];
    const at::Tensor& g = grads[0];
    const at::Tensor tanh_inner = t.numel() == x.numel() ? t : at::Tensor();
    if (!MagnitudesWanted()) return {GeluTanhBackward(g, x, tanh_inner)};
    if (ctx->saved_data["agreed"].toBool() && IsAgreed(g)) {
      at::Tensor gx = GeluTanhBackward(g, x, tanh_inner);
      OfferMagnitude(gx, ZeroMagnitude());
      return {gx};
    }
    at::Tensor terms;
    at::Tensor gx = GeluTanhBackward(g, x, tanh_inner, &terms);
    at::NoGradGuard no_grad;
    OfferAbsMagnitude(gx, g, terms);
    return {gx};
  }
};

// The ops below are ATen's own arithmetic (the same bits as autograd's formulas) that also
// pass magnitudes through their backward: a mask of a magnitude, or the sum of two.

// relu(x); backward: threshold_backward(g, y, 0), as autograd's.
struct ReluFn : public torch::autograd::Function<ReluFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x) {
    at::Tensor y = at::relu(x);
    ctx->save_for_backward({y});
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor y = ctx->get_saved_variables()[0];
    at::Tensor gx = at::threshold_backward(grads[0], y, 0);
    if (MagnitudesWanted()) {
      at::NoGradGuard no_grad;
      const at::Tensor m = IncomingMagnitude(grads[0]);
      OfferMagnitude(gx, IsZeroMagnitude(m) ? m : at::threshold_backward(m, y, 0));
    }
    return {gx};
  }
};

// a + b (same shapes); backward: the incoming gradient to both, as autograd's.
struct AddFn : public torch::autograd::Function<AddFn> {
  static at::Tensor forward(AutogradContext*, const at::Tensor& a, const at::Tensor& b) {
    at::Tensor y = a + b;
    if (IsAgreed(a) && IsAgreed(b)) OfferMagnitude(y, ZeroMagnitude());  // a sum of equal values
    return y;
  }
  static variable_list backward(AutogradContext*, variable_list grads) {
    at::Tensor g = grads[0].contiguous();
    if (MagnitudesWanted()) OfferMagnitude(g, IncomingMagnitude(grads[0]));
    return {g, g};
  }
};

// Two uses of x; backward: the sum of the two gradients (as autograd accumulates two uses:
// IEEE addition is commutative, so the bits are the same), whose magnitude is the sum of
// theirs.
struct ForkFn : public torch::autograd::Function<ForkFn> {
  static variable_list forward(AutogradContext*, const at::Tensor& x) {
    return {x.alias(), x.alias()};
  }
  static variable_list backward(AutogradContext*, variable_list grads) {
    const at::Tensor &g1 = grads[0], &g2 = grads[1];
    if (!g1.defined() || !g2.defined()) return {g1.defined() ? g1 : g2};
    at::Tensor g = g1 + g2;
    if (MagnitudesWanted()) {
      at::NoGradGuard no_grad;
      const at::Tensor m1 = IncomingMagnitude(g1), m2 = IncomingMagnitude(g2);
      OfferMagnitude(g, IsZeroMagnitude(m1) ? m2 : IsZeroMagnitude(m2) ? m1 : m1 + m2);
    }
    return {g};
  }
};

// The mean over the spatial dimensions: vt::Sum(x, {2, 3}) / (H W); backward: the incoming
// gradient divided by H W, spread over the positions, as autograd's.
struct AvgPoolFn : public torch::autograd::Function<AvgPoolFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x) {
    ctx->saved_data["sizes"] = x.sizes().vec();
    const double count = static_cast<double>(x.size(2) * x.size(3));
    at::Tensor y = vt::Sum(x, {2, 3}) / count;
    if (MagnitudesWanted()) {
      at::NoGradGuard no_grad;
      OfferMagnitude(y, x.abs().sum({2, 3}) / count);
    }
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const std::vector<int64_t> sizes = ctx->saved_data["sizes"].toIntVector();
    const double count = static_cast<double>(sizes[2] * sizes[3]);
    const at::Tensor& g = grads[0];
    at::Tensor gx = (g / count).view({sizes[0], sizes[1], 1, 1}).expand(sizes).contiguous();
    if (MagnitudesWanted()) {
      at::NoGradGuard no_grad;
      const at::Tensor m = IncomingMagnitude(g);
      OfferMagnitude(gx,
                     IsZeroMagnitude(m)
                         ? m
                         : (m / count).view({sizes[0], sizes[1], 1, 1}).expand(sizes).contiguous());
    }
    return {gx};
  }
};

// An attention's [B, T, 3D] projection as q, k and v, each [B, H, T, D/H] and contiguous;
// backward: the three gradients written into one [B, T, 3D] tensor in one pass (LibTorch's
// split, view, transpose and contiguous took a copy per gradient and a cat). The gradients
// arriving here are boundaries' rounded outputs (scores.da, scores.db, mix.db), so their
// rearrangement is too (StepContext::AddGridRearrangement) and agreed when they are: the
// qkv gradient's boundary passes it on without a pass over it.
struct SplitHeadsFn : public torch::autograd::Function<SplitHeadsFn> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& qkv, int64_t heads) {
    const int64_t b = qkv.size(0), t = qkv.size(1), d = qkv.size(2) / 3;
    ctx->saved_data["heads"] = heads;
    variable_list out;
    for (const at::Tensor& part : qkv.split(d, 2)) {
      out.push_back(part.view({b, t, heads, d / heads}).transpose(1, 2).contiguous());
    }
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const int64_t heads = ctx->saved_data["heads"].toInt();
    const at::Tensor& g0 = grads[0];  // [B, H, T, hd] (LibTorch gives zeros for an unused one)
    const int64_t b = g0.size(0), t = g0.size(2), hd = g0.size(3), d = heads * hd;
    at::Tensor g = at::empty({b, t, 3 * d}, g0.options());
    const at::Tensor parts = g.view({b, t, 3, heads, hd});
    for (int64_t i = 0; i < 3; ++i) parts.select(2, i).copy_(grads[i].transpose(1, 2));
    AddGridRearrangement(g, {grads[0], grads[1], grads[2]});
    if (AgreedValues(grads[0]) && AgreedValues(grads[1]) && AgreedValues(grads[2])) {
      OfferMagnitude(g, ZeroMagnitude());
    }
    return {g, at::Tensor()};
  }
};

// [B, H, T, hd] -> [B, T, H*hd] contiguous (the heads' outputs side by side); backward: the
// gradient back to [B, H, T, hd] in one copy, a rearrangement of a rounded gradient when the
// one arriving is (c_proj.dx's), as SplitHeadsFn's.
struct MergeHeadsFn : public torch::autograd::Function<MergeHeadsFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x) {
    const int64_t b = x.size(0), h = x.size(1), t = x.size(2), hd = x.size(3);
    ctx->saved_data["heads"] = h;
    return x.transpose(1, 2).contiguous().view({b, t, h * hd});
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const int64_t heads = ctx->saved_data["heads"].toInt();
    const at::Tensor& g = grads[0];  // [B, T, H*hd]
    const int64_t b = g.size(0), t = g.size(1), hd = g.size(2) / heads;
    at::Tensor gx = g.view({b, t, heads, hd}).transpose(1, 2).contiguous();
    AddGridRearrangement(gx, {g});
    if (AgreedValues(g)) OfferMagnitude(gx, ZeroMagnitude());
    return {gx};
  }
};

}  // namespace

at::Tensor ReluOp(const at::Tensor& x) { return ReluFn::apply(x); }

at::Tensor AddOp(const at::Tensor& a, const at::Tensor& b) {
  if (!a.sizes().equals(b.sizes())) throw Error("add: operands must have the same shape");
  return AddFn::apply(a, b);
}

std::pair<at::Tensor, at::Tensor> ForkOp(const at::Tensor& x) {
  variable_list two = ForkFn::apply(x);
  return {two[0], two[1]};
}

at::Tensor AvgPoolOp(const at::Tensor& x) {
  if (x.dim() != 4) throw Error("global average pooling: expected [N, C, H, W]");
  return AvgPoolFn::apply(x);
}

at::Tensor GeluOp(const at::Tensor& x) { return GeluFn::apply(x); }

std::vector<at::Tensor> SplitHeadsOp(const at::Tensor& qkv, int64_t heads) {
  if (qkv.dim() != 3 || heads < 1 || qkv.size(2) % (3 * heads) != 0) {
    throw Error("attention heads: expected [B, T, 3D] with D divisible by " +
                std::to_string(heads) + " heads, got " + c10::str(qkv.sizes()));
  }
  return SplitHeadsFn::apply(qkv, heads);
}

at::Tensor MergeHeadsOp(const at::Tensor& x) {
  if (x.dim() != 4)
    throw Error("attention heads: expected [B, H, T, hd], got " + c10::str(x.sizes()));
  return MergeHeadsFn::apply(x);
}

at::Tensor Boundary(const at::Tensor& x, const std::string& name) {
  return BoundaryFn::apply(x, name);
}

at::Tensor InputGrad(const at::Tensor& x, const std::string& name) {
  StepContext* step = StepContext::Current();
  if (step == nullptr || !x.requires_grad() || !at::GradMode::is_enabled()) return x;
  return InputGradFn::apply(x, name, static_cast<int64_t>(step->NextCall(name + ":bwd")));
}

at::Tensor LinearOp(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias) {
  if (x.size(-1) != w.size(1)) {
    throw Error("linear: input has " + std::to_string(x.size(-1)) + " features, weight expects " +
                std::to_string(w.size(1)));
  }
  return LinearFn::apply(x, w, BiasOrPlaceholder(bias, w));
}

at::Tensor Conv2dOp(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias,
                    int64_t stride, int64_t padding) {
  return Conv2dFn::apply(x, w, BiasOrPlaceholder(bias, w), stride, padding);
}

at::Tensor MatmulOp(const at::Tensor& a, const at::Tensor& b) {
  if (a.dim() != b.dim() || a.dim() < 2)
    throw Error("matmul: operands must have the same rank >= 2");
  return MatmulFn::apply(a, b);
}

}  // namespace vt::nn
