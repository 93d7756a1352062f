// The two ways a spec is made give the same bytes: vt.spec from Lua (option tables, defaults
// filled in by the bindings) and Spec::Fields from the runtime's own objects (a built model,
// an OptimizerConfig, a WindowTable). Two copies of what enters the spec hash would let a
// trainer's and an auditor's specs drift apart; this test is the guard.
#include <catch2/catch.hpp>
#include <string>

#include "runtime/data/sources.h"
#include "runtime/train/spec.h"
#include "tests/support/subprocess.h"

using vt::train::Spec;

namespace {

// vt.spec{...} made by vtrun from Lua source `spec_lua` (with `data` defined), canonical.
std::string LuaSpec(const std::string& data_lua, const std::string& spec_lua) {
  vt::testing::ProcessResult r = vt::testing::RunProcess(
      {VTRUN_BINARY, "-e",
       "local data = " + data_lua + "\nio.write(vt.spec" + spec_lua + ":canonical())"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return r.out;
}

std::string Canonical(const vt::nn::Model& model, const vt::data::Dataset& data,
                      const vt::optim::OptimizerConfig& oc, int64_t batch, int64_t steps,
                      uint64_t seed, int64_t k) {
  return Spec::FromFields(
             Spec::Fields(model, data, oc, vt::nn::WindowTable{}, batch, steps, seed, k))
      .Canonical();
}

}  // namespace

TEST_CASE("a spec made in Lua with defaults equals the runtime's, byte for byte", "[spec]") {
  vt::data::SyntheticOptions so;
  so.size = 64;
  so.input_shape = {1, 28, 28};
  so.classes = 10;
  so.seed = 4;
  auto images = vt::data::Synthetic(so);
  const std::string images_lua =
      "vt.data.synthetic{size = 64, input_shape = {1, 28, 28}, classes = 10, seed = 4}";

  SECTION("an MLP, SGD, every default") {
    auto model = vt::nn::MakeMlp(vt::nn::MlpConfig{}, 0);
    vt::optim::OptimizerConfig oc;
    CHECK(LuaSpec(images_lua,
                  "{model = vt.models.mlp{}, data = data, optim = vt.optim.sgd{}, steps = 7}") ==
          Canonical(*model, *images, oc, 32, 7, 0, 10));
  }
  SECTION("a ResNet, AdamW with defaults, other run settings") {
    vt::nn::ResNetConfig rc;
    rc.width = 4;
    rc.in_channels = 1;
    auto model = vt::nn::MakeResNet(rc, 9);
    vt::optim::OptimizerConfig oc;
    oc.kind = "adamw";
    oc.lr = 3e-4;
    CHECK(LuaSpec(images_lua,
                  "{model = vt.models.resnet{width = 4, in_channels = 1}, data = data, optim = "
                  "vt.optim.adamw{lr = 3e-4},"
                  " batch = 8, steps = 5, seed = 9, checkpoint_every = 2}") ==
          Canonical(*model, *images, oc, 8, 5, 9, 2));
  }
  SECTION("a small GPT on text, SGD with every field set") {
    vt::data::TextOptions to;
    to.path = std::string(VTRUN_SOURCE_DIR) + "/data/shakespeare.txt";
    to.context = 16;
    auto text = vt::data::TextCorpus(to);
    vt::nn::Gpt2Config gc;
    gc.layers = 1;
    gc.d_model = 16;
    gc.heads = 2;
    gc.vocab = 256;
    gc.context = 16;
    gc.dropout = 0.1;
    auto model = vt::nn::MakeGpt2(gc, 1);
    vt::optim::OptimizerConfig oc;
    oc.lr = 0.5;
    oc.momentum = 0.9;
    oc.nesterov = true;
    oc.weight_decay = 1e-4;
    oc.schedule.kind = "cosine";
    oc.schedule.warmup = 3;
    oc.schedule.min_factor = 0.1;
    CHECK(LuaSpec("vt.data.text{path = '" + to.path + "', context = 16}",
                  "{model = vt.models.gpt2{layers = 1, d_model = 16, heads = 2, vocab = 256, "
                  "context = 16, dropout = 0.1},"
                  " data = data, optim = vt.optim.sgd{lr = 0.5, momentum = 0.9, nesterov = true, "
                  "weight_decay = 1e-4,"
                  " schedule = 'cosine', warmup = 3, min_factor = 0.1}, batch = 4, steps = 3, seed "
                  "= 1}") == Canonical(*model, *text, oc, 4, 3, 1, 10));
  }
}
