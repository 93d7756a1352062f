#include "runtime/train/spec_check.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "runtime/common/error.h"

namespace vt::train {

namespace {

// Long values (a Lua model's source) are named by where they first differ, not printed whole.
std::string Excerpt(const std::string& value, size_t at) {
  const size_t start = at > 20 ? at - 20 : 0;
  std::string out = value.substr(start, 60);
  return (start > 0 ? "..." : "") + out + (start + 60 < value.size() ? "..." : "");
}

std::string FieldDifference(const std::string& key, const std::string& mine,
                            const std::string& theirs, const std::string& there_name) {
  if (mine.size() <= 120 && theirs.size() <= 120)
    return key + " is " + mine + " here, " + theirs + " in " + there_name;
  size_t at = 0;
  while (at < mine.size() && at < theirs.size() && mine[at] == theirs[at]) ++at;
  // Escaped newlines ("\\n") count the lines of a source.
  size_t line = 1;
  for (size_t i = 0; i + 1 < at; ++i) {
    if (mine[i] == '\\' && mine[i + 1] == 'n') ++line;
    if (mine[i] == '\\') ++i;
  }
  return key + " differs from character " + std::to_string(at + 1) + " (line " +
         std::to_string(line) + "): '" + Excerpt(mine, at) + "' here, '" + Excerpt(theirs, at) +
         "' in " + there_name;
}

}  // namespace

std::string SpecDifference(const Spec& here, const Spec& there, const std::string& there_name,
                           size_t limit) {
  const std::map<std::string, std::string>& a = here.fields();
  const std::map<std::string, std::string>& b = there.fields();
  std::set<std::string> keys;
  for (const auto& [k, v] : a) keys.insert(k);
  for (const auto& [k, v] : b) keys.insert(k);
  std::string out;
  size_t differing = 0;
  for (const std::string& k : keys) {
    auto ia = a.find(k);
    auto ib = b.find(k);
    if (ia != a.end() && ib != b.end() && ia->second == ib->second) continue;
    if (++differing > limit) continue;
    const std::string mine = ia == a.end() ? "absent" : ia->second;
    const std::string theirs = ib == b.end() ? "absent" : ib->second;
    out += (out.empty() ? "" : "; ") + FieldDifference(k, mine, theirs, there_name);
  }
  if (differing > limit) out += "; and " + std::to_string(differing - limit) + " more";
  return out;
}

void CheckLogsSpec(store::Store& store, const std::string& run, const Spec& spec) {
  store.Refresh();
  std::optional<store::RunInfo> info = store.GetRun(run);
  if (!info)
    throw Error("store '" + store.path() + "' holds no run '" + run +
                "' to replay (logs_run names another)");
  if (info->spec == spec.Canonical()) return;
  Spec theirs = Spec::Parse(info->spec);
  throw Error("the logs in store '" + store.path() + "', run '" + run +
              "', were made with another spec than this auditor's: " +
              SpecDifference(spec, theirs, "the logs") +
              ". Replaying them would report a divergence that is not the trainer's");
}

namespace {

std::vector<int64_t> IntList(const std::string& text) {
  std::vector<int64_t> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    if (comma > start) out.push_back(std::stoll(text.substr(start, comma - start)));
    start = comma + 1;
  }
  return out;
}

int64_t Product(const std::vector<int64_t>& v) {
  int64_t n = 1;
  for (int64_t d : v) n *= d;
  return n;
}

std::string Shape(const std::vector<int64_t>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

}  // namespace

// A model defined in Lua has no fields to compare with the data: it runs (without a step, so
// without rounding or gradients) on the first two examples, and its output must have one row
// of at least classes() values per target.
std::string LuaModelMisfit(const Spec& spec, const data::Dataset& data) {
  const int64_t n = std::min<int64_t>(2, data.size());
  if (n < 1) return "";
  std::vector<int64_t> indices;
  for (int64_t i = 0; i < n; ++i) indices.push_back(i);
  const data::Batch batch = data.Get(indices, spec.seed(), 0);
  at::Tensor out;
  try {
    at::NoGradGuard no_grad;
    std::shared_ptr<nn::Model> model = spec.BuildModel();
    out = model->Forward(batch.inputs);
  } catch (const std::exception& e) {
    return "the model's forward fails on the data's examples " + Shape(data.input_shape()) + ": " +
           e.what();
  }
  std::vector<int64_t> want = batch.targets.sizes().vec();
  std::vector<int64_t> got = out.sizes().vec();
  if (got.size() != want.size() + 1 || !std::equal(want.begin(), want.end(), got.begin())) {
    want.push_back(data.classes());
    return "the model's outputs for a batch of " + std::to_string(n) + " are " + Shape(got) +
           "; the data's targets need " + Shape(want) + " (one row of class scores per target)";
  }
  if (got.back() < data.classes()) {
    return "the model's outputs have " + std::to_string(got.back()) +
           " class scores per target, fewer than the data's " + std::to_string(data.classes()) +
           " classes";
  }
  return "";
}

std::string ModelDataMisfit(const Spec& spec, const data::Dataset& data) {
  const std::map<std::string, std::string>& f = spec.fields();
  auto field = [&](const std::string& k) {
    auto it = f.find("model." + k);
    return it == f.end() ? std::string() : it->second;
  };
  const std::string type = field("type");
  const std::vector<int64_t> shape = data.input_shape();
  const int64_t classes = data.classes();
  auto need_classes = [&](const std::string& key) -> std::string {
    const int64_t have = std::stoll(field(key));
    if (have >= classes) return "";
    return "model." + key + " " + std::to_string(have) + " is fewer than the data's " +
           std::to_string(classes) +
           (type == "gpt2"
                ? " token values"
                : " classes (labels are 0-based, up to " + std::to_string(classes - 1) + ")");
  };
  if (type == "mlp") {
    const std::vector<int64_t> want = IntList(field("input_shape"));
    if (Product(want) != Product(shape)) {
      return "model.input_shape " + field("input_shape") + " has " + std::to_string(Product(want)) +
             " values, the data's examples " + Shape(shape) + " have " +
             std::to_string(Product(shape));
    }
    return need_classes("classes");
  }
  if (type == "resnet") {
    if (shape.size() != 3)
      return "resnet takes images [C, H, W]; the data's examples are " + Shape(shape);
    if (std::to_string(shape[0]) != field("in_channels")) {
      return "model.in_channels " + field("in_channels") + " does not match the data's " +
             std::to_string(shape[0]) + " channels (examples " + Shape(shape) + ")";
    }
    return need_classes("classes");
  }
  if (type == "lua") return LuaModelMisfit(spec, data);
  if (type == "gpt2") {
    if (shape.size() != 1)
      return "gpt2 takes token sequences [T]; the data's examples are " + Shape(shape);
    if (shape[0] > std::stoll(field("context"))) {
      return "the data's sequences of " + std::to_string(shape[0]) +
             " tokens exceed model.context " + field("context");
    }
    return need_classes("vocab");
  }
  return "";
}

std::string UnknownBoundaryOverrides(const nn::WindowTable& windows,
                                     const std::map<std::string, nn::BoundaryStats>& seen) {
  std::string out;
  // A sharded step names its boundaries "s<k>/name"; overrides are matched on plain names
  // (`seen` holds every shard's step 1: Runner::UnknownOverridesOfFirstStep gathers them).
  std::set<std::string> plain_seen;
  for (const auto& [name, stats] : seen) {
    std::string plain;
    nn::ShardOf(name, &plain);
    plain_seen.insert(plain);
  }
  for (const auto& [name, window] : windows.by_boundary) {
    std::string plain;
    nn::ShardOf(name, &plain);
    if (seen.count(name) || plain_seen.count(plain)) continue;
    std::vector<std::pair<size_t, std::string>> near;
    for (const auto& [candidate, stats] : seen)
      near.emplace_back(EditDistance(name, candidate), candidate);
    std::sort(near.begin(), near.end());
    std::string nearest;
    for (size_t i = 0; i < near.size() && i < 3; ++i) nearest += (i ? ", " : "") + near[i].second;
    out += (out.empty() ? "" : "; ") + ("'" + name + "'") +
           (nearest.empty() ? "" : " (nearest: " + nearest + ")");
  }
  if (out.empty()) return out;
  return "the spec's round.boundaries names boundaries the model did not reach in the run's "
         "first step: " +
         out + "; no step of this run was stored (an override must name a boundary of step 1)";
}

}  // namespace vt::train
