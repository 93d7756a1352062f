#include "runtime/nn/reduce.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <tuple>
#include <vector>

#include "runtime/common/error.h"
#include "runtime/nn/batch_norm.h"
#include "runtime/nn/context.h"
#include "runtime/nn/layer_norm.h"
#include "runtime/nn/magnitude.h"
#include "runtime/nn/planes.h"
#include "runtime/profile/profile.h"
#include "runtime/tensor/layout.h"

namespace vt::nn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Runs `f` without autograd and returns its result.
template <class F>
at::Tensor Detached(F&& f) {
  at::NoGradGuard no_grad;
  return f();
}

// The call number of an op's backward statistics boundary, taken in the forward pass (so
// records pair up whatever order autograd runs backward in); -1 when no backward will run.
int64_t BackwardCall(const std::string& boundary, std::initializer_list<at::Tensor> inputs) {
  StepContext* step = StepContext::Current();
  if (step == nullptr || !at::GradMode::is_enabled()) return -1;
  for (const at::Tensor& t : inputs) {
    if (t.defined() && t.requires_grad()) return step->NextCall(boundary);
  }
  return -1;
}

// Rounds a backward statistic at the boundary numbered in the forward pass, with its
// per-element magnitude (`magnitude` is called only when the step wants magnitudes).
template <class Magnitude>
at::Tensor RoundBackward(const AutogradContext* ctx, const at::Tensor& t, Magnitude&& magnitude) {
  const int64_t call = ctx->saved_data.at("bwd_call").toInt();
  if (call < 0) return t;
  return ApplyBoundary(ctx->saved_data.at("bwd_name").toStringRef(), t, static_cast<int32_t>(call),
                       MagnitudesWanted() ? Detached(magnitude) : at::Tensor());
}

// The magnitude of a value whose terms never cancel (a sum of positive terms): itself.
at::Tensor OwnMagnitude(const at::Tensor& t) {
  return MagnitudesWanted() ? t.detach().abs() : at::Tensor();
}

void SaveBackwardCall(AutogradContext* ctx, const std::string& boundary, int64_t call) {
  ctx->saved_data["bwd_name"] = boundary;
  ctx->saved_data["bwd_call"] = call;
}

// Sum over the last dimension, kept.
at::Tensor RowSum(const at::Tensor& t) { return vt::Sum(t, {t.dim() - 1}, true); }

// Sum over every dimension but the last: [..., D] -> [D].
at::Tensor ColumnSum(const at::Tensor& t) { return vt::Sum(t.reshape({-1, t.size(-1)}), {0}); }

// Each op below rounds its order-dependent statistics before the elementwise arithmetic that
// uses them: "<name>.sum:fwd" / "<name>.sum:bwd" (softmax, log-softmax), "<name>.mean:fwd",
// "<name>.var:fwd" and "<name>.stats:bwd" (layer and batch norm). Without a step context
// ApplyBoundary returns its input, and the ops are plain profile-ordered FP64.
struct SoftmaxFn : public torch::autograd::Function<SoftmaxFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const std::string& name,
                            int64_t bwd_call) {
    at::Tensor e = (x - std::get<0>(x.max(-1, true))).exp();
    const at::Tensor sum = RowSum(e);
    at::Tensor y = e / ApplyBoundary(name + ".sum:fwd", sum, -1, OwnMagnitude(sum));
    ctx->save_for_backward({y});
    SaveBackwardCall(ctx, name + ".sum:bwd", bwd_call);
    OfferMagnitude(y, OwnMagnitude(y));  // a quotient of positive values
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor y = ctx->get_saved_variables()[0];
    const at::Tensor& g = grads[0];
    const at::Tensor gy = g * y;
    return {y * (g - RoundBackward(ctx, RowSum(gy), [&] { return RowSum(gy.abs()); })),
            at::Tensor(), at::Tensor()};
  }
};

struct LogSoftmaxFn : public torch::autograd::Function<LogSoftmaxFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const std::string& name,
                            int64_t bwd_call) {
    at::Tensor z = x - std::get<0>(x.max(-1, true));
    const at::Tensor sum = RowSum(z.exp());
    at::Tensor y = z - ApplyBoundary(name + ".sum:fwd", sum, -1, OwnMagnitude(sum)).log();
    ctx->save_for_backward({y});
    SaveBackwardCall(ctx, name + ".sum:bwd", bwd_call);
    // z <= 0 and log(sum) >= 0 (the sum holds exp(0) = 1): |y| = |z| + log(sum), no cancellation.
    OfferMagnitude(y, OwnMagnitude(y));
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor y = ctx->get_saved_variables()[0];
    const at::Tensor& g = grads[0];
    const at::Tensor s = RoundBackward(ctx, RowSum(g), [&] { return RowSum(g.abs()); });
    const at::Tensor p_s = y.exp() * s;
    at::Tensor gx = g - p_s;
    if (MagnitudesWanted()) OfferMagnitude(gx, Detached([&] { return g.abs() + p_s.abs(); }));
    return {gx, at::Tensor(), at::Tensor()};
  }
};

// Rounds two statistics of the same shape as one boundary call: [..., 1] and [..., 1] (or
// [C] and [C]) go through the boundary side by side. Their magnitudes are abs_reduce of their
// terms: the statistic's reduction of the terms' absolute values.
std::pair<at::Tensor, at::Tensor> RoundPair(const AutogradContext* ctx, const at::Tensor& a,
                                            const at::Tensor& b, const at::Tensor& a_terms,
                                            const at::Tensor& b_terms,
                                            at::Tensor (*abs_reduce)(const at::Tensor&)) {
  at::Tensor both = RoundBackward(ctx, at::stack({a, b}), [&] {
    return at::stack({abs_reduce(a_terms), abs_reduce(b_terms)});
  });
  return {both[0], both[1]};
}

struct LayerNormFn : public torch::autograd::Function<LayerNormFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w,
                            const at::Tensor& b, double eps, const std::string& name,
                            int64_t bwd_call) {
    const double d = static_cast<double>(x.size(-1));
    // Fused (layer_norm.h): the statistics' sums straight from x, no centered tensor.
    const bool fused = LayerNormFused(x, {&w, &b});
    const bool magnitudes = MagnitudesWanted();
    at::Tensor sum, mean_magnitude;
    if (fused && magnitudes && x.dim() >= 2) {  // (RowAbsMean of one row takes ATen's sum)
      LayerNormRowSumAndAbs sums = LayerNormRowSumAndAbsOf(x);
      sum = sums.sum;
      mean_magnitude = sums.abs / d;  // RowAbsMean(x): the same bits
    } else {
      sum = fused ? LayerNormRowSum(x) : RowSum(x);
      if (magnitudes) mean_magnitude = RowAbsMean(x);
    }
    at::Tensor mean = ApplyBoundary(name + ".mean:fwd", sum / d, -1, mean_magnitude);
    const at::Tensor centered = fused ? at::Tensor() : x - mean;
    const at::Tensor var_sum =
        (fused ? LayerNormCenteredSquareSum(x, mean) : RowSum(centered * centered)) / d;
    at::Tensor var = ApplyBoundary(name + ".var:fwd", var_sum, -1, OwnMagnitude(var_sum));
    at::Tensor rstd = (var + eps).rsqrt();
    at::Tensor xhat, y;
    if (fused) {
      LayerNormOutput out = LayerNormOutputFromInput(x, mean, rstd, w, b);
      xhat = out.xhat;
      y = out.y;
    } else {
      xhat = centered * rstd;
      y = xhat * w + b;
    }
    ctx->save_for_backward({xhat, rstd, w, b});
    SaveBackwardCall(ctx, name + ".stats:bwd", bwd_call);
    // Alike everywhere from an input that is (as batch norm's below); else |xhat w| + |b|.
    const bool agreed = IsAgreed(x);
    ctx->saved_data["agreed"] = agreed;
    if (agreed) {
      OfferMagnitude(y, ZeroMagnitude());
    } else if (MagnitudesWanted()) {
      OfferMagnitude(y, AbsPlusColumn(xhat * w, b));
    }
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const at::Tensor &xhat = saved[0], &rstd = saved[1], &w = saved[2];
    const at::Tensor& g = grads[0];
    const double d = static_cast<double>(xhat.size(-1));
    // Fused (layer_norm.h): the row sums in one pass over g and xhat, the input gradient and
    // the column sums in one more each, and the magnitudes' sums, when wanted, in one more: no
    // products of g in memory.
    const at::Tensor g_in = g.contiguous();
    const bool fused = LayerNormFused(g_in, {&w}) && ContiguousCpuDoubles({&g_in, &xhat});
    const bool magnitudes = MagnitudesWanted();
    // (RowAbsMean of a single row takes ATen's sum: that case keeps the products.)
    const bool fused_abs = fused && magnitudes && g_in.dim() >= 2;
    LayerNormGradAbsSums abs_sums;
    if (fused_abs) {
      at::NoGradGuard no_grad;
      abs_sums = LayerNormGradAbsSumsOf(g_in, xhat, w);
    }
    at::Tensor gxhat, gxx;
    if (!fused || (magnitudes && !fused_abs)) {
      gxhat = g * w;
      gxx = gxhat * xhat;
    }
    at::Tensor mean_g, mean_gx;
    if (fused) {
      const LayerNormRowSums sums = LayerNormGradRowSums(g_in, xhat, w);
      if (fused_abs) {
        std::vector<int64_t> stat_shape = xhat.sizes().vec();
        stat_shape.back() = 1;
        const at::Tensor both = RoundBackward(ctx, at::stack({sums.gxhat / d, sums.gxx / d}), [&] {
          // RowAbsMean of g * w and of (g * w) * xhat: the same bits.
          return at::stack(
              {abs_sums.row_gxhat.view(stat_shape) / d, abs_sums.row_gxx.view(stat_shape) / d});
        });
        mean_g = both[0];
        mean_gx = both[1];
      } else {
        std::tie(mean_g, mean_gx) =
            RoundPair(ctx, sums.gxhat / d, sums.gxx / d, gxhat, gxx, &RowAbsMean);
      }
    } else {
      std::tie(mean_g, mean_gx) =
          RoundPair(ctx, RowSum(gxhat) / d, RowSum(gxx) / d, gxhat, gxx, &RowAbsMean);
    }
    at::Tensor gx = fused ? LayerNormInputGrad(g_in, xhat, w, rstd, mean_g, mean_gx)
                          : rstd * (gxhat - mean_g - xhat * mean_gx);
    if (magnitudes) {
      // gx cancels its three terms: its magnitude is theirs, unless it is alike everywhere
      // (the forward's input and g are, and the statistics are rounded).
      at::NoGradGuard no_grad;
      if (ctx->saved_data["agreed"].toBool() && IsAgreed(g)) {
        OfferMagnitude(gx, ZeroMagnitude());
      } else {
        OfferMagnitude(gx,
                       RowAbsSum3(rstd, gxhat.defined() ? gxhat : g * w, mean_g, xhat * mean_gx));
      }
      AddGradMagnitude(w, fused_abs ? abs_sums.col_gy_xhat : ColumnAbsSum(g * xhat));
      AddGradMagnitude(saved[3], fused_abs ? abs_sums.col_g : ColumnAbsSum(g));
    }
    if (fused) {
      const LayerNormColumnSums sums = LayerNormGradColumnSums(g_in, xhat);
      return {gx, sums.gy_xhat, sums.g, at::Tensor(), at::Tensor(), at::Tensor()};
    }
    const at::Tensor gy_xhat = g * xhat;
    return {gx, ColumnSum(gy_xhat), ColumnSum(g), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// Per-channel sum of [N, C, H, W] -> [C].
at::Tensor ChannelSum(const at::Tensor& t) { return vt::Sum(t, {0, 2, 3}); }
at::Tensor PerChannel(const at::Tensor& t) { return t.view({1, -1, 1, 1}); }

struct BatchNormFn : public torch::autograd::Function<BatchNormFn> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w,
                               const at::Tensor& b, double eps, const std::string& name,
                               int64_t bwd_call) {
    const double count = static_cast<double>(x.numel() / x.size(1));
    // Fused (batch_norm.h): the statistics' sums straight from x, no centered tensor.
    const bool fused = BatchNormStatisticsFused(x, {&w, &b});
    at::Tensor mean = ApplyBoundary(
        name + ".mean:fwd", (fused ? BatchNormChannelSum(x) : ChannelSum(x)) / count, -1,
        MagnitudesWanted() ? Detached([&] { return ChannelAbsSum(x) / count; }) : at::Tensor());
    at::Tensor centered = fused ? at::Tensor() : x - PerChannel(mean);
    const at::Tensor var_sum =
        (fused ? BatchNormCenteredSquareSum(x, mean) : ChannelSum(centered * centered)) / count;
    at::Tensor var = ApplyBoundary(name + ".var:fwd", var_sum, -1, OwnMagnitude(var_sum));
    at::Tensor rstd = (var + eps).rsqrt();
    BatchNormOutput out = fused ? BatchNormOutputFromInput(x, mean, rstd, w, b)
                                : BatchNormOutputOf(centered, rstd, w, b);
    ctx->save_for_backward({out.xhat, rstd, w, b});
    ctx->saved_data["count"] = count;
    SaveBackwardCall(ctx, name + ".stats:bwd", bwd_call);
    ctx->mark_non_differentiable({mean, var});
    // From an input every party holds alike (a boundary's output), with the statistics rounded
    // and the parameters the run's own, the output is IEEE subtractions, products and sums of
    // equal values: the same bits everywhere (ROUNDING.md "Magnitudes"). Otherwise
    // |xhat w_c| + |b_c|, its two terms.
    const bool agreed = IsAgreed(x);
    ctx->saved_data["agreed"] = agreed;
    if (agreed) {
      OfferMagnitude(out.y, ZeroMagnitude());
    } else if (MagnitudesWanted()) {
      OfferAbsPlusChannel(out.y, out.xhat, b, w);
    }
    return {out.y, mean, var};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const at::Tensor &xhat = saved[0], &rstd = saved[1], &w = saved[2];
    const double count = ctx->saved_data["count"].toDouble();
    const at::Tensor& g = grads[0];
    // g w_c, g w_c xhat, g xhat and, in the same pass, the parameters' magnitudes (sum |g
    // xhat|, sum |g| per channel), which also give the two statistics': their terms g w_c and
    // g w_c xhat have |w_c| as a factor.
    // Fused (batch_norm.h): the four channel sums in one pass over g and xhat, and the input
    // gradient from g, with no products of g in memory.
    const at::Tensor g_in = g.contiguous();
    const bool fused = BatchNormStatisticsFused(g_in, {&w}) && FusablePlanes({&g_in, &xhat}, {});
    BatchNormBackwardTerms terms;
    BatchNormGradSums sums;
    if (fused) {
      sums = BatchNormGradSumsOf(g_in, xhat, w, MagnitudesWanted());
    } else {
      terms = BatchNormBackwardTermsOf(g, xhat, w, MagnitudesWanted());
      sums.gxhat = ChannelSum(terms.gxhat);
      sums.gxx = ChannelSum(terms.gxx);
      sums.magnitudes = terms.magnitudes;
    }
    const ParamMagnitudes& m = sums.magnitudes;
    const at::Tensor both =
        RoundBackward(ctx, at::stack({sums.gxhat / count, sums.gxx / count}), [&] {
          const at::Tensor abs_w = w.detach().abs();
          return at::stack({abs_w * m.b / count, abs_w * m.w / count});
        });
    const at::Tensor mean_g = both[0], mean_gx = both[1];
    at::Tensor gx = fused ? BatchNormInputGradFromG(g_in, xhat, w, rstd, mean_g, mean_gx)
                          : BatchNormInputGrad(terms.gxhat, xhat, rstd, mean_g, mean_gx);
    if (MagnitudesWanted()) {
      at::NoGradGuard no_grad;
      // Alike everywhere when the forward's input and g are (the statistics are rounded):
      // elementwise IEEE arithmetic of equal values, as the output's.
      if (ctx->saved_data["agreed"].toBool() && IsAgreed(g)) {
        OfferMagnitude(gx, ZeroMagnitude());
      } else {
        OfferComputedMagnitude(gx, BatchNormInputGradMagnitude(g, xhat, w, rstd, mean_g, mean_gx));
      }
      AddGradMagnitude(w, m.w);
      AddGradMagnitude(saved[3], m.b);
    }
    return {gx,
            fused ? sums.gy_xhat : ChannelSum(terms.gy_xhat),
            fused ? sums.g : ChannelSum(g),
            at::Tensor(),
            at::Tensor(),
            at::Tensor()};
  }
};

struct EmbeddingFn : public torch::autograd::Function<EmbeddingFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& weight,
                            const at::Tensor& indices) {
    ctx->save_for_backward({indices, weight});
    ctx->saved_data["rows"] = weight.size(0);
    at::Tensor y = at::embedding(weight, indices);
    // Copies of the parameter's rows: alike everywhere.
    if (MagnitudesWanted()) OfferMagnitude(y, ZeroMagnitude());
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const at::Tensor& indices = saved[0];
    const at::Tensor& g = grads[0];
    const int64_t rows = ctx->saved_data["rows"].toInt();
    at::Tensor gw = vt::IndexAddRows(g.reshape({-1, g.size(-1)}), indices.reshape({-1}), rows);
    if (MagnitudesWanted()) {
      // The terms are the incoming gradient's values, or the magnitude of their own terms
      // where the op that made them offered one (a broadcast sum's). A gradient alike
      // everywhere (zero magnitude) is its own terms' size: the index-add that sums them is
      // not alike everywhere.
      at::NoGradGuard no_grad;
      const at::Tensor incoming = IncomingMagnitude(g);
      const at::Tensor terms = IsZeroMagnitude(incoming) ? g.abs() : incoming;
      AddGradMagnitude(
          saved[1], vt::IndexAddRows(terms.reshape({-1, g.size(-1)}), indices.reshape({-1}), rows));
    }
    return {gw, at::Tensor()};
  }
};

struct AddBroadcastFn : public torch::autograd::Function<AddBroadcastFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b) {
    ctx->saved_data["b_shape"] = b.sizes().vec();
    at::Tensor y = a + b;
    if (IsAgreed(a) && IsAgreed(b)) OfferMagnitude(y, ZeroMagnitude());  // a sum of equal values
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const std::vector<int64_t> b_shape = ctx->saved_data["b_shape"].toIntVector();
    const at::Tensor& g = grads[0];
    // Reduce the leading dimensions b lacks and those where b has size 1.
    const int64_t lead = g.dim() - static_cast<int64_t>(b_shape.size());
    std::vector<int64_t> dims;
    for (int64_t d = 0; d < g.dim(); ++d) {
      if (d < lead || (b_shape[d - lead] == 1 && g.size(d) != 1)) dims.push_back(d);
    }
    at::Tensor gb = dims.empty() ? g : vt::Sum(g, dims, true).reshape(b_shape);
    if (!dims.empty() && MagnitudesWanted())
      OfferMagnitude(gb, Detached([&] { return vt::Sum(g.abs(), dims, true).reshape(b_shape); }));
    return {g, gb};
  }
};

void CheckFloating(const at::Tensor& x, const char* op) {
  if (!at::isFloatingType(x.scalar_type())) {
    throw Error(std::string(op) + ": expected a floating-point tensor, got " +
                std::string(c10::toString(x.scalar_type())));
  }
  if (x.dim() == 0)
    throw Error(std::string(op) + ": expected at least one dimension, got a scalar");
}

}  // namespace

at::Tensor SoftmaxOp(const at::Tensor& x, const std::string& name) {
  CheckFloating(x, "softmax");
  return SoftmaxFn::apply(x, name, BackwardCall(name + ".sum:bwd", {x}));
}

at::Tensor LogSoftmaxOp(const at::Tensor& x, const std::string& name) {
  CheckFloating(x, "log_softmax");
  return LogSoftmaxFn::apply(x, name, BackwardCall(name + ".sum:bwd", {x}));
}

at::Tensor LayerNormOp(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                       double eps, const std::string& name) {
  CheckFloating(x, "layer_norm");
  if (weight.dim() != 1 || bias.sizes() != weight.sizes() || x.size(-1) != weight.size(0)) {
    throw Error("layer_norm: input's last dimension " + std::to_string(x.size(-1)) +
                " must match weight and bias [" + std::to_string(weight.size(0)) + "]");
  }
  return LayerNormFn::apply(x, weight, bias, eps, name,
                            BackwardCall(name + ".stats:bwd", {x, weight, bias}));
}

BatchNormResult BatchNormTrainOp(const at::Tensor& x, const at::Tensor& weight,
                                 const at::Tensor& bias, double eps, const std::string& name) {
  CheckFloating(x, "batch_norm");
  if (x.dim() != 4 || weight.dim() != 1 || weight.size(0) != x.size(1) ||
      bias.sizes() != weight.sizes()) {
    throw Error("batch_norm: expected input [N, C, H, W] and weight, bias [C]");
  }
  auto out = BatchNormFn::apply(x, weight, bias, eps, name,
                                BackwardCall(name + ".stats:bwd", {x, weight, bias}));
  return {out[0], out[1], out[2]};
}

at::Tensor EmbeddingOp(const at::Tensor& weight, const at::Tensor& indices) {
  return EmbeddingFn::apply(weight, indices);
}

at::Tensor AddBroadcastOp(const at::Tensor& a, const at::Tensor& b) {
  if (b.dim() > a.dim())
    throw Error("add_broadcast: the broadcast operand has more dimensions than the result");
  for (int64_t d = 0; d < b.dim(); ++d) {
    const int64_t bs = b.size(d), as = a.size(a.dim() - b.dim() + d);
    if (bs != as && bs != 1) throw Error("add_broadcast: shapes do not broadcast");
  }
  return AddBroadcastFn::apply(a, b);
}

}  // namespace vt::nn
