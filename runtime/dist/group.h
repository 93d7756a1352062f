// The processes of one data-parallel run: PyTorch's own distributed engine (c10d) with the
// Gloo backend, over TCP. A Group is what the sharded training step (train/engine.h) and the
// runners (train/runner.h) use to sum gradients, move log records to rank 0 and keep every
// rank's state equal; nothing else in vtrun talks to the network.
//
// Rendezvous (where the ranks find each other, as torch.distributed's init_method):
//   tcp://HOST:PORT   rank 0 listens on PORT (c10d TCPStore); the others connect to HOST.
//   file:///PATH      a file every rank can reach (c10d FileStore), for one host or a
//                     shared file system; it must not exist before the run.
// Each rank's Gloo transport binds to `interface_host` (default: 127.0.0.1 when the
// rendezvous host is a loopback address or a file, else the address this host's name
// resolves to, as c10d's createDefaultDevice does).
//
// Every collective blocks until all ranks have called it or `timeout_seconds` pass; a rank
// that dies makes the others' next collective fail (connection closed) or time out. Every
// failure is a vt::Error naming the operation, this rank and the cause.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace vt::dist {

struct GroupOptions {
  int world = 1;                 // number of processes, >= 1
  int rank = 0;                  // this process, in [0, world)
  std::string rendezvous;        // tcp://HOST:PORT or file:///PATH
  std::string interface_host;    // address this rank's Gloo transport binds to ("": see above)
  double timeout_seconds = 300;  // per collective and for the rendezvous. Default: 300.
};

// Throws vt::Error naming the bad field (world, rank, rendezvous, timeout).
void Validate(const GroupOptions& options);

class Group {
 public:
  virtual ~Group() = default;
  // Joins the group (blocks until every rank has joined or the timeout passes).
  static std::shared_ptr<Group> Connect(const GroupOptions& options);

  virtual int rank() const = 0;
  virtual int world() const = 0;

  // In place, on every rank: the elementwise sum over ranks (float64 or int64, contiguous).
  // The order of the additions is Gloo's (ring), the same result on every rank.
  virtual void AllReduceSum(at::Tensor& t) = 0;
  // In place: every rank gets root's tensor (same shape and dtype on every rank).
  virtual void Broadcast(at::Tensor& t, int root) = 0;
  // Every rank gets root's bytes.
  virtual void BroadcastBytes(std::string* bytes, int root) = 0;
  // Root gets every rank's bytes, by rank (its own included); the others get {}.
  virtual std::vector<std::string> GatherBytes(const std::string& mine, int root) = 0;
  // Root sends parts[r] to rank r (parts has world() entries on root, is ignored elsewhere);
  // every rank returns its own part.
  virtual std::string ScatterBytes(const std::vector<std::string>& parts, int root) = 0;
  virtual void Barrier() = 0;

  // Bytes this rank has put on the wire so far (an estimate from the algorithm: ring
  // all-reduce 2(w-1)/w of the payload, point-to-point and broadcast payloads as sent).
  virtual int64_t bytes_sent() const = 0;
};

// "rank 1 of 4" (for error messages and progress lines).
std::string Describe(const Group& group);

}  // namespace vt::dist
