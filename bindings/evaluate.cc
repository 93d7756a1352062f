// runner:evaluate: the model of a run on examples of a data set, for experiments (test loss
// and accuracy, output distance between runs, a backdoor's success rate).
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <vector>

#include "bindings/lua_support.h"
#include "bindings/tensor.h"
#include "bindings/train_support.h"
#include "runtime/common/error.h"
#include "runtime/train/deviation.h"

namespace vt::lua {

// runner:evaluate(data [, {limit=1024, batch=256, trigger=c}]) -> {loss, accuracy, examples,
// outputs}: the current model on the first `limit` examples of `data` in evaluation mode
// (batch norm on running statistics, no dropout, no rounding, no gradients). outputs: the
// logits (float64). For experiments (test loss, output distance between runs). With
// trigger = c (image data only): every image gets the trigger patch (train/deviation.h) and
// every label becomes c, examples whose own label is c are left out, so accuracy is the
// backdoor's success rate and loss the backdoor loss (E10).
int RunnerEvaluate(lua_State* L) {
  const char* api = "vt.runner.evaluate";
  RunnerPtr& r = CheckRunner(L, 1);
  DatasetPtr& data = CheckUserdata<DatasetPtr>(L, 2, kDatasetMeta, "vt.Dataset");
  CheckOptions(L, 3, api, {"limit", "batch", "trigger"});
  const int64_t limit = OptInteger(L, 3, api, "limit").value_or(1024);
  const int64_t batch = OptInteger(L, 3, api, "batch").value_or(256);
  const std::optional<int64_t> trigger = OptInteger(L, 3, api, "trigger");
  if (limit < 1 || batch < 1) Fail(L, api, "limit and batch must be >= 1");
  if (trigger) {
    const auto shape = data->input_shape();
    if (shape.size() != 3 || shape[1] < 4 || shape[2] < 4) {
      Fail(L, api,
           "trigger needs image data (inputs [C, H, W] of at least 4x4); '" + data->name() +
               "' has none");
    }
    if (*trigger < 0 || *trigger >= data->classes()) {
      Fail(L, api,
           "trigger must be a class in [0, " + std::to_string(data->classes()) + "), got " +
               std::to_string(*trigger));
    }
  }
  return Protect(L, api, [&] {
    nn::Model& model = r->model();
    const bool was_training = model.training();
    model.Train(false);
    at::NoGradGuard no_grad;
    const at::ScalarType dtype = model.NamedParameters().front().second->scalar_type();
    const int64_t n = std::min(limit, data->size());
    double loss_sum = 0;
    int64_t correct = 0, counted = 0;
    std::vector<at::Tensor> outputs;
    for (int64_t start = 0; start < n; start += batch) {
      std::vector<int64_t> idx;
      for (int64_t i = start; i < std::min(n, start + batch); ++i) idx.push_back(i);
      data::Batch b = data->Get(idx, 0, 0);
      at::Tensor inputs = b.inputs.is_floating_point() ? b.inputs.to(dtype) : b.inputs;
      if (trigger) {
        const at::Tensor keep = b.targets.ne(*trigger).nonzero().flatten();
        if (keep.numel() == 0) continue;
        inputs = inputs.index_select(0, keep).clone();
        train::PatchTrigger(&inputs);
        b.targets = at::full({keep.numel()}, *trigger, b.targets.options());
      }
      at::Tensor logits = model.Forward(inputs);
      const int64_t items = b.targets.numel();
      loss_sum += model.Loss(logits, b.targets).item<double>() * static_cast<double>(items);
      correct += logits.argmax(-1).eq(b.targets).sum().item<int64_t>();
      counted += items;
      outputs.push_back(logits.to(at::kDouble));
    }
    model.Train(was_training);
    if (counted == 0)
      throw Error("no example of " + data->name() + " has a label other than the trigger's");
    lua_newtable(L);
    SetNumbers(L, {{"loss", loss_sum / static_cast<double>(counted)},
                   {"accuracy", static_cast<double>(correct) / static_cast<double>(counted)},
                   {"examples", static_cast<double>(trigger ? counted : n)}});
    PushTensor(L, at::cat(outputs));
    lua_setfield(L, -2, "outputs");
    return 1;
  });
}

}  // namespace vt::lua
