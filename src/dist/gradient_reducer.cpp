// Bucketed gradient all-reduce started from autograd hooks (see gradient_reducer.h).
#include "mixlab/dist/gradient_reducer.h"

#include "mixlab/core/error.h"
#include "mixlab/dist/data_parallel.h"

namespace mixlab {
struct GradientReducer::Impl {
  struct Slot {
    torch::Tensor param;
    size_t bucket = 0;
    int64_t offset = 0;  // of the gradient in the bucket's buffer
    int64_t flag = 0;    // index of the "has a gradient" flag in the bucket's buffer
    unsigned hook = 0;
    bool fired = false;
  };
  struct Bucket {
    torch::Tensor flat;  // gradients, then one flag per slot
    std::vector<size_t> slots;
    int64_t flags_offset = 0;
    size_t waiting = 0;  // slots whose gradient has not arrived in this step
    PendingCollective work;
  };

  DataParallel* dp = nullptr;
  std::vector<Slot> slots;
  std::vector<Bucket> buckets;
  size_t next = 0;  // first bucket not started in this step
  bool armed = false;
  int64_t collectives = 0;

  void start(Bucket& b) {
    b.work = dp->start_all_reduce_sum(b.flat, "all-reduce of the gradients");
    ++collectives;
  }

  // Starts every bucket, in order, whose gradients are all in.
  void start_ready() {
    while (next < buckets.size() && buckets[next].waiting == 0) start(buckets[next++]);
  }

  void on_gradient(size_t i, const torch::Tensor& grad) {
    if (!armed) return;
    torch::NoGradGuard no_grad;
    Slot& s = slots[i];
    MIXLAB_CHECK(!s.fired,
                 "GradientReducer: parameter {} received a second gradient in one step (one backward per step: "
                 "call begin() before each backward and finish() after it)",
                 i);
    MIXLAB_CHECK(!grad.is_sparse(), "GradientReducer: parameter {} has a sparse gradient; only dense ones are reduced",
                 i);
    s.fired = true;
    Bucket& b = buckets[s.bucket];
    b.flat.narrow(0, s.offset, s.param.numel()).view(s.param.sizes()).copy_(grad);
    b.flat[s.flag].fill_(1);
    --b.waiting;
    start_ready();
  }
};

GradientReducer::GradientReducer(DataParallel& dp, const std::vector<torch::Tensor>& params, int64_t bucket_bytes)
    : impl_(std::make_unique<Impl>()) {
  MIXLAB_CHECK(bucket_bytes > 0, "GradientReducer: bucket_bytes must be > 0, got {}", bucket_bytes);
  impl_->dp = &dp;
  auto& I = *impl_;
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    if (!it->defined() || !it->requires_grad()) continue;
    MIXLAB_CHECK(it->device().is_cpu(), "GradientReducer: parameters must be on the CPU, got one on {}",
                 it->device().str());
    Impl::Slot s;
    s.param = *it;
    I.slots.push_back(s);
  }
  // Group the slots into buckets and size their buffers.
  std::vector<std::vector<size_t>> groups;
  int64_t bytes = 0;
  for (size_t i = 0; i < I.slots.size(); ++i) {
    const auto& p = I.slots[i].param;
    const int64_t b = p.numel() * static_cast<int64_t>(p.element_size());
    if (groups.empty() || I.slots[groups.back().front()].param.scalar_type() != p.scalar_type() ||
        bytes + b > bucket_bytes) {
      groups.emplace_back();
      bytes = 0;
    }
    groups.back().push_back(i);
    bytes += b;
  }
  for (const auto& g : groups) {
    Impl::Bucket b;
    b.slots = g;
    int64_t numel = 0;
    for (size_t i : g) {
      I.slots[i].bucket = I.buckets.size();
      I.slots[i].offset = numel;
      numel += I.slots[i].param.numel();
    }
    b.flags_offset = numel;
    for (size_t k = 0; k < g.size(); ++k) I.slots[g[k]].flag = numel + static_cast<int64_t>(k);
    b.flat =
        torch::zeros({numel + static_cast<int64_t>(g.size())}, I.slots[g.front()].param.options().requires_grad(false));
    I.buckets.push_back(std::move(b));
  }
  for (size_t i = 0; i < I.slots.size(); ++i) {
    Impl* impl = impl_.get();
    I.slots[i].hook =
        I.slots[i].param.register_hook([impl, i](const torch::Tensor& grad) { impl->on_gradient(i, grad); });
  }
}

GradientReducer::~GradientReducer() {
  for (auto& s : impl_->slots) s.param.remove_hook(s.hook);
}

void GradientReducer::begin() {
  auto& I = *impl_;
  MIXLAB_CHECK(!I.armed, "GradientReducer: begin() twice without finish()");
  torch::NoGradGuard no_grad;
  for (auto& b : I.buckets) {
    b.flat.narrow(0, b.flags_offset, static_cast<int64_t>(b.slots.size())).zero_();
    b.waiting = b.slots.size();
  }
  for (auto& s : I.slots) s.fired = false;
  I.next = 0;
  I.armed = true;
}

void GradientReducer::finish() {
  auto& I = *impl_;
  MIXLAB_CHECK(I.armed, "GradientReducer: finish() without begin()");
  I.armed = false;
  torch::NoGradGuard no_grad;
  // Buckets with a parameter that got no gradient here: zeros in its place, then start them.
  for (size_t k = I.next; k < I.buckets.size(); ++k) {
    auto& b = I.buckets[k];
    for (size_t i : b.slots)
      if (!I.slots[i].fired) b.flat.narrow(0, I.slots[i].offset, I.slots[i].param.numel()).zero_();
    I.start(b);
  }
  I.next = I.buckets.size();
  for (auto& b : I.buckets) b.work.wait();
  std::vector<torch::Tensor> flags;  // per bucket, as doubles: one read each, not one per slot
  for (auto& b : I.buckets)
    flags.push_back(b.flat.narrow(0, b.flags_offset, static_cast<int64_t>(b.slots.size())).to(torch::kFloat64));
  for (auto& s : I.slots) {
    const auto& flat = I.buckets[s.bucket].flat;
    const bool some_rank_had_one = flags[s.bucket].data_ptr<double>()[s.flag - I.buckets[s.bucket].flags_offset] > 0;
    auto grad = s.param.mutable_grad();
    if (!some_rank_had_one && !grad.defined()) continue;
    const auto sum = flat.narrow(0, s.offset, s.param.numel()).view(s.param.sizes());
    if (grad.defined())
      grad.copy_(sum);
    else
      s.param.mutable_grad() = sum.clone();
  }
}

int64_t GradientReducer::bucket_count() const { return static_cast<int64_t>(impl_->buckets.size()); }
int64_t GradientReducer::collectives() const { return impl_->collectives; }

}  // namespace mixlab
