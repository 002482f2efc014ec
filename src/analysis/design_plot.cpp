// The design search's picture (mixlab/analysis/design.h, design_plot): every candidate as time
// per token (log2 x) against max shortest path (log2 y), coloured by decode cache (log scale) when it
// is within the budget and hollow grey when not, the Pareto front as a line, the named patterns
// of seed 000 Table 1 labelled, the recommendation ringed.
#include <cairo.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "chart_canvas.h"
#include "mixlab/analysis/design.h"
#include "mixlab/core/error.h"

namespace mixlab {
namespace {

// Five-stop viridis, t in [0, 1].
void cache_color(cairo_t* cr, double t) {
  static const double kStops[5][3] = {{0.267, 0.005, 0.329},
                                      {0.230, 0.322, 0.546},
                                      {0.128, 0.567, 0.551},
                                      {0.369, 0.789, 0.383},
                                      {0.993, 0.906, 0.144}};
  t = std::clamp(t, 0.0, 1.0) * 4.0;
  const int k = std::min(3, static_cast<int>(t));
  const double u = t - k;
  cairo_set_source_rgb(cr, kStops[k][0] + u * (kStops[k + 1][0] - kStops[k][0]),
                       kStops[k][1] + u * (kStops[k + 1][1] - kStops[k][1]),
                       kStops[k][2] + u * (kStops[k + 1][2] - kStops[k][2]));
}

}  // namespace

void design_plot(const DesignResult& r, const std::string& path) {
  using analysis_detail::text_aligned;
  using analysis_detail::text_at;
  // Infinite paths (B = 0 beyond the window) have no place on the axis: left out, and said so.
  std::vector<const DesignCandidate*> shown;
  int64_t left_out = 0;
  int64_t screened = 0;
  for (const auto& c : r.candidates) {
    if (!c.measured) {
      ++screened;
      continue;
    }
    if (c.path_infinite) {
      ++left_out;
      continue;
    }
    shown.push_back(&c);
  }
  auto lx = [](const DesignCandidate& c) { return std::log2(static_cast<double>(std::max<int64_t>(c.time_max, 1))); };
  auto lc = [](const DesignCandidate& c) { return std::log2(static_cast<double>(std::max<int64_t>(c.cache_max, 1))); };
  auto ly = [](int64_t path) { return std::log2(static_cast<double>(std::max<int64_t>(path, 1))); };
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1, c0 = 0, c1 = 1;
  if (!shown.empty()) {
    x0 = x1 = lx(*shown[0]);
    y1 = ly(shown[0]->path_max);
    c0 = c1 = lc(*shown[0]);
    for (const auto* c : shown) {
      x0 = std::min(x0, lx(*c)), x1 = std::max(x1, lx(*c));
      y1 = std::max(y1, ly(c->path_max));
      if (c->within_budget) c0 = std::min(c0, lc(*c)), c1 = std::max(c1, lc(*c));
    }
  }
  y1 = std::max(y1, 1.0);
  if (c1 <= c0) c1 = c0 + 1;
  x0 -= 0.3, x1 += 0.3, y0 -= 0.2, y1 += 0.3;
  const int W = 900, H = 600;
  const double left = 70, right = W - 120, top = 40, bottom = H - 70;
  auto px = [&](double lxv) { return left + (right - left) * (lxv - x0) / (x1 - x0); };
  auto py_log = [&](double lyv) { return bottom - (bottom - top) * (lyv - y0) / (y1 - y0); };
  auto py = [&](double path) { return py_log(ly(static_cast<int64_t>(path))); };

  analysis_detail::Canvas canvas(W, H);
  cairo_t* cr = canvas.cr();
  const auto& o = r.options;
  analysis_detail::draw_titles(
      cr,
      fmt::format("mixlab design at T = {}: {} distinct candidates, {} within the budget, front {}", o.T,
                  r.candidates.size(), r.ranked.size(), r.front.size()),
      fmt::format("time per token: max |P(i)| (log2 axis){}{}",
                  left_out ? fmt::format("; {} with an infinite path not shown", left_out) : "",
                  screened ? fmt::format("; {} screened out by --max-time not shown", screened) : ""),
      "max shortest path (log2 axis)", left, bottom, H);
  cairo_set_line_width(cr, 1);
  cairo_set_font_size(cr, 10);
  // Grid: one line per power of two on x, per integer step (at most ~10 lines) on y.
  for (int e = static_cast<int>(std::ceil(x0)); e <= static_cast<int>(std::floor(x1)); ++e) {
    cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
    cairo_move_to(cr, px(e), top);
    cairo_line_to(cr, px(e), bottom);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    text_aligned(cr, px(e), bottom + 14, 0.5, fmt::format("{}", int64_t{1} << e));
  }
  for (int e = 0; e <= static_cast<int>(std::floor(y1)); ++e) {
    const double y = py_log(e);
    cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
    cairo_move_to(cr, left, y);
    cairo_line_to(cr, right, y);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    text_aligned(cr, left - 6, y + 4, 1, std::to_string(int64_t{1} << e));
  }
  // Candidates outside the budget first (hollow grey), then those within (filled, cache colour).
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto* c : shown) {
      if (c->within_budget != (pass == 1)) continue;
      const double x = px(lx(*c)), y = py(static_cast<double>(c->path_max));
      cairo_new_path(cr);  // no line from the last text or dot
      cairo_arc(cr, x, y, pass ? 3.5 : 3.0, 0, 2 * M_PI);
      if (pass == 0) {
        cairo_set_source_rgb(cr, 0.72, 0.72, 0.72);
        cairo_stroke(cr);
      } else {
        cache_color(cr, (lc(*c) - c0) / (c1 - c0));
        cairo_fill(cr);
      }
    }
  }
  // The front as a staircase over time: the least path found at each time or below.
  std::vector<const DesignCandidate*> front;
  for (size_t i : r.front)
    if (!r.candidates[i].path_infinite) front.push_back(&r.candidates[i]);
  std::sort(front.begin(), front.end(), [](const DesignCandidate* a, const DesignCandidate* b) {
    return std::make_pair(a->time_max, a->path_max) < std::make_pair(b->time_max, b->path_max);
  });
  cairo_set_source_rgb(cr, 0.85, 0.1, 0.1);
  cairo_set_line_width(cr, 1.5);
  bool started = false;
  int64_t best_path = std::numeric_limits<int64_t>::max();
  for (const auto* c : front) {
    if (c->path_max >= best_path) continue;
    const double x = px(lx(*c));
    if (started) {
      cairo_line_to(cr, x, py(static_cast<double>(best_path)));
    } else {
      cairo_move_to(cr, x, py(static_cast<double>(c->path_max)));
      started = true;
    }
    cairo_line_to(cr, x, py(static_cast<double>(c->path_max)));
    best_path = c->path_max;
  }
  if (started) cairo_stroke(cr);
  cairo_set_line_width(cr, 1);
  for (const auto* c : front) {
    cairo_new_path(cr);
    cairo_arc(cr, px(lx(*c)), py(static_cast<double>(c->path_max)), 5.5, 0, 2 * M_PI);
    cairo_stroke(cr);
  }
  // Named patterns (seed 000 Table 1) and the recommendation, labelled.
  cairo_set_source_rgb(cr, 0, 0, 0);
  for (const auto* c : shown) {
    if (!c->named) continue;
    const double x = px(lx(*c)), y = py(static_cast<double>(c->path_max));
    cairo_rectangle(cr, x - 4, y - 4, 8, 8);
    cairo_stroke(cr);
    text_at(cr, x + 7, y - 6, c->spec);
  }
  if (r.recommended >= 0) {
    const auto& c = r.candidates[static_cast<size_t>(r.recommended)];
    if (!c.path_infinite) {
      const double x = px(lx(c)), y = py(static_cast<double>(c.path_max));
      cairo_set_source_rgb(cr, 0.85, 0.1, 0.1);
      cairo_set_line_width(cr, 2);
      cairo_new_path(cr);
      cairo_arc(cr, x, y, 9, 0, 2 * M_PI);
      cairo_stroke(cr);
      cairo_set_font_size(cr, 12);
      text_at(cr, x + 11, y + 16, "recommended: " + c.spec);
    }
  }
  // Colour bar: cache max (log2) of the candidates within the budget.
  cairo_set_font_size(cr, 10);
  const double bx = right + 30, bw = 16;
  for (int k = 0; k < 100; ++k) {
    cache_color(cr, 1.0 - k / 99.0);
    cairo_rectangle(cr, bx, top + (bottom - top) * k / 100.0, bw, (bottom - top) / 100.0 + 1);
    cairo_fill(cr);
  }
  cairo_set_source_rgb(cr, 0, 0, 0);
  text_at(cr, bx - 10, top - 8, "cache max");
  text_at(cr, bx + bw + 4, top + 8, fmt::format("{:.0f}", std::exp2(c1)));
  text_at(cr, bx + bw + 4, bottom, fmt::format("{:.0f}", std::exp2(c0)));
  text_at(cr, bx - 10, bottom + 30, "red: front");
  text_at(cr, bx - 10, bottom + 44, "grey: over budget");
  text_at(cr, bx - 10, bottom + 58, "square: named");
  canvas.write_png(path, "design_plot");
}

}  // namespace mixlab
