#include "runtime/tensor/format.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <vector>

#include "runtime/tensor/dtype.h"

namespace vt {
namespace {

// Renders single elements with one shared style so columns line up.
class ElementFormatter {
 public:
  ElementFormatter(const at::Tensor& shown, const FormatOptions& options)
      : precision_(options.precision) {
    kind_ = shown.scalar_type() == at::kBool          ? Kind::kBool
            : at::isFloatingType(shown.scalar_type()) ? Kind::kFloat
                                                      : Kind::kInt;
    if (kind_ != Kind::kFloat || shown.numel() == 0) return;
    at::Tensor v = shown.to(at::kDouble).flatten();
    at::Tensor finite = v.masked_select(at::isfinite(v));
    if (finite.numel() == 0) return;
    at::Tensor a = finite.abs();
    double max_abs = a.max().item<double>();
    at::Tensor nonzero = a.masked_select(a > 0);
    double min_abs = nonzero.numel() > 0 ? nonzero.min().item<double>() : 0.0;
    scientific_ = max_abs >= 1e8 || (min_abs > 0 && min_abs < 1e-4) ||
                  (min_abs > 0 && max_abs / min_abs >= 1e3 && max_abs >= 1e3);
  }

  std::string Format(const at::Tensor& scalar) const {
    char buf[64];
    switch (kind_) {
      case Kind::kBool:
        return scalar.item<bool>() ? "true" : "false";
      case Kind::kInt:
        std::snprintf(buf, sizeof buf, "%" PRId64, scalar.item<int64_t>());
        return buf;
      case Kind::kFloat: {
        double x = scalar.item<double>();
        if (std::isnan(x)) return "nan";
        if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
        std::snprintf(buf, sizeof buf, scientific_ ? "%.*e" : "%.*f", precision_, x);
        return buf;
      }
    }
    return "?";
  }

 private:
  enum class Kind { kBool, kInt, kFloat };
  Kind kind_;
  bool scientific_ = false;
  int precision_;
};

bool Summarize(const at::Tensor& t, const FormatOptions& o) { return t.numel() > o.threshold; }

// Elements that will be shown, so number styles are chosen from what is visible.
at::Tensor Shown(const at::Tensor& t, const FormatOptions& o, bool summarize) {
  if (t.dim() == 0) return t.reshape({1});
  if (!summarize || t.size(0) <= 2 * o.edge_items) {
    if (t.dim() == 1) return t;
    std::vector<at::Tensor> parts;
    for (int64_t i = 0; i < t.size(0); ++i) parts.push_back(Shown(t[i], o, summarize).flatten());
    return parts.empty() ? t.flatten() : at::cat(parts);
  }
  std::vector<at::Tensor> parts;
  for (int64_t i = 0; i < o.edge_items; ++i) parts.push_back(Shown(t[i], o, summarize).flatten());
  for (int64_t i = t.size(0) - o.edge_items; i < t.size(0); ++i) {
    parts.push_back(Shown(t[i], o, summarize).flatten());
  }
  return at::cat(parts);
}

void Render(const at::Tensor& t, const ElementFormatter& fmt, size_t width, const FormatOptions& o,
            bool summarize, int indent, std::string& out) {
  auto pad = [&](std::string s) {
    if (s.size() < width) s.insert(0, width - s.size(), ' ');
    return s;
  };
  out += '[';
  const int64_t n = t.size(0);
  const bool cut = summarize && n > 2 * o.edge_items;
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < n; ++i) {
    if (cut && i == o.edge_items) {
      rows.push_back(-1);
      i = n - o.edge_items - 1;
      continue;
    }
    rows.push_back(i);
  }
  for (size_t k = 0; k < rows.size(); ++k) {
    if (k > 0) {
      out += ',';
      if (t.dim() == 1) {
        out += ' ';
      } else {
        out.append(t.dim() - 1, '\n');
        out.append(indent + 1, ' ');
      }
    }
    if (rows[k] < 0) {
      out += "...";
      continue;
    }
    if (t.dim() == 1) {
      out += pad(fmt.Format(t[rows[k]]));
    } else {
      Render(t[rows[k]], fmt, width, o, summarize, indent + 1, out);
    }
  }
  out += ']';
}

void MeasureWidth(const at::Tensor& shown, const ElementFormatter& fmt, size_t* width) {
  for (int64_t i = 0; i < shown.numel(); ++i)
    *width = std::max(*width, fmt.Format(shown[i]).size());
}

}  // namespace

std::string FormatTensor(const at::Tensor& tensor, const FormatOptions& options) {
  at::Tensor t = tensor.to(at::kCPU);
  std::string out = "vt.tensor ";
  try {
    out += DtypeName(t.scalar_type());
  } catch (const std::exception&) {
    out += c10::toString(t.scalar_type());
  }
  out += " [";
  for (int64_t d = 0; d < t.dim(); ++d) out += (d > 0 ? ", " : "") + std::to_string(t.size(d));
  out += "]\n";
  if (t.numel() == 0) return out + "[]";
  const bool summarize = Summarize(t, options);
  at::Tensor shown = Shown(t, options, summarize);
  ElementFormatter fmt(shown, options);
  size_t width = 0;
  MeasureWidth(shown, fmt, &width);
  if (t.dim() == 0) return out + fmt.Format(t);
  Render(t, fmt, width, options, summarize, 0, out);
  return out;
}

}  // namespace vt
