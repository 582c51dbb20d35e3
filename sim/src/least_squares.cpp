#include "shardscope/sim/least_squares.hpp"

#include <algorithm>
#include <cmath>

namespace shardscope::sim {
namespace {

// Solves A·x = b (A symmetric positive definite after the ridge) by Gaussian elimination with
// partial pivoting; a singular system leaves the affected unknowns at 0.
std::vector<double> solve_linear(std::vector<std::vector<double>> a, std::vector<double> b) {
  const std::size_t n = b.size();
  for (std::size_t col = 0; col < n; ++col) {
    std::size_t pivot = col;
    for (std::size_t r = col + 1; r < n; ++r) {
      if (std::fabs(a[r][col]) > std::fabs(a[pivot][col])) pivot = r;
    }
    if (std::fabs(a[pivot][col]) < 1e-300) continue;
    std::swap(a[col], a[pivot]);
    std::swap(b[col], b[pivot]);
    for (std::size_t r = col + 1; r < n; ++r) {
      const double f = a[r][col] / a[col][col];
      for (std::size_t c = col; c < n; ++c) a[r][c] -= f * a[col][c];
      b[r] -= f * b[col];
    }
  }
  std::vector<double> x(n, 0.0);
  for (std::size_t i = n; i-- > 0;) {
    if (std::fabs(a[i][i]) < 1e-300) continue;
    double s = b[i];
    for (std::size_t c = i + 1; c < n; ++c) s -= a[i][c] * x[c];
    x[i] = s / a[i][i];
  }
  return x;
}

// The unconstrained ridge solution over the free parameters, the fixed ones held at `beta`.
void solve_free(const LinearProblem& p, const std::vector<int>& w, const std::vector<bool>& fixed,
                std::vector<double>& beta) {
  std::vector<std::size_t> free;
  for (std::size_t j = 0; j < p.parameters(); ++j) {
    if (!fixed[j]) free.push_back(j);
  }
  if (free.empty()) return;
  const std::size_t k = free.size();
  std::vector<std::vector<double>> a(k, std::vector<double>(k, 0.0));
  std::vector<double> b(k, 0.0);
  std::vector<double> scale(k, 0.0);  // Σ w x_j²: the ridge's unit
  for (std::size_t i = 0; i < p.rows.size(); ++i) {
    const double wi = w.empty() ? 1.0 : w[i];
    if (wi == 0) continue;
    const auto& x = p.rows[i];
    double r = p.y[i];
    for (std::size_t j = 0; j < p.parameters(); ++j) {
      if (fixed[j]) r -= x[j] * beta[j];
    }
    for (std::size_t u = 0; u < k; ++u) {
      const double xu = x[free[u]];
      if (xu == 0) continue;
      b[u] += wi * xu * r;
      scale[u] += wi * xu * xu;
      for (std::size_t v = 0; v < k; ++v) a[u][v] += wi * xu * x[free[v]];
    }
  }
  for (std::size_t u = 0; u < k; ++u) {
    if (scale[u] == 0) {  // no row sees it: it stays where the prior has it
      a[u][u] = 1;
      b[u] = p.prior[free[u]];
      continue;
    }
    const double lambda = p.ridge * scale[u];
    a[u][u] += lambda;
    b[u] += lambda * p.prior[free[u]];
  }
  const auto x = solve_linear(std::move(a), std::move(b));
  for (std::size_t u = 0; u < k; ++u) beta[free[u]] = x[u];
}

}  // namespace

LinearFit solve_least_squares(const LinearProblem& p, const std::vector<int>& weights) {
  LinearFit fit;
  fit.beta = p.prior;
  std::vector<bool> fixed(p.parameters(), false);
  // Active set: each round fixes the parameter furthest outside its bounds (relative to its
  // range), so at most one round per parameter.
  for (std::size_t round = 0; round <= p.parameters(); ++round) {
    solve_free(p, weights, fixed, fit.beta);
    std::size_t worst = p.parameters();
    double worst_excess = 0;
    for (std::size_t j = 0; j < p.parameters(); ++j) {
      if (fixed[j]) continue;
      const double range = std::max(p.hi[j] - p.lo[j], 1e-300);
      const double excess = std::max(p.lo[j] - fit.beta[j], fit.beta[j] - p.hi[j]) / range;
      if (excess > worst_excess) {
        worst_excess = excess;
        worst = j;
      }
    }
    if (worst == p.parameters()) break;
    fit.beta[worst] = std::clamp(fit.beta[worst], p.lo[worst], p.hi[worst]);
    fixed[worst] = true;
  }
  for (std::size_t i = 0; i < p.rows.size(); ++i) {
    const double wi = weights.empty() ? 1.0 : weights[i];
    double r = p.y[i];
    for (std::size_t j = 0; j < p.parameters(); ++j) r -= p.rows[i][j] * fit.beta[j];
    fit.sse += wi * r * r;
  }
  return fit;
}

std::vector<int> bootstrap_weights(std::size_t n, std::mt19937_64& engine) {
  std::vector<int> w(n, 0);
  for (std::size_t i = 0; i < n; ++i) ++w[static_cast<std::size_t>(engine() % n)];
  return w;
}

double quantile(std::vector<double>& values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = std::ceil(p * static_cast<double>(values.size()));
  const auto index = static_cast<std::size_t>(std::max(rank, 1.0)) - 1;
  return values[std::min(index, values.size() - 1)];
}

}  // namespace shardscope::sim
