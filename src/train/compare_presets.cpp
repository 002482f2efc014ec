// Presets of `mixlab compare`: the settings every mixer and task share (mixlab/train/compare.h).
//
// The one list of presets is compare_presets(); the CLI validates --preset against it.
#include <algorithm>

#include "mixlab/core/error.h"
#include "mixlab/train/compare.h"
#include "mixlab/train/tasks.h"
#include "mixlab/train/trainer.h"

namespace mixlab {
namespace {

using json = nlohmann::json;

// Preset mad: steps per task, from attention's runs at the tasks' default sizes with MAD's model
// (docs/log/results-2026-11.md, "The MAD recall tasks with MAD's model ..."): memorization,
// compression and induction pass 90 % within 300 steps, selective copying by 1000 (99 % at 3000);
// attention leaves the recall plateau near step 4000-5500 (mad_recall) and 9500-10000 (noisy
// recall) and passes 90 % on fuzzy recall near step 9000, so those budgets leave room for slower
// mixers. Compression and induction had attention's 500 steps until mamba and gla, near their
// start there, were run longer ("MAD's compression and induction with 4000 steps"): both solve
// induction by step 2000 and reach 78 % on compression at 4000, still climbing.
int64_t mad_steps(const std::string& task) {
  if (task == "mad_memorization") return 500;
  if (task == "mad_compression" || task == "induction") return 4000;
  if (task == "selective_copy") return 3000;
  if (task == "mad_recall") return 8000;
  return 16000;  // mad_noisy_recall, mad_fuzzy_recall
}

// Preset mad's mixers: one spec per registered family (mixlab/registry/registry.h), in the
// registry's order; tests/train/task_mad_test.cpp checks that every family has exactly one. Each
// is its family's default spec except two:
// - brl: its default history (one block of 8) leaves MAD's compression answers, 31 tokens back,
//   out of reach of a 2-layer model, where it stayed at chance; hist=32 (the paper's 4 x window)
//   reaches them (docs/log/results-2026-11.md, "BRL's history").
// - tpsm: its default (c = 4, GPT-2 Agg and Inf) stayed at chance on selective copying and
//   induction (7.0 % at step 1500, 5.9 % at 1000); the recipe that learned MQAR ("What held T-PSM
//   back on MQAR") with c = T/4 solves induction by step 1000 and compression by 2000
//   (docs/log/results-2026-11.md, "The T-PSM on MAD").
const std::vector<std::string>& mad_mixers() {
  static const std::vector<std::string> m = {
      "attention",
      "local:8",
      "ssm",
      "resolvent:pow2",
      "linear_attn",
      "retnet",
      "gla",
      "mamba",
      "mlstm",
      "gated_rfa",
      "deltanet",
      "gated_deltanet",
      "toeplitz",
      "tpsm:c=16:compress=linear:identity=empty:inf=attention:pos=rope:init=0.08:agg=attention:compress_init=sum",
      "brl:hist=32"};
  return m;
}

// The default preset: measured to finish the 9 x 3 default runs in <= 10 minutes on 2 cores
// (docs/log/results-2026-11.md has the timing) while still separating the mixers.
json preset_json(const std::string& preset, const std::string& task) {
  const bool copy = task == "copy";
  if (preset == "default" && task == "lm") {
    // Bytes, not gpt2: at d_model 64 a 50257-token embedding would be 95% of the parameters and
    // the (B,T,50257) head most of the compute (docs/log/results-2026-11.md, "Language modelling (Brown)").
    return {{"task", task},         {"tokenizer", "bytes"}, {"length", 128},    {"d_model", 64},
            {"layers", 2},          {"heads", 4},           {"mlp_ratio", 4},   {"steps", 600},
            {"batch", 16},          {"lr", 3e-3},           {"warmup", 60},     {"seed", 0},
            {"eval_tokens", 16384}, {"eval_stride", 64},    {"eval_batch", 32}, {"log_every", 50},
            {"curriculum", false}};
  }
  if (preset == "paper" && task == "lm") {
    // Seed 000 §5.3 / App. C: the 125M GPT-2 shape with the GPT-2 tokenizer, context 1024.
    return {{"task", task},     {"tokenizer", "gpt2"}, {"length", 1024},   {"d_model", 768},     {"layers", 12},
            {"heads", 12},      {"mlp_ratio", 4},      {"steps", 20000},   {"batch", 32},        {"lr", 6e-4},
            {"warmup", 2000},   {"seed", 0},           {"eval_tokens", 0}, {"eval_stride", 512}, {"eval_batch", 8},
            {"log_every", 100}, {"curriculum", false}};
  }
  if (preset == "default") {
    // No curriculum: with a few hundred steps, the first three phases (lengths / 8, 4, 2) leave
    // too few steps at the full length (measured in docs/log/results-2026-11.md).
    const bool text = task == "textcopy";
    if (task == "s5") {
      // The group fixes the vocabulary: the task's own defaults (config.cpp), the shared model.
      json j = preset_json("default", "copy");
      j["task"] = task;
      for (const char* key : {"vocab", "length", "pairs"}) j.erase(key);
      j["steps"] = 600, j["warmup"] = 60;
      return j;
    }
    json j = {{"task", task},
              {"vocab", text ? 256 : 32},
              {"length", copy || text ? 16 : 64},
              {"pairs", copy || text ? 0 : 8},
              {"d_model", 64},
              {"layers", 2},
              {"heads", 4},
              {"mlp_ratio", 4},
              {"steps", copy ? 2000 : 600},
              {"batch", 32},
              {"lr", 3e-3},
              {"warmup", copy ? 200 : 60},
              {"seed", 0},
              {"eval_batches", 4},
              {"eval_batch", 64},
              {"log_every", 50},
              {"curriculum", false}};
    if (task == "recall") {
      // The main job's recall column (docs/log/results-2026-11.md, "The main job's recall"): the
      // MQAR plateau breaks after about 2750 steps for attention at lr 1e-3 (it never does at
      // 3e-3) and near 3500 for the dense recurrence, which learns faster at 2e-3 than at 1e-3
      // or 3e-3 (45.6, 18.0 and 40.9 % at step 3000). The sub-linear recurrences learned recall
      // at 1e-3 in table1 and stayed at chance for 5000 steps at 2e-3 (pow2), so they keep 1e-3.
      // A constant rate until the last 20 % (wsd) keeps it up when the plateau breaks; a
      // validation accuracy of 95 % (every 250 steps) ends a run. local:8 and ssm are settled at
      // chance (table1 on 2026-11-25: 10.4 and 12.3 % after 8000 steps; local:8's two layers see 16 positions
      // back, most keys are further), so they train 600 steps. The dense recurrence plans 12000
      // steps: where its plateau breaks moves with last-bit rounding (stopped at 4750 with one
      // build of the resolvent backward, 79 % at step 5000 with another), and a plan of 5000
      // starts the decay at step 4000, before the break. With 8000 it stopped at steps 6250, 5500
      // and 4500 with seeds 0, 1 and 3; seeds 2 and 4 sat near 75 % and ended at 78 and 73 %.
      // With 12000, seed 2 left that second plateau at step 10750 and stopped at 11250 (96.4 %).
      // Until 80 % of the plan wsd is constant, so a run that stops before step 6400 is the same
      // run under both plans (seed 0: the same curve, stopped at 6250): the longer plan costs
      // time only in a run that needs it.
      j["steps"] = 5000, j["lr"] = 1e-3, j["warmup"] = 100;
      j["schedule"] = "wsd", j["eval_every"] = 250, j["stop_at"] = 0.95;
      // The cache variants and order:8 take 7e-4: in a sweep of 3e-4 to 2e-3 (seeds 0-2 at 5e-4,
      // 7e-4 and 1e-3) it had the best mean validation accuracy for all three, and pow2+cache and
      // order:8 left the plateau with every seed, where at 1e-3 seed 0 kept all three on it for
      // the 5000 steps (docs/log/results-2026-11.md, "The main job's cache variants and order:8:
      // a learning-rate sweep over three seeds"). pow2 and square keep 1e-3 (93 % with seed 0;
      // 73-74 % at 5e-4).
      j["lr_by_mixer"] = {{"resolvent:dense", 2e-3},
                          {"resolvent:pow2+cache", 7e-4},
                          {"resolvent:square+cache", 7e-4},
                          {"resolvent:order:8", 7e-4}};
      j["steps_by_mixer"] = {{"resolvent:dense", 12000}, {"local:8", 600}, {"ssm", 600}};
    }
    return j;
  }
  if (preset == "table1") {
    // Seed 000 Table 1 at a budget measured to reach its copy, recall and multihop results on this
    // CPU (docs/log/results-2026-11.md, "Seed 000 Table 1 on a CPU"): the default's tasks and model (copy's wider),
    // more steps, and per task the learning rate that attention and the dense recurrence both learn at. Recall and
    // multihop need lr 1e-3 (attention never leaves the MQAR plateau at 3e-3 with batch 32) and thousands of steps
    // after the plateau breaks; copy is learned at 3e-3. Multihop gets 16000 steps on the warmup-stable-decay schedule:
    // the dense recurrence's plateau there breaks between steps 6000 and 14000 depending on the seed, and a cosine over
    // 16000 steps had too little rate left for seed 1's late break (48.7 % chains; 99.9 % with wsd, which keeps the
    // rate until step 12800; docs/log/results-2026-11.md, "Multihop on the wsd schedule").
    MIXLAB_CHECK(copy || task == "recall" || task == "multihop",
                 "compare: preset table1 has the tasks copy, recall and multihop, got '{}'", task);
    // The default's model and tasks (one definition), with table1's budget on top.
    json j = preset_json("default", task);
    for (const char* key : {"schedule", "eval_every", "stop_at", "lr_by_mixer", "steps_by_mixer"}) j.erase(key);
    j["log_every"] = 100;
    j["eval_every"] = 2000;
    if (copy) {
      // The sub-linear tier (seed 000's "almost free intermediate tier") copies at the paper's
      // level only with width and steps: at d_model 64 square stopped near 86 % after 16000
      // steps; at 128 it passed 95 % from step 13000 and the cache variants reached 96 %
      // (docs/log/results-2026-11.md, "The square pattern's copy: budget, schedule, curriculum
      // and width"). Attention and the dense recurrence copy 99.9-100 % within 2000 steps at
      // d_model 64 and 100 % at 128, so they keep the default's 2000 steps. local:8 climbs at
      // 128 (65.5 % at step 2000, 78.0 at 4000 of 14000): it gets the whole budget. Warmup stays
      // the default's 200 steps: the measured preset run (2026-11-29, "Table1's copy column at
      // d_model 128") used it; the earlier width experiments had 1600 of 16000.
      j["d_model"] = 128;
      j["steps"] = 14000;
      j["steps_by_mixer"] = {{"attention", 2000}, {"resolvent:dense", 2000}};
    } else {
      j["steps"] = task == "recall" ? 8000 : 16000;
      j["lr"] = 1e-3;
      j["warmup"] = 300;
      if (task == "multihop") j["schedule"] = "wsd";
      // local:8 and ssm are settled at chance on recall (10.4 and 12.3 % after 8000 steps in this
      // preset on 2026-11-25; the default preset gives them 600 steps for the same reason), and
      // local:8 on multihop (12.5-14.7 % at every evaluation from step 2000 to 16000 on
      // 2026-11-29): its two layers see 16 positions back, and most keys are further.
      if (task == "recall") j["steps_by_mixer"] = {{"local:8", 600}, {"ssm", 600}};
      if (task == "multihop") {
        // The SSM and the four sub-linear powers stay on multihop's guessing plateau: 41-43 %
        // held-out (ssm 42-46) at every evaluation from step 2000 to 16000, under the cosine
        // (2026-11-25) and under wsd (2026-11-29; docs/log/results-2026-11.md, "Table1's
        // multihop column on the wsd schedule"). 4000 steps show it with two evaluations and
        // save 12-18 minutes of the preset's wall time (2026-11-30, by the runs' seconds).
        // order:8 creeps (40.8 -> 52.6 %) and keeps the whole budget, as do attention and the
        // dense recurrence, which leave the plateau.
        j["steps_by_mixer"] = {{"local:8", 600},           {"ssm", 4000},
                               {"resolvent:pow2", 4000},   {"resolvent:pow2+cache", 4000},
                               {"resolvent:square", 4000}, {"resolvent:square+cache", 4000}};
      }
    }
    return j;
  }
  if (preset == "paper") {
    const bool text = task == "textcopy";
    return {{"task", task},
            {"vocab", text ? 256 : 8192},
            {"length", copy || text ? 128 : 256},
            {"pairs", copy || text ? 0 : 64},
            {"d_model", 256},
            {"layers", 2},
            {"heads", 4},
            {"mlp_ratio", 4},
            {"steps", 20000},
            {"batch", 1024},
            {"lr", 3e-3},
            {"warmup", 2000},
            {"seed", 0},
            {"eval_batches", 8},
            {"eval_batch", 256},
            {"log_every", 100}};
  }
  if (preset == "mad") {
    // The MAD suite and the two classics (mixlab/train/task_mad.h) at their CPU sizes: the
    // task's own vocabulary and length (config.cpp) and MAD's model for every mixer (mad-lab
    // configs: dim 128, 16 heads, 2 mixer blocks; weight decay 0, one of its sweep's two), one lr
    // for all: 1e-3, the top of MAD's sweep. With this project's default model (d_model 64,
    // 4 heads, weight decay 0.1) attention stayed on the recall tasks' plateau for 2000-18000
    // steps; with MAD's it leaves it (docs/log/results-2026-11.md, "The MAD recall tasks ...").
    // A run stops at 99 % held-out answers (MAD trains to a fixed budget; this only saves time).
    const auto tasks = compare_preset_tasks("mad");
    MIXLAB_CHECK(std::find(tasks.begin(), tasks.end(), task) != tasks.end(),
                 "compare: preset mad has the tasks {}, got '{}'", fmt::join(tasks, ", "), task);
    // wsd keeps the rate up until the last 20 % (a cosine decays before a plateau breaks).
    const int64_t steps = mad_steps(task), warmup = std::min<int64_t>(500, steps / 10);
    const int64_t eval_every = std::min<int64_t>(500, steps / 4);
    return {{"task", task},        {"d_model", 128},           {"layers", 2},        {"heads", 16}, {"mlp_ratio", 4},
            {"weight_decay", 0.0}, {"steps", steps},           {"batch", 32},        {"lr", 1e-3},  {"warmup", warmup},
            {"schedule", "wsd"},   {"eval_every", eval_every}, {"stop_at", 0.99},    {"seed", 0},   {"eval_batches", 4},
            {"eval_batch", 64},    {"log_every", 50},          {"curriculum", false}};
  }
  if (preset == "psm") {
    // Seed 004 §4.1 (S5) and §4.2 (MQAR) on this CPU: the tasks' own settings, a small model
    // for every mixer (the paper's are 12-48 layers), the same steps and batch for all
    // (docs/log/results-2026-11.md "Transformer-PSM beside the baselines" has the measured time).
    const bool s5 = task == "s5";
    MIXLAB_CHECK(s5 || task == "recall", "compare: preset psm has the tasks s5 and recall, got '{}'", task);
    return {{"task", task},
            {"vocab", s5 ? 128 : 256},
            {"length", s5 ? 18 : 256},
            {"pairs", s5 ? 0 : 8},
            {"d_model", 64},
            {"layers", 2},
            {"heads", 4},
            {"mlp_ratio", 4},
            {"steps", s5 ? 1500 : 800},
            {"batch", 32},
            {"lr", 1e-3},
            {"warmup", s5 ? 150 : 80},
            {"seed", 0},
            {"eval_batches", 4},
            {"eval_batch", 64},
            {"log_every", 100},
            {"curriculum", true}};
  }
  // compare_config checked the name against compare_presets(): reaching here is a missing branch.
  MIXLAB_ASSERT(false, "compare: preset '{}' is listed but has no settings", preset);
  return {};
}

}  // namespace

std::vector<std::string> compare_default_mixers() {
  return {"attention",
          "local:8",
          "ssm",
          "resolvent:order:8",
          "resolvent:dense",
          "resolvent:pow2",
          "resolvent:pow2+cache",
          "resolvent:square",
          "resolvent:square+cache"};
}

const std::vector<std::string>& compare_presets() {
  static const std::vector<std::string> p = {"default", "table1", "paper", "psm", "mad"};
  return p;
}

std::vector<std::string> compare_preset_tasks(const std::string& preset) {
  if (preset == "default") return {"copy", "recall"};  // multihop needs table1's 16000 steps
  if (preset == "psm") return {"s5", "recall"};
  if (preset == "mad")
    return {"mad_recall",      "mad_fuzzy_recall", "mad_noisy_recall", "selective_copy",
            "mad_compression", "mad_memorization", "induction"};
  return {"copy", "recall", "multihop"};
}

std::vector<std::string> compare_preset_mixers(const std::string& preset) {
  return preset == "mad" ? mad_mixers() : compare_default_mixers();
}

std::map<std::string, std::vector<int64_t>> compare_preset_sweeps(const std::string& preset,
                                                                  const std::vector<std::string>& tasks,
                                                                  const json& overrides) {
  std::map<std::string, std::vector<int64_t>> out;
  if ((preset == "default" || preset == "table1") && std::find(tasks.begin(), tasks.end(), "copy") != tasks.end()) {
    // Copy: every length it trains on. The table scores the longest, the hardest; the sweep shows
    // the rest (docs/log/results-2026-11.md, "The copy tier at one length, and by length").
    const TaskSpec t = compare_config(preset, "copy", "attention", overrides).task;
    for (int64_t L = task_shortest_train_length(t, t.length); L <= t.length; ++L) out["copy"].push_back(L);
  }
  if (preset != "psm") return out;
  for (const auto& t : tasks) {
    // s5: Fig. 3's lengths 1..180 (trained on 4..18); recall: in-distribution lengths (Fig. 4).
    if (t == "s5") out[t] = length_list_parse("1-18,24-180/12", "preset psm s5 sweep");
    if (t == "recall") out[t] = length_list_parse("32,64,128,256", "preset psm recall sweep");
  }
  return out;
}

TrainConfig compare_config(const std::string& preset_name, const std::string& task, const std::string& mixer,
                           const json& overrides) {
  const std::string& preset = preset_name;
  const auto& known = compare_presets();
  MIXLAB_CHECK(std::find(known.begin(), known.end(), preset) != known.end(), "compare: unknown preset '{}' (known: {})",
               preset, fmt::join(known, ", "));
  json j = preset_json(preset, task);
  // A rate or a step budget per mixer (the preset says where each was measured): this mixer's plan,
  // which a key set for every run (the overrides below) replaces. The table shows both when they
  // differ between rows.
  for (const char* key : {"lr", "steps"}) {
    const std::string by = std::string(key) + "_by_mixer";
    if (!j.contains(by)) continue;
    const json by_mixer = j[by];
    j.erase(by);
    if (by_mixer.contains(mixer)) j[key] = by_mixer[mixer];
  }
  const json plan = j;  // the preset's run for this mixer, before the overrides
  // task file: the data file sets length and vocabulary (mixlab/train/task_file.h); no pairs.
  if (task == "file")
    for (const char* key : {"vocab", "length", "pairs"}) j.erase(key);
  j["mixer"] = mixer;
  MIXLAB_CHECK(overrides.is_object(), "compare: overrides must be a JSON object");
  for (const auto& item : overrides.items()) j[item.key()] = item.value();
  // --set data=... names the file task's rows; in a run of --tasks file,copy the others ignore it.
  if (task != "file")
    for (const char* key : {"data", "eval_data"}) j.erase(key);
  // Likewise a task-only key (--set noise_frac=0.4) goes to its task only.
  std::vector<std::string> foreign;
  for (const auto& item : j.items())
    if (!config_key_applies(item.key(), task)) foreign.push_back(item.key());
  for (const auto& key : foreign) j.erase(key);
  // Other steps than the preset's without an explicit warmup: keep the preset's warmup fraction
  // of this mixer's planned steps (its steps_by_mixer entry where it has one), so that --steps
  // with the budget a mixer already has leaves its run as it was.
  if (overrides.contains("steps") && !overrides.contains("warmup") && j["steps"].is_number_integer())
    j["warmup"] = j["steps"].get<int64_t>() * plan["warmup"].get<int64_t>() / plan["steps"].get<int64_t>();
  j["task"] = task;  // the task list decides the task
  return config_from_json(j, fmt::format("compare preset '{}' for {}/{}", preset, mixer, task));
}

int64_t compare_model_parameters(const TrainConfig& c) {
  torch::NoGradGuard no_grad;
  DecoderModel model(model_dims_for(c), mixer_factory_from_spec(c.mixer, c.layers));
  return model.parameter_count();
}

int64_t compare_matched_d_model(const TrainConfig& c, int64_t target) {
  const int64_t step = 2 * c.heads, d0 = c.d_model;
  int64_t best = d0, best_gap = -1;
  for (int64_t d = std::max(step, (d0 / 2) / step * step); d <= 2 * d0; d += step) {
    TrainConfig t = c;
    t.d_model = d;
    int64_t n = 0;
    try {
      n = compare_model_parameters(t);
    } catch (const Error&) {
      continue;  // a width this mixer rejects
    }
    const int64_t gap = std::abs(n - target);
    if (best_gap < 0 || gap < best_gap || (gap == best_gap && std::abs(d - d0) < std::abs(best - d0))) {
      best = d;
      best_gap = gap;
    }
  }
  return best;
}

}  // namespace mixlab
