// Sharded steps and what the ranks of a group exchange (runtime/train/engine.h ShardPlan,
// runtime/train/rank_exchange.h, runtime/dist/group.h). The groups themselves run in
// tests/lua/data_parallel_test.lua (real processes on Gloo).
#include <ATen/ATen.h>  // before Catch: glog (in ATen) has a CHECK macro of its own

#include <catch2/catch.hpp>

#include "runtime/common/error.h"
#include "runtime/dist/group.h"
#include "runtime/nn/context.h"
#include "runtime/train/engine.h"
#include "runtime/train/rank_exchange.h"

using vt::Error;
using vt::nn::ShardOf;

TEST_CASE("shard prefixes of boundary names", "[shard]") {
  std::string plain;
  CHECK(ShardOf("s3/fc0:fwd", &plain) == 3);
  CHECK(plain == "fc0:fwd");
  CHECK(ShardOf("s0/layer1.0.bn1.mean:fwd", &plain) == 0);
  CHECK(plain == "layer1.0.bn1.mean:fwd");
  for (const char* name : {"fc0:fwd", "stem.conv:fwd", "s/fc0:fwd", "sx/fc0:fwd", "s1", "s1/",
                           "s12345678901/x", "~trace"}) {
    CHECK(ShardOf(name, &plain) == -1);
    CHECK(plain == name);
  }
}

TEST_CASE("a window override of a boundary applies to every shard's copy of it", "[shard]") {
  vt::nn::WindowTable t;
  t.by_boundary["fc0:fwd"] = {0.0, 1e-12};
  t.by_boundary["s2/fc0:fwd"] = {0.0, 1e-10};
  CHECK(t.Lookup("s1/fc0:fwd").alpha == 1e-12);
  CHECK(t.Lookup("s2/fc0:fwd").alpha == 1e-10);  // its own override first
  CHECK(t.Lookup("s1/fc1:fwd") == t.by_kind[0]);
}

TEST_CASE("the shards a process computes", "[shard]") {
  vt::train::ShardPlan p = vt::train::ShardPlan::For(4, nullptr);
  CHECK(p.first == 0);
  CHECK(p.count == 4);
  CHECK(vt::train::OwnerRank("s3/fc0:fwd", 4, 2) == 1);
  CHECK(vt::train::OwnerRank("s1/fc0:fwd", 4, 2) == 0);
  CHECK(vt::train::OwnerRank("s1/fc0:fwd", 4, 4) == 1);
  CHECK(vt::train::OwnerRank("fc0.weight:grad", 4, 2) == -1);
  CHECK(vt::train::OwnerRank("s9/fc0:fwd", 4, 2) == 0);  // beyond the run: rank 0 reports it
}

TEST_CASE("records and reports cross between ranks intact, and damaged messages are errors",
          "[shard]") {
  vt::train::EncodedRecords records = {{{"s1/fc0:fwd", 0}, std::string("\x01\x02\x00\x03", 4)},
                                       {{"fc0.weight:grad", 7}, ""},
                                       {{"~trace", 0}, std::string(300, 'x')}};
  const std::string bytes = vt::train::EncodeRecords(records);
  CHECK(vt::train::DecodeRecords(bytes) == records);
  CHECK(vt::train::DecodeRecords(vt::train::EncodeRecords({})).empty());
  for (size_t cut : {size_t{0}, size_t{5}, bytes.size() - 1}) {
    CHECK_THROWS_AS(vt::train::DecodeRecords(bytes.substr(0, cut)), Error);
  }
  CHECK_THROWS_AS(vt::train::DecodeRecords(bytes + "x"), Error);

  vt::train::RankReport report;
  report.boundaries["s1/fc0:fwd"].elements = 1000;
  report.boundaries["s1/fc0:fwd"].illegitimate = 3;
  report.boundaries["s1/fc0:fwd"].steerable = -1;  // any int64 survives
  report.divergence = "boundary 's1/fc0:fwd' call 0 at step 2";
  report.log_mismatches = 2;
  report.log_mismatch = "no log record for boundary 's1/fc1:fwd'";
  const vt::train::RankReport back =
      vt::train::DecodeRankReport(vt::train::EncodeRankReport(report));
  CHECK(back.boundaries.at("s1/fc0:fwd").elements == 1000);
  CHECK(back.boundaries.at("s1/fc0:fwd").illegitimate == 3);
  CHECK(back.boundaries.at("s1/fc0:fwd").steerable == -1);
  CHECK(back.divergence == report.divergence);
  CHECK(back.log_mismatches == 2);
  CHECK(back.log_mismatch == report.log_mismatch);
  CHECK_THROWS_AS(vt::train::DecodeRankReport("\x00\x00\x00\x00\x00\x00\x00\x09"), Error);

  CHECK(vt::train::PayloadOrThrow(vt::train::Ok("abc")) == "abc");
  CHECK_THROWS_WITH(vt::train::PayloadOrThrow(vt::train::Failed("rank 0: no such run")),
                    "rank 0: no such run");
  CHECK_THROWS_AS(vt::train::PayloadOrThrow(""), Error);
}

TEST_CASE("group options are checked before anything connects", "[shard]") {
  vt::dist::GroupOptions o;
  o.world = 2;
  o.rank = 0;
  o.rendezvous = "tcp://127.0.0.1:29500";
  CHECK_NOTHROW(vt::dist::Validate(o));
  o.rendezvous = "file:///tmp/rdzv";
  CHECK_NOTHROW(vt::dist::Validate(o));
  for (const char* bad : {"", "tcp://host", "tcp://:12", "tcp://h:0", "tcp://h:70000", "tcp://h:1x",
                          "file://rel/path", "http://h:1"}) {
    o.rendezvous = bad;
    CHECK_THROWS_AS(vt::dist::Validate(o), Error);
  }
  o.rendezvous = "tcp://[::1]:29500";
  CHECK_NOTHROW(vt::dist::Validate(o));
  o.rank = 2;
  CHECK_THROWS_WITH(vt::dist::Validate(o), Catch::Contains("rank must be in [0, 1]"));
  o.rank = 0;
  o.timeout_seconds = 0;
  CHECK_THROWS_WITH(vt::dist::Validate(o), Catch::Contains("timeout"));
  o.timeout_seconds = 10;
  o.world = 1;
  CHECK_THROWS_WITH(vt::dist::Group::Connect(o), Catch::Contains("needs no rendezvous"));
}

// Control for the ":grad" boundary of sharded steps: the orders in which one process (shard
// order) and a ring all-reduce (partial sums of each rank, then across ranks) add four shard
// gradients give other FP64 bits, so without the logged rounding of the sum the ranks of
// two layouts would hold different gradients (and, once a value straddles an FP32 midpoint,
// different weights: E2 shows that drift for summation orders inside one GEMM).
TEST_CASE("shard gradient sums depend on the order of the additions", "[shard]") {
  at::manual_seed(7);
  std::vector<at::Tensor> g;
  for (int i = 0; i < 4; ++i) g.push_back(at::randn({100000}, at::kDouble) * std::pow(10.0, i - 2));
  const at::Tensor in_order = ((g[0] + g[1]) + g[2]) + g[3];   // one process, shard order
  const at::Tensor two_ranks = (g[0] + g[1]) + (g[2] + g[3]);  // two ranks' partial sums
  const double differ = in_order.ne(two_ranks).to(at::kDouble).mean().item<double>();
  CHECK(differ > 0.05);
}
