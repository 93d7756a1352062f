#include "runtime/train/checkpoint_entry.h"

#include <ATen/ATen.h>

#include "runtime/common/error.h"

namespace vt::train {

uint8_t CheckpointDType(at::ScalarType type) {
  switch (type) {
    case at::kFloat:
      return static_cast<uint8_t>(store::DType::kFloat32);
    case at::kDouble:
      return static_cast<uint8_t>(store::DType::kFloat64);
    case at::kLong:
      return static_cast<uint8_t>(store::DType::kInt64);
    case at::kInt:
      return static_cast<uint8_t>(store::DType::kInt32);
    case at::kByte:
    case at::kBool:
      return static_cast<uint8_t>(store::DType::kUInt8);
    default:
      return 0;
  }
}

store::StateEntry CheckpointEntry(const std::string& name, const at::Tensor& t, at::Tensor* keep) {
  if (t.device().type() != at::kCPU) throw Error("entry '" + name + "': tensor must be on the CPU");
  store::StateEntry entry;
  entry.name = name;
  entry.dtype = CheckpointDType(t.scalar_type());
  if (entry.dtype == 0) throw Error("entry '" + name + "': the store has no dtype for this tensor");
  *keep = t.contiguous();
  entry.shape.assign(keep->sizes().begin(), keep->sizes().end());
  entry.data = keep->data_ptr();
  entry.bytes = static_cast<size_t>(keep->numel()) * keep->element_size();
  return entry;
}

}  // namespace vt::train
