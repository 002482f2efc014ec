// `mixlab compare`: train every mixer on every task, measure, tabulate, chart (see compare.h).
#include "mixlab/train/compare.h"

#include <ATen/Parallel.h>
#include <cairo/cairo.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <thread>

#include "mixlab/analysis/analyze.h"
#include "mixlab/core/error.h"
#include "mixlab/mixers/registry.h"
#include "mixlab/train/trainer.h"

namespace mixlab {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string family_of(const std::string& spec) { return spec.substr(0, spec.find(':')); }

bool family_registered(const std::string& spec) {
  const std::string f = family_of(spec);
  for (const auto& info : mixer_families())
    if (info.family == f) return true;
  return false;
}

std::string file_safe(const std::string& s) {
  std::string r = s;
  for (char& c : r)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
  return r;
}

// The default preset: measured to finish the 9 x 3 default runs in <= 10 minutes on 2 cores
// (docs/RESULTS.md has the timing) while still separating the mixers.
json preset_json(const std::string& preset, const std::string& task) {
  const bool copy = task == "copy";
  if (preset == "default") {
    // No curriculum: with a few hundred steps, the first three phases (lengths / 8, 4, 2) leave
    // too few steps at the full length (measured in docs/RESULTS.md).
    const bool text = task == "textcopy";
    return {{"task", task},
            {"vocab", text ? 256 : 32},
            {"length", copy || text ? 16 : 64},
            {"pairs", copy || text ? 0 : 8},
            {"d_model", 64},
            {"layers", 2},
            {"heads", 4},
            {"mlp_ratio", 4},
            {"steps", 600},
            {"batch", 32},
            {"lr", 3e-3},
            {"warmup", 60},
            {"seed", 0},
            {"eval_batches", 4},
            {"eval_batch", 64},
            {"log_every", 50},
            {"curriculum", false}};
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
  MIXLAB_CHECK(false, "compare: unknown preset '{}' (known: default, paper)", preset);
  return {};
}

std::string fmt_rate(double r) {
  if (r >= 1e6) return fmt::format("{:.2f}M", r / 1e6);
  if (r >= 1e3) return fmt::format("{:.1f}k", r / 1e3);
  return fmt::format("{:.0f}", r);
}

// Decode speed: model.step over T random tokens, B = 1, after a short warm-up.
double decode_us_per_token(DecoderModel& model, int64_t T) {
  torch::NoGradGuard no_grad;
  model.eval();
  auto tokens = torch::randint(kFirstContentToken, model.dims().vocab, {1, T}, torch::kInt64);
  {
    auto warm = model.init_state(1);
    for (int64_t t = 0; t < std::min<int64_t>(T, 8); ++t) model.step(warm, tokens.select(1, t));
  }
  auto state = model.init_state(1);
  const auto t0 = Clock::now();
  for (int64_t t = 0; t < T; ++t) model.step(state, tokens.select(1, t));
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  return 1e6 * s / static_cast<double>(T);
}

void fill_analysis(CompareRow& row, Mixer& mixer, int64_t T) {
  row.cost_class = mixer.cost_class();
  row.pattern = mixer.pattern_spec();
  row.analysis_T = T;
  if (row.pattern.empty()) {
    row.structure = mixer.spec();
    row.shortest = "—";
    row.congestion = "—";
    return;
  }
  const Pattern p = Pattern::parse(row.pattern);
  const PatternReport r = analyze_pattern(p, T, AnalyzeOptions{});
  row.structure = r.structure;
  row.cost_max = r.cost_max;
  row.cache_max = r.cache_max;
  row.shortest = r.shortest_path.infinite ? "∞" : std::to_string(r.shortest_path.max);
  const auto& c = r.congestion;
  const int64_t ub = c.upper_bound();
  auto show = [](int64_t v) { return v == kAnalysisInf ? std::string("∞") : std::to_string(v); };
  if (c.lower_bound == kAnalysisNone && ub == kAnalysisNone) {
    row.congestion = "n/a";
  } else if (ub == kAnalysisNone) {
    row.congestion = "≥" + show(c.lower_bound);
  } else if (c.lower_bound == ub || c.lower_bound == kAnalysisNone) {
    row.congestion = show(ub);
  } else {
    row.congestion = show(c.lower_bound) + ".." + show(ub);
  }
}

// Display width of a UTF-8 string (the table uses ∞, — and ≥, one column each).
size_t display_width(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}
std::string pad(const std::string& s, size_t w, bool right = false) {
  const size_t d = display_width(s);
  if (d >= w) return s;
  return right ? std::string(w - d, ' ') + s : s + std::string(w - d, ' ');
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
  static const std::vector<std::string> p = {"default", "paper"};
  return p;
}

TrainConfig compare_config(const std::string& preset_name, const std::string& task, const std::string& mixer,
                           const json& overrides) {
  const std::string& preset = preset_name;
  json j = preset_json(preset, task);
  j["mixer"] = mixer;
  MIXLAB_CHECK(overrides.is_object(), "compare: overrides must be a JSON object");
  for (const auto& item : overrides.items()) j[item.key()] = item.value();
  // Fewer steps than the preset without an explicit warmup: keep the preset's warmup fraction.
  if (overrides.contains("steps") && !overrides.contains("warmup") && j["steps"].is_number_integer()) {
    const json base = preset_json(preset_name, task);
    j["warmup"] = j["steps"].get<int64_t>() * base["warmup"].get<int64_t>() / base["steps"].get<int64_t>();
  }
  j["task"] = task;  // the task list decides the task
  return config_from_json(j, fmt::format("compare preset '{}' for {}/{}", preset, mixer, task));
}

namespace {

// Mean, min and max of one cell over seeds.
struct SeedStats {
  double mean = 0, lo = 0, hi = 0;
};
SeedStats seed_stats(const std::vector<double>& v) {
  SeedStats s;
  if (v.empty()) return s;
  s.lo = *std::min_element(v.begin(), v.end());
  s.hi = *std::max_element(v.begin(), v.end());
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  return s;
}

// "97.3" for one seed, "97.3 (96.1..98.0)" for several: mean (min..max), in %.
std::string seed_cell(const std::vector<double>& v) {
  const SeedStats s = seed_stats(v);
  if (v.size() <= 1) return fmt::format("{:.1f}", 100 * s.mean);
  return fmt::format("{:.1f} ({:.1f}..{:.1f})", 100 * s.mean, 100 * s.lo, 100 * s.hi);
}

}  // namespace

CompareReport compare_run(const CompareOptions& o) {
  MIXLAB_CHECK(!o.tasks.empty(), "compare: the task list is empty");
  MIXLAB_CHECK(o.seeds >= 1, "compare: --seeds must be >= 1 (runs per mixer and task), got {}", o.seeds);
  for (const auto& t : o.tasks) {
    const auto& names = task_names();
    MIXLAB_CHECK(std::find(names.begin(), names.end(), t) != names.end(), "compare: unknown task '{}' (known: {})", t,
                 fmt::join(names, ", "));
  }
  CompareReport rep;
  rep.preset = o.preset;
  rep.tasks = o.tasks;
  rep.seeds = o.seeds;
  const std::vector<std::string> mixers = o.mixers.empty() ? compare_default_mixers() : o.mixers;
  // Validate every config before the first (long) run, so a typo fails in a second.
  int64_t T = 1;
  for (const auto& t : o.tasks) {
    const TrainConfig c = compare_config(o.preset, t, mixers.front(), o.overrides);
    T = std::max(T, task_sequence_length(c.task, c.task.length));
    if (rep.config_example.is_null()) rep.config_example = config_to_json(c);
  }
  const std::string runs_dir = o.out_dir + "/runs";
  std::filesystem::create_directories(runs_dir);
  const auto t_all = Clock::now();

  // One job per (mixer, task). Jobs run on o.jobs worker threads, each with one intra-op
  // thread; a job's result depends only on its own config (the model is initialised under a
  // lock right after seeding the global generator, and batches come from the task's own RNG),
  // so the table is the same for every job count.
  struct Job {
    size_t mixer = 0, task = 0;
    int64_t seed = 0;  // offset added to the config's seed
    TrainResult result;
    std::shared_ptr<DecoderModel> model;
    int64_t parameters = 0;
    std::string error;
  };
  std::vector<Job> jobs;
  std::vector<std::string> skipped(mixers.size());
  for (size_t m = 0; m < mixers.size(); ++m) {
    if (!family_registered(mixers[m])) {
      skipped[m] = fmt::format("skipped: mixer family '{}' is not registered", family_of(mixers[m]));
      if (o.progress) std::cerr << "compare: " << mixers[m] << ": " << skipped[m] << "\n";
      continue;
    }
    for (size_t t = 0; t < o.tasks.size(); ++t)
      for (int64_t sd = 0; sd < o.seeds; ++sd) jobs.push_back(Job{m, t, sd, {}, nullptr, 0, ""});
  }
  const int64_t n_jobs = static_cast<int64_t>(jobs.size());
  const int64_t workers = std::max<int64_t>(1, std::min<int64_t>(o.jobs, n_jobs));
  std::mutex init_mutex, log_mutex;
  std::atomic<int64_t> next{0};
  auto log = [&](const std::string& line) {
    if (!o.progress) return;
    std::lock_guard<std::mutex> lock(log_mutex);
    std::cerr << line;
  };
  auto work = [&] {
    // OpenMP keeps the thread count per thread: a new std::thread starts with the process
    // default (all cores), not with the caller's setting, so each worker sets its own.
    if (workers > 1) at::set_num_threads(1);
    for (int64_t i = next++; i < n_jobs; i = next++) {
      Job& job = jobs[i];
      const std::string& spec = mixers[job.mixer];
      const std::string& task = o.tasks[job.task];
      try {
        TrainConfig c = compare_config(o.preset, task, spec, o.overrides);
        c.seed += static_cast<uint64_t>(job.seed);
        std::unique_ptr<Trainer> trainer;
        {
          std::lock_guard<std::mutex> lock(init_mutex);  // the global generator seeds the init
          trainer = std::make_unique<Trainer>(c);
        }
        job.parameters = trainer->model().parameter_count();
        log(fmt::format("compare: run {}/{}: {} on {} ({} parameters, {} steps, seed {})\n", i + 1, n_jobs, spec, task,
                        job.parameters, c.steps, c.seed));
        TrainOptions to;
        to.progress = o.progress;
        to.label = "  " + spec + "/" + task;
        to.metrics_path = runs_dir + "/" + file_safe(spec) + "_" + task +
                          (o.seeds > 1 ? fmt::format("_seed{}", c.seed) : std::string()) + ".jsonl";
        job.result = trainer->run(to);
        job.model = trainer->model_ptr();
        const auto& e = job.result.eval;
        log(fmt::format("compare: {} on {}: token acc {:.1f}%, answer acc {:.1f}%{}, {:.0f}s, {} tok/s\n", spec, task,
                        100 * e.token_acc, 100 * e.answer_acc,
                        e.chain_queries > 0 ? fmt::format(", chain acc {:.1f}%", 100 * e.chain_acc) : "",
                        job.result.seconds, fmt_rate(job.result.tokens_per_s)));
      } catch (const std::exception& e) {
        job.error = e.what();
      }
    }
  };
  if (workers == 1) {
    work();
  } else {
    std::vector<std::thread> pool;
    for (int64_t w = 0; w < workers; ++w) pool.emplace_back(work);
    for (auto& th : pool) th.join();
  }
  rep.jobs = workers;

  // Rows in mixer order. Decode speed and analysis are measured after training, one at a time,
  // so concurrent jobs do not disturb the decode timings.
  for (size_t m = 0; m < mixers.size(); ++m) {
    CompareRow row;
    row.mixer = mixers[m];
    if (!skipped[m].empty()) {
      row.note = skipped[m];
      rep.rows.push_back(row);
      continue;
    }
    try {
      std::shared_ptr<DecoderModel> decode_model;
      double rate_sum = 0;
      std::map<std::string, std::vector<double>> answer_seeds, loss_seeds, hop_sum;
      std::map<std::string, std::vector<int64_t>> hop_n;
      for (const auto& job : jobs) {
        if (job.mixer != m) continue;
        MIXLAB_CHECK(job.error.empty(), "{} on {}: {}", mixers[m], o.tasks[job.task], job.error);
        const std::string& task = o.tasks[job.task];
        const EvalResult& e = job.result.eval;
        row.token_acc_seeds[task].push_back(e.token_acc);
        answer_seeds[task].push_back(e.answer_acc);
        loss_seeds[task].push_back(e.loss);
        if (e.chain_queries > 0) row.chain_acc_seeds[task].push_back(e.chain_acc);
        auto& hs = hop_sum[task];
        auto& hn = hop_n[task];
        if (hs.size() < e.hop_acc.size()) hs.resize(e.hop_acc.size(), 0.0), hn.resize(e.hop_acc.size(), 0);
        for (size_t k = 0; k < e.hop_acc.size(); ++k)
          if (e.hop_queries[k] > 0) hs[k] += e.hop_acc[k], ++hn[k];
        rate_sum += job.result.tokens_per_s / static_cast<double>(o.seeds);
        row.seconds += job.result.seconds;
        row.parameters = job.parameters;
        if (job.model->dims().max_len >= T) decode_model = job.model;
      }
      for (const auto& t : o.tasks) {
        row.token_acc[t] = seed_stats(row.token_acc_seeds[t]).mean;
        row.answer_acc[t] = seed_stats(answer_seeds[t]).mean;
        row.eval_loss[t] = seed_stats(loss_seeds[t]).mean;
        if (row.chain_acc_seeds.count(t)) row.chain_acc[t] = seed_stats(row.chain_acc_seeds[t]).mean;
        if (!hop_sum[t].empty()) {
          auto& h = row.hop_acc[t];
          for (size_t k = 0; k < hop_sum[t].size(); ++k)
            h.push_back(hop_n[t][k] > 0 ? hop_sum[t][k] / static_cast<double>(hop_n[t][k]) : 0.0);
        }
      }
      row.train_tokens_per_s = rate_sum / static_cast<double>(o.tasks.size());
      // T is the longest task's sequence, and each model is sized for its own task.
      MIXLAB_ASSERT(decode_model != nullptr, "compare: no model of {} holds T = {}", mixers[m], T);
      row.decode_us_per_token = decode_us_per_token(*decode_model, T);
      fill_analysis(row, decode_model->blocks().front()->mixer(), T);
      row.ran = true;
    } catch (const std::exception& e) {
      row.ran = false;
      row.note = fmt::format("failed: {}", e.what());
      if (o.progress) std::cerr << "compare: " << mixers[m] << ": " << row.note << "\n";
    }
    rep.rows.push_back(row);
  }
  rep.seconds = std::chrono::duration<double>(Clock::now() - t_all).count();
  return rep;
}

std::string compare_table_text(const CompareReport& rep) {
  std::vector<std::string> head = {"mixer", "structure", "cost", "time/tok", "cache", "path", "congestion"};
  // Multihop also gets the accuracy on its chained queries (those that follow >= 1 link): the
  // part of the task that plain recall does not measure.
  const bool chains = std::find(rep.tasks.begin(), rep.tasks.end(), "multihop") != rep.tasks.end();
  for (const auto& t : rep.tasks) head.push_back(t + " %");
  if (chains) head.push_back("chains %");
  head.insert(head.end(), {"train tok/s", "decode µs/tok"});
  std::vector<std::vector<std::string>> cells;
  for (const auto& r : rep.rows) {
    std::vector<std::string> c = {r.mixer};
    if (!r.ran) {
      c.push_back(r.note);
      cells.push_back(c);
      continue;
    }
    c.push_back(r.structure);
    c.push_back(r.cost_class);
    c.push_back(r.cost_max >= 0 ? std::to_string(r.cost_max) : "—");
    c.push_back(r.cache_max >= 0 ? std::to_string(r.cache_max) : "—");
    c.push_back(r.shortest);
    c.push_back(r.congestion);
    for (const auto& t : rep.tasks) c.push_back(seed_cell(r.token_acc_seeds.at(t)));
    if (chains) c.push_back(r.chain_acc_seeds.count("multihop") ? seed_cell(r.chain_acc_seeds.at("multihop")) : "—");
    c.push_back(fmt_rate(r.train_tokens_per_s));
    c.push_back(fmt::format("{:.0f}", r.decode_us_per_token));
    cells.push_back(c);
  }
  std::vector<size_t> w(head.size());
  for (size_t i = 0; i < head.size(); ++i) w[i] = display_width(head[i]);
  for (const auto& c : cells)
    if (c.size() == head.size())
      for (size_t i = 0; i < c.size(); ++i) w[i] = std::max(w[i], display_width(c[i]));
  std::string out;
  auto line = [&](const std::vector<std::string>& c) {
    std::string s;
    for (size_t i = 0; i < c.size(); ++i) {
      if (i) s += " | ";
      s += (c.size() == head.size()) ? pad(c[i], w[i], i >= 3) : c[i];
    }
    out += s + "\n";
  };
  line(head);
  std::string rule;
  for (size_t i = 0; i < head.size(); ++i) rule += (i ? "-|-" : "") + std::string(w[i], '-');
  out += rule + "\n";
  for (const auto& c : cells) line(c);
  int64_t T = 0;
  for (const auto& r : rep.rows) T = std::max(T, r.analysis_T);
  out += fmt::format(
      "time/tok = max past positions read per token, cache = max positions kept, path = max shortest path,\n"
      "congestion = copy routing bounds — all measured by the analysis at T = {} (0-based rows). Accuracy = held-out\n"
      "token accuracy on scored positions{}{}. Preset '{}', {:.0f} s in total, {} run(s) at a time.\n",
      T, chains ? "; chains = multihop queries whose answer follows >= 1 link" : "",
      rep.seeds > 1 ? fmt::format("; mean (min..max) over {} seeds", rep.seeds) : "", rep.preset, rep.seconds,
      rep.jobs);
  return out;
}

namespace {

void write_chart(const CompareReport& rep, const std::string& path) {
  std::vector<const CompareRow*> rows;
  for (const auto& r : rep.rows)
    if (r.ran) rows.push_back(&r);
  const int W = 160 + 110 * static_cast<int>(std::max<size_t>(rows.size(), 1)), H = 460;
  cairo_surface_t* surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, W, H);
  cairo_t* cr = cairo_create(surface);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  const double left = 70, right = W - 150, top = 40, bottom = H - 120;
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, 14);
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_move_to(cr, left, 24);
  cairo_show_text(cr, fmt::format("Held-out token accuracy per task (preset '{}')", rep.preset).c_str());
  // Axes and grid (0..100 %).
  cairo_set_font_size(cr, 11);
  for (int g = 0; g <= 100; g += 20) {
    const double y = bottom - (bottom - top) * g / 100.0;
    cairo_set_source_rgb(cr, 0.85, 0.85, 0.85);
    cairo_move_to(cr, left, y);
    cairo_line_to(cr, right, y);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_move_to(cr, left - 34, y + 4);
    cairo_show_text(cr, fmt::format("{}%", g).c_str());
  }
  static const double colors[][3] = {{0.27, 0.47, 0.67}, {0.93, 0.40, 0.47}, {0.13, 0.53, 0.20},
                                     {0.80, 0.73, 0.27}, {0.40, 0.80, 0.93}, {0.67, 0.20, 0.47}};
  const double group = (right - left) / static_cast<double>(std::max<size_t>(rows.size(), 1));
  const double bar = group * 0.8 / static_cast<double>(rep.tasks.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const double x0 = left + group * static_cast<double>(i) + group * 0.1;
    for (size_t k = 0; k < rep.tasks.size(); ++k) {
      const double acc = rows[i]->token_acc.at(rep.tasks[k]);
      const double h = (bottom - top) * acc;
      const auto& col = colors[k % 6];
      cairo_set_source_rgb(cr, col[0], col[1], col[2]);
      cairo_rectangle(cr, x0 + bar * static_cast<double>(k), bottom - h, bar * 0.92, h);
      cairo_fill(cr);
    }
    cairo_save(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_move_to(cr, x0 + group * 0.2, bottom + 10);
    cairo_rotate(cr, M_PI / 5);
    cairo_show_text(cr, rows[i]->mixer.c_str());
    cairo_restore(cr);
  }
  for (size_t k = 0; k < rep.tasks.size(); ++k) {  // legend
    const auto& col = colors[k % 6];
    cairo_set_source_rgb(cr, col[0], col[1], col[2]);
    cairo_rectangle(cr, right + 20, top + 22.0 * static_cast<double>(k), 14, 14);
    cairo_fill(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_move_to(cr, right + 40, top + 22.0 * static_cast<double>(k) + 12);
    cairo_show_text(cr, rep.tasks[k].c_str());
  }
  cairo_destroy(cr);
  const cairo_status_t st = cairo_surface_write_to_png(surface, path.c_str());
  cairo_surface_destroy(surface);
  MIXLAB_CHECK(st == CAIRO_STATUS_SUCCESS, "compare: cannot write the chart '{}': {}", path,
               cairo_status_to_string(st));
}

}  // namespace

void compare_write(const CompareReport& rep, const std::string& dir) {
  std::filesystem::create_directories(dir);
  json rows = json::array();
  std::string csv =
      "mixer,ran,note,structure,pattern,cost_class,analysis_T,time_per_token,cache,shortest_path,"
      "congestion";
  for (const auto& t : rep.tasks)
    csv += "," + t + "_token_acc," + t + "_answer_acc," + t + "_chain_acc," + t + "_token_acc_min," + t +
           "_token_acc_max," + t + "_chain_acc_min," + t + "_chain_acc_max";
  csv += ",train_tokens_per_s,decode_us_per_token,parameters,train_seconds\n";
  auto quote = [](const std::string& s) {
    std::string q = "\"";
    for (char c : s) q += (c == '"') ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  };
  for (const auto& r : rep.rows) {
    json j = {{"mixer", r.mixer},
              {"ran", r.ran},
              {"note", r.note},
              {"structure", r.structure},
              {"pattern", r.pattern},
              {"cost_class", r.cost_class},
              {"analysis_T", r.analysis_T},
              {"time_per_token", r.cost_max},
              {"cache", r.cache_max},
              {"shortest_path", r.shortest},
              {"congestion", r.congestion},
              {"token_acc", r.token_acc},
              {"answer_acc", r.answer_acc},
              {"eval_loss", r.eval_loss},
              {"chain_acc", r.chain_acc},
              {"seeds", rep.seeds},
              {"token_acc_seeds", r.token_acc_seeds},
              {"chain_acc_seeds", r.chain_acc_seeds},
              {"hop_acc", r.hop_acc},
              {"train_tokens_per_s", r.train_tokens_per_s},
              {"decode_us_per_token", r.decode_us_per_token},
              {"parameters", r.parameters},
              {"train_seconds", r.seconds}};
    rows.push_back(j);
    csv += fmt::format("{},{},{},{},{},{},{},{},{},{},{}", quote(r.mixer), r.ran ? 1 : 0, quote(r.note),
                       quote(r.structure), quote(r.pattern), quote(r.cost_class), r.analysis_T, r.cost_max, r.cache_max,
                       quote(r.shortest), quote(r.congestion));
    for (const auto& t : rep.tasks) {
      const bool has = r.token_acc.count(t) > 0;
      csv += has ? fmt::format(",{:.6f},{:.6f},", r.token_acc.at(t), r.answer_acc.at(t)) : std::string(",,,");
      if (r.chain_acc.count(t)) csv += fmt::format("{:.6f}", r.chain_acc.at(t));
      for (const auto* m : {&r.token_acc_seeds, &r.chain_acc_seeds}) {
        if (m->count(t) && !m->at(t).empty()) {
          const SeedStats st = seed_stats(m->at(t));
          csv += fmt::format(",{:.6f},{:.6f}", st.lo, st.hi);
        } else {
          csv += ",,";
        }
      }
    }
    csv +=
        fmt::format(",{:.1f},{:.2f},{},{:.2f}\n", r.train_tokens_per_s, r.decode_us_per_token, r.parameters, r.seconds);
  }
  const json doc = {{"preset", rep.preset}, {"tasks", rep.tasks}, {"seconds", rep.seconds},
                    {"jobs", rep.jobs},     {"seeds", rep.seeds}, {"config", rep.config_example},
                    {"rows", rows}};
  {
    std::ofstream out(dir + "/compare.json");
    MIXLAB_CHECK(out.good(), "compare: cannot write '{}/compare.json'", dir);
    out << doc.dump(2) << "\n";
  }
  {
    std::ofstream out(dir + "/compare.csv");
    MIXLAB_CHECK(out.good(), "compare: cannot write '{}/compare.csv'", dir);
    out << csv;
  }
  write_chart(rep, dir + "/compare.png");
}

}  // namespace mixlab
