#include "runtime/train/spec.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>

#include "runtime/common/error.h"

namespace vt::train {
namespace {

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

const std::set<std::string>& ModelKeys(const std::string& type) {
  static const std::map<std::string, std::set<std::string>> keys = {
      {"mlp", {"input_shape", "hidden", "classes", "dropout"}},
      {"resnet", {"depth", "width", "in_channels", "classes"}},
      {"gpt2", {"layers", "d_model", "heads", "vocab", "context", "dropout"}},
      {"lua", {"source", "module"}},  // and the prefixes in IsLuaModelKey
  };
  auto it = keys.find(type);
  if (it == keys.end())
    throw Error("spec: model.type must be mlp, resnet, gpt2 or lua, got '" + type + "'");
  return it->second;
}

// model.arg.<name>, model.module.<path>, model.state.<name> (a Lua-defined model's fields).
bool IsLuaModelKey(const std::string& rest) {
  for (const char* prefix : {"arg.", "module.", "state."}) {
    const size_t n = std::strlen(prefix);
    if (rest.size() > n && rest.compare(0, n, prefix) == 0) return true;
  }
  return false;
}

std::map<std::string, ModelBuilder>& Builders() {
  static std::map<std::string, ModelBuilder> builders;
  return builders;
}

const std::set<std::string> kOptimKeys = {"kind",         "lr",     "momentum",  "nesterov",
                                          "weight_decay", "beta1",  "beta2",     "eps",
                                          "schedule",     "warmup", "min_factor"};
const char* kKinds[] = {"fwd", "bwd", "grad", "update"};

// A canonical decimal integer (what std::to_string writes: no sign but '-', no leading zeros,
// no spaces) that fits int64_t; false otherwise.
bool ParseInt(const std::string& s, int64_t* out) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno == ERANGE || std::to_string(v) != s) return false;
  *out = v;
  return true;
}

// The data sets a spec can name (Dataset::name() up to its ':').
const std::set<std::string> kDataKinds = {"fashion-mnist", "synthetic", "tensors", "text"};

class Reader {
 public:
  explicit Reader(const std::map<std::string, std::string>& f) : f_(f) {}
  const std::string& Str(const std::string& key) const {
    auto it = f_.find(key);
    if (it == f_.end()) throw Error("spec: missing field '" + key + "'");
    return it->second;
  }
  bool Has(const std::string& key) const { return f_.count(key) > 0; }
  // Numbers must be spelled canonically (Num: "%.17g", the shortest form that round-trips
  // through "%.17g"; integers in plain decimal): the spec hash is over the text, so "16",
  // "0x10" and "1.6e1" for one learning rate would be three specs for one run.
  double Double(const std::string& key) const {
    const std::string& s = Str(key);
    char* end = nullptr;
    errno = 0;
    double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v)) {
      throw Error("spec: field '" + key + "' must be a finite number, got '" + s + "'");
    }
    if (v == 0.0 && std::signbit(v)) {
      // "-0" is how Num spells -0.0, yet it means what "0" does: two texts for one run.
      throw Error("spec: field '" + key + "' must be spelled canonically ('0'), got '" + s + "'");
    }
    if (s != Num(v)) {
      throw Error("spec: field '" + key + "' must be spelled canonically (printf \"%.17g\": '" +
                  Num(v) + "'), got '" + s + "'");
    }
    return v;
  }
  int64_t Int(const std::string& key, int64_t min, int64_t max) const {
    const std::string& s = Str(key);
    int64_t v = 0;
    if (!ParseInt(s, &v) || v < min || v > max) {
      throw Error("spec: field '" + key + "' must be an integer in [" + std::to_string(min) + ", " +
                  std::to_string(max) + "] in plain decimal, got '" + s + "'");
    }
    return v;
  }
  bool Bool(const std::string& key) const {
    const std::string& s = Str(key);
    if (s != "true" && s != "false")
      throw Error("spec: field '" + key + "' must be true or false, got '" + s + "'");
    return s == "true";
  }
  std::vector<int64_t> Ints(const std::string& key) const {
    std::vector<int64_t> out;
    std::stringstream in(Str(key));
    std::string item;
    while (std::getline(in, item, ',')) {
      int64_t v = 0;
      if (!ParseInt(item, &v) || v < 0) {
        throw Error("spec: field '" + key +
                    "' must be a comma-separated list of sizes in plain decimal, got '" + Str(key) +
                    "'");
      }
      out.push_back(v);
    }
    return out;
  }

 private:
  const std::map<std::string, std::string>& f_;
};

void CheckKeys(const std::map<std::string, std::string>& fields) {
  const std::set<std::string> top = {"version",          "seed",  "batch", "steps",
                                     "checkpoint_every", "shards"};
  auto type = fields.find("model.type");
  if (type == fields.end()) throw Error("spec: missing field 'model.type'");
  const auto& model_keys = ModelKeys(type->second);
  for (const auto& [key, value] : fields) {
    if (key.empty() || value.find('\n') != std::string::npos ||
        key.find_first_of("=\n") != std::string::npos) {
      throw Error("spec: field '" + key +
                  "' has a key or value that cannot be encoded (no '=' in keys, no newlines)");
    }
    bool ok = top.count(key) > 0;
    if (key.rfind("model.", 0) == 0) {
      ok = key == "model.type" || key == "model.init" || model_keys.count(key.substr(6)) > 0 ||
           (type->second == "lua" && IsLuaModelKey(key.substr(6)));
    }
    if (key.rfind("data.", 0) == 0) ok = key.size() > 5;
    if (key.rfind("optim.", 0) == 0) ok = kOptimKeys.count(key.substr(6)) > 0;
    if (key.rfind("round.", 0) == 0) {
      const std::string rest = key.substr(6);
      ok = rest == "bits";
      for (const char* kind : kKinds) {
        ok = ok || rest == std::string(kind) + ".band" || rest == std::string(kind) + ".alpha";
      }
      if (rest.rfind("boundary.", 0) == 0) {
        // round.boundary.<name>.<band|alpha>, with a name ("round.boundary..alpha" was
        // accepted: a window for no boundary, and another text of the run).
        const bool band = rest.size() > 14 && rest.compare(rest.size() - 5, 5, ".band") == 0;
        const bool alpha = rest.size() > 15 && rest.compare(rest.size() - 6, 6, ".alpha") == 0;
        ok = band || alpha;
      }
    }
    if (!ok) {
      std::string valid;
      for (const auto& m : model_keys) valid += "model." + m + ", ";
      if (type->second == "lua") valid += "model.arg.*, model.module.*, model.state.*, ";
      throw Error("spec: unknown field '" + key +
                  "' (valid: version, seed, batch, steps, checkpoint_every, shards, model.type, "
                  "model.init, " +
                  valid +
                  "data.*, optim.*, round.bits, round.<fwd|bwd|grad|update>.<band|alpha>, "
                  "round.boundary.<name>.<band|alpha>)");
    }
  }
}

// data.kind is a known data set, data.name belongs to it, data.digest is a SHA-256 in hex.
void CheckDataFields(const Reader& r) {
  const std::string& kind = r.Str("data.kind");
  if (kDataKinds.count(kind) == 0) {
    throw Error("spec: field 'data.kind' must be fashion-mnist, synthetic, tensors or text, got '" +
                kind + "'");
  }
  const std::string& name = r.Str("data.name");
  if (name != kind && name.rfind(kind + ":", 0) != 0) {
    throw Error("spec: field 'data.name' must be '" + kind + "' or start with '" + kind +
                ":' (data.kind), got '" + name + "'");
  }
  const std::string& digest = r.Str("data.digest");
  if (digest.size() != 64 || digest.find_first_not_of("0123456789abcdef") != std::string::npos) {
    throw Error("spec: field 'data.digest' must be a SHA-256 in 64 lowercase hex digits, got '" +
                digest + "'");
  }
}

// An upper bound on the number of parameters and buffers of the spec's model, from its
// fields alone (mirroring models.cc; in double, so hostile sizes cannot overflow it).
double ModelValuesBound(const Reader& r, const std::map<std::string, std::string>& fields) {
  const std::string& type = r.Str("model.type");
  if (type == "lua") {
    // The declared state (checked against what the source builds, which may not allocate more).
    double total = 0;
    for (auto it = fields.lower_bound("model.state."); it != fields.end(); ++it) {
      if (it->first.rfind("model.state.", 0) != 0) break;
      double n = 1;
      for (int64_t d : r.Ints(it->first)) n *= static_cast<double>(d);
      total += n;
    }
    return total;
  }
  auto linear = [](double in, double out) { return in * out + out; };
  if (type == "mlp") {
    double in = 1;
    for (int64_t d : r.Ints("model.input_shape")) in *= static_cast<double>(d);
    double total = 0;
    if (r.Has("model.hidden") && !r.Str("model.hidden").empty()) {
      for (int64_t h : r.Ints("model.hidden")) {
        total += linear(in, static_cast<double>(h));
        in = static_cast<double>(h);
      }
    }
    return total + linear(in, static_cast<double>(r.Int("model.classes", 2, 1 << 24)));
  }
  if (type == "resnet") {
    // Every convolution 3x3 and every channel with 5 batch-norm values: above the real count.
    const double width = static_cast<double>(r.Int("model.width", 1, 1 << 16));
    const int64_t depth = r.Int("model.depth", 1, 1000);
    const double expansion = depth == 18 ? 1 : 4;
    const int blocks = depth == 18 ? 2 : 6;
    double total = 9 * 3 * width + 5 * width;
    double in = width;
    for (int stage = 0; stage < 4; ++stage) {
      const double out = width * (1 << stage) * expansion;
      total += blocks * (3 * 9 * std::max(in, out) * out + 3 * 9 * out * out + 4 * 5 * out);
      in = out;
    }
    return total + linear(in, static_cast<double>(r.Int("model.classes", 2, 1 << 24)));
  }
  const double d = static_cast<double>(r.Int("model.d_model", 1, 1 << 16));
  const double layers = static_cast<double>(r.Int("model.layers", 1, 1024));
  const double vocab = static_cast<double>(r.Int("model.vocab", 2, 1 << 24));
  const double context = static_cast<double>(r.Int("model.context", 1, 1 << 20));
  return (vocab + context) * d + layers * (12 * d * d + 13 * d) + 2 * d;
}

}  // namespace

Spec Spec::FromFields(std::map<std::string, std::string> fields, double max_model_values) {
  fields.emplace("version", kSpecVersion);
  if (fields["version"] != kSpecVersion)
    throw Error("spec: version '" + fields["version"] + "' is not supported (this vtrun reads " +
                kSpecVersion + "; a run made under another version replays with the vtrun " +
                "that made it: docs/ROUNDING.md, \"Changes\")");
  CheckKeys(fields);
  Spec spec;
  spec.fields_ = std::move(fields);
  // Every typed accessor validates its field; building the model and optimizer validates the rest.
  Reader r(spec.fields_);
  spec.batch();
  spec.steps();
  spec.seed();
  spec.checkpoint_every();
  if (r.Has("shards")) {
    // Absent means 1, so "shards=1" would be a second spelling of the same run.
    if (r.Str("shards") == "1")
      throw Error("spec: shards=1 is written by leaving shards out (one spelling per run)");
    const int64_t k = r.Int("shards", 2, 4096);
    if (spec.batch() % k != 0) {
      throw Error("spec: batch " + std::to_string(spec.batch()) + " does not split into shards=" +
                  std::to_string(k) + " equal parts (batch must be a multiple of shards)");
    }
  }
  CheckDataFields(r);
  spec.Optimizer().Validate();
  spec.Windows().Validate();
  const double values = ModelValuesBound(r, spec.fields_);
  if (values > max_model_values) {
    char text[64];
    std::snprintf(text, sizeof text, "%.3g", values);
    throw Error("spec: the model (model.type " + r.Str("model.type") + ") would have up to " +
                text + " parameters and buffers, more than the " + Num(max_model_values) +
                " a spec may describe");
  }
  spec.BuildModel();
  return spec;
}

Spec Spec::Parse(std::string_view canonical, double max_model_values) {
  std::map<std::string, std::string> fields;
  size_t pos = 0;
  int line = 0;
  std::string previous;
  while (pos < canonical.size()) {
    ++line;
    size_t end = canonical.find('\n', pos);
    if (end == std::string_view::npos)
      throw Error("spec: line " + std::to_string(line) + " does not end with a newline");
    std::string_view text = canonical.substr(pos, end - pos);
    size_t eq = text.find('=');
    if (eq == std::string_view::npos || eq == 0)
      throw Error("spec: line " + std::to_string(line) + " is not key=value");
    std::string key(text.substr(0, eq));
    if (!previous.empty() && key <= previous)
      throw Error("spec: keys are not sorted and unique at line " + std::to_string(line));
    fields[key] = std::string(text.substr(eq + 1));
    previous = key;
    pos = end + 1;
  }
  return FromFields(std::move(fields), max_model_values);
}

std::map<std::string, std::string> Spec::Fields(const nn::Model& model, const data::Dataset& data,
                                                const optim::OptimizerConfig& optim,
                                                const nn::WindowTable& windows, int64_t batch,
                                                int64_t steps, uint64_t seed,
                                                int64_t checkpoint_every, int64_t shards) {
  std::map<std::string, std::string> f;
  f["version"] = kSpecVersion;
  f["seed"] = std::to_string(seed);
  f["batch"] = std::to_string(batch);
  f["steps"] = std::to_string(steps);
  f["checkpoint_every"] = std::to_string(checkpoint_every);
  if (shards != 1) f["shards"] = std::to_string(shards);
  f["model.type"] = model.type();
  for (const auto& [k, v] : model.config()) f["model." + k] = v;
  const std::string name = data.name();
  f["data.kind"] = name.substr(0, name.find(':'));
  f["data.name"] = name;
  f["data.digest"] = data.digest();
  for (const auto& [k, v] : data.settings()) f["data." + k] = v;
  for (const auto& [k, v] : optim.Canonical()) f["optim." + k] = v;
  f["round.bits"] = std::to_string(windows.bits);
  for (int k = 0; k < 4; ++k) {
    f[std::string("round.") + kKinds[k] + ".band"] = Num(windows.by_kind[k].band);
    f[std::string("round.") + kKinds[k] + ".alpha"] = Num(windows.by_kind[k].alpha);
  }
  for (const auto& [boundary, w] : windows.by_boundary) {
    f["round.boundary." + boundary + ".band"] = Num(w.band);
    f["round.boundary." + boundary + ".alpha"] = Num(w.alpha);
  }
  return f;
}

std::string Spec::Canonical() const {
  std::string out;
  for (const auto& [k, v] : fields_) out += k + "=" + v + "\n";
  return out;
}

store::Digest Spec::Hash() const { return store::Sha256Of(Canonical()); }
std::string Spec::HashHex() const { return store::ToHex(Hash()); }

int64_t Spec::batch() const { return Reader(fields_).Int("batch", 1, int64_t{1} << 24); }
int64_t Spec::steps() const { return Reader(fields_).Int("steps", 0, int64_t{1} << 40); }
uint64_t Spec::seed() const {
  return static_cast<uint64_t>(Reader(fields_).Int("seed", 0, INT64_MAX));
}
int64_t Spec::shards() const {
  Reader r(fields_);
  return r.Has("shards") ? r.Int("shards", 2, 4096) : 1;
}
int64_t Spec::checkpoint_every() const {
  return Reader(fields_).Int("checkpoint_every", 1, int64_t{1} << 40);
}

std::shared_ptr<nn::Model> Spec::BuildModel() const {
  Reader r(fields_);
  const std::string& type = r.Str("model.type");
  if (type == "lua") return BuildRegisteredModel();
  if (type == "mlp") {
    nn::MlpConfig c;
    c.input_shape = r.Ints("model.input_shape");
    c.hidden = r.Has("model.hidden") && !r.Str("model.hidden").empty() ? r.Ints("model.hidden")
                                                                       : std::vector<int64_t>{};
    c.classes = r.Int("model.classes", 2, 1 << 24);
    c.dropout = r.Double("model.dropout");
    return nn::MakeMlp(c, seed());
  }
  if (type == "resnet") {
    nn::ResNetConfig c;
    c.depth = static_cast<int>(r.Int("model.depth", 1, 1000));
    c.width = r.Int("model.width", 1, 1 << 16);
    c.in_channels = r.Int("model.in_channels", 1, 3);
    c.classes = r.Int("model.classes", 2, 1 << 24);
    return nn::MakeResNet(c, seed());
  }
  nn::Gpt2Config c;
  c.layers = r.Int("model.layers", 1, 1024);
  c.d_model = r.Int("model.d_model", 1, 1 << 16);
  c.heads = r.Int("model.heads", 1, 1024);
  c.vocab = r.Int("model.vocab", 2, 1 << 24);
  c.context = r.Int("model.context", 1, 1 << 20);
  c.dropout = r.Double("model.dropout");
  return nn::MakeGpt2(c, seed());
}

std::shared_ptr<nn::Model> Spec::BuildRegisteredModel() const {
  const std::string& type = fields_.at("model.type");
  std::map<std::string, std::string> model_fields;
  for (auto it = fields_.lower_bound("model."); it != fields_.end(); ++it) {
    if (it->first.rfind("model.", 0) != 0) break;
    if (it->first != "model.init") model_fields[it->first.substr(6)] = it->second;
  }
  const double declared = ModelValuesBound(Reader(fields_), fields_);
  std::shared_ptr<nn::Model> model = ModelBuilderFor(type)(model_fields, seed(), declared);
  // The spec commits to the architecture twice: the source, and the module tree and state it
  // builds (readable, and what a difference between two specs is named by). They must agree.
  std::map<std::string, std::string> built = model->config();
  built["type"] = type;
  for (const auto& [key, value] : built) {
    auto it = model_fields.find(key);
    if (it == model_fields.end())
      throw Error("spec: model." + key + " (" + value + ") is what model.source builds, and the " +
                  "spec does not have it");
    if (it->second != value)
      throw Error("spec: model." + key + " is " + it->second + " in the spec, but model.source " +
                  "builds " + value);
  }
  for (const auto& [key, value] : model_fields) {
    if (!built.count(key))
      throw Error("spec: model." + key + " is in the spec, but model.source builds no such " +
                  (key.rfind("state.", 0) == 0 ? "parameter or buffer" : "module or argument"));
  }
  return model;
}

void RegisterModelType(const std::string& type, ModelBuilder builder) {
  Builders()[type] = std::move(builder);
}

const ModelBuilder& ModelBuilderFor(const std::string& type) {
  auto it = Builders().find(type);
  if (it == Builders().end())
    throw Error("spec: model.type " + type + " is built by the vtrun host (vt.nn); this program " +
                "cannot build it");
  return it->second;
}

std::string EscapeSpecText(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 16);
  for (unsigned char c : text) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[5];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

std::string UnescapeSpecText(std::string_view s, const std::string& what) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = s[i];
    if (c < 0x20 || c == 0x7f)
      throw Error("spec: " + what + " has an unescaped control byte at character " +
                  std::to_string(i + 1));
    if (c != '\\') {
      out += static_cast<char>(c);
      continue;
    }
    if (i + 1 >= s.size()) throw Error("spec: " + what + " ends in a lone backslash");
    const char e = s[++i];
    if (e == '\\') {
      out += '\\';
    } else if (e == 'n') {
      out += '\n';
    } else if (e == 'r') {
      out += '\r';
    } else if (e == 't') {
      out += '\t';
    } else if (e == 'x' && i + 2 < s.size()) {
      const std::string hex(s.substr(i + 1, 2));
      char* end = nullptr;
      const long v = std::strtol(hex.c_str(), &end, 16);
      if (*end != '\0' || hex.find_first_not_of("0123456789abcdef") != std::string::npos ||
          !(v < 0x20 || v == 0x7f) || v == '\n' || v == '\r' || v == '\t')
        throw Error("spec: " + what + " has a non-canonical escape \\x" + hex + " at character " +
                    std::to_string(i));
      out += static_cast<char>(v);
      i += 2;
    } else {
      throw Error("spec: " + what + " has an unknown escape \\" + std::string(1, e) +
                  " at character " + std::to_string(i) + " (allowed: \\\\ \\n \\r \\t \\xHH)");
    }
  }
  return out;
}

std::string Spec::InitDigest() const {
  auto it = fields_.find("model.init");
  return it == fields_.end() ? "" : it->second;
}

optim::OptimizerConfig Spec::Optimizer() const {
  Reader r(fields_);
  optim::OptimizerConfig c;
  c.kind = r.Str("optim.kind");
  c.lr = r.Double("optim.lr");
  c.weight_decay = r.Double("optim.weight_decay");
  c.schedule.kind = r.Str("optim.schedule");
  c.schedule.warmup = r.Int("optim.warmup", 0, int64_t{1} << 40);
  c.schedule.min_factor = r.Double("optim.min_factor");
  c.schedule.total = steps();
  if (c.kind == "sgd") {
    c.momentum = r.Double("optim.momentum");
    c.nesterov = r.Bool("optim.nesterov");
  } else {
    c.beta1 = r.Double("optim.beta1");
    c.beta2 = r.Double("optim.beta2");
    c.eps = r.Double("optim.eps");
  }
  return c;
}

nn::WindowTable Spec::Windows() const {
  Reader r(fields_);
  nn::WindowTable w;
  w.bits = static_cast<int>(r.Int("round.bits", 10, 32));
  for (int k = 0; k < 4; ++k) {
    w.by_kind[k].band = r.Double(std::string("round.") + kKinds[k] + ".band");
    w.by_kind[k].alpha = r.Double(std::string("round.") + kKinds[k] + ".alpha");
  }
  const std::string prefix = "round.boundary.";
  for (const auto& [key, value] : fields_) {
    if (key.rfind(prefix, 0) != 0) continue;
    const size_t dot = key.rfind('.');
    const std::string boundary = key.substr(prefix.size(), dot - prefix.size());
    const std::string field = key.substr(dot + 1);
    nn::Window& win = w.by_boundary[boundary];
    (field == "band" ? win.band : win.alpha) = r.Double(key);
  }
  return w;
}

void Spec::CheckData(const data::Dataset& data) const {
  Reader r(fields_);
  if (data.digest() != r.Str("data.digest")) {
    throw Error("data set '" + data.name() + "' has digest " + data.digest() +
                ", the spec requires " + r.Str("data.digest") + " (" + r.Str("data.name") + ")");
  }
  // The readable fields say what the digest is of: a spec whose data.name (or data.kind)
  // names another data set than the one with its digest, or that carries data fields the data
  // set does not have, would tell a reader one thing and train on another (and give one run
  // many spec hashes).
  if (r.Str("data.name") != data.name()) {
    throw Error("data set '" + data.name() + "' is not the spec's data.name '" +
                r.Str("data.name") + "'");
  }
  const auto settings = data.settings();
  for (const auto& [k, v] : settings) {
    const std::string key = "data." + k;
    if (!r.Has(key) || r.Str(key) != v) {
      throw Error("data set setting '" + k + "' is '" + v + "', the spec has '" +
                  (r.Has(key) ? r.Str(key) : "(none)") + "'");
    }
  }
  for (const auto& [key, value] : fields_) {
    if (key.rfind("data.", 0) != 0) continue;
    const std::string k = key.substr(5);
    if (k == "kind" || k == "name" || k == "digest" || settings.count(k) > 0) continue;
    throw Error("spec field '" + key + "' is not a setting of data set '" + data.name() +
                "' (its fields: data.kind, data.name, data.digest" +
                [&] {
                  std::string list;
                  for (const auto& [sk, sv] : settings) list += ", data." + sk;
                  return list;
                }() +
                ")");
  }
}

}  // namespace vt::train
