// What the ranks of a data-parallel run (train/engine.h ShardPlan) send each other besides
// gradients: log records (to rank 0, which commits the run, or from it, when auditing), and
// each rank's part of a step report. Length-prefixed byte encodings, only ever exchanged
// between the processes of one run; decoders still check every length (vt::Error).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runtime/dist/group.h"
#include "runtime/nn/context.h"

namespace vt::train {

using EncodedRecords = std::vector<std::pair<nn::RecordKey, std::string>>;

std::string EncodeRecords(const EncodedRecords& records);
EncodedRecords DecodeRecords(const std::string& bytes);

// A rank's part of a StepReport.
struct RankReport {
  std::map<std::string, nn::BoundaryStats> boundaries;
  std::string divergence;
  int64_t log_mismatches = 0;
  std::string log_mismatch;
};
std::string EncodeRankReport(const RankReport& report);
RankReport DecodeRankReport(const std::string& bytes);

// The rank that computes the record of `boundary` in a run of `shards` shards over `world`
// processes: the owner of its shard ("s<k>/..."), or -1 for the records every rank computes
// (the summed gradient, the update). A shard beyond the run's goes to rank 0, whose replay
// then reports it as a record no boundary reached.
int OwnerRank(const std::string& boundary, int64_t shards, int world);

// A status byte and a payload: the way a rank that does something alone (rank 0 opening the
// store, reading the trainer's logs) tells the others whether it worked, so they fail with
// its error instead of waiting for a collective that never comes.
std::string Ok(const std::string& payload);
std::string Failed(const std::string& message);
// The payload, or throws vt::Error with the failing rank's message.
std::string PayloadOrThrow(const std::string& bytes);

// A check every rank must pass or fail together: rank 0 gathers each rank's `mine` (by rank),
// `verdict` turns them into an error message ("" when all is well), and every rank throws
// that message as a vt::Error (so none waits in a later collective for one that gave up).
void AgreeOrThrow(dist::Group& group, const std::string& mine,
                  const std::function<std::string(const std::vector<std::string>&)>& verdict);

}  // namespace vt::train
