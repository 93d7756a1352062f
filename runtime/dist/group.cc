#include "runtime/dist/group.h"

#include <ATen/ATen.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
// VT_WITH_C10D (CMake option VT_DIST, default ON) is 0 only in builds against a LibTorch
// that ships no Gloo headers (a GPU build against a pip wheel, README "GPU profile").
#if VT_WITH_C10D
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif

#include "runtime/common/error.h"

namespace vt::dist {
namespace {

struct Rendezvous {
  bool tcp = false;
  std::string host;  // tcp
  uint16_t port = 0;
  std::string path;  // file
};

Rendezvous ParseRendezvous(const std::string& url) {
  Rendezvous r;
  const std::string allowed = " (allowed: tcp://HOST:PORT or file:///ABSOLUTE/PATH)";
  if (url.rfind("tcp://", 0) == 0) {
    const std::string rest = url.substr(6);
    const size_t colon = rest.rfind(':');
    if (colon == std::string::npos || colon == 0)
      throw Error("rendezvous '" + url + "' has no host and port" + allowed);
    r.tcp = true;
    r.host = rest.substr(0, colon);
    if (r.host.size() > 2 && r.host.front() == '[' && r.host.back() == ']')
      r.host = r.host.substr(1, r.host.size() - 2);
    const std::string port = rest.substr(colon + 1);
    if (port.empty() || port.size() > 5 ||
        port.find_first_not_of("0123456789") != std::string::npos || std::stoi(port) < 1 ||
        std::stoi(port) > 65535) {
      throw Error("rendezvous '" + url + "': port must be a number in [1, 65535]" + allowed);
    }
    r.port = static_cast<uint16_t>(std::stoi(port));
    return r;
  }
  if (url.rfind("file://", 0) == 0) {
    r.path = url.substr(7);
    if (r.path.empty() || r.path[0] != '/')
      throw Error("rendezvous '" + url + "': the file path must be absolute" + allowed);
    return r;
  }
  throw Error("rendezvous '" + url + "' is not understood" + allowed);
}

#if VT_WITH_C10D

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000.0)));
}

// The message of an exception from c10d or Gloo without LibTorch's backtrace.
std::string Message(const std::exception& e) {
  if (const auto* c = dynamic_cast<const c10::Error*>(&e)) return c->what_without_backtrace();
  return e.what();
}

class GlooGroup final : public Group {
 public:
  explicit GlooGroup(const GroupOptions& o) : options_(o), timeout_(Millis(o.timeout_seconds)) {
    const Rendezvous r = ParseRendezvous(o.rendezvous);
    std::string bind = o.interface_host;
    Guard("rendezvous at " + o.rendezvous, [&] {
      if (r.tcp) {
        c10d::TCPStoreOptions so;
        so.port = r.port;
        so.isServer = o.rank == 0;
        so.numWorkers = static_cast<size_t>(o.world);
        so.waitWorkers = true;
        so.timeout = timeout_;
        store_ = c10::make_intrusive<c10d::TCPStore>(r.host, so);
        if (bind.empty() && IsLoopback(r.host)) bind = "127.0.0.1";
      } else {
        store_ = c10::make_intrusive<c10d::FileStore>(r.path, o.world);
        store_->setTimeout(timeout_);
        if (bind.empty()) bind = "127.0.0.1";
      }
      auto go = c10d::ProcessGroupGloo::Options::create(timeout_);
      go->devices.push_back(bind.empty() ? c10d::ProcessGroupGloo::createDefaultDevice()
                                         : c10d::ProcessGroupGloo::createDeviceForHostname(bind));
      group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store_, o.rank, o.world, go);
    });
  }

  int rank() const override { return options_.rank; }
  int world() const override { return options_.world; }
  int64_t bytes_sent() const override { return bytes_sent_; }

  void AllReduceSum(at::Tensor& t) override {
    if (!t.is_contiguous() || (t.scalar_type() != at::kDouble && t.scalar_type() != at::kLong)) {
      throw Error("all-reduce needs a contiguous float64 or int64 tensor");
    }
    const int64_t payload = t.numel() * static_cast<int64_t>(t.element_size());
    Guard("all-reduce of " + std::to_string(payload) + " bytes", [&] {
      std::vector<at::Tensor> tensors{t};
      c10d::AllreduceOptions ao;
      ao.reduceOp = c10d::ReduceOp::SUM;
      Wait(group_->allreduce(tensors, ao));
    });
    bytes_sent_ += payload * 2 * (world() - 1) / world();
  }

  void Broadcast(at::Tensor& t, int root) override {
    const int64_t payload = t.numel() * static_cast<int64_t>(t.element_size());
    Guard("broadcast of " + std::to_string(payload) + " bytes from rank " + std::to_string(root),
          [&] {
            std::vector<at::Tensor> tensors{t};
            c10d::BroadcastOptions bo;
            bo.rootRank = root;
            Wait(group_->broadcast(tensors, bo));
          });
    if (rank() == root) bytes_sent_ += payload;
  }

  void BroadcastBytes(std::string* bytes, int root) override {
    at::Tensor size = at::full({1}, static_cast<int64_t>(bytes->size()), at::kLong);
    Broadcast(size, root);
    const int64_t n = size.item<int64_t>();
    at::Tensor data = rank() == root ? FromBytes(*bytes) : at::empty({n}, at::kByte);
    if (n > 0) Broadcast(data, root);
    if (rank() != root) *bytes = ToBytes(data);
  }

  std::vector<std::string> GatherBytes(const std::string& mine, int root) override {
    std::vector<std::string> out;
    if (rank() != root) {
      Send(mine, root);
      return out;
    }
    out.resize(static_cast<size_t>(world()));
    for (int r = 0; r < world(); ++r) out[static_cast<size_t>(r)] = r == root ? mine : Recv(r);
    return out;
  }

  std::string ScatterBytes(const std::vector<std::string>& parts, int root) override {
    if (rank() != root) return Recv(root);
    if (parts.size() != static_cast<size_t>(world()))
      throw Error("scatter needs one part per rank");
    for (int r = 0; r < world(); ++r) {
      if (r != root) Send(parts[static_cast<size_t>(r)], r);
    }
    return parts[static_cast<size_t>(root)];
  }

  void Barrier() override {
    Guard("barrier", [&] { Wait(group_->barrier()); });
  }

 private:
  static at::Tensor FromBytes(const std::string& bytes) {
    at::Tensor t = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
    if (!bytes.empty()) std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
    return t;
  }
  static std::string ToBytes(const at::Tensor& t) {
    return std::string(static_cast<const char*>(t.data_ptr()), static_cast<size_t>(t.numel()));
  }

  void Send(const std::string& bytes, int to) {
    Guard("sending " + std::to_string(bytes.size()) + " bytes to rank " + std::to_string(to), [&] {
      std::vector<at::Tensor> size{at::full({1}, static_cast<int64_t>(bytes.size()), at::kLong)};
      Wait(group_->send(size, to, kSizeTag));
      if (!bytes.empty()) {
        std::vector<at::Tensor> data{FromBytes(bytes)};
        Wait(group_->send(data, to, kDataTag));
      }
    });
    bytes_sent_ += 8 + static_cast<int64_t>(bytes.size());
  }

  std::string Recv(int from) {
    std::string out;
    Guard("receiving from rank " + std::to_string(from), [&] {
      std::vector<at::Tensor> size{at::empty({1}, at::kLong)};
      Wait(group_->recv(size, from, kSizeTag));
      const int64_t n = size[0].item<int64_t>();
      if (n < 0 || n > (int64_t{1} << 40))
        throw Error("rank " + std::to_string(from) + " announced " + std::to_string(n) + " bytes");
      if (n == 0) return;
      std::vector<at::Tensor> data{at::empty({n}, at::kByte)};
      Wait(group_->recv(data, from, kDataTag));
      out = ToBytes(data[0]);
    });
    return out;
  }

  void Wait(const c10::intrusive_ptr<c10d::Work>& work) {
    if (!work->wait(timeout_))
      throw Error("timed out after " + std::to_string(options_.timeout_seconds) + " s");
  }

  // Runs `f`, turning any failure into a vt::Error that names the operation and this rank.
  template <class F>
  void Guard(const std::string& what, F&& f) {
    try {
      f();
    } catch (const std::exception& e) {
      throw Error("distributed " + what + " failed on " + Describe(*this) + ": " + Message(e) +
                  " (did another rank stop or time out?)");
    }
  }

  static constexpr int kSizeTag = 1, kDataTag = 2;
  GroupOptions options_;
  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
  int64_t bytes_sent_ = 0;
};
#endif  // VT_WITH_C10D

}  // namespace

void Validate(const GroupOptions& o) {
  if (o.world < 1 || o.world > 4096)
    throw Error("world must be in [1, 4096], got " + std::to_string(o.world));
  if (o.rank < 0 || o.rank >= o.world) {
    throw Error("rank must be in [0, " + std::to_string(o.world - 1) + "] for world " +
                std::to_string(o.world) + ", got " + std::to_string(o.rank));
  }
  if (!(o.timeout_seconds > 0) || o.timeout_seconds > 86400) {
    throw Error("timeout must be in (0, 86400] seconds, got " + std::to_string(o.timeout_seconds));
  }
  if (o.world > 1) ParseRendezvous(o.rendezvous);
}

std::shared_ptr<Group> Group::Connect(const GroupOptions& options) {
  Validate(options);
  if (options.world == 1)
    throw Error("a group of one process needs no rendezvous: run without --world");
#if VT_WITH_C10D
  return std::make_shared<GlooGroup>(options);
#else
  throw Error(
      "this vtrun was built without c10d (CMake option VT_DIST=OFF, as its LibTorch "
      "ships no Gloo headers): data-parallel runs need a build with VT_DIST=ON");
#endif
}

std::string Describe(const Group& group) {
  return "rank " + std::to_string(group.rank()) + " of " + std::to_string(group.world());
}

}  // namespace vt::dist
