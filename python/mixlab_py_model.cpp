// python/mixlab_py_model.cpp — the decoder model and its checkpoints for Python (mixlab.Model,
// mixlab.load): the CLI's own objects, not a re-implementation.
//
// A _Model owns a Trainer (mixlab/train/trainer.h): the model `mixlab train` builds from the same
// config (same dims, same mixer factory, same initialisation from the config's seed), plus the
// optimiser the checkpoint format carries. So a checkpoint written by `mixlab train` loads here
// through the trainer's own reader (checksum, config, resume rules), and one written here is read
// by `mixlab eval`, `generate`, `train --resume` and `--init-from` like any other. Python training
// (torch.optim on the parameters) changes the very tensors the C++ model holds; the optimiser
// state in a checkpoint saved from Python is the C++ trainer's (that of the loaded checkpoint, or
// empty for a new model), so `train --resume` continues from its weights with those moments.
//
// Building a model seeds torch's default generator with the config's seed, as `mixlab train`
// does (that is what makes its weights the CLI's); the generator's previous state is put back
// afterwards, so Python code around it sees no change.
#include <pybind11/stl.h>
#include <torch/python.h>
#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "mixlab/core/error.h"
#include "mixlab/core/tensor_checks.h"
#include "mixlab/model/model.h"
#include "mixlab/train/checkpoint.h"
#include "mixlab/train/config.h"
#include "mixlab/train/generate.h"
#include "mixlab/train/task_lm.h"
#include "mixlab/train/trainer.h"

namespace py = pybind11;

namespace mixlab::python {
namespace {

using json = nlohmann::json;

// torch's default CPU generator, put back when the scope ends.
class KeepDefaultGenerator {
 public:
  KeepDefaultGenerator() : state_(at::detail::getDefaultCPUGenerator().get_state()) {}
  ~KeepDefaultGenerator() {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    gen.set_state(state_);
  }

 private:
  torch::Tensor state_;
};

class PyModel {
 public:
  explicit PyModel(const TrainConfig& config) {
    KeepDefaultGenerator keep;
    trainer_ = std::make_unique<Trainer>(config);
  }
  static std::shared_ptr<PyModel> load(const std::string& path) {
    const LoadedCheckpoint ckpt = checkpoint_read(path);
    auto m = std::make_shared<PyModel>(ckpt.config);
    KeepDefaultGenerator keep;  // the checkpoint also holds the training run's generator state
    m->trainer_->checkpoint_load(ckpt);
    return m;
  }
  DecoderModel& model() { return trainer_->model(); }
  Trainer& trainer() { return *trainer_; }

 private:
  std::unique_ptr<Trainer> trainer_;
};

TrainConfig config_arg(const std::string& json_text) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::parse_error& e) {
    MIXLAB_FAIL("Model: config is not valid JSON: {}", e.what());
  }
  return config_from_json(j, "(Python dict)");
}

std::shared_ptr<DecoderState> state_arg(const std::shared_ptr<DecoderState>& state, const char* fn) {
  MIXLAB_CHECK(state != nullptr, "Model.{}: state is None (use Model.init_state(batch))", fn);
  return state;
}

// Bounds of a Python caller's sizes, checked before anything is allocated (issue 37 item 3): a
// batch of 2^62 overflows torch's size arithmetic; generate would stream for days otherwise.
constexpr int64_t kMaxBatch = int64_t{1} << 24;
constexpr int64_t kMaxGenerateTokens = int64_t{1} << 24;
// Model.generate runs without the GIL, so Python's signal handlers (Ctrl-C: KeyboardInterrupt)
// run only when it asks: after a token, once this much time has passed since it last asked (every
// token of a slow model, every few of a fast one; one GIL round trip per interval).
constexpr std::chrono::milliseconds kSignalCheckInterval{20};

// Token ids for the model: int64 on the CPU, every size >= 1, ids in [0, vocab), and, with a
// state, its batch. The embedding would otherwise raise IndexError ("index out of range in
// self"), read a meta tensor as garbage, or fail deep inside a mixer naming its own x_t.
void check_tokens(PyModel& pm, const char* fn, const char* name, const at::Tensor& tokens, int64_t rank,
                  const DecoderState* state) {
  const char* letters = rank == 2 ? "(B,T)" : "(B)";
  check_dim(fn, name, tokens, rank, letters);
  MIXLAB_CHECK(tokens.scalar_type() == at::kLong, "{}: {} must be int64 token ids, got {}", fn, name,
               c10::toString(tokens.scalar_type()));
  check_cpu(fn, name, tokens);
  for (int64_t d = 0; d < rank; ++d)
    MIXLAB_CHECK(tokens.size(d) >= 1, "{}: {} must have every size >= 1 {}, got {}", fn, name, letters,
                 shape_string(tokens));
  if (state != nullptr)
    MIXLAB_CHECK(tokens.size(0) == state->batch(), "{}: {} must have B = {} (the state's batch), got {}", fn, name,
                 state->batch(), shape_string(tokens));
  // Sizes before values: the id range below reads every element (a stride-0 tensor of 2^40 ids
  // would take hours).
  MIXLAB_CHECK(tokens.size(0) <= kMaxBatch, "{}: {} must have B <= {} {}, got {}", fn, name, kMaxBatch, letters,
               shape_string(tokens));
  const int64_t max_len = pm.model().dims().max_len;
  MIXLAB_CHECK(rank == 1 || tokens.size(1) <= max_len, "{}: {} must have T <= max_len = {} {}, got {}", fn, name,
               max_len, letters, shape_string(tokens));
  const int64_t vocab = pm.model().dims().vocab;
  const auto [lo, hi] = at::aminmax(tokens);
  MIXLAB_CHECK(lo.item<int64_t>() >= 0 && hi.item<int64_t>() < vocab,
               "{}: {} must be token ids in [0, {}), got ids from {} to {}", fn, name, vocab, lo.item<int64_t>(),
               hi.item<int64_t>());
}

}  // namespace

void bind_model(py::module_& m) {
  py::class_<DecoderState, std::shared_ptr<DecoderState>>(m, "ModelState", R"doc(
Decode state of a whole model (every layer's mixer state, and the memory stream of memory mixers)
for a batch of sequences, from Model.init_state. Opaque; Model.step and Model.prefill advance it.
)doc")
      .def_property_readonly(
          "position", [](const DecoderState& s) { return s.position; }, "Tokens consumed so far.")
      .def_property_readonly("bytes", &DecoderState::bytes, "Bytes held by every layer's state (measured).")
      .def_property_readonly("batch", &DecoderState::batch, "Sequences held.");

  py::class_<PyModel, std::shared_ptr<PyModel>>(m, "_Model")
      .def(
          "forward",
          [](PyModel& pm, const at::Tensor& tokens) {
            check_tokens(pm, "Model.forward", "tokens", tokens, 2, nullptr);
            return pm.model().forward(tokens);
          },
          py::arg("tokens"), py::call_guard<py::gil_scoped_release>())
      .def(
          "init_state",
          [](PyModel& pm, int64_t batch) {
            MIXLAB_CHECK(batch >= 1 && batch <= kMaxBatch, "Model.init_state: batch must be in [1, {}], got {}",
                         kMaxBatch, batch);
            return std::make_shared<DecoderState>(pm.model().init_state(batch));
          },
          py::arg("batch"), py::call_guard<py::gil_scoped_release>())
      .def(
          "step",
          [](PyModel& pm, const std::shared_ptr<DecoderState>& state, const at::Tensor& tokens_t) {
            check_tokens(pm, "Model.step", "tokens_t", tokens_t, 1, state_arg(state, "step").get());
            return pm.model().step(*state, tokens_t);
          },
          py::arg("state"), py::arg("tokens_t"), py::call_guard<py::gil_scoped_release>())
      .def(
          "prefill",
          [](PyModel& pm, const std::shared_ptr<DecoderState>& state, const at::Tensor& tokens) {
            check_tokens(pm, "Model.prefill", "tokens", tokens, 2, state_arg(state, "prefill").get());
            return pm.model().prefill(*state, tokens);
          },
          py::arg("state"), py::arg("tokens"), py::call_guard<py::gil_scoped_release>())
      .def(
          "fork",
          [](PyModel& pm, const std::shared_ptr<DecoderState>& state) {
            return std::make_shared<DecoderState>(pm.model().fork(*state_arg(state, "fork")));
          },
          py::arg("state"), py::call_guard<py::gil_scoped_release>())
      .def(
          "save", [](PyModel& pm, const std::string& path) { pm.trainer().checkpoint_save(path); }, py::arg("path"),
          py::call_guard<py::gil_scoped_release>())
      .def(
          "generate",
          [](PyModel& pm, const std::string& prompt, int64_t max_tokens, double temperature, int64_t top_k,
             double top_p, uint64_t seed) {
            const TrainConfig& c = pm.trainer().config();
            MIXLAB_CHECK(c.task.name == "lm",
                         "Model.generate: this is a model of task {}, not a language model (task lm)", c.task.name);
            MIXLAB_CHECK(c.task.tokenizer != "ids",
                         "Model.generate: the model was trained on token ids without text (tokenizer ids): there is "
                         "no tokenizer to encode a prompt or decode tokens");
            MIXLAB_CHECK(max_tokens <= kMaxGenerateTokens, "Model.generate: max_tokens must be <= {}, got {}",
                         kMaxGenerateTokens, max_tokens);
            GenerateOptions o;
            o.prompt = prompt;
            o.max_tokens = max_tokens;
            o.sampling.temperature = temperature;
            o.sampling.top_k = top_k;
            o.sampling.top_p = top_p;
            o.seed = seed;
            std::string text;
            auto asked = std::chrono::steady_clock::now();
            auto emit = [&](const std::string& piece) {
              text += piece;
              const auto now = std::chrono::steady_clock::now();
              if (now - asked < kSignalCheckInterval) return;
              asked = now;
              py::gil_scoped_acquire gil;
              // A handler that raised (SIGINT: KeyboardInterrupt) ends generation with its exception,
              // fetched here with the GIL held; pybind11 raises it in the caller.
              if (PyErr_CheckSignals() != 0) throw py::error_already_set();
            };
            const bool was_training = pm.model().is_training();
            try {
              generate_text(pm.model(), lm_task_tokenizer(c.task), o, emit);
            } catch (...) {
              pm.model().train(was_training);
              throw;
            }
            pm.model().train(was_training);
            return py::bytes(text);  // bytes: a token may end inside a UTF-8 character
          },
          py::arg("prompt"), py::arg("max_tokens"), py::arg("temperature"), py::arg("top_k"), py::arg("top_p"),
          py::arg("seed"), py::call_guard<py::gil_scoped_release>())
      .def("named_parameters",
           [](PyModel& pm) {
             std::vector<std::pair<std::string, at::Tensor>> out;
             for (const auto& item : pm.model().named_parameters(/*recurse=*/true))
               out.emplace_back(item.key(), item.value());
             return out;
           })
      .def("named_buffers",
           [](PyModel& pm) {
             std::vector<std::pair<std::string, at::Tensor>> out;
             for (const auto& item : pm.model().named_buffers(/*recurse=*/true))
               out.emplace_back(item.key(), item.value());
             return out;
           })
      .def(
          "train", [](PyModel& pm, bool mode) { pm.model().train(mode); }, py::arg("mode"))
      .def_property_readonly("config", [](PyModel& pm) { return config_to_json(pm.trainer().config()).dump(); })
      .def_property_readonly("completed_steps", [](PyModel& pm) { return pm.trainer().step(); })
      .def_property_readonly("state_spec", [](PyModel& pm) { return pm.model().state_spec(); });

  m.def(
      "_model_from_config",
      [](const std::string& config_json) { return std::make_shared<PyModel>(config_arg(config_json)); },
      py::arg("config_json"), py::call_guard<py::gil_scoped_release>());
  m.def(
      "_model_load", [](const std::string& path) { return PyModel::load(path); }, py::arg("path"),
      py::call_guard<py::gil_scoped_release>());
}

}  // namespace mixlab::python
