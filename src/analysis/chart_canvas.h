// src/analysis/chart_canvas.h — private: what every Cairo chart of the analysis area shares
// (bar_chart_png, scatter_chart_png, line_chart_png): a white canvas with the chart font, the
// series palette, text placement, the title and axis titles, and the PNG write that never leaves
// a half-written file at the destination.
#pragma once

#include <cairo.h>

#include <cstddef>
#include <string>

namespace mixlab::analysis_detail {

/// Series colours: Paul Tol's colour-blind-safe "bright" first (bar charts use these), then
/// enough further distinct colours for one line per registered mixer; cycled beyond that.
constexpr size_t kPaletteSize = 16;
void set_series_color(cairo_t* cr, size_t series);

/// An ARGB image of w x h points painted white, drawing in black with the sans-serif chart font.
class Canvas {
 public:
  Canvas(int w, int h);
  ~Canvas();
  Canvas(const Canvas&) = delete;
  Canvas& operator=(const Canvas&) = delete;

  cairo_t* cr() const { return cr_; }

  /// Writes the image to `path` through a temporary file renamed into place, so a reader never
  /// sees a partial PNG. Throws mixlab::Error "<who>: cannot write '<path>': <reason>".
  void write_png(const std::string& path, const char* who);

 private:
  cairo_surface_t* surface_;
  cairo_t* cr_;
};

/// Text with its baseline starting at (x, y), in the current font and colour.
void text_at(cairo_t* cr, double x, double y, const std::string& s);
/// Text whose right end (align = 1) or centre (align = 0.5) is at x.
void text_aligned(cairo_t* cr, double x, double y, double align, const std::string& s);

/// The chart title above the plot, the x title under it and the y title rotated along its left
/// edge. `left`/`bottom` are the plot's edges; `height` is the canvas height.
void draw_titles(cairo_t* cr, const std::string& title, const std::string& x_label, const std::string& y_label,
                 double left, double bottom, double height);

}  // namespace mixlab::analysis_detail
