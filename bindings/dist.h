// The process group a distributed vtrun belongs to (vtrun --world N --rank R --rendezvous
// URL), and the launcher that starts N local ranks (vtrun --nproc N). See runtime/dist/group.h.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/dist/group.h"

namespace vt::lua {

// The group this process joined at start-up, or null (one process). vt.trainer and
// vt.auditor run as ranks of it.
std::shared_ptr<dist::Group>& DefaultGroup();

// vtrun --nproc N: starts N copies of this executable as ranks 0..N-1 of a group (with
// `rank_args` in place of --nproc N and the rest of `argv` after them), waits for them, and
// stops the others when one fails. Returns the exit status for the launcher.
int LaunchRanks(int nproc, const dist::GroupOptions& options, const std::vector<std::string>& args);

}  // namespace vt::lua
