#include "runtime/train/spec_check.h"

#include <map>
#include <set>

#include "runtime/common/error.h"

namespace vt::train {

std::string SpecDifference(const Spec& here, const Spec& there, const std::string& there_name, size_t limit) {
  const std::map<std::string, std::string>& a = here.fields();
  const std::map<std::string, std::string>& b = there.fields();
  std::set<std::string> keys;
  for (const auto& [k, v] : a) keys.insert(k);
  for (const auto& [k, v] : b) keys.insert(k);
  std::string out;
  size_t differing = 0;
  for (const std::string& k : keys) {
    auto ia = a.find(k);
    auto ib = b.find(k);
    if (ia != a.end() && ib != b.end() && ia->second == ib->second) continue;
    if (++differing > limit) continue;
    const std::string mine = ia == a.end() ? "absent" : ia->second;
    const std::string theirs = ib == b.end() ? "absent" : ib->second;
    out += (out.empty() ? "" : "; ") + k + " is " + mine + " here, " + theirs + " in " + there_name;
  }
  if (differing > limit) out += "; and " + std::to_string(differing - limit) + " more";
  return out;
}

void CheckLogsSpec(store::Store& store, const std::string& run, const Spec& spec) {
  store.Refresh();
  std::optional<store::RunInfo> info = store.GetRun(run);
  if (!info) throw Error("store '" + store.path() + "' holds no run '" + run + "' to replay (logs_run names another)");
  if (info->spec == spec.Canonical()) return;
  Spec theirs = Spec::Parse(info->spec);
  throw Error("the logs in store '" + store.path() + "', run '" + run + "', were made with another spec than this auditor's: " +
              SpecDifference(spec, theirs, "the logs") + ". Replaying them would report a divergence that is not the trainer's");
}

}  // namespace vt::train
