#include "runtime/optim/optimizer.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <cstdio>
#include <tuple>

#include "runtime/common/error.h"
#include "runtime/nn/context.h"
#include "runtime/optim/adamw_kernels.h"
#include "runtime/optim/sgd_kernels.h"
#include "runtime/tensor/layout.h"

namespace vt::optim {
namespace {

constexpr double kPi = 3.14159265358979323846;

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

void Require(bool ok, const std::string& what) {
  if (!ok) throw Error("optimizer: " + what);
}

}  // namespace

double PortableCos(double x) {
  // Reduce to [0, pi/2] with cos(x) = -cos(pi - x), then the Taylor series, whose terms
  // fall below 1e-17 by x^22/22! at x = pi/2.
  double sign = 1.0;
  if (x > kPi / 2) {
    x = kPi - x;
    sign = -1.0;
  }
  const double x2 = x * x;
  double term = 1.0, sum = 1.0;
  for (int k = 1; k <= 12; ++k) {
    term = -term * x2 / static_cast<double>((2 * k - 1) * (2 * k));
    sum += term;
  }
  return sign * sum;
}

double PowInt(double x, int64_t n) {
  double result = 1.0, base = x;
  while (n > 0) {
    if (n & 1) result *= base;
    base *= base;
    n >>= 1;
  }
  return result;
}

void Schedule::Validate() const {
  Require(kind == "constant" || kind == "cosine" || kind == "linear",
          "schedule must be 'constant', 'cosine' or 'linear', got '" + kind + "'");
  Require(warmup >= 0, "warmup must be >= 0");
  Require(min_factor >= 0 && min_factor <= 1, "min_factor must be in [0, 1]");
  Require(kind == "constant" || total > 0, "a " + kind + " schedule needs the run's total steps");
}

double Schedule::Factor(int64_t step) const {
  if (warmup > 0 && step <= warmup) return static_cast<double>(step) / static_cast<double>(warmup);
  if (kind == "constant") return 1.0;
  const double span = static_cast<double>(std::max<int64_t>(1, total - warmup));
  double progress = static_cast<double>(step - warmup) / span;
  progress = std::min(1.0, std::max(0.0, progress));
  const double decay =
      kind == "cosine" ? 0.5 * (1.0 + PortableCos(kPi * progress)) : 1.0 - progress;
  return min_factor + (1.0 - min_factor) * decay;
}

void OptimizerConfig::Validate() const {
  Require(kind == "sgd" || kind == "adamw", "kind must be 'sgd' or 'adamw', got '" + kind + "'");
  Require(std::isfinite(lr) && lr > 0, "lr must be a finite number > 0, got " + Num(lr));
  Require(momentum >= 0 && momentum < 1, "momentum must be in [0, 1), got " + Num(momentum));
  Require(!nesterov || momentum > 0, "nesterov needs momentum > 0");
  Require(weight_decay >= 0 && std::isfinite(weight_decay), "weight_decay must be >= 0");
  Require(beta1 >= 0 && beta1 < 1, "beta1 must be in [0, 1), got " + Num(beta1));
  Require(beta2 >= 0 && beta2 < 1, "beta2 must be in [0, 1), got " + Num(beta2));
  Require(eps > 0, "eps must be > 0");
  schedule.Validate();
}

std::map<std::string, std::string> OptimizerConfig::Canonical() const {
  std::map<std::string, std::string> out = {{"kind", kind},
                                            {"lr", Num(lr)},
                                            {"weight_decay", Num(weight_decay)},
                                            {"schedule", schedule.kind},
                                            {"warmup", std::to_string(schedule.warmup)},
                                            {"min_factor", Num(schedule.min_factor)}};
  if (kind == "sgd") {
    out["momentum"] = Num(momentum);
    out["nesterov"] = nesterov ? "true" : "false";
  } else {
    out["beta1"] = Num(beta1);
    out["beta2"] = Num(beta2);
    out["eps"] = Num(eps);
  }
  return out;
}

Optimizer::Optimizer(OptimizerConfig config) : config_(std::move(config)) { config_.Validate(); }

void Optimizer::set_config(OptimizerConfig config) {
  config.Validate();
  config_ = std::move(config);
}

void Optimizer::InitState(const NamedTensors& params) {
  for (const auto& [name, p] : params) {
    if (config_.kind == "adamw" || config_.momentum > 0) {
      if (!first_.count(name)) first_[name] = at::zeros_like(*p).detach();
    }
    if (config_.kind == "adamw" && !second_.count(name))
      second_[name] = at::zeros_like(*p).detach();
  }
}

std::vector<std::pair<std::string, at::Tensor*>> Optimizer::NamedState() {
  std::vector<std::pair<std::string, at::Tensor*>> out;
  const std::string first = config_.kind == "adamw" ? ".exp_avg" : ".momentum";
  for (auto& [name, t] : first_) out.emplace_back("optim." + name + first, &t);
  for (auto& [name, t] : second_) out.emplace_back("optim." + name + ".exp_avg_sq", &t);
  return out;
}

void Optimizer::Step(const NamedTensors& params, int64_t step,
                     const std::vector<std::optional<precision::Magnitude>>* grad_boundaries) {
  if (grad_boundaries != nullptr && grad_boundaries->size() != params.size()) {
    throw Error("optimizer: " + std::to_string(grad_boundaries->size()) +
                " gradient boundaries for " + std::to_string(params.size()) + " parameters");
  }
  InitState(params);
  at::NoGradGuard no_grad;
  const double lr = config_.lr * config_.schedule.Factor(step);
  // Where boundaries round, each pass runs inside its boundary's rounding pass, block by block
  // (nn::ApplyBoundaryProduced: one pass over memory where there were two); in plain steps the
  // passes run on their own, AdamW's moments together.
  const bool fuse = fuse_boundaries_ && nn::BoundariesRound();
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string& name = params[i].first;
    at::Tensor* p = params[i].second;
    at::Tensor grad = p->grad();
    // The gradient's boundary, when the caller left it here: where the update takes one pass,
    // with_grad makes it the pass's first link (its values are there already: its producer
    // writes nothing); elsewhere round_grad gives it its own pass first. The passes after it
    // read the gradient through `grad` (a tampering trainer's boundary hands back a new one).
    bool grad_pending =
        grad_boundaries != nullptr && (*grad_boundaries)[i].has_value() && grad.defined();
    const precision::Magnitude grad_magnitude =
        grad_pending ? *(*grad_boundaries)[i] : precision::Magnitude();
    auto with_grad = [&](std::vector<nn::StepContext::ProducedLink> links) {
      if (grad_pending && ContiguousCpuDoubles({&grad})) {
        links.insert(links.begin(),
                     {name + ":grad", &grad, [](int64_t, int64_t) {}, grad_magnitude});
        grad_pending = false;
      }
      return links;
    };
    auto round_grad = [&] {
      if (grad_pending) nn::ApplyBoundaryInPlace(name + ":grad", &grad, grad_magnitude);
      grad_pending = false;
    };
    if (!grad.defined()) grad = at::zeros_like(*p);
    // The update is computed in the parameter's own memory and rounded there; a boundary
    // that hands back another tensor (a tampering trainer's) is copied in.
    at::Tensor value = p->detach();
    at::Tensor updated = value;
    if (config_.kind == "sgd") {
      // d = grad + weight_decay * value; buf = momentum * buf + d; value - lr * (d, buf or
      // d + momentum * buf): sgd_kernels.h, a pass each side of the momentum's boundary.
      const double momentum = config_.momentum, weight_decay = config_.weight_decay;
      const bool nesterov = config_.nesterov;
      if (momentum > 0 && fuse && ContiguousCpuDoubles({&first_[name], &grad, &value})) {
        // Both boundaries in one pass: the update reads each block's rounded momentum while it
        // is in cache (and the momentum reads the value before the update writes it). (A
        // tampering trainer's boundaries run one after the other and may hand back a new
        // buffer: the update reads it as it is then.)
        at::Tensor& b = first_[name];
        double* pb = b.data_ptr<double>();
        double* px = value.data_ptr<double>();
        nn::ApplyBoundaryChain(
            with_grad({{name + ":momentum", &b,
                        [&](int64_t begin, int64_t end) {
                          SgdMomentumRange(pb, grad.data_ptr<double>(), px, momentum, weight_decay,
                                           begin, end);
                        }},
                       {name + ":update", &updated, [&](int64_t begin, int64_t end) {
                          SgdUpdateRange(px, grad.data_ptr<double>(), b.data_ptr<double>(), lr,
                                         momentum, weight_decay, nesterov, begin, end);
                        }}}));
      } else {
        round_grad();
        at::Tensor buf;
        if (momentum > 0) {
          buf = first_[name];
          if (fuse && ContiguousCpuDoubles({&buf, &grad, &value})) {
            double* pb = buf.data_ptr<double>();
            const double *pg = grad.data_ptr<double>(), *px = value.data_ptr<double>();
            nn::ApplyBoundaryProduced(name + ":momentum", &buf, [&](int64_t begin, int64_t end) {
              SgdMomentumRange(pb, pg, px, momentum, weight_decay, begin, end);
            });
          } else {
            SgdMomentumInPlace(buf, grad, value, momentum, weight_decay);
            nn::ApplyBoundaryInPlace(name + ":momentum", &buf);
          }
          first_[name] = buf;
        }
        if (fuse && ContiguousCpuDoubles({&value, &grad}) &&
            (!buf.defined() || ContiguousCpuDoubles({&value, &buf}))) {
          double* px = value.data_ptr<double>();
          const double* pg = grad.data_ptr<double>();
          const double* pb = buf.defined() ? buf.data_ptr<double>() : nullptr;
          nn::ApplyBoundaryProduced(name + ":update", &updated, [&](int64_t begin, int64_t end) {
            SgdUpdateRange(px, pg, pb, lr, momentum, weight_decay, nesterov, begin, end);
          });
        } else {
          SgdUpdateInPlace(updated, grad, buf, lr, momentum, weight_decay, config_.nesterov);
          nn::ApplyBoundaryInPlace(name + ":update", &updated);
        }
      }
    } else {
      at::Tensor& m = first_[name];
      at::Tensor& v = second_[name];
      const double beta1 = config_.beta1, beta2 = config_.beta2, eps = config_.eps;
      const double c1 = 1.0 - PowInt(beta1, step), c2 = 1.0 - PowInt(beta2, step);
      // value * 1.0 is value, bit for bit.
      const double decay = config_.weight_decay > 0 ? 1.0 - lr * config_.weight_decay : 1.0;
      if (fuse && ContiguousCpuDoubles({&value, &m, &v, &grad})) {
        double *pm = m.data_ptr<double>(), *pv = v.data_ptr<double>();
        double* px = value.data_ptr<double>();
        // One pass for the three boundaries: the update reads the rounded moments of each
        // block while they are in cache. (A tampering trainer's boundaries, which run one
        // after the other, hand back new tensors: the update reads m and v as they are then.)
        nn::ApplyBoundaryChain(
            with_grad({{name + ":exp_avg", &m,
                        [&](int64_t begin, int64_t end) {
                          AdamWFirstMomentRange(pm, grad.data_ptr<double>(), beta1, begin, end);
                        }},
                       {name + ":exp_avg_sq", &v,
                        [&](int64_t begin, int64_t end) {
                          AdamWSecondMomentRange(pv, grad.data_ptr<double>(), beta2, begin, end);
                        }},
                       {name + ":update", &updated, [&](int64_t begin, int64_t end) {
                          AdamWUpdateRange(px, m.data_ptr<double>(), v.data_ptr<double>(), lr, c1,
                                           c2, eps, decay, begin, end);
                        }}}));
      } else {
        round_grad();
        AdamWMomentsInPlace(m, v, grad, beta1, beta2);
        nn::ApplyBoundaryInPlace(name + ":exp_avg", &m);
        nn::ApplyBoundaryInPlace(name + ":exp_avg_sq", &v);
        AdamWUpdateInPlace(updated, m, v, lr, c1, c2, eps, decay);
        nn::ApplyBoundaryInPlace(name + ":update", &updated);
      }
    }
    if (!updated.is_same(value)) value.copy_(updated);
    p->mutable_grad() = at::Tensor();
  }
}

}  // namespace vt::optim
