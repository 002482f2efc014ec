// The training checkpoint file: header, checksum, archive entries (see mixlab/train/checkpoint.h).
#include "mixlab/train/checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cstdio>
#include <cstring>
#include <limits>
#include <mutex>
#include <sstream>

#include "mixlab/core/atomic_file.h"
#include "mixlab/core/checksum.h"
#include "mixlab/core/error.h"
#include "mixlab/core/shown_text.h"

namespace mixlab {
namespace {

// The archive's own format tag (inside the payload) and the file header's magic + version.
constexpr const char* kCheckpointFormat = "mixlab-checkpoint-1";
constexpr const char* kCheckpointMagic = "mixlab-checkpoint";
constexpr int kCheckpointVersion = 2;
// The optional entry of the training loop's state (checkpoint.h); absent in older files.
constexpr const char* kLoopStateEntry = "train_state";
// A checkpoint is read whole into memory; this bounds what a wrong path can make us allocate.
constexpr int64_t kCheckpointMaxBytes = int64_t{64} << 30;

// First line of a c10::Error message (the rest is a C++ backtrace, useless to a user).
std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// The first line of what LibTorch threw while reading an archive: a c10::Error (then a backtrace
// follows), or another std::exception, e.g. torch::jit::ErrorReport from compiling the archive's
// code/ files (then a source excerpt follows). mixlab's own errors pass through unchanged.
std::string library_error(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e))
    return first_line(c10_error->what_without_backtrace());
  return first_line(e.what());
}

// Parses "<magic> <version> <payload bytes> <checksum hex>\n" + payload, verifies size and
// checksum, and returns the payload (a torch archive).
std::string checkpoint_payload(const std::string& path, const std::string& file) {
  const auto nl = file.find('\n');
  const std::string header = file.substr(0, std::min<size_t>(nl, 200));
  if (file.compare(0, std::strlen(kCheckpointMagic), kCheckpointMagic) != 0 || nl == std::string::npos) {
    const bool zip = file.size() >= 2 && file[0] == 'P' && file[1] == 'K';
    MIXLAB_FAIL("{}: not a mixlab checkpoint ({}; expected a '{} {}' header)", checkpoint_prefix(path),
                zip ? "a plain torch archive without mixlab's header and checksum" : "truncated or corrupt file",
                kCheckpointMagic, kCheckpointVersion);
  }
  char magic[32] = {0};
  int version = 0;
  unsigned long long size = 0, sum = 0;
  const int got = std::sscanf(header.c_str(), "%31s %d %llu %16llx", magic, &version, &size, &sum);
  MIXLAB_CHECK(got == 4 && std::string(magic) == kCheckpointMagic,
               "{}: truncated or corrupt file (malformed header '{}')", checkpoint_prefix(path), header);
  MIXLAB_CHECK(version == kCheckpointVersion,
               "{}: checkpoint format version {} is not supported (this mixlab reads version {})",
               checkpoint_prefix(path), version, kCheckpointVersion);
  const size_t have = file.size() - nl - 1;
  MIXLAB_CHECK(have == size, "{}: truncated or corrupt file (the header says {} payload bytes, the file has {})",
               checkpoint_prefix(path), size, have);
  const std::string_view payload(file.data() + nl + 1, have);
  const uint64_t actual = checksum64(payload);
  MIXLAB_CHECK(actual == sum,
               "{}: checksum mismatch (stored {:016x}, computed {:016x}): the file is corrupt; use an earlier "
               "checkpoint or retrain",
               checkpoint_prefix(path), static_cast<uint64_t>(sum), actual);
  return std::string(payload);
}

void archive_load(torch::serialize::InputArchive& ar, const std::string& path, const std::string& payload) {
  try {
    ar.load_from(payload.data(), payload.size());
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(fmt::format("{}: not a readable checkpoint (truncated or corrupt file): {}", checkpoint_prefix(path),
                            library_error(e)));
  }
  c10::IValue format;
  bool ok = false;
  try {
    ok = ar.try_read("format", format);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(fmt::format("{}: corrupt entry 'format': {}", checkpoint_prefix(path), library_error(e)));
  }
  MIXLAB_CHECK(ok && format.isString() && format.toStringRef() == kCheckpointFormat,
               "{}: not a mixlab checkpoint (missing or wrong 'format' entry; expected '{}')", checkpoint_prefix(path),
               kCheckpointFormat);
}

c10::IValue archive_read(torch::serialize::InputArchive& ar, const std::string& path, const char* key) {
  c10::IValue v;
  bool ok = false;
  try {
    ok = ar.try_read(key, v);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(fmt::format("{}: corrupt entry '{}': {}", checkpoint_prefix(path), key, library_error(e)));
  }
  MIXLAB_CHECK(ok, "{}: missing entry '{}'", checkpoint_prefix(path), key);
  return v;
}

TrainConfig archive_config(torch::serialize::InputArchive& ar, const std::string& path) {
  const c10::IValue v = archive_read(ar, path, "config");
  MIXLAB_CHECK(v.isString(), "{}: entry 'config' is not text", checkpoint_prefix(path));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(v.toStringRef());
  } catch (const nlohmann::json::exception& e) {  // parse_error, out_of_range (a number beyond double)
    throw Error(fmt::format("{}: entry 'config' is not valid JSON: {}", checkpoint_prefix(path), e.what()));
  }
  return config_from_json(j, fmt::format("stored in {}", checkpoint_prefix(path)));
}

// The training loop's state as the entry "train_state" holds it (JSON text; a non-finite double,
// which the loop never stores, would be written as null and read back as NaN).
std::string loop_state_text(const TrainLoopState& s) {
  return nlohmann::json{{"window_loss", s.window_loss},
                        {"window_steps", s.window_steps},
                        {"window_correct", s.window_correct},
                        {"window_answer_tokens", s.window_answer_tokens},
                        {"last_loss", s.last_loss},
                        {"last_acc", s.last_acc},
                        {"skipped", s.skipped},
                        {"stopped_step", s.stopped_step},
                        {"stop_at", s.stop_at}}
      .dump();
}

// Reads "train_state" if the file has it (the defaults if not: a checkpoint written before the
// entry existed) and checks every value against the checkpoint's step.
TrainLoopState archive_loop_state(torch::serialize::InputArchive& ar, const std::string& path, int64_t step) {
  TrainLoopState s;
  const std::string what = fmt::format("{}: entry '{}'", checkpoint_prefix(path), kLoopStateEntry);
  c10::IValue v;
  bool present = false;
  try {
    present = ar.try_read(kLoopStateEntry, v);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(fmt::format("{} is corrupt: {}", what, library_error(e)));
  }
  if (!present) return s;
  MIXLAB_CHECK(v.isString(), "{} is not text", what);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(v.toStringRef());
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{} is not valid JSON: {}", what, e.what()));
  }
  // A value quoted in a message: one line, cut, never throwing on bytes that are not UTF-8.
  auto shown = [](const nlohmann::json& x) {
    return shown_text(x.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), 60);
  };
  MIXLAB_CHECK(j.is_object(), "{} must be a JSON object, got {}", what, shown(j));
  constexpr int64_t kMaxCount = int64_t{1} << 62;
  auto count = [&](const char* key, int64_t hi) -> int64_t {
    if (!j.contains(key)) return 0;
    const nlohmann::json& x = j[key];
    const bool ok = x.is_number_integer() && (x.is_number_unsigned() ? x.get<uint64_t>() <= static_cast<uint64_t>(hi)
                                                                     : x.get<int64_t>() >= 0 && x.get<int64_t>() <= hi);
    MIXLAB_CHECK(ok, "{}: key '{}' must be an integer in [0, {}], got {}", what, key, hi, shown(x));
    return x.get<int64_t>();
  };
  auto real = [&](const char* key) -> double {
    if (!j.contains(key)) return 0;
    const nlohmann::json& x = j[key];
    if (x.is_null()) return std::numeric_limits<double>::quiet_NaN();
    MIXLAB_CHECK(x.is_number(), "{}: key '{}' must be a number, got {}", what, key, shown(x));
    return x.get<double>();
  };
  s.window_loss = real("window_loss");
  s.window_steps = count("window_steps", step);
  s.window_answer_tokens = count("window_answer_tokens", kMaxCount);
  s.window_correct = count("window_correct", s.window_answer_tokens);
  s.last_loss = real("last_loss");
  s.last_acc = real("last_acc");
  s.skipped = count("skipped", step);
  s.stopped_step = count("stopped_step", step);
  MIXLAB_CHECK(s.stopped_step == 0 || s.stopped_step == step,
               "{}: key 'stopped_step' is {}; expected 0 (not stopped) or the checkpoint's step {}", what,
               s.stopped_step, step);
  s.stop_at = real("stop_at");
  MIXLAB_CHECK(s.stopped_step == 0 || (s.stop_at > 0 && s.stop_at <= 1),
               "{}: key 'stop_at' must be in (0, 1] for a stopped run, got {}", what, s.stop_at);
  return s;
}

}  // namespace

std::string checkpoint_prefix(const std::string& path) { return fmt::format("checkpoint '{}'", path); }

void checkpoint_write(const std::string& path, const TrainConfig& config, int64_t step, const torch::nn::Module& model,
                      const torch::optim::Optimizer& optimizer, const TrainLoopState& loop) {
  std::ostringstream payload;
  try {
    torch::serialize::OutputArchive ar;
    ar.write("format", c10::IValue(std::string(kCheckpointFormat)));
    ar.write("config", c10::IValue(config_to_json(config).dump()));
    ar.write("step", c10::IValue(step));
    torch::serialize::OutputArchive model_ar, optim_ar;
    model.save(model_ar);
    optimizer.save(optim_ar);
    ar.write("model", model_ar);
    ar.write("optimizer", optim_ar);
    {
      // Under the generator's own lock (LibTorch's rule for its users): compare trains several
      // runs in one process, and another may be seeding or drawing for its model's init.
      at::Generator gen = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(gen.mutex());
      ar.write("rng", gen.get_state());
    }
    ar.write(kLoopStateEntry, c10::IValue(loop_state_text(loop)));
    ar.save_to(payload);
  } catch (const c10::Error& e) {
    throw Error(
        fmt::format("{}: cannot serialise: {}", checkpoint_prefix(path), first_line(e.what_without_backtrace())));
  }
  const std::string body = payload.str();
  const std::string header =
      fmt::format("{} {} {} {:016x}\n", kCheckpointMagic, kCheckpointVersion, body.size(), checksum64(body));
  // atomic_write_file: unique temp name, checked writes, fsync, rename, fsync of the directory.
  atomic_write_file(path, header + body);
}

LoadedCheckpoint checkpoint_read(const std::string& path) {
  LoadedCheckpoint c;
  c.path = path;
  c.payload = checkpoint_payload(path, file_read(path, kCheckpointMaxBytes, "checkpoint"));
  torch::serialize::InputArchive ar;
  archive_load(ar, path, c.payload);
  c.config = archive_config(ar, path);
  const c10::IValue step = archive_read(ar, path, "step");
  MIXLAB_CHECK(step.isInt() && step.toInt() >= 0 && step.toInt() <= c.config.steps,
               "{}: entry 'step' must be an integer in [0, {}]", checkpoint_prefix(path), c.config.steps);
  c.step = step.toInt();
  c.loop = archive_loop_state(ar, path, c.step);
  return c;
}

TrainConfig checkpoint_read_config(const std::string& path) { return checkpoint_read(path).config; }

void checkpoint_load_model(const LoadedCheckpoint& c, torch::nn::Module& model) {
  const std::string& path = c.path;
  torch::serialize::InputArchive ar;
  archive_load(ar, path, c.payload);
  try {
    torch::serialize::InputArchive model_ar;
    MIXLAB_CHECK(ar.try_read("model", model_ar), "{}: missing entry 'model'", checkpoint_prefix(path));
    model.load(model_ar);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(fmt::format("{}: cannot read the model weights: {}", checkpoint_prefix(path), library_error(e)));
  }
}

void checkpoint_load_training_state(const LoadedCheckpoint& c, torch::nn::Module& model,
                                    torch::optim::Optimizer& optimizer) {
  const std::string& path = c.path;
  torch::serialize::InputArchive ar;
  archive_load(ar, path, c.payload);
  try {
    torch::serialize::InputArchive model_ar, optim_ar;
    MIXLAB_CHECK(ar.try_read("model", model_ar), "{}: missing entry 'model'", checkpoint_prefix(path));
    MIXLAB_CHECK(ar.try_read("optimizer", optim_ar), "{}: missing entry 'optimizer'", checkpoint_prefix(path));
    model.load(model_ar);
    optimizer.load(optim_ar);
    torch::Tensor rng;
    MIXLAB_CHECK(ar.try_read("rng", rng), "{}: missing entry 'rng'", checkpoint_prefix(path));
    at::Generator gen = at::detail::getDefaultCPUGenerator();  // a handle sharing the global one
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(rng);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(
        fmt::format("{}: cannot restore the model/optimizer state: {}", checkpoint_prefix(path), library_error(e)));
  }
}

}  // namespace mixlab
