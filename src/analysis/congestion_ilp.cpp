// Exact minimum congestion of the copy routing by an integer program solved with GLPK.
//
// Variables: x[c, e] ∈ {0, 1} for commodity c (c -> c + n) and every edge e = (u -> v) of the
// pattern with c <= u < v <= c + n (a path from c to c + n never leaves that window), and an
// integer C. Constraints: flow conservation of one unit from c to c + n for every commodity;
// for every node v: (1 if v is a source) + Σ_c Σ_u x[c, (u -> v)] <= C. Minimise C.
// On a DAG a binary unit flow is exactly one path, so a solution is a routing; we rebuild it,
// validate it and count its congestion rather than trusting the objective value.
#include <glpk.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "mixlab/analysis/congestion.h"
#include "mixlab/analysis/metrics.h"
#include "mixlab/core/error.h"

namespace mixlab {
namespace {

// Owns a glp_prob so that an exception cannot leak it.
struct GlpProb {
  glp_prob* lp = glp_create_prob();
  ~GlpProb() { glp_delete_prob(lp); }
};

}  // namespace

ExactCongestion congestion_exact_ilp(const Pattern& p, int64_t n, int64_t lower, int64_t upper, double time_limit_s) {
  MIXLAB_CHECK(n >= 1 && n <= 64, "congestion_exact_ilp: n must be in [1, 64] (the program grows as n^2), got {}", n);
  MIXLAB_CHECK(lower >= 1 && upper >= lower, "congestion_exact_ilp: need 1 <= lower <= upper, got lower={} upper={}",
               lower, upper);
  MIXLAB_CHECK(time_limit_s > 0, "congestion_exact_ilp: time_limit_s must be > 0, got {}", time_limit_s);
  PatternGraph g = pattern_graph_build(p, 2 * n);

  // Edges per commodity: (u, v) pairs inside the window; column = 1 + running index.
  struct Edge {
    int64_t c, u, v;
  };
  std::vector<Edge> edges;
  for (int64_t c = 0; c < n; ++c) {
    for (int64_t v = c + 1; v <= c + n; ++v) {
      for (int64_t e = g.start[v]; e < g.start[v + 1]; ++e) {
        int64_t u = g.pred[e];
        if (u < c) break;
        if (!p.recurrent() && u != c) continue;  // B = 0: only direct edges from the source
        edges.push_back({c, u, v});
      }
    }
  }
  const int n_edge_cols = static_cast<int>(edges.size());
  const int col_C = n_edge_cols + 1;

  // Rows: flow rows (c, v) for v in [c, c + n], then one load row per node 0..2n-1.
  auto flow_row = [&](int64_t c, int64_t v) { return static_cast<int>(c * (n + 1) + (v - c)) + 1; };
  const int n_flow_rows = static_cast<int>(n * (n + 1));
  auto load_row = [&](int64_t v) { return n_flow_rows + static_cast<int>(v) + 1; };
  const int n_rows = n_flow_rows + static_cast<int>(2 * n);

  glp_term_out(GLP_OFF);  // GLPK prints to the terminal by default
  GlpProb prob;
  glp_prob* lp = prob.lp;
  glp_set_obj_dir(lp, GLP_MIN);
  glp_add_rows(lp, n_rows);
  for (int64_t c = 0; c < n; ++c) {
    for (int64_t v = c; v <= c + n; ++v) {
      double rhs = v == c ? 1.0 : (v == c + n ? -1.0 : 0.0);  // out - in
      glp_set_row_bnds(lp, flow_row(c, v), GLP_FX, rhs, rhs);
    }
  }
  for (int64_t v = 0; v < 2 * n; ++v) {
    double sources_here = v < n ? 1.0 : 0.0;  // node v < n is the source of commodity v
    glp_set_row_bnds(lp, load_row(v), GLP_UP, 0.0, -sources_here);
  }
  glp_add_cols(lp, n_edge_cols + 1);
  for (int j = 1; j <= n_edge_cols; ++j) glp_set_col_kind(lp, j, GLP_BV);
  glp_set_col_kind(lp, col_C, GLP_IV);
  if (lower == upper)
    glp_set_col_bnds(lp, col_C, GLP_FX, static_cast<double>(lower), static_cast<double>(lower));
  else
    glp_set_col_bnds(lp, col_C, GLP_DB, static_cast<double>(lower), static_cast<double>(upper));
  glp_set_obj_coef(lp, col_C, 1.0);

  // Matrix in GLPK's 1-based triplet form (index 0 unused).
  std::vector<int> ia(1), ja(1);
  std::vector<double> ar(1);
  auto put = [&](int r, int c, double v) {
    ia.push_back(r);
    ja.push_back(c);
    ar.push_back(v);
  };
  for (int j = 0; j < n_edge_cols; ++j) {
    const Edge& e = edges[j];
    put(flow_row(e.c, e.u), j + 1, 1.0);   // leaves u
    put(flow_row(e.c, e.v), j + 1, -1.0);  // enters v
    put(load_row(e.v), j + 1, 1.0);        // visits v
  }
  for (int64_t v = 0; v < 2 * n; ++v) put(load_row(v), col_C, -1.0);
  glp_load_matrix(lp, static_cast<int>(ia.size()) - 1, ia.data(), ja.data(), ar.data());

  glp_iocp parm;
  glp_init_iocp(&parm);
  parm.presolve = GLP_ON;
  parm.msg_lev = GLP_MSG_OFF;
  parm.tm_lim = static_cast<int>(std::min(time_limit_s * 1000.0, 2.0e9));
  int ret = glp_intopt(lp, &parm);
  int status = glp_mip_status(lp);

  ExactCongestion out;
  if (status != GLP_OPT && status != GLP_FEAS) {
    out.status = ret == GLP_ETMLIM ? "no solution found within the time limit"
                                   : fmt::format("no solution found (GLPK code {}, status {})", ret, status);
    return out;
  }
  // Rebuild the paths from the chosen edges.
  std::vector<std::map<int64_t, int64_t>> next(static_cast<size_t>(n));
  for (int j = 0; j < n_edge_cols; ++j)
    if (glp_mip_col_val(lp, j + 1) > 0.5) next[edges[j].c][edges[j].u] = edges[j].v;
  out.routing.n = n;
  out.routing.paths.resize(static_cast<size_t>(n));
  for (int64_t c = 0; c < n; ++c) {
    auto& path = out.routing.paths[c];
    path.push_back(c);
    while (path.back() != c + n) {
      auto it = next[c].find(path.back());
      MIXLAB_ASSERT(it != next[c].end(), "ILP flow of commodity {} stops at {}", c, path.back());
      path.push_back(it->second);
    }
  }
  routing_validate(p, out.routing);
  out.value = routing_congestion(out.routing);
  MIXLAB_ASSERT(out.value <= std::lround(glp_mip_obj_val(lp)), "ILP routing congestion {} above objective {}",
                out.value, glp_mip_obj_val(lp));
  out.optimal = status == GLP_OPT;
  out.status = out.optimal ? "optimal" : "not proven optimal (time limit)";
  return out;
}

}  // namespace mixlab
