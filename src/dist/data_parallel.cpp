// Rendezvous, process group and bucketed collectives (see data_parallel.h). Gloo's headers stay
// in this file: nothing above the dist area sees c10d.
#include "mixlab/dist/data_parallel.h"

#include <cstdlib>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "mixlab/core/error.h"

namespace mixlab {
namespace {

using Clock = std::chrono::steady_clock;

// First line of a c10 / gloo message (the rest is a backtrace).
std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

bool is_loopback(const std::string& addr) { return addr == "localhost" || addr.rfind("127.", 0) == 0 || addr == "::1"; }

}  // namespace

struct DataParallel::Impl {
  DistEnv env;
  std::chrono::milliseconds timeout{0};
  int64_t bucket_bytes = 0;
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
  int64_t calls = 0;
  double seconds = 0;
  int exchange_tag = 0;  // tags of the exchange all-reduce: the same sequence on every rank

  // Any failure of a collective becomes a DistributedError naming the rank and the operation. A
  // peer that died shows up as a closed connection or a timeout.
  [[noreturn]] void fail(const char* what, const std::exception& e) const {
    throw DistributedError(fmt::format(
        "rank {} of {}: {} failed: {} (another rank exited, was killed or could not be reached within {} s; see "
        "its output)",
        env.rank, env.world_size, what, first_line(e.what()), timeout.count() / 1000.0));
  }

  // Starts one collective; the returned Work is waited for by wait().
  c10::intrusive_ptr<c10d::Work> start(const char* what,
                                       const std::function<c10::intrusive_ptr<c10d::Work>()>& launch) const {
    try {
      return launch();
    } catch (const std::exception& e) {
      fail(what, e);
    }
  }

  void wait(const char* what, const c10::intrusive_ptr<c10d::Work>& work) const {
    try {
      work->wait(timeout);
    } catch (const std::exception& e) {
      fail(what, e);
    }
  }

  // Runs one collective and waits for it.
  void run(const char* what, const std::function<c10::intrusive_ptr<c10d::Work>()>& launch) const {
    wait(what, start(what, launch));
  }
};

DataParallel::DataParallel(const DistEnv& env, std::chrono::milliseconds timeout, int64_t bucket_bytes)
    : impl_(std::make_unique<Impl>()) {
  MIXLAB_CHECK(env.world_size >= 1 && env.rank >= 0 && env.rank < env.world_size,
               "DataParallel: rank {} must lie in [0, world size {})", env.rank, env.world_size);
  MIXLAB_CHECK(timeout.count() > 0, "DataParallel: timeout must be > 0 ms, got {}", timeout.count());
  MIXLAB_CHECK(bucket_bytes > 0, "DataParallel: bucket_bytes must be > 0, got {}", bucket_bytes);
  impl_->env = env;
  impl_->timeout = timeout;
  impl_->bucket_bytes = bucket_bytes;
  const std::string where = fmt::format("{}:{}", env.master_addr, env.master_port);
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<uint16_t>(env.master_port);
  opts.isServer = env.rank == 0;
  opts.numWorkers = static_cast<size_t>(env.world_size);
  opts.waitWorkers = true;
  opts.timeout = timeout;
  try {
    impl_->store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, opts);
  } catch (const std::exception& e) {
    const std::string msg = first_line(e.what());
    if (env.rank == 0 && (msg.find("in use") != std::string::npos || msg.find("listen") != std::string::npos ||
                          msg.find("bind") != std::string::npos)) {
      throw DistributedError(fmt::format(
          "rank 0: cannot serve the rendezvous on MASTER_ADDR:MASTER_PORT = {}: the port is already in use or the "
          "address is not local ({}); choose another port (--master-port or MASTER_PORT)",
          where, msg));
    }
    throw DistributedError(
        fmt::format("rank {} of {}: rendezvous at MASTER_ADDR:MASTER_PORT = {} failed within {} s: {}", env.rank,
                    env.world_size, where, timeout.count() / 1000.0, msg));
  }
  try {
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
    if (ifname && *ifname) {
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
    } else if (is_loopback(env.master_addr)) {
      // A local launch: bind to loopback, whatever this machine's hostname resolves to.
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    } else {
      options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    }
    options->threads = 1;  // one collective at a time; the cores belong to the compute
    impl_->group = c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, static_cast<int>(env.rank),
                                                               static_cast<int>(env.world_size), options);
  } catch (const std::exception& e) {
    throw DistributedError(fmt::format("rank {} of {}: cannot connect the process group through {} within {} s: {}",
                                       env.rank, env.world_size, where, timeout.count() / 1000.0,
                                       first_line(e.what())));
  }
}

DataParallel::~DataParallel() = default;

int64_t DataParallel::rank() const { return impl_->env.rank; }
int64_t DataParallel::world_size() const { return impl_->env.world_size; }
int64_t DataParallel::all_reduce_calls() const { return impl_->calls; }
double DataParallel::all_reduce_seconds() const { return impl_->seconds; }

void DataParallel::broadcast(const std::vector<torch::Tensor>& tensors) {
  torch::NoGradGuard no_grad;
  for (const auto& t : tensors) {
    if (!t.defined()) continue;
    // Gloo wants dense tensors: reduce a contiguous copy and write it back when needed.
    std::vector<at::Tensor> buf{t.is_contiguous() ? t : t.contiguous()};
    impl_->run("broadcast", [&] { return impl_->group->broadcast(buf, c10d::BroadcastOptions{}); });
    if (!buf[0].is_same(t)) t.copy_(buf[0]);
  }
}

void DataParallel::all_reduce_sum(const std::vector<torch::Tensor>& tensors) {
  torch::NoGradGuard no_grad;
  const auto t0 = Clock::now();
  // Buckets of consecutive tensors of one dtype, at most bucket_bytes each (a larger tensor is
  // its own bucket).
  std::vector<torch::Tensor> bucket;
  int64_t bucket_size = 0;
  auto flush = [&] {
    if (bucket.empty()) return;
    // One contiguous tensor is reduced in place; several are packed into one flat buffer.
    const bool in_place = bucket.size() == 1 && bucket[0].is_contiguous();
    torch::Tensor flat;
    if (in_place) {
      flat = bucket[0].view({-1});
    } else {
      std::vector<torch::Tensor> parts;
      for (const auto& t : bucket) parts.push_back(t.reshape({-1}));
      flat = torch::cat(parts);
    }
    start_all_reduce_sum(flat, "all-reduce of the gradients").wait();
    ++impl_->calls;
    if (!in_place) {
      int64_t offset = 0;
      for (auto& t : bucket) {
        t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
        offset += t.numel();
      }
    }
    bucket.clear();
    bucket_size = 0;
  };
  for (const auto& t : tensors) {
    if (!t.defined()) continue;
    const int64_t bytes = t.numel() * static_cast<int64_t>(t.element_size());
    if (!bucket.empty() && (bucket[0].scalar_type() != t.scalar_type() || bucket_size + bytes > impl_->bucket_bytes))
      flush();
    bucket.push_back(t);
    bucket_size += bytes;
  }
  flush();
  impl_->seconds += std::chrono::duration<double>(Clock::now() - t0).count();
}

std::vector<double> DataParallel::all_reduce_sum(const std::vector<double>& values) {
  if (values.empty()) return {};
  const auto acc = torch::tensor(values, torch::kFloat64);
  start_all_reduce_sum(acc, "all-reduce of the step statistics").wait();
  return std::vector<double>(acc.data_ptr<double>(), acc.data_ptr<double>() + acc.numel());
}

void PendingCollective::wait() {
  if (!wait_) return;
  auto w = std::move(wait_);
  wait_ = nullptr;
  w();
}

PendingCollective DataParallel::start_all_reduce_sum(torch::Tensor flat, const char* what) {
  MIXLAB_CHECK(flat.defined() && flat.device().is_cpu() && flat.is_contiguous(),
               "start_all_reduce_sum ({}): expected a defined, contiguous CPU tensor", what);
  const Impl* impl = impl_.get();
  PendingCollective pending;
  const auto world = static_cast<int>(impl_->env.world_size);
  const auto rank = static_cast<int>(impl_->env.rank);
  if (world == 1) return pending;  // the sum of one rank's buffer is the buffer
  if (world > kExchangeMaxRanks) {
    auto buf = std::make_shared<std::vector<at::Tensor>>(1, std::move(flat));
    auto work = impl_->start(what, [&] { return impl_->group->allreduce(*buf, c10d::AllreduceOptions{}); });
    // `buf` keeps the tensor list alive until the collective is waited for.
    pending.wait_ = [impl, what, work, buf] { impl->wait(what, work); };
    return pending;
  }
  // Exchange: every rank sends its buffer to every other rank and sums all of them in rank order,
  // so every rank computes the same bits. Gloo's point-to-point messages bypass its collective
  // worker thread and its ring's segments: 0.38 ms against 1.96 ms for 400 KB between two local
  // processes (bench/allreduce_latency.py, docs/log/benchmarks-2026-11.md).
  struct Exchange {
    std::vector<at::Tensor> parts;               // by rank; this rank's is `flat` (or a copy of it)
    std::vector<std::vector<at::Tensor>> lists;  // Gloo keeps references into these until done
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
  };
  auto ex = std::make_shared<Exchange>();
  const int tag = impl_->exchange_tag;
  impl_->exchange_tag = (impl_->exchange_tag + 1) & 0x3fffffff;
  ex->parts.resize(static_cast<size_t>(world));
  ex->lists.reserve(2 * static_cast<size_t>(world));
  for (int p = 0; p < world; ++p) {
    if (p == rank) continue;
    ex->parts[static_cast<size_t>(p)] = torch::empty_like(flat);
    ex->lists.push_back({flat});
    auto& send_list = ex->lists.back();
    ex->works.push_back(impl_->start(what, [&] { return impl_->group->send(send_list, p, tag); }));
    ex->lists.push_back({ex->parts[static_cast<size_t>(p)]});
    auto& recv_list = ex->lists.back();
    ex->works.push_back(impl_->start(what, [&] { return impl_->group->recv(recv_list, p, tag); }));
  }
  pending.wait_ = [impl, what, ex, flat, rank, world]() mutable {
    for (const auto& w : ex->works) impl->wait(what, w);
    torch::NoGradGuard no_grad;
    // Rank order: (b0 + b1) + b2 + ..., written into `flat`, which is this rank's own part.
    ex->parts[static_cast<size_t>(rank)] = rank >= 2 ? flat.clone() : flat;
    at::add_out(flat, ex->parts[0], ex->parts[1]);
    for (int p = 2; p < world; ++p) flat.add_(ex->parts[static_cast<size_t>(p)]);
  };
  return pending;
}

void DataParallel::barrier() {
  impl_->run("barrier", [&] { return impl_->group->barrier(c10d::BarrierOptions{}); });
}

}  // namespace mixlab
