// Rules on vtrun's own sources that no compiler checks.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

// Every .cc and .h under the folders that make up vtrun, with the lines holding `needle`
// outside comments.
std::vector<std::string> Uses(const std::string& needle) {
  std::vector<std::string> found;
  for (const char* folder : {"runtime", "bindings", "store"}) {
    const std::filesystem::path root = std::filesystem::path(VTRUN_SOURCE_DIR) / folder;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".cc" && ext != ".h" && ext != ".cu") continue;
      std::ifstream in(entry.path());
      std::string line;
      for (int number = 1; std::getline(in, line); ++number) {
        const auto at = line.find(needle);
        const auto comment = line.find("//");
        if (at != std::string::npos && (comment == std::string::npos || at < comment)) {
          found.push_back(entry.path().string() + ":" + std::to_string(number));
        }
      }
    }
  }
  return found;
}

}  // namespace

TEST_CASE("sources: no std::filesystem::remove_all in vtrun (it crashes in the GPU build)",
          "[host]") {
  // A vtrun linked against a PyTorch wheel's libtorch.so binds remove_all to the copy that
  // library exports, which calls address 0 on a non-empty directory (EXPERIMENTS.md E15).
  // Trees are removed with vt::RemoveTree (store/remove_tree.h).
  const auto uses = Uses("remove_all(");
  INFO("uses: " << [&] {
    std::ostringstream out;
    for (const auto& u : uses) out << u << " ";
    return out.str();
  }());
  CHECK(uses.empty());
}

TEST_CASE("tests: no test case's name holds a semicolon (ctest would split it and run none of it)",
          "[host]") {
  // catch_discover_tests turns the names into a CMake list, where ';' separates items: a name
  // with one became two ctest tests whose filters matched no test case, so it never ran.
  std::vector<std::string> split;
  for (const auto& test : Catch::getRegistryHub().getTestCaseRegistry().getAllTests()) {
    if (test.getTestCaseInfo().name.find(';') != std::string::npos) {
      split.push_back(test.getTestCaseInfo().name);
    }
  }
  INFO("names: " << [&] {
    std::ostringstream out;
    for (const auto& name : split) out << "'" << name << "' ";
    return out.str();
  }());
  CHECK(split.empty());
}
