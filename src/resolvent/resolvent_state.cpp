// ResolventState: the decode cache of the resolvent op (what future rows can still read).
#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <istream>
#include <ostream>

#include "mixlab/core/error.h"
#include "mixlab/core/tensor_checks.h"
#include "mixlab/resolvent/resolvent.h"

namespace mixlab {

using torch::Tensor;

namespace {

// Spec heading a standalone op state (no mixer): this prefix + the pattern spec.
constexpr const char* kOpStateSpec = "resolvent-op:";

// Copies rows r of src (B,H,T,E) into slot slots[r] of dst (B,H,Cap,E), in row order (a later
// row that reuses a slot overwrites the earlier one, which was evicted).
void copy_rows(Tensor& dst, const Tensor& src_in, const std::vector<int64_t>& slots) {
  auto src = src_in.to(dst.scalar_type()).contiguous();
  const int64_t BH = dst.size(0) * dst.size(1), cap = dst.size(2), E = dst.size(3), T = src.size(2);
  const int64_t bytes = E * static_cast<int64_t>(dst.element_size());
  auto* d = static_cast<char*>(dst.data_ptr());
  const auto* s = static_cast<const char*>(src.data_ptr());
  for (int64_t bh = 0; bh < BH; ++bh)
    for (int64_t r = 0; r < T; ++r)
      std::memcpy(d + (bh * cap + slots[r]) * bytes, s + (bh * T + r) * bytes, static_cast<size_t>(bytes));
}

Tensor grow(const Tensor& t, int64_t cap) {
  if (!t.defined()) return t;
  auto n = torch::zeros({t.size(0), t.size(1), cap, t.size(3)}, t.options());
  n.narrow(2, 0, t.size(2)).copy_(t);
  return n;
}

}  // namespace

ResolventState::ResolventState(const Pattern& pattern, int64_t batch, int64_t heads, int64_t head_dim,
                               torch::ScalarType dtype, ResolventStateLayout layout)
    : pattern_(pattern), batch_(batch), heads_(heads), head_dim_(head_dim), dtype_(dtype), layout_(std::move(layout)) {
  const char* fn = "ResolventState";
  MIXLAB_CHECK(batch >= 1 && heads >= 1 && head_dim >= 1,
               "{}: batch, heads and head_dim must be >= 1, got B={}, H={}, D={}", fn, batch, heads, head_dim);
  MIXLAB_CHECK(dtype == torch::kFloat || dtype == torch::kDouble, "{}: dtype must be float32 or float64, got {}", fn,
               c10::toString(dtype));
  for (auto e : layout_.extra_dims) MIXLAB_CHECK(e >= 1, "{}: extra_dims must be >= 1, got {}", fn, e);
  if (pattern.cache_efficient()) {
    horizon_ = Horizon::kPattern;
  } else if (pattern.last_offset() > 0) {
    // A bounded window: band:W, order:K, offsets, ruler, a union of such.
    horizon_ = Horizon::kLast;
    last_ = pattern.last_offset();
  }
  capacity_ = horizon_ == Horizon::kLast ? last_ : 16;
  auto opts = torch::TensorOptions().dtype(dtype);
  if (layout_.store_x) x_ = torch::zeros({batch, heads, capacity_, head_dim}, opts);
  if (layout_.store_y) y_ = torch::zeros({batch, heads, capacity_, head_dim}, opts);
  for (auto e : layout_.extra_dims) extras_.push_back(torch::zeros({batch, heads, capacity_, e}, opts));
  for (int64_t s = capacity_ - 1; s >= 0; --s) free_slots_.push_back(s);
}

int64_t ResolventState::bytes() const {
  int64_t b = tensor_bytes(x_) + tensor_bytes(y_);
  for (const auto& e : extras_) b += tensor_bytes(e);
  return b;
}

std::vector<int64_t> ResolventState::held_positions() const {
  std::vector<int64_t> out;
  out.reserve(slot_of_.size());
  for (const auto& kv : slot_of_) out.push_back(kv.first);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int64_t> ResolventState::next_row() const {
  return next_row_at_ == position_ ? next_row_ : pattern_.row(position_);
}

int64_t ResolventState::slot_of(int64_t position) const {
  auto it = slot_of_.find(position);
  return it == slot_of_.end() ? -1 : it->second;
}

Tensor ResolventState::gather(const Tensor& slots, const std::vector<int64_t>& positions) const {
  std::vector<int64_t> idx;
  idx.reserve(positions.size());
  for (auto p : positions) {
    const int64_t s = slot_of(p);
    MIXLAB_ASSERT(s >= 0, "ResolventState::gather: position {} is not held at position {}", p, position_);
    idx.push_back(s);
  }
  return slots.index_select(2, torch::tensor(idx, torch::kLong));
}

void ResolventState::reserve(int64_t slots) {
  if (slots <= capacity_) return;
  x_ = grow(x_, slots);
  y_ = grow(y_, slots);
  for (auto& e : extras_) e = grow(e, slots);
  for (int64_t s = slots - 1; s >= capacity_; --s) free_slots_.push_back(s);
  capacity_ = slots;
}

int64_t ResolventState::take_slot() {
  if (free_slots_.empty()) {
    const int64_t cap = std::max<int64_t>(2 * capacity_, 1);
    x_ = grow(x_, cap);
    y_ = grow(y_, cap);
    for (auto& e : extras_) e = grow(e, cap);
    for (int64_t s = cap - 1; s >= capacity_; --s) free_slots_.push_back(s);
    capacity_ = cap;
  }
  const int64_t s = free_slots_.back();
  free_slots_.pop_back();
  return s;
}

void ResolventState::evict_after(int64_t next_row) {
  auto drop = [&](int64_t pos) {
    auto it = slot_of_.find(pos);
    if (it == slot_of_.end()) return;
    free_slots_.push_back(it->second);
    slot_of_.erase(it);
  };
  if (horizon_ == Horizon::kLast) {
    drop(next_row - last_ - 1);
  } else if (horizon_ == Horizon::kPattern) {
    // Cache-efficiency (S_i ⊆ S_{i-1} ∪ {i-1}): every later row reads a subset of
    // P(next_row) ∪ {next_row, ...}, so anything outside P(next_row) is dead. The row is kept
    // for next_row() (the decode step of next_row reads it); it is descending: binary search
    // (O(√n) positions for square+cache, so no quadratic scan).
    next_row_ = pattern_.row(next_row);
    next_row_at_ = next_row;
    const auto& keep = next_row_;
    std::vector<int64_t> dead;
    for (const auto& kv : slot_of_)
      if (!std::binary_search(keep.begin(), keep.end(), kv.first, std::greater<int64_t>())) dead.push_back(kv.first);
    for (auto p : dead) drop(p);
  }
}

void ResolventState::append(const Tensor& x, const Tensor& y, const std::vector<Tensor>& extras) {
  const char* fn = "ResolventState::append";
  // T comes from the first tensor given, stored or not: a layout that stores neither x nor y
  // (W_A = 1 and non-recurrent) still advances by the x or y its caller passes, or by advance(T).
  const char* ref_name = "x";
  const Tensor* ref = nullptr;
  if (layout_.store_x || (!layout_.store_y && x.defined())) {
    ref = &x;
  } else if (layout_.store_y || y.defined()) {
    ref = &y;
    ref_name = "y";
  }
  int64_t T = 0;
  if (ref && ref->defined()) {
    check_dim(fn, ref_name, *ref, 4, "(B,H,T,D)");
    T = ref->size(2);
  } else {
    MIXLAB_CHECK(!extras.empty() && extras[0].defined() && extras[0].dim() == 4,
                 "{}: x, y or an extra channel (B,H,T,E) must be given to know T (a state that stores nothing "
                 "advances by advance(T))",
                 fn);
    T = extras[0].size(2);
  }
  if (layout_.store_x) check_shape(fn, "x", x, {batch_, heads_, T, head_dim_}, "(B,H,T,D)");
  if (layout_.store_y) check_shape(fn, "y", y, {batch_, heads_, T, head_dim_}, "(B,H,T,D)");
  MIXLAB_CHECK(extras.size() == extras_.size(), "{}: expected {} extra channels, got {}", fn, extras_.size(),
               extras.size());
  for (size_t k = 0; k < extras.size(); ++k)
    check_shape(fn, "extras", extras[k], {batch_, heads_, T, layout_.extra_dims[k]}, "(B,H,T,E)");
  // Bookkeeping first (it may grow the slot tensors), then copy the rows in order.
  const auto slots = take_slots(T);
  if (layout_.store_x) copy_rows(x_, x.detach(), slots);
  if (layout_.store_y) copy_rows(y_, y.detach(), slots);
  for (size_t k = 0; k < extras.size(); ++k) copy_rows(extras_[k], extras[k].detach(), slots);
}

std::vector<int64_t> ResolventState::take_slots(int64_t T) {
  std::vector<int64_t> slots(static_cast<size_t>(T));
  for (int64_t r = 0; r < T; ++r) slots[r] = append_slot();
  return slots;
}

int64_t ResolventState::append_slot() {
  const int64_t s = take_slot();
  slot_of_[position_] = s;
  ++position_;
  evict_after(position_);
  return s;
}

void ResolventState::advance(int64_t T) {
  const char* fn = "ResolventState::advance";
  MIXLAB_CHECK(T >= 0, "{}: T must be >= 0, got {}", fn, T);
  MIXLAB_CHECK(!layout_.store_x && !layout_.store_y && extras_.empty(),
               "{}: the state stores{}{}{}; use append(x, y, extras)", fn, layout_.store_x ? " x" : "",
               layout_.store_y ? " y" : "", extras_.empty() ? "" : " extra channels");
  take_slots(T);
}

void ResolventState::io(StateArchive& ar) {
  const char* fn = "ResolventState::io";
  ar.scalar("position", position_);
  if (!ar.loading()) {
    const auto held = held_positions();
    Tensor h = torch::tensor(held, torch::kLong);
    ar.tensor("held", h);
    Tensor x = layout_.store_x ? gather(x_, held) : Tensor(), y = layout_.store_y ? gather(y_, held) : Tensor();
    ar.tensor("x", x);
    ar.tensor("y", y);
    for (size_t k = 0; k < extras_.size(); ++k) {
      Tensor e = gather(extras_[k], held);
      ar.tensor("extra" + std::to_string(k), e);
    }
    return;
  }
  MIXLAB_CHECK(slot_of_.empty(), "{}: reading needs a fresh state, this one holds {} positions", fn, slot_of_.size());
  Tensor held;
  ar.tensor("held", held);
  MIXLAB_CHECK(held.defined() && held.dim() == 1 && held.scalar_type() == torch::kLong,
               "{}: 'held' must be a 1-D int64 tensor", fn);
  const int64_t n = held.numel();
  const auto* hp = held.data_ptr<int64_t>();
  for (int64_t r = 0; r < n; ++r)
    MIXLAB_CHECK(hp[r] >= 0 && hp[r] < position_ && (r == 0 || hp[r] > hp[r - 1]),
                 "{}: held positions must be ascending and below position {}, got {} at {}", fn, position_, hp[r], r);
  reserve(n);
  std::vector<int64_t> slots;
  for (int64_t r = 0; r < n; ++r) {
    const int64_t s = take_slot();
    slot_of_[hp[r]] = s;
    slots.push_back(s);
  }
  auto read_rows = [&](const std::string& key, bool stored, Tensor& dst, int64_t E) {
    Tensor t;
    ar.tensor(key, t);
    if (!stored) {
      MIXLAB_CHECK(!t.defined(), "{}: '{}' is stored but this state's layout has none", fn, key);
      return;
    }
    MIXLAB_CHECK(t.defined(), "{}: '{}' is missing", fn, key);
    check_shape(fn, key.c_str(), t, {batch_, heads_, n, E}, "(B,H,N,E)");
    MIXLAB_CHECK(t.scalar_type() == dtype_, "{}: '{}' has dtype {}, expected {}", fn, key,
                 c10::toString(t.scalar_type()), c10::toString(dtype_));
    copy_rows(dst, t, slots);
  };
  read_rows("x", layout_.store_x, x_, head_dim_);
  read_rows("y", layout_.store_y, y_, head_dim_);
  for (size_t k = 0; k < extras_.size(); ++k)
    read_rows("extra" + std::to_string(k), true, extras_[k], layout_.extra_dims[k]);
}

void ResolventState::save(std::ostream& out) const {
  auto ar = StateArchive::writer();
  int64_t heads = heads_, head_dim = head_dim_, dtype = static_cast<int64_t>(dtype_);
  bool sx = layout_.store_x, sy = layout_.store_y;
  Tensor extra_dims = torch::tensor(layout_.extra_dims, torch::kLong);
  ar.scalar("heads", heads);
  ar.scalar("head_dim", head_dim);
  ar.scalar("dtype", dtype);
  ar.flag("store_x", sx);
  ar.flag("store_y", sy);
  ar.tensor("extra_dims", extra_dims);
  const_cast<ResolventState*>(this)->io(ar);  // a writing archive only reads the fields
  StateRecord r;
  r.spec = std::string(kOpStateSpec) + pattern_.spec();
  r.batch = batch_;
  r.position = position_;
  r.entries = std::move(ar.entries());
  state_write(out, r);
}

std::unique_ptr<ResolventState> ResolventState::load(std::istream& in) {
  const char* fn = "ResolventState::load";
  StateRecord r = state_read(in, fn);
  MIXLAB_CHECK(r.spec.rfind(kOpStateSpec, 0) == 0, "{}: the stream holds a state of '{}', not of the resolvent op", fn,
               r.spec);
  auto pattern = Pattern::parse(r.spec.substr(std::string(kOpStateSpec).size()));
  auto ar = StateArchive::reader(std::move(r.entries), fn);
  int64_t heads = 0, head_dim = 0, dtype = 0;
  ResolventStateLayout layout;
  Tensor extra_dims;
  ar.scalar("heads", heads);
  ar.scalar("head_dim", head_dim);
  ar.scalar("dtype", dtype);
  ar.flag("store_x", layout.store_x);
  ar.flag("store_y", layout.store_y);
  ar.tensor("extra_dims", extra_dims);
  MIXLAB_CHECK(extra_dims.defined() && extra_dims.dim() == 1 && extra_dims.scalar_type() == torch::kLong &&
                   extra_dims.numel() <= 16,
               "{}: 'extra_dims' must be a short 1-D int64 tensor", fn);
  for (int64_t k = 0; k < extra_dims.numel(); ++k) layout.extra_dims.push_back(extra_dims[k].item<int64_t>());
  MIXLAB_CHECK(dtype == static_cast<int64_t>(torch::kFloat) || dtype == static_cast<int64_t>(torch::kDouble),
               "{}: dtype code {} is not float32 or float64", fn, dtype);
  auto st = std::make_unique<ResolventState>(pattern, r.batch, heads, head_dim, static_cast<torch::ScalarType>(dtype),
                                             layout);
  st->io(ar);
  ar.finish();
  MIXLAB_CHECK(st->position() == r.position, "{}: header position {} differs from the stored one {}", fn, r.position,
               st->position());
  return st;
}

}  // namespace mixlab
