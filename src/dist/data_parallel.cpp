// Rendezvous, process group and bucketed collectives (see data_parallel.h). Gloo's headers stay
// in this file: nothing above the dist area sees c10d.
#include "mixlab/dist/data_parallel.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "mixlab/core/error.h"

namespace mixlab {
namespace {

using Clock = std::chrono::steady_clock;

// First line of a c10 / gloo message (the rest is a backtrace).
std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

bool is_loopback(const std::string& addr) { return addr == "localhost" || addr.rfind("127.", 0) == 0 || addr == "::1"; }

bool is_timeout(const std::string& message) { return message.find("imed out") != std::string::npos; }

std::string join_key(int64_t rank) { return fmt::format("mixlab/join/{}", rank); }
std::string read_key(int64_t rank) { return fmt::format("mixlab/read/{}", rank); }
std::string left_key(int64_t rank) { return fmt::format("mixlab/left/{}", rank); }

// After a failure the exchange still looks at its other peers, briefly: a peer whose connection
// also broke was lost too; one that is merely slower is not waited for.
constexpr std::chrono::milliseconds kOtherPeersGrace{500};
// How long rank 0 keeps serving the store after an exchange failed (see ~DataParallel).
constexpr std::chrono::milliseconds kServerLinger{1500};
// How often a joining rank asks the store which ranks have joined.
constexpr std::chrono::milliseconds kJoinPoll{20};

}  // namespace

struct DataParallel::Impl {
  DistEnv env;
  std::chrono::milliseconds timeout{0};
  int64_t bucket_bytes = 0;
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
  int64_t calls = 0;
  double seconds = 0;
  int exchange_tag = 0;                          // tags of the exchange all-reduce: the same sequence on every rank
  mutable std::atomic<bool> failed_once{false};  // an exchange failed: see ~DataParallel

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

  // A point-to-point exchange failed on the peers `failed` (in the order of blame). A peer that
  // left a note in the store ("mixlab/left/<rank>") stopped because it lost another rank itself:
  // the first peer without a note is the lost one. This rank leaves its own note, and rank 0,
  // which serves the store, keeps it a moment longer (~DataParallel), so that a survivor that
  // finds both the killed rank and a survivor already gone still blames the killed one.
  [[noreturn]] void fail_peers(const char* what, const std::vector<std::pair<int, std::string>>& failed) const {
    std::vector<std::pair<int, std::string>> lost, stopped;
    for (const auto& f : failed) {
      bool left = false;
      try {
        left = store->check({left_key(f.first)});
      } catch (const std::exception&) {
        // The store is gone with rank 0: no notes to read.
      }
      (left ? stopped : lost).push_back(f);
    }
    if (lost.empty()) std::swap(lost, stopped);
    const int blamed = lost.front().first;
    failed_once = true;
    try {
      const std::string text = std::to_string(blamed);
      store->set(left_key(env.rank), std::vector<uint8_t>(text.begin(), text.end()));
    } catch (const std::exception&) {
      // Best effort: the store may be gone already.
    }
    std::vector<int> others;
    for (size_t i = 1; i < lost.size(); ++i) others.push_back(lost[i].first);
    std::vector<int> quit;
    for (const auto& f : stopped) quit.push_back(f.first);
    throw DistributedError(fmt::format(
        "rank {} of {}: {} failed: lost rank {} ({}){}{}; rank {} exited, was killed or did not answer within {} s; "
        "see its output",
        env.rank, env.world_size, what, blamed, lost.front().second,
        others.empty() ? std::string() : fmt::format(", and rank(s) {}", fmt::join(others, ", ")),
        quit.empty() ? std::string()
                     : fmt::format(" (rank(s) {} stopped after losing a rank too)", fmt::join(quit, ", ")),
        blamed, timeout.count() / 1000.0));
  }

  void join(const LaunchFingerprint& fingerprint, const std::string& where);
};

// Every rank publishes its fingerprint and reads every other rank's (see data_parallel.h).
void DataParallel::Impl::join(const LaunchFingerprint& fingerprint, const std::string& where) {
  const int64_t world = env.world_size;
  auto bytes = [](const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); };
  // Of `ranks`, those whose key is not in the store yet.
  auto missing = [&](const std::function<std::string(int64_t)>& key, const std::vector<int64_t>& ranks) {
    std::vector<int64_t> out;
    for (int64_t r : ranks)
      if (!store->check({key(r)})) out.push_back(r);
    return out;
  };
  auto lost_server = [&](const char* doing, const std::exception& e) {
    return DistributedError(fmt::format(
        "rank {} of {}: lost the rendezvous server (rank 0) at MASTER_ADDR:MASTER_PORT = {} while {}: {}; rank 0 "
        "exited or was killed, see its output",
        env.rank, world, where, doing, first_line(e.what())));
  };
  auto did_not_join = [&](const std::vector<int64_t>& absent, const std::string& note) {
    return DistributedError(fmt::format(
        "rank {} of {}: rank(s) {} did not join the launch at MASTER_ADDR:MASTER_PORT = {} within {} s (WORLD_SIZE = "
        "{}: every rank must be started, with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE){}",
        env.rank, world, fmt::join(absent, ", "), where, timeout.count() / 1000.0, world, note));
  };
  // Polled rather than one blocking wait: a rank other than 0 then still knows which ranks were
  // missing when rank 0, whose deadline comes first, gives up and takes the store with it.
  std::vector<int64_t> absent;
  for (int64_t r = 0; r < world; ++r) absent.push_back(r);
  bool polled = false;
  const auto deadline = Clock::now() + timeout;
  try {
    store->set(join_key(env.rank), bytes(fingerprint_to_text(fingerprint)));
    for (;;) {
      absent = missing(join_key, absent);
      polled = true;
      if (absent.empty() || Clock::now() >= deadline) break;
      std::this_thread::sleep_for(kJoinPoll);
    }
  } catch (const std::exception& e) {
    if (!polled || absent.empty()) throw lost_server("waiting for the other ranks to join", e);
    throw did_not_join(absent, fmt::format("; rank 0 stopped waiting first ({})", first_line(e.what())));
  }
  if (!absent.empty()) throw did_not_join(absent, "");
  std::string mismatch;
  try {
    for (int64_t r = 0; r < world && mismatch.empty(); ++r) {
      if (r == env.rank) continue;
      const auto value = store->get(join_key(r));
      const LaunchFingerprint theirs = fingerprint_from_text(std::string(value.begin(), value.end()),
                                                             fmt::format("rank {}'s launch fingerprint", r));
      mismatch = fingerprint_difference(fingerprint, env.rank, theirs, r);
    }
    // Rank 0 serves the store: it stays until every other rank has read what it needs.
    if (env.rank != 0) {
      store->set(read_key(env.rank), bytes("1"));
    } else {
      std::vector<std::string> read;
      for (int64_t r = 1; r < world; ++r) read.push_back(read_key(r));
      store->wait(read, timeout);
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    if (env.rank != 0) throw lost_server("reading the other ranks' launch fingerprints", e);
    // Rank 0: a rank that joined and then vanished before reading.
    std::vector<int64_t> others;
    for (int64_t r = 1; r < world; ++r) others.push_back(r);
    try {
      absent = missing(read_key, others);
    } catch (const std::exception&) {
    }
    throw DistributedError(fmt::format(
        "rank 0 of {}: {} joined the launch at {} but did not check the launch fingerprints within {} s (exited "
        "or killed? see their output): {}",
        world, absent.empty() ? std::string("a rank") : fmt::format("rank(s) {}", fmt::join(absent, ", ")), where,
        timeout.count() / 1000.0, first_line(e.what())));
  }
  if (!mismatch.empty()) {
    throw LaunchMismatchError(fmt::format(
        "rank {} of {}: refusing to train: the ranks of this launch were started differently (every rank must run "
        "the same executable with the same config): {}",
        env.rank, world, mismatch));
  }
}

DataParallel::DataParallel(const DistEnv& env, std::chrono::milliseconds timeout, int64_t bucket_bytes,
                           const LaunchFingerprint& fingerprint)
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
  // Joining is checked key by key in join(), which can name the ranks that did not come.
  opts.waitWorkers = false;
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
    if (env.rank != 0) {
      throw DistributedError(fmt::format(
          "rank {} of {}: cannot reach the rendezvous server (rank 0) at MASTER_ADDR:MASTER_PORT = {} within {} s: "
          "{} (rank 0 was not started, exited early, or listens elsewhere)",
          env.rank, env.world_size, where, timeout.count() / 1000.0, msg));
    }
    throw DistributedError(
        fmt::format("rank {} of {}: rendezvous at MASTER_ADDR:MASTER_PORT = {} failed within {} s: {}", env.rank,
                    env.world_size, where, timeout.count() / 1000.0, msg));
  }
  if (env.world_size > 1) impl_->join(fingerprint, where);
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

DataParallel::~DataParallel() {
  // After a lost peer, rank 0 closes its connections at once but serves the store a moment longer:
  // the other survivors read the notes there that say which rank was lost first (fail_peers).
  if (impl_ && impl_->failed_once && impl_->env.rank == 0) {
    impl_->group.reset();
    std::this_thread::sleep_for(kServerLinger);
  }
}

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
  // A message to or from one peer; `error` when it could not even be started (a connection that
  // already broke). One peer's failure never stops the messages to the others: a survivor of a
  // killed rank still gets every other survivor's buffer, so each of them names the killed rank.
  struct PeerMessage {
    int peer = 0;
    c10::intrusive_ptr<c10d::Work> work;
    std::string error;
  };
  struct Exchange {
    std::vector<at::Tensor> parts;               // by rank; this rank's is `flat` (or a copy of it)
    std::vector<std::vector<at::Tensor>> lists;  // Gloo keeps references into these until done
    std::vector<PeerMessage> messages;
  };
  auto post = [](int peer, const std::function<c10::intrusive_ptr<c10d::Work>()>& launch) {
    PeerMessage m;
    m.peer = peer;
    try {
      m.work = launch();
    } catch (const std::exception& e) {
      m.error = first_line(e.what());
    }
    return m;
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
    ex->messages.push_back(post(p, [&] { return impl_->group->send(send_list, p, tag); }));
    ex->lists.push_back({ex->parts[static_cast<size_t>(p)]});
    auto& recv_list = ex->lists.back();
    ex->messages.push_back(post(p, [&] { return impl_->group->recv(recv_list, p, tag); }));
  }
  pending.wait_ = [impl, what, ex, flat, rank, world]() mutable {
    // Failed peers, in the order of blame: first those whose connection had already broken when
    // this collective started, then the others in wait order (after the first failure, only
    // broken connections count: a peer that is merely slow is not blamed).
    std::vector<std::pair<int, std::string>> failed;
    auto add = [&](int peer, const std::string& error) {
      for (const auto& f : failed)
        if (f.first == peer) return;
      failed.emplace_back(peer, error);
    };
    for (const auto& m : ex->messages)
      if (!m.error.empty()) add(m.peer, m.error);
    for (auto& m : ex->messages) {
      if (!m.error.empty()) continue;
      try {
        m.work->wait(failed.empty() ? impl->timeout : std::min(impl->timeout, kOtherPeersGrace));
      } catch (const std::exception& e) {
        const std::string error = first_line(e.what());
        if (failed.empty() || !is_timeout(error)) add(m.peer, error);
      }
    }
    if (!failed.empty()) impl->fail_peers(what, failed);
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
