#pragma once
// Small dense least squares for calibration: a handful of parameters, thousands of rows.
//   minimise Σ_i w_i (y_i − x_i·β)² + Σ_j λ_j (β_j − prior_j)²   subject to lo_j ≤ β_j ≤ hi_j
// The ridge term λ_j = ridge · Σ_i w_i x_ij² is a small pull toward the prior that keeps the normal
// equations solvable when two columns are nearly proportional (attention FLOPs that grow with the
// GEMM FLOPs of every layer alike); it does not move a parameter the rows determine. Bounds are
// kept by an active set: the parameter furthest outside its bounds is fixed there and the rest
// solved again. Rows are weighted by an integer count, so a bootstrap resample is a weight vector.

#include <cstdint>
#include <random>
#include <vector>

namespace shardscope::sim {

struct LinearProblem {
  std::vector<std::vector<double>> rows;  // x_i, each of parameters() values
  std::vector<double> y;                  // y_i
  std::vector<double> prior;              // where the ridge pulls
  std::vector<double> lo;
  std::vector<double> hi;
  double ridge = 1e-3;

  std::size_t parameters() const { return prior.size(); }
};

struct LinearFit {
  std::vector<double> beta;
  double sse = 0;  // Σ w_i (y_i − x_i·β)², the ridge term not included
};

/// Solves the problem with row i counted weights[i] times (empty: once each).
LinearFit solve_least_squares(const LinearProblem& problem, const std::vector<int>& weights = {});

/// A bootstrap resample of n rows: how many times each is drawn. Deterministic for a given
/// engine state on every platform (std::mt19937_64 is specified; the draw is engine() mod n).
std::vector<int> bootstrap_weights(std::size_t n, std::mt19937_64& engine);

/// The nearest-rank p-quantile (0 ≤ p ≤ 1) of `values` (sorted in place).
double quantile(std::vector<double>& values, double p);

}  // namespace shardscope::sim
