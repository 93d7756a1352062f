// The end-to-end known-answer run of store/FORMAT.md ("A whole run"), shared by the store
// tests: spec "kat-spec", k = 2, n = 3, checkpoints with one float32 entry "w" = {i, i+0.5}.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "store/checkpoint_digest.h"
#include "store/store.h"

namespace vt::store::testing {

inline std::string KatCheckpoint(uint64_t i) {
  float w[2] = {static_cast<float>(i), static_cast<float>(i) + 0.5f};
  return SerializeCheckpoint({StateEntry{"w", 1, {2}, w, sizeof(w)}});
}

// Records of step s: ("a:fwd", 0, s bytes of value s), ("b:bwd", 0, "v<s>"), and for s = 2
// also ("a:fwd", 1, "").
struct KatStep {
  std::string a, b;
  std::vector<LogRecordView> records() const {
    std::vector<LogRecordView> r = {{"a:fwd", 0, a}, {"b:bwd", 0, b}};
    if (a.size() == 2) r.push_back({"a:fwd", 1, ""});
    return r;
  }
};

inline KatStep KatRecords(uint64_t s) {
  return KatStep{std::string(s, static_cast<char>(s)), "v" + std::to_string(s)};
}

inline const char* kKatLeaves[3] = {
    "6266d675f7f372aa9fcc9832b85a9a071b5645f99dade0ebeedbc72031973d0b",
    "2fea267fb78516e5524368a3ba9355fabf201a3da9c09559cc8ca4f60158e432",
    "c94d63d634a6a1dfb36d227755088dfad8f7d4e21df9625e54e2409c6bfc457e",
};
inline const char* kKatStates[3] = {
    "24979199b35aedbc85929f35a40c52f9d7719acfc4a9efbba59cdf289dc64e51",
    "f0968e11fc135493c5153fc06ddba5c9c627484ab23a470299d778595ff23c9b",
    "5eae3bb24b34fbd8c62114cc3a4f5a51e55d21f82680f09339aea96576fcd0ae",
};
inline const char kKatRoot[] = "40fc86452e20d10fb7cc8a11a7a569a345931683e08d2a675fba6b3fd20326fc";
inline const char kKatRootAt2[] =
    "f4a02d87732f0ce4ba390ac3c725d7cc5e993e1989acb691c1002b400cbf0400";

// Writes the whole KAT run as `id` into `s`.
inline void WriteKatRun(Store& s, const std::string& id) {
  s.CreateRun(id, RunConfig{"kat-spec", 2, 3, ""});
  s.PutCheckpoint(id, 0, KatCheckpoint(0));
  for (uint64_t step = 1; step <= 3; ++step) {
    KatStep r = KatRecords(step);
    s.WriteStep(id, step, r.records());
    if (step == 2) s.PutCheckpoint(id, 1, KatCheckpoint(1));
  }
  s.PutCheckpoint(id, 2, KatCheckpoint(2));
}

}  // namespace vt::store::testing
