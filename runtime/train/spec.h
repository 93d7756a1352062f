// The spec of a run: everything that determines it (PROTOCOL.md, "Objects"), as a sorted
// map of dotted keys to string values with a canonical byte encoding and its SHA-256
// (spec_hash). Readable on purpose: `key=value` lines sorted by key, e.g.
//
//   batch=8
//   checkpoint_every=10
//   data.digest=808cd3b6...
//   data.kind=text
//   model.type=gpt2
//   ...
//
// Known keys (anything else is an error naming the key and the valid ones):
//   version, seed, batch, steps, checkpoint_every, shards (data-parallel shards of each batch,
//   train/engine.h ShardPlan; absent means 1, and 1 is never written),
//   model.type (mlp|resnet|gpt2|lua) and that model's fields (model.layers, ...; a Lua-defined
//   model, vt.nn: model.source, model.arg.<name>, model.module[.<path>], model.state.<name>),
//   model.init (optional: hex SHA-256 of the initial weights' canonical encoding, when they
//   come from a safetensors file instead of the seed),
//   data.kind, data.name, data.digest, data.<setting> (the data set's settings()),
//   optim.<field> (OptimizerConfig::Canonical()),
//   round.bits, round.<kind>.band, round.<kind>.alpha (kind: fwd, bwd, grad, update),
//   round.boundary.<boundary name>.band / .alpha (per-boundary windows from calibration).
// Paths are not part of a spec (they differ between machines); the data digest is.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "runtime/data/dataset.h"
#include "runtime/nn/context.h"
#include "runtime/nn/models.h"
#include "runtime/optim/optimizer.h"
#include "store/sha256.h"

namespace vt::train {

// "5": windows with per-element magnitudes (docs/ROUNDING.md "The window"; version 3 takes a
// convolution's weight-gradient magnitude over the whole batch, version 4 computes GELU with
// vtrun's own tanh, version 5 gives the norms' and GELU's outputs and input gradients and a
// GPT's residual stream the zero window where their inputs are values every party holds
// alike). A run made under an earlier version replays only with the vtrun that made it.
constexpr const char* kSpecVersion = "5";

// The most parameters and buffers a spec's model may have (2^31: 16 GiB as FP64). Validating
// a spec builds its model, and a spec is untrusted input (a trainer discloses it to every
// auditor and judge), so the size is checked from the fields before anything is allocated.
constexpr double kMaxModelValues = 2147483648.0;

// Builds a model of a type the runtime does not define itself (the vtrun host registers "lua",
// models written with vt.nn): from the spec's model fields without their "model." prefix
// (type, source, arg.*; module.* and state.* are ignored), the run's seed, and the most
// parameter and buffer values it may allocate (an error past that). The model's config()
// must give back every model field but type and init, module.* and state.* included.
using ModelBuilder = std::function<std::shared_ptr<nn::Model>(
    const std::map<std::string, std::string>& model_fields, uint64_t seed, double max_values)>;
void RegisterModelType(const std::string& type, ModelBuilder builder);
// The builder of `type`, or throws vt::Error saying this program cannot build such models.
const ModelBuilder& ModelBuilderFor(const std::string& type);

// Text in a spec value (a model's Lua source, a string argument): backslash, newline, carriage
// return and tab as \\ \n \r \t, other control bytes as \xHH (lowercase), everything else
// as it is. One spelling per text: Unescape throws vt::Error on any other escape.
std::string EscapeSpecText(std::string_view text);
std::string UnescapeSpecText(std::string_view escaped, const std::string& what);

class Spec {
 public:
  // Validates every field (known keys, types, ranges, a model of at most `max_model_values`
  // values, the model's and optimizer's own checks) and throws vt::Error naming the first
  // bad one. Numbers must be spelled as Fields() spells them: integers in plain decimal,
  // other numbers as printf("%.17g"); any other spelling of the same value is an error.
  static Spec FromFields(std::map<std::string, std::string> fields,
                         double max_model_values = kMaxModelValues);
  // Parses the canonical encoding (then validates as FromFields).
  static Spec Parse(std::string_view canonical, double max_model_values = kMaxModelValues);

  // Builds the fields of a spec from its parts.
  static std::map<std::string, std::string> Fields(const nn::Model& model,
                                                   const data::Dataset& data,
                                                   const optim::OptimizerConfig& optim,
                                                   const nn::WindowTable& windows, int64_t batch,
                                                   int64_t steps, uint64_t seed,
                                                   int64_t checkpoint_every, int64_t shards = 1);

  const std::map<std::string, std::string>& fields() const { return fields_; }
  std::string Canonical() const;
  store::Digest Hash() const;
  std::string HashHex() const;

  int64_t batch() const;
  int64_t steps() const;
  uint64_t seed() const;
  int64_t checkpoint_every() const;
  int64_t shards() const;  // 1 unless the spec has shards

  // A fresh model initialised from the spec's seed (see InitDigest for imported weights).
  std::shared_ptr<nn::Model> BuildModel() const;
  // model.init, or "" when the initial weights come from the seed.
  std::string InitDigest() const;
  optim::OptimizerConfig Optimizer() const;
  nn::WindowTable Windows() const;
  // Throws vt::Error unless `data` is the spec's data set (digest, name and settings).
  void CheckData(const data::Dataset& data) const;

 private:
  // A model of a registered type (RegisterModelType), checked against the spec's model fields.
  std::shared_ptr<nn::Model> BuildRegisteredModel() const;

  std::map<std::string, std::string> fields_;
};

}  // namespace vt::train
