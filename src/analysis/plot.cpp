// Sparsity pictures of A and B (seed 000 Fig. 2) drawn with Cairo into PNG or SVG.
#include <cairo-svg.h>
#include <cairo.h>

#include <algorithm>
#include <cctype>
#include <memory>

#include "mixlab/analysis/analyze.h"
#include "mixlab/core/error.h"

// Cairo's text API loads fontconfig, which keeps its configuration cache for the whole process;
// LeakSanitizer reports that cache at exit (sanitizer CI builds). Weak, so that a program with
// its own suppression list keeps it.
extern "C" __attribute__((weak)) const char* __lsan_default_suppressions() { return "leak:libfontconfig\n"; }

namespace mixlab {
namespace {

constexpr double kPanel = 512.0;  // matrix side in points
constexpr double kMargin = 36.0;  // around and between panels
constexpr double kHeader = 64.0;  // room for the titles

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return s;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void text(cairo_t* cr, double x, double y, double size, const std::string& s) {
  cairo_set_font_size(cr, size);
  cairo_move_to(cr, x, y);
  cairo_show_text(cr, s.c_str());
}

// One T x T panel at (x0, y0): rows i top to bottom, columns j left to right.
void draw_panel(cairo_t* cr, double x0, double y0, int64_t T, const std::vector<std::vector<int64_t>>& rows,
                bool diagonal, const std::string& title) {
  const double cell = kPanel / static_cast<double>(T);
  cairo_set_source_rgb(cr, 0, 0, 0);
  text(cr, x0, y0 - 10, 15, title);
  // The causal region (j <= i, or j < i for B) in a faint grey, so zeros inside it read as zeros.
  cairo_set_source_rgb(cr, 0.95, 0.95, 0.95);
  for (int64_t i = 0; i < T; ++i) {
    double w = static_cast<double>(diagonal ? i + 1 : i) * cell;
    if (w > 0) cairo_rectangle(cr, x0, y0 + static_cast<double>(i) * cell, w, cell);
  }
  cairo_fill(cr);
  cairo_set_source_rgb(cr, 0.85, 0.05, 0.05);  // non-zeros in red
  for (int64_t i = 0; i < T; ++i) {
    for (int64_t j : rows[i])
      cairo_rectangle(cr, x0 + static_cast<double>(j) * cell, y0 + static_cast<double>(i) * cell, cell, cell);
    if (diagonal)
      cairo_rectangle(cr, x0 + static_cast<double>(i) * cell, y0 + static_cast<double>(i) * cell, cell, cell);
  }
  cairo_fill(cr);
  if (T <= 64) {  // a cell grid only where cells are large enough to see it
    cairo_set_source_rgb(cr, 0.8, 0.8, 0.8);
    cairo_set_line_width(cr, 0.5);
    for (int64_t k = 1; k < T; ++k) {
      double t = static_cast<double>(k) * cell;
      cairo_move_to(cr, x0 + t, y0);
      cairo_line_to(cr, x0 + t, y0 + kPanel);
      cairo_move_to(cr, x0, y0 + t);
      cairo_line_to(cr, x0 + kPanel, y0 + t);
    }
    cairo_stroke(cr);
  }
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_set_line_width(cr, 1.0);
  cairo_rectangle(cr, x0, y0, kPanel, kPanel);
  cairo_stroke(cr);
}

}  // namespace

void analysis_plot(const Pattern& p, int64_t T, const std::string& path) {
  MIXLAB_CHECK(T >= 1, "analysis_plot: T must be >= 1, got {}", T);
  MIXLAB_CHECK(T <= kPlotMaxT, "analysis_plot: T = {} is above the plot limit {} (cells would be under 2 points)", T,
               kPlotMaxT);
  const std::string ext = lower(path);
  const bool png = ends_with(ext, ".png"), svg = ends_with(ext, ".svg");
  MIXLAB_CHECK(png || svg, "analysis_plot: file '{}' must end in .png or .svg", path);

  std::vector<std::vector<int64_t>> rows(static_cast<size_t>(T)), none(static_cast<size_t>(T));
  for (int64_t i = 0; i < T; ++i) rows[i] = p.row(i);

  const double width = 2 * kPanel + 3 * kMargin, height = kPanel + kHeader + kMargin;
  std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)> surface(
      svg ? cairo_svg_surface_create(path.c_str(), width, height)
          : cairo_image_surface_create(CAIRO_FORMAT_RGB24, static_cast<int>(width), static_cast<int>(height)),
      &cairo_surface_destroy);
  MIXLAB_CHECK(cairo_surface_status(surface.get()) == CAIRO_STATUS_SUCCESS, "analysis_plot: cannot create '{}': {}",
               path, cairo_status_to_string(cairo_surface_status(surface.get())));
  std::unique_ptr<cairo_t, decltype(&cairo_destroy)> ctx(cairo_create(surface.get()), &cairo_destroy);
  cairo_t* cr = ctx.get();
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_source_rgb(cr, 0, 0, 0);
  text(cr, kMargin, 24, 16,
       fmt::format("{}  —  {},  T = {}  (row i down, column j across, 0-based; non-zeros red)", p.spec(),
                   p.structure_name(), T));
  const double y0 = kHeader;
  draw_panel(cr, kMargin, y0, T, rows, true, "A: P(i) and the diagonal");
  draw_panel(cr, 2 * kMargin + kPanel, y0, T, p.recurrent() ? rows : none, false,
             p.recurrent() ? "B: P(i), strictly lower" : "B = 0 (non-recurrent: attention)");
  ctx.reset();
  cairo_status_t st = CAIRO_STATUS_SUCCESS;
  if (png) {
    st = cairo_surface_write_to_png(surface.get(), path.c_str());
  } else {
    cairo_surface_finish(surface.get());
    st = cairo_surface_status(surface.get());
  }
  MIXLAB_CHECK(st == CAIRO_STATUS_SUCCESS, "analysis_plot: cannot write '{}': {}", path, cairo_status_to_string(st));
}

}  // namespace mixlab
