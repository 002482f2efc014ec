// One finished compare run on disk (mixlab/train/compare_run_record.h).
#include "mixlab/train/compare_run_record.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <limits>
#include <nlohmann/json.hpp>
#include <string_view>
#include <type_traits>
#include <vector>

#include "mixlab/core/atomic_file.h"
#include "mixlab/core/checksum.h"
#include "mixlab/core/error.h"
#include "mixlab/core/shown_text.h"

namespace mixlab {
namespace {

using json = nlohmann::json;

constexpr const char* kFormat = "mixlab compare run";
constexpr int64_t kVersion = 1;
// A record is a few kB (hop accuracies are short vectors); anything far larger is not one.
constexpr int64_t kMaxRecordBytes = int64_t{16} << 20;

json eval_to_json(const EvalResult& e) {
  return {{"loss", e.loss},
          {"token_acc", e.token_acc},
          {"answer_acc", e.answer_acc},
          {"answer_tokens", e.answer_tokens},
          {"answers", e.answers},
          {"chain_acc", e.chain_acc},
          {"chain_queries", e.chain_queries},
          {"hop_acc", e.hop_acc},
          {"hop_queries", e.hop_queries},
          {"bits_per_byte", e.bits_per_byte},
          {"scored_bytes", e.scored_bytes}};
}

// Reads `key` of `j` as T, or fails naming the record's path and the key. Strict: an integer
// field takes only a JSON integer in int64_t's range, a number field any finite number (JSON has
// no NaN), so no value is converted on the way in.
template <typename T>
bool has_type(const json& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v.is_boolean();
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX});
  } else if constexpr (std::is_same_v<T, double>) {
    return v.is_number() || v.is_null();  // nlohmann writes a NaN or an infinity as null
  } else if constexpr (std::is_same_v<T, std::string>) {
    return v.is_string();
  } else {  // std::vector<E>
    return v.is_array() &&
           std::all_of(v.begin(), v.end(), [](const json& e) { return has_type<typename T::value_type>(e); });
  }
}

template <typename T>
T field(const json& j, const char* key, const std::string& where) {
  MIXLAB_CHECK(j.is_object() && j.contains(key), "{}: field '{}' is missing", where, key);
  const json& v = j.at(key);
  MIXLAB_CHECK(has_type<T>(v), "{}: field '{}' has the wrong type: {}", where, key, shown_text(v.dump()));
  if constexpr (std::is_same_v<T, double>) {
    if (v.is_null()) return std::numeric_limits<double>::quiet_NaN();
  }
  return v.get<T>();
}

// The deepest nesting of arrays and objects in JSON text (strings skipped). A record nests 4
// deep; the check comes before parsing, since dumping a deeply nested value (the checksum
// does) recurses once per level.
int64_t json_depth(std::string_view text) {
  int64_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}
constexpr int64_t kMaxDepth = 16;

EvalResult eval_from_json(const json& record, const char* key, const std::string& path) {
  MIXLAB_CHECK(record.contains(key) && record.at(key).is_object(), "{}: field '{}' is missing or not an object", path,
               key);
  const json& j = record.at(key);
  const std::string where = path + " " + key;
  EvalResult e;
  e.loss = field<double>(j, "loss", where);
  e.token_acc = field<double>(j, "token_acc", where);
  e.answer_acc = field<double>(j, "answer_acc", where);
  e.answer_tokens = field<int64_t>(j, "answer_tokens", where);
  e.answers = field<int64_t>(j, "answers", where);
  e.chain_acc = field<double>(j, "chain_acc", where);
  e.chain_queries = field<int64_t>(j, "chain_queries", where);
  e.hop_acc = field<std::vector<double>>(j, "hop_acc", where);
  e.hop_queries = field<std::vector<int64_t>>(j, "hop_queries", where);
  MIXLAB_CHECK(e.hop_acc.size() == e.hop_queries.size(), "{}: hop_acc has {} entries and hop_queries {}", where,
               e.hop_acc.size(), e.hop_queries.size());
  e.bits_per_byte = field<double>(j, "bits_per_byte", where);
  e.scored_bytes = field<int64_t>(j, "scored_bytes", where);
  return e;
}

// The first key whose value differs between two configs' JSON, as "key: A there, B now".
std::string first_difference(const json& there, const json& now) {
  for (const auto& [key, value] : now.items())
    if (!there.contains(key) || there.at(key) != value)
      return fmt::format("'{}': {} there, {} now", key,
                         there.contains(key) ? shown_text(there.at(key).dump()) : "(absent)", shown_text(value.dump()));
  for (const auto& [key, value] : there.items())
    if (!now.contains(key)) return fmt::format("'{}': {} there, absent now", shown_text(key), shown_text(value.dump()));
  return "";
}

}  // namespace

std::string compare_config_difference(const TrainConfig& there, const TrainConfig& now) {
  return first_difference(config_to_json(there), config_to_json(now));
}

std::string compare_run_base(const std::string& mixer_spec, const std::string& task, uint64_t seed, bool seed_suffix,
                             double lr, bool lr_suffix) {
  std::string safe = mixer_spec;
  for (char& c : safe)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
  return safe + "_" + task + (seed_suffix ? fmt::format("_seed{}", seed) : std::string()) +
         (lr_suffix ? fmt::format("_lr{}", lr) : std::string());
}

void compare_run_record_write(const std::string& path, const CompareRunRecord& r) {
  const TrainResult& t = r.result;
  const json body = {{"config", config_to_json(r.config)},
                     {"parameters", r.parameters},
                     {"step", t.step},
                     {"last_loss", t.last_loss},
                     {"last_acc", t.last_acc},
                     {"eval", eval_to_json(t.eval)},
                     {"tokens_per_s", t.tokens_per_s},
                     {"seconds", t.seconds},
                     {"skipped_steps", t.skipped_steps},
                     {"stopped_early", t.stopped_early},
                     {"valid", eval_to_json(r.valid)},
                     {"test", eval_to_json(r.test)},
                     {"native_kernels", r.native_kernels},
                     {"blas", r.blas}};
  const std::string text = body.dump();
  const json doc = {{"format", kFormat},
                    {"version", kVersion},
                    {"checksum", fmt::format("{:016x}", checksum64(text))},
                    {"record", body}};
  atomic_write_file(path, doc.dump(1) + "\n");
}

CompareRunRecord compare_run_record_read(const std::string& path, const TrainConfig& expected) {
  const std::string where = fmt::format("compare run record '{}'", path);
  const std::string bytes = file_read(path, kMaxRecordBytes, "compare run record");
  const int64_t depth = json_depth(bytes);
  MIXLAB_CHECK(depth <= kMaxDepth,
               "{}: nested {} deep, a record is at most {}; the file is damaged: remove it and the run trains again",
               where, depth, kMaxDepth);
  json doc;
  try {
    doc = json::parse(bytes);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number like 1E890
    MIXLAB_FAIL("{}: not JSON ({}); the file is damaged: remove it and the run trains again", where,
                shown_text(e.what(), 200));
  }
  MIXLAB_CHECK(doc.is_object(), "{}: expected a JSON object, got {}", where, doc.type_name());
  const auto format = field<std::string>(doc, "format", where);
  MIXLAB_CHECK(format == kFormat, "{}: format '{}', expected '{}'", where, shown_text(format), kFormat);
  const auto version = field<int64_t>(doc, "version", where);
  MIXLAB_CHECK(version == kVersion, "{}: version {}, this build reads version {}", where, version, kVersion);
  MIXLAB_CHECK(doc.contains("record") && doc.at("record").is_object(), "{}: field 'record' is missing", where);
  const json& body = doc.at("record");
  const auto checksum = field<std::string>(doc, "checksum", where);
  const std::string computed = fmt::format("{:016x}", checksum64(body.dump()));
  MIXLAB_CHECK(checksum == computed,
               "{}: checksum {} does not match its record ({}); the file is damaged: remove it and the run trains "
               "again",
               where, shown_text(checksum), computed);
  MIXLAB_CHECK(body.contains("config") && body.at("config").is_object(),
               "{}: field 'config' is missing or not an object", where);
  const json now = config_to_json(expected);
  const std::string diff = first_difference(body.at("config"), now);
  MIXLAB_CHECK(diff.empty(),
               "{}: was trained with other settings ({}); --resume keeps only runs of the same settings: use "
               "another --out, or remove the file to train the run again",
               where, diff);
  CompareRunRecord r;
  r.config = expected;
  r.parameters = field<int64_t>(body, "parameters", where);
  TrainResult& t = r.result;
  t.step = field<int64_t>(body, "step", where);
  MIXLAB_CHECK(t.step >= 0 && t.step <= expected.steps, "{}: step {} is outside [0, {}]", where, t.step,
               expected.steps);
  t.last_loss = field<double>(body, "last_loss", where);
  t.last_acc = field<double>(body, "last_acc", where);
  t.eval = eval_from_json(body, "eval", where);
  t.tokens_per_s = field<double>(body, "tokens_per_s", where);
  t.seconds = field<double>(body, "seconds", where);
  t.skipped_steps = field<int64_t>(body, "skipped_steps", where);
  t.stopped_early = field<bool>(body, "stopped_early", where);
  r.valid = eval_from_json(body, "valid", where);
  r.test = eval_from_json(body, "test", where);
  r.native_kernels = field<std::string>(body, "native_kernels", where);
  r.blas = field<std::string>(body, "blas", where);
  return r;
}

}  // namespace mixlab
