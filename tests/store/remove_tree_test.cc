// vt::RemoveTree: what vt.fs.remove, the rank launcher and store readers remove with.
#include "store/remove_tree.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <string>

#include "tests/store/test_util.h"

namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

void Touch(const std::string& path) { std::ofstream(path) << "x"; }

}  // namespace

TEST_CASE("RemoveTree removes a tree bottom up and counts its entries", "[store][fs]") {
  vt::store::testing::TempDir dir;
  const std::string root = dir.path() + "/tree";
  REQUIRE(mkdir(root.c_str(), 0755) == 0);
  REQUIRE(mkdir((root + "/a").c_str(), 0755) == 0);
  REQUIRE(mkdir((root + "/a/b").c_str(), 0755) == 0);
  REQUIRE(mkdir((root + "/empty").c_str(), 0755) == 0);
  Touch(root + "/f1");
  Touch(root + "/a/f2");
  Touch(root + "/a/b/f3");
  // A link to a directory outside the tree: the link goes, what it points to stays.
  const std::string outside = dir.path() + "/outside";
  REQUIRE(mkdir(outside.c_str(), 0755) == 0);
  Touch(outside + "/keep");
  REQUIRE(symlink(outside.c_str(), (root + "/a/link").c_str()) == 0);

  std::error_code ec;
  CHECK(vt::RemoveTree(root, ec) == 8);  // tree, a, a/b, empty, f1, f2, f3 and the link
  CHECK_FALSE(ec);
  CHECK_FALSE(Exists(root));
  CHECK(Exists(outside + "/keep"));
}

TEST_CASE("RemoveTree: a file, a link, and nothing at all", "[store][fs]") {
  vt::store::testing::TempDir dir;
  std::error_code ec;
  const std::string file = dir.path() + "/file";
  Touch(file);
  CHECK(vt::RemoveTree(file, ec) == 1);
  CHECK_FALSE(ec);
  CHECK_FALSE(Exists(file));

  const std::string target = dir.path() + "/target";
  REQUIRE(mkdir(target.c_str(), 0755) == 0);
  const std::string link = dir.path() + "/link";
  REQUIRE(symlink(target.c_str(), link.c_str()) == 0);
  CHECK(vt::RemoveTree(link, ec) == 1);  // the link, not the directory it names
  CHECK(Exists(target));

  CHECK(vt::RemoveTree(dir.path() + "/missing", ec) == 0);
  CHECK_FALSE(ec);
}

TEST_CASE("RemoveTree reports what stops it", "[store][fs]") {
  vt::store::testing::TempDir dir;
  std::error_code ec;
  // A path through a file: not a missing entry, an error (ENOTDIR), and nothing removed.
  const std::string file = dir.path() + "/file";
  Touch(file);
  CHECK(vt::RemoveTree(file + "/below", ec) == 0);
  CHECK(ec.value() == ENOTDIR);
  CHECK(Exists(file));
}
