// Shared Cairo drawing for the analysis charts (src/analysis/chart_canvas.h).
#include "chart_canvas.h"

#include <cmath>
#include <cstdio>

#include "mixlab/core/error.h"

namespace mixlab::analysis_detail {
namespace {

constexpr double kPalette[kPaletteSize][3] = {
    {0.27, 0.47, 0.67}, {0.93, 0.40, 0.47}, {0.13, 0.53, 0.20}, {0.80, 0.73, 0.27},  // Tol bright
    {0.40, 0.80, 0.93}, {0.67, 0.20, 0.47}, {0.20, 0.13, 0.53}, {0.93, 0.47, 0.20},  // + indigo, orange
    {0.27, 0.67, 0.60}, {0.53, 0.13, 0.33}, {0.60, 0.60, 0.20}, {0.00, 0.00, 0.00},  // teal, wine, olive, black
    {0.55, 0.35, 0.17}, {0.45, 0.45, 0.45}, {0.55, 0.80, 0.20}, {0.98, 0.55, 0.80},  // brown, grey, lime, pink
};

}  // namespace

void set_series_color(cairo_t* cr, size_t series) {
  const auto& c = kPalette[series % kPaletteSize];
  cairo_set_source_rgb(cr, c[0], c[1], c[2]);
}

Canvas::Canvas(int w, int h)
    : surface_(cairo_image_surface_create(CAIRO_FORMAT_ARGB32, w, h)), cr_(cairo_create(surface_)) {
  cairo_set_source_rgb(cr_, 1, 1, 1);
  cairo_paint(cr_);
  cairo_select_font_face(cr_, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_source_rgb(cr_, 0, 0, 0);
}

Canvas::~Canvas() {
  cairo_destroy(cr_);
  cairo_surface_destroy(surface_);
}

void Canvas::write_png(const std::string& path, const char* who) {
  cairo_surface_flush(surface_);
  const std::string tmp = path + ".tmp";
  const cairo_status_t st = cairo_surface_write_to_png(surface_, tmp.c_str());
  if (st != CAIRO_STATUS_SUCCESS) {
    std::remove(tmp.c_str());
    MIXLAB_CHECK(false, "{}: cannot write '{}': {}", who, path, cairo_status_to_string(st));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    MIXLAB_CHECK(false, "{}: cannot write '{}': rename from '{}' failed", who, path, tmp);
  }
}

void text_at(cairo_t* cr, double x, double y, const std::string& s) {
  cairo_move_to(cr, x, y);
  cairo_show_text(cr, s.c_str());
}

void text_aligned(cairo_t* cr, double x, double y, double align, const std::string& s) {
  cairo_text_extents_t ext;
  cairo_text_extents(cr, s.c_str(), &ext);
  text_at(cr, x - align * ext.x_advance, y, s);
}

void draw_titles(cairo_t* cr, const std::string& title, const std::string& x_label, const std::string& y_label,
                 double left, double bottom, double height) {
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_set_font_size(cr, 14);
  text_at(cr, left, 24, title);
  cairo_set_font_size(cr, 11);
  text_at(cr, left, height - 24, x_label);
  cairo_save(cr);
  cairo_move_to(cr, 22, bottom);
  cairo_rotate(cr, -M_PI / 2);
  cairo_show_text(cr, y_label.c_str());
  cairo_restore(cr);
}

}  // namespace mixlab::analysis_detail
