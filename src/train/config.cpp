// Training config: JSON <-> TrainConfig with strict key and value checks.
#include "mixlab/train/config.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "mixlab/core/atomic_file.h"
#include "mixlab/core/error.h"
#include "mixlab/core/shown_text.h"
#include "mixlab/data/lm_tokenizer.h"
#include "mixlab/registry/layer_specs.h"
#include "mixlab/train/task_file.h"
#include "mixlab/train/task_s5.h"

namespace mixlab {
namespace {

using json = nlohmann::json;

// Integer keys are at most 2^40: larger values are typos or attacks, and products of a few keys
// (batch x length x d_model) must not overflow int64 before config_memory_bytes refuses them.
constexpr int64_t kConfigMaxInt = int64_t{1} << 40;

// Key readers: each checks the JSON type, then the range, and names key + origin on failure.
int64_t read_int(const json& j, const char* key, int64_t fallback, int64_t lo, const std::string& origin,
                 int64_t hi = kConfigMaxInt) {
  if (!j.contains(key)) return fallback;
  const json& v = j.at(key);
  MIXLAB_CHECK(v.is_number_integer(), "config {}: key '{}' must be an integer, got {}", origin, key, v.dump());
  // An unsigned value above INT64_MAX would wrap in get<int64_t>(): out of range, not negative.
  const bool too_big = v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi);
  const int64_t x = too_big ? hi : v.get<int64_t>();
  MIXLAB_CHECK(x >= lo, "config {}: key '{}' must be >= {}, got {}", origin, key, lo, v.dump());
  MIXLAB_CHECK(!too_big && x <= hi, "config {}: key '{}' must be <= {} (out of range), got {}", origin, key, hi,
               v.dump());
  return x;
}
uint64_t read_uint64(const json& j, const char* key, uint64_t fallback, const std::string& origin) {
  if (!j.contains(key)) return fallback;
  const json& v = j.at(key);
  MIXLAB_CHECK(v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0),
               "config {}: key '{}' must be an integer in [0, 18446744073709551615], got {}", origin, key, v.dump());
  return v.get<uint64_t>();
}
double read_double(const json& j, const char* key, double fallback, const std::string& origin) {
  if (!j.contains(key)) return fallback;
  const json& v = j.at(key);
  MIXLAB_CHECK(v.is_number(), "config {}: key '{}' must be a number, got {}", origin, key, v.dump());
  const double x = v.get<double>();
  MIXLAB_CHECK(std::isfinite(x), "config {}: key '{}' must be finite, got {}", origin, key, v.dump());
  return x;
}
std::string read_string(const json& j, const char* key, const std::string& fallback, const std::string& origin) {
  if (!j.contains(key)) return fallback;
  const json& v = j.at(key);
  MIXLAB_CHECK(v.is_string(), "config {}: key '{}' must be a string, got {}", origin, key, v.dump());
  return v.get<std::string>();
}
bool read_bool(const json& j, const char* key, bool fallback, const std::string& origin) {
  if (!j.contains(key)) return fallback;
  const json& v = j.at(key);
  MIXLAB_CHECK(v.is_boolean(), "config {}: key '{}' must be true or false, got {}", origin, key, v.dump());
  return v.get<bool>();
}

const std::set<std::string>& known_keys() {
  static const std::set<std::string> keys = {
      "task",         "vocab",       "length",      "pairs",      "hop_prob",
      "curriculum",   "d_model",     "layers",      "heads",      "mlp_ratio",
      "mixer",        "steps",       "batch",       "lr",         "warmup",
      "weight_decay", "beta1",       "beta2",       "grad_clip",  "seed",
      "eval_batches", "eval_batch",  "eval_every",  "log_every",  "checkpoint_every",
      "tokenizer",    "eval_tokens", "eval_stride", "max_len",    "curriculum_phases",
      "elements",     "corpus",      "tokens",      "schedule",   "decay_frac",
      "stop_at",      "data",        "eval_data",   "noise_frac", "noise_vocab",
      "key_len",      "value_len",   "copy_tokens", "map_seed",   "min_length",
      "row_groups"};
  return keys;
}

// Keys of one task only (the MAD suite and selective copying, tasks.h): another task rejects them.
const std::map<std::string, std::string>& task_only_keys() {
  static const std::map<std::string, std::string> keys = {
      {"noise_frac", "mad_noisy_recall"}, {"noise_vocab", "mad_noisy_recall"}, {"key_len", "mad_fuzzy_recall"},
      {"value_len", "mad_fuzzy_recall"},  {"copy_tokens", "selective_copy"},   {"map_seed", "mad_memorization"}};
  return keys;
}

// Keys that only change logging / evaluation cadence: they may differ on --resume.
const std::set<std::string>& cadence_keys() {
  // stop_at only decides where a run ends, never what a step computes. row_groups changes only
  // how a step's gradient is summed (its rounding, row_groups.h); its automatic value follows
  // the thread count, which a resume on another machine may change too.
  static const std::set<std::string> keys = {"eval_batches", "eval_batch",       "eval_every",
                                             "log_every",    "checkpoint_every", "eval_tokens",
                                             "eval_stride",  "stop_at",          "row_groups"};
  return keys;
}

}  // namespace

bool config_key_applies(const std::string& key, const std::string& task) {
  const auto it = task_only_keys().find(key);
  return it == task_only_keys().end() || it->second == task;
}

int64_t config_default_vocab(const std::string& task) {
  // The MAD suite and the classics at their papers' vocabularies (task_mad.h maps MAD's sizes).
  static const std::map<std::string, int64_t> vocab = {
      {"mad_recall", 20},      {"mad_noisy_recall", 36},  {"mad_fuzzy_recall", 19}, {"selective_copy", 18},
      {"mad_compression", 19}, {"mad_memorization", 259}, {"induction", 20}};
  const auto it = vocab.find(task);
  return it == vocab.end() ? 64 : it->second;
}

int64_t config_default_length(const std::string& task) {
  // MAD suite and classics: scaled to this CPU where the paper's is larger (tasks.h lists both).
  static const std::map<std::string, int64_t> mad = {
      {"mad_recall", 32},      {"mad_noisy_recall", 32}, {"mad_fuzzy_recall", 64}, {"selective_copy", 64},
      {"mad_compression", 32}, {"mad_memorization", 32}, {"induction", 64}};
  if (const auto it = mad.find(task); it != mad.end()) return it->second;
  if (task == "lm") return 128;
  if (task == "s5") return 18;  // seed 004 §4.1 trains S5 on lengths up to 18
  return task == "copy" || task == "textcopy" ? 16 : 64;
}
int64_t config_default_pairs(const std::string& task) {
  return task == "recall" || task == "multihop" || task == "s5" || task == "lm" || task == "file" ? 8 : 0;
}

void config_validate(const TrainConfig& c, const std::string& origin) {
  try {
    task_validate(c.task);
  } catch (const Error& e) {
    throw Error(fmt::format("config {}: {}", origin, e.what()));
  }
  MIXLAB_CHECK(c.d_model >= 1, "config {}: key 'd_model' must be >= 1, got {}", origin, c.d_model);
  MIXLAB_CHECK(c.heads >= 1 && c.d_model % c.heads == 0, "config {}: key 'heads' must divide d_model ({}), got {}",
               origin, c.d_model, c.heads);
  MIXLAB_CHECK(c.layers >= 1, "config {}: key 'layers' must be >= 1, got {}", origin, c.layers);
  MIXLAB_CHECK(c.mlp_ratio >= 1, "config {}: key 'mlp_ratio' must be >= 1, got {}", origin, c.mlp_ratio);
  MIXLAB_CHECK(!c.mixer.empty(), "config {}: key 'mixer' must not be empty", origin);
  try {
    // The per-layer list's grammar and its fit to `layers` (a pure string check; the members are
    // checked where a model is built, check_mixer_layer_specs).
    (void)mixer_layer_list(c.mixer, c.layers);
  } catch (const Error& e) {
    throw Error(fmt::format("config {}: key 'mixer': {}", origin, e.what()));
  }
  MIXLAB_CHECK(c.steps >= 1, "config {}: key 'steps' must be >= 1, got {}", origin, c.steps);
  MIXLAB_CHECK(c.batch >= 1, "config {}: key 'batch' must be >= 1, got {}", origin, c.batch);
  // Bounded above so that every value reaches the optimiser's float arithmetic without overflow
  // (1e300 used to fail there with a message that named no key); a huge rate that only makes the
  // loss diverge (1e6) stays allowed, and the trainer stops it naming the key.
  MIXLAB_CHECK(c.lr > 0 && c.lr <= 1e30, "config {}: key 'lr' must be in (0, 1e30], got {}", origin, c.lr);
  MIXLAB_CHECK(c.warmup >= 0 && c.warmup <= c.steps, "config {}: key 'warmup' must be in [0, steps={}], got {}", origin,
               c.steps, c.warmup);
  MIXLAB_CHECK(c.schedule == "cosine" || c.schedule == "wsd" || c.schedule == "constant",
               "config {}: key 'schedule' must be cosine, wsd or constant, got '{}'", origin, c.schedule);
  MIXLAB_CHECK(c.decay_frac > 0 && c.decay_frac <= 1, "config {}: key 'decay_frac' must be in (0, 1], got {}", origin,
               c.decay_frac);
  MIXLAB_CHECK(c.stop_at >= 0 && c.stop_at <= 1,
               "config {}: key 'stop_at' must be in (0, 1] (a held-out accuracy), or 0 for off, got {}", origin,
               c.stop_at);
  MIXLAB_CHECK(c.stop_at == 0 || c.eval_every > 0,
               "config {}: key 'stop_at' needs 'eval_every' > 0 (the evaluations it is checked at)", origin);
  MIXLAB_CHECK(c.weight_decay >= 0 && c.weight_decay <= 1e30,
               "config {}: key 'weight_decay' must be in [0, 1e30], got {}", origin, c.weight_decay);
  MIXLAB_CHECK(c.beta1 >= 0 && c.beta1 < 1, "config {}: key 'beta1' must be in [0, 1), got {}", origin, c.beta1);
  MIXLAB_CHECK(c.beta2 >= 0 && c.beta2 < 1, "config {}: key 'beta2' must be in [0, 1), got {}", origin, c.beta2);
  MIXLAB_CHECK(c.grad_clip > 0 && c.grad_clip <= 1e30, "config {}: key 'grad_clip' must be in (0, 1e30], got {}",
               origin, c.grad_clip);
  MIXLAB_CHECK(c.row_groups >= 0 && c.row_groups <= kMaxRowGroups,
               "config {}: key 'row_groups' must be in [1, {}] (groups of a batch's rows, each run on a thread), "
               "or 0 for one per intra-op thread, got {}",
               origin, kMaxRowGroups, c.row_groups);
  MIXLAB_CHECK(c.row_groups <= c.batch,
               "config {}: key 'row_groups' = {} needs at least one row per group, but key 'batch' = {}", origin,
               c.row_groups, c.batch);
  MIXLAB_CHECK(c.eval_batches >= 1, "config {}: key 'eval_batches' must be >= 1, got {}", origin, c.eval_batches);
  MIXLAB_CHECK(c.eval_batch >= 1, "config {}: key 'eval_batch' must be >= 1, got {}", origin, c.eval_batch);
  MIXLAB_CHECK(c.log_every >= 1, "config {}: key 'log_every' must be >= 1, got {}", origin, c.log_every);
  MIXLAB_CHECK(c.task.name == "lm" || c.task.tokenizer == "bytes",
               "config {}: key 'tokenizer' applies to task lm only (task {}), got '{}'", origin, c.task.name,
               c.task.tokenizer);
  MIXLAB_CHECK(c.task.name == "file" || (c.task.data.empty() && c.task.eval_data.empty()),
               "config {}: keys 'data' and 'eval_data' apply to task file only (task {}), got '{}'", origin,
               c.task.name, c.task.data.empty() ? c.task.eval_data : c.task.data);
  MIXLAB_CHECK(c.eval_tokens >= 0, "config {}: key 'eval_tokens' must be >= 0, got {}", origin, c.eval_tokens);
  MIXLAB_CHECK(c.eval_stride >= 0 && (c.task.name != "lm" || c.eval_stride <= c.task.length),
               "config {}: key 'eval_stride' must be in [0, length = {}] (0 = length / 2), got {}", origin,
               c.task.length, c.eval_stride);
  const int64_t trained = task_sequence_length(c.task, c.task.length);
  MIXLAB_CHECK(c.max_len == 0 || (c.max_len >= trained && c.max_len <= kConfigMaxLen),
               "config {}: key 'max_len' must be 0 (the task's longest sequence, {}) or in [{}, {}], got {}", origin,
               trained, trained, kConfigMaxLen, c.max_len);
}

TrainConfig config_from_json(const json& j, const std::string& origin) {
  MIXLAB_CHECK(j.is_object(), "config {}: expected a JSON object, got {}", origin, j.type_name());
  for (const auto& item : j.items()) {
    // Keys and text values are printable (names, specs, paths): refusing control bytes first keeps
    // every message below, which quotes them, on one line.
    const size_t key_control = control_byte_offset(item.key());
    MIXLAB_CHECK(key_control == std::string::npos,
                 "config {}: key '{}' has a control character at offset {}; expected printable text", origin,
                 shown_text(item.key()), key_control);
    if (item.value().is_string()) {
      const auto& text = item.value().get_ref<const std::string&>();
      const size_t control = control_byte_offset(text);
      MIXLAB_CHECK(control == std::string::npos,
                   "config {}: key '{}' has a control character at offset {} of its value '{}'; expected printable "
                   "text",
                   origin, item.key(), control, shown_text(text));
    }
    MIXLAB_CHECK(known_keys().count(item.key()), "config {}: unknown key '{}' (known: {})", origin, item.key(),
                 fmt::join(known_keys(), ", "));
  }
  const std::string task_name = j.contains("task") && j.at("task").is_string() ? j.at("task").get<std::string>() : "";
  for (const auto& [key, task] : task_only_keys())
    MIXLAB_CHECK(!j.contains(key) || task_name == task, "config {}: key '{}' applies to task {} only (task {})", origin,
                 key, task, task_name.empty() ? "copy" : task_name);
  TrainConfig c;
  c.task.name = read_string(j, "task", c.task.name, origin);
  const auto& names = task_names();
  MIXLAB_CHECK(std::find(names.begin(), names.end(), c.task.name) != names.end(),
               "config {}: key 'task' must be one of {}, got '{}'", origin, fmt::join(names, ", "), c.task.name);
  if (c.task.name == "textcopy") c.task.vocab = std::max<int64_t>(c.task.vocab, 256);  // byte tokens
  // lm's data: paths are stored absolute, so eval and generate find them from any folder.
  for (auto [key, field] : {std::pair{"corpus", &c.task.corpus}, std::pair{"tokens", &c.task.tokens}}) {
    *field = read_string(j, key, "", origin);
    MIXLAB_CHECK(field->empty() || c.task.name == "lm", "config {}: key '{}' applies to task lm only (task {})", origin,
                 key, c.task.name);
    if (!field->empty()) *field = std::filesystem::absolute(*field).lexically_normal().string();
  }
  // Token files are GPT-2 ids unless the config says otherwise (nanoGPT's prepare.py).
  c.task.tokenizer = read_string(j, "tokenizer", c.task.tokens.empty() ? c.task.tokenizer : "gpt2", origin);
  MIXLAB_CHECK(c.task.tokenizer != "ids" || j.contains("vocab"),
               "config {}: tokenizer 'ids' needs key 'vocab' (the number of distinct token ids the files use)", origin);
  if (c.task.name == "lm") {
    // The vocabulary follows the tokenizer; a different explicit vocab is rejected by lm_validate.
    try {
      c.task.vocab = lm_tokenizer_vocab(lm_tokenizer_parse(c.task.tokenizer, "key 'tokenizer'"));
    } catch (const Error& e) {
      throw Error(fmt::format("config {}: {}", origin, e.what()));
    }
  }
  // s5's vocabulary follows its group (4 specials + n! permutations), so `mixlab train --task s5`
  // trains with its defaults; elements is read first for that.
  c.task.elements = read_int(j, "elements", c.task.elements, 1, origin);
  if (c.task.name == "s5" && c.task.elements >= 2 && c.task.elements <= 5) c.task.vocab = s5_min_vocab(c.task);
  // task file: the data sets length and (unless given) vocab, which may then be below 8.
  const bool file = c.task.name == "file";
  // The MAD suite's vocabularies may be below 8 (task_validate states each task's minimum).
  const int64_t vocab_min = file || config_default_vocab(c.task.name) != 64 ? 1 : 8;
  if (config_default_vocab(c.task.name) != 64) c.task.vocab = config_default_vocab(c.task.name);
  c.task.vocab = read_int(j, "vocab", c.task.vocab, vocab_min, origin);
  c.task.length = read_int(j, "length", 0, 0, origin);
  c.task.data = read_string(j, "data", "", origin);
  c.task.eval_data = read_string(j, "eval_data", "", origin);
  if (file) file_task_configure(c.task, c.task.length != 0, j.contains("vocab"), origin);
  if (c.task.length == 0) c.task.length = config_default_length(c.task.name);
  c.task.pairs = read_int(j, "pairs", 0, 0, origin);
  if (c.task.pairs == 0) c.task.pairs = config_default_pairs(c.task.name);
  c.task.hop_prob = read_double(j, "hop_prob", c.task.hop_prob, origin);
  c.task.noise_frac = read_double(j, "noise_frac", c.task.noise_frac, origin);
  c.task.noise_vocab = read_int(j, "noise_vocab", c.task.noise_vocab, 1, origin);
  c.task.key_len = read_int(j, "key_len", c.task.key_len, 1, origin);
  c.task.value_len = read_int(j, "value_len", c.task.value_len, 1, origin);
  c.task.copy_tokens = read_int(j, "copy_tokens", c.task.copy_tokens, 1, origin);
  c.task.map_seed = read_uint64(j, "map_seed", c.task.map_seed, origin);
  c.task.curriculum = read_bool(j, "curriculum", c.task.curriculum, origin);
  c.task.min_length = read_int(j, "min_length", c.task.min_length, 0, origin);
  c.task.curriculum_phases =
      read_int(j, "curriculum_phases", c.task.curriculum_phases, 1, origin, kMaxCurriculumPhases);
  c.d_model = read_int(j, "d_model", c.d_model, 1, origin);
  c.layers = read_int(j, "layers", c.layers, 1, origin);
  c.heads = read_int(j, "heads", c.heads, 1, origin);
  c.mlp_ratio = read_int(j, "mlp_ratio", c.mlp_ratio, 1, origin);
  c.mixer = read_string(j, "mixer", c.mixer, origin);
  c.steps = read_int(j, "steps", c.steps, 1, origin);
  c.batch = read_int(j, "batch", c.batch, 1, origin);
  c.lr = read_double(j, "lr", c.lr, origin);
  c.warmup = read_int(j, "warmup", std::min(c.warmup, c.steps), 0, origin);
  c.schedule = read_string(j, "schedule", c.schedule, origin);
  c.decay_frac = read_double(j, "decay_frac", c.decay_frac, origin);
  c.stop_at = read_double(j, "stop_at", c.stop_at, origin);
  c.weight_decay = read_double(j, "weight_decay", c.weight_decay, origin);
  c.beta1 = read_double(j, "beta1", c.beta1, origin);
  c.beta2 = read_double(j, "beta2", c.beta2, origin);
  c.grad_clip = read_double(j, "grad_clip", c.grad_clip, origin);
  c.row_groups = read_int(j, "row_groups", c.row_groups, 0, origin);
  c.seed = read_uint64(j, "seed", 0, origin);
  c.eval_batches = read_int(j, "eval_batches", c.eval_batches, 1, origin);
  c.eval_batch = read_int(j, "eval_batch", 0, 0, origin);
  if (c.eval_batch == 0) c.eval_batch = c.batch;
  c.eval_every = read_int(j, "eval_every", c.eval_every, 0, origin);
  c.log_every = read_int(j, "log_every", c.log_every, 1, origin);
  c.checkpoint_every = read_int(j, "checkpoint_every", c.checkpoint_every, 0, origin);
  c.eval_tokens = read_int(j, "eval_tokens", c.eval_tokens, 0, origin);
  c.eval_stride = read_int(j, "eval_stride", c.eval_stride, 0, origin);
  c.max_len = read_int(j, "max_len", c.max_len, 0, origin);
  config_validate(c, origin);
  return c;
}

TrainConfig config_load(const std::string& path) {
  const std::string text = file_read(path, kConfigMaxBytes, "config");
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number beyond double
    throw Error(fmt::format("config {}: malformed JSON: {}", path, e.what()));
  }
  return config_from_json(j, path);
}

double config_memory_bytes(const TrainConfig& c) {
  // Rough, deliberately low: it must refuse absurd configs (batch=1e9, vocab=1e12) before
  // LibTorch allocates, never a config that fits. All in double so no product overflows.
  const double V = static_cast<double>(c.task.vocab), C = static_cast<double>(c.d_model);
  const double L = static_cast<double>(c.layers), R = static_cast<double>(c.mlp_ratio);
  const double T = static_cast<double>(task_sequence_length(c.task, c.task.length));
  const double B = static_cast<double>(std::max(c.batch, c.eval_batch));
  const double H = static_cast<double>(c.heads);
  // The embedding is tied to the output head (model.h): V x C parameters once, not twice; with
  // gpt2 (V = 50257) it dominates a small model, and so do the (B,T,V) logits below.
  const double params = V * C + L * (4 + 2 * R) * C * C;
  // Parameters, gradients and two Adam moments, float32.
  const double state = 4 * params * 4;
  // Activations kept for backward: per layer a few (B,T,C) and (B,T,R*C) tensors; logits (B,T,V).
  double acts = B * T * (L * (6 + 2 * R) * C + 3 * V) * 4;
  // Full attention materialises (B,H,T,T) scores per layer (per attention layer of a hybrid).
  // The list is not expanded: an absurd `layers` must cost nothing here.
  const auto items = mixer_layer_list(c.mixer, c.layers);
  double unit = 0, attention = 0;
  for (const auto& item : items) {
    unit += static_cast<double>(item.count);
    if (item.spec == "attention") attention += static_cast<double>(item.count);
  }
  acts += L * (attention / unit) * B * H * T * T * 4;
  return state + acts;
}

void config_check_memory(const TrainConfig& c, double limit_bytes, const std::string& origin,
                         const std::string& limit_name) {
  const double need = config_memory_bytes(c);
  MIXLAB_CHECK(need <= limit_bytes,
               "config {}: needs about {:.3g} GB of memory (batch {}, length {}, d_model {}, layers {}, vocab {}), "
               "more than {} ({:.3g} GB); reduce these keys{}",
               origin, need / 1e9, c.batch, c.task.length, c.d_model, c.layers, c.task.vocab, limit_name,
               limit_bytes / 1e9, limit_name == "--max-memory" ? "" : " or raise --max-memory");
}

double machine_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 1e18;
}

json config_to_json(const TrainConfig& c) {
  json j;
  j["task"] = c.task.name;
  j["vocab"] = c.task.vocab;
  j["length"] = c.task.length;
  j["pairs"] = c.task.pairs;
  j["hop_prob"] = c.task.hop_prob;
  j["curriculum"] = c.task.curriculum;
  j["curriculum_phases"] = c.task.curriculum_phases;
  j["elements"] = c.task.elements;
  j["d_model"] = c.d_model;
  j["layers"] = c.layers;
  j["heads"] = c.heads;
  j["mlp_ratio"] = c.mlp_ratio;
  j["mixer"] = c.mixer;
  j["steps"] = c.steps;
  j["batch"] = c.batch;
  j["lr"] = c.lr;
  j["warmup"] = c.warmup;
  j["schedule"] = c.schedule;
  j["decay_frac"] = c.decay_frac;
  j["stop_at"] = c.stop_at;
  j["weight_decay"] = c.weight_decay;
  j["beta1"] = c.beta1;
  j["beta2"] = c.beta2;
  j["grad_clip"] = c.grad_clip;
  if (c.row_groups != 0) j["row_groups"] = c.row_groups;  // only when set: other configs read as before
  j["seed"] = c.seed;                                     // uint64: a seed of 2^64-1 round-trips
  j["eval_batches"] = c.eval_batches;
  j["eval_batch"] = c.eval_batch;
  j["eval_every"] = c.eval_every;
  j["log_every"] = c.log_every;
  j["checkpoint_every"] = c.checkpoint_every;
  j["tokenizer"] = c.task.tokenizer;
  // Written only when set, so the config of a Brown run reads as before.
  if (!c.task.corpus.empty()) j["corpus"] = c.task.corpus;
  if (!c.task.tokens.empty()) j["tokens"] = c.task.tokens;
  j["eval_tokens"] = c.eval_tokens;
  j["eval_stride"] = c.eval_stride;
  j["max_len"] = c.max_len;
  // Written only when set, so the config of another task reads as before.
  if (!c.task.data.empty()) j["data"] = c.task.data;
  if (!c.task.eval_data.empty()) j["eval_data"] = c.task.eval_data;
  if (c.task.min_length != 0) j["min_length"] = c.task.min_length;
  // Task-only keys are written for their task only, so other configs read as before.
  const std::string& t = c.task.name;
  if (t == "mad_noisy_recall") j["noise_frac"] = c.task.noise_frac, j["noise_vocab"] = c.task.noise_vocab;
  if (t == "mad_fuzzy_recall") j["key_len"] = c.task.key_len, j["value_len"] = c.task.value_len;
  if (t == "selective_copy") j["copy_tokens"] = c.task.copy_tokens;
  if (t == "mad_memorization") j["map_seed"] = c.task.map_seed;
  return j;
}

namespace {

// The first key (in name order) for which `compared` holds and the two configs differ, as a
// message; "" when they agree on every compared key.
template <typename Compared>
std::string first_difference(const TrainConfig& checkpoint, const TrainConfig& current, Compared compared) {
  json a = config_to_json(checkpoint), b = config_to_json(current);
  // A key written only when set (corpus, tokens, data, eval_data) may be in one of the two:
  // compare it as "".
  for (const auto& item : b.items())
    if (!a.contains(item.key())) a[item.key()] = "";
  for (const auto& item : a.items()) {
    const json other = b.contains(item.key()) ? b.at(item.key()) : json("");
    if (!compared(item.key()) || item.value() == other) continue;
    return fmt::format("key '{}' is {} in the checkpoint but {} in the current config", item.key(), item.value().dump(),
                       other.dump());
  }
  return "";
}

}  // namespace

std::string config_resume_mismatch(const TrainConfig& checkpoint, const TrainConfig& current) {
  return first_difference(checkpoint, current, [](const std::string& key) { return !cadence_keys().count(key); });
}

std::string config_weights_mismatch(const TrainConfig& source, const TrainConfig& current) {
  static const std::set<std::string> weight_keys = {"mixer", "d_model", "layers", "heads", "mlp_ratio", "vocab"};
  return first_difference(source, current, [](const std::string& key) { return weight_keys.count(key) > 0; });
}

int64_t config_max_len(const TrainConfig& c) {
  return c.max_len > 0 ? c.max_len : task_sequence_length(c.task, c.task.length);
}

int64_t config_eval_stride(const TrainConfig& c) {
  return c.eval_stride > 0 ? c.eval_stride : std::max<int64_t>(1, c.task.length / 2);
}

double config_lr_at(const TrainConfig& c, int64_t step) {
  if (c.warmup > 0 && step < c.warmup) return c.lr * static_cast<double>(step + 1) / static_cast<double>(c.warmup);
  if (c.schedule == "constant") return c.lr;
  if (c.schedule == "wsd") {
    // The decay covers the last decay_frac of all steps (at least one step): lr at its first
    // step, falling linearly to 0 at `steps`. A decay longer than the steps after warmup starts
    // right after it.
    const double decay_steps = std::max(1.0, std::round(c.decay_frac * static_cast<double>(c.steps)));
    const double start = std::max(static_cast<double>(c.warmup), static_cast<double>(c.steps) - decay_steps);
    if (static_cast<double>(step) < start) return c.lr;
    const double span = std::max(1.0, static_cast<double>(c.steps) - start);
    return c.lr * std::max(0.0, 1.0 - (static_cast<double>(step) - start) / span);
  }
  const int64_t span = std::max<int64_t>(1, c.steps - c.warmup);
  const double progress = std::min(1.0, static_cast<double>(step - c.warmup) / static_cast<double>(span));
  return c.lr * 0.5 * (1.0 + std::cos(M_PI * progress));
}

void config_check_row_groups_for_processes(const TrainConfig& config, int64_t processes) {
  MIXLAB_CHECK(processes <= 1 || config.row_groups <= 1,
               "key 'row_groups' = {} cannot be combined with data parallel ({} processes): each process trains its "
               "rows on its own threads; leave it at 0 or 1",
               config.row_groups, processes);
}

}  // namespace mixlab
