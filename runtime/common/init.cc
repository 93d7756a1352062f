#include "runtime/common/init.h"

#include <c10/core/DefaultDtype.h>
#include <c10/util/typeid.h>

#include "runtime/common/threads.h"

namespace vt {

void InitializeRuntime() {
  c10::set_default_dtype(caffe2::TypeMeta::Make<double>());
  ConfigureThreadsFromEnvironment();
}

}  // namespace vt
