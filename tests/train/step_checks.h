// Shared by the train tests that compare two ways of taking a step.
#pragma once

#include <catch2/catch.hpp>
#include <map>
#include <string>

#include "runtime/nn/context.h"

namespace vt::train::testing {

// Two steps' boundary statistics agree in every count (not in their seconds).
inline void CheckSameBoundaryStats(const std::map<std::string, nn::BoundaryStats>& a,
                                   const std::map<std::string, nn::BoundaryStats>& b) {
  REQUIRE(a.size() == b.size());
  for (const auto& [name, s] : a) {
    INFO(name);
    REQUIRE(b.count(name) == 1);
    const nn::BoundaryStats& t = b.at(name);
    CHECK(s.calls == t.calls);
    CHECK(s.elements == t.elements);
    CHECK(s.logged == t.logged);
    CHECK(s.exact == t.exact);
    CHECK(s.corrections == t.corrections);
    CHECK(s.illegitimate == t.illegitimate);
    CHECK(s.near_misses == t.near_misses);
    CHECK(s.steerable == t.steerable);
    CHECK(s.steered == t.steered);
    CHECK(s.steered_unlogged == t.steered_unlogged);
    CHECK(s.magnitudes == t.magnitudes);
  }
}

}  // namespace vt::train::testing
