// Catch2 main for vt_tests: applies the runtime's process settings (float64 default dtype,
// thread count) as vtrun does, then runs the tests.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "runtime/common/init.h"

int main(int argc, char** argv) {
  vt::InitializeRuntime();
  return Catch::Session().run(argc, argv);
}
