// chi_square_p_value: the upper tail of the chi-square distribution, and pooled_chi_square: the
// test of a histogram against exact probabilities, for the tests that check a sampled distribution
// (speculation must preserve the target's).
#pragma once

#include <cmath>
#include <map>

namespace vela::test {

// Upper tail of the chi-square distribution with `dof` degrees of freedom at x: the regularized
// upper incomplete gamma Q(dof / 2, x / 2) (a series below a + 1, a continued fraction above).
inline double chi_square_p_value(double x, int dof) {
  const double a = dof / 2.0, z = x / 2.0;
  if (z <= 0) return 1.0;
  const double log_prefix = a * std::log(z) - z - std::lgamma(a);
  if (z < a + 1) {
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 1000 && std::abs(term) > 1e-15 * std::abs(sum); ++n) {
      term *= z / (a + n);
      sum += term;
    }
    return 1.0 - sum * std::exp(log_prefix);
  }
  // Lentz's method for the continued fraction of Q.
  double b = z + 1 - a, c = 1e300, d = 1 / b, h = d;
  for (int i = 1; i < 1000; ++i) {
    double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::abs(d) < 1e-300) d = 1e-300;
    c = b + an / c;
    if (std::abs(c) < 1e-300) c = 1e-300;
    d = 1 / d;
    double delta = d * c;
    h *= delta;
    if (std::abs(delta - 1) < 1e-15) break;
  }
  return std::exp(log_prefix) * h;
}

struct ChiSquare {
  double chi2 = 0;
  int bins = 0;
  double p_value = 1;
};

// Pearson's chi-square of `observed` outcome counts from n_draws draws against `expected`
// probabilities, the outcomes expected fewer than 5 times pooled into one bin (an outcome missing
// from `observed` was drawn 0 times).
template <class Outcome>
ChiSquare pooled_chi_square(const std::map<Outcome, double>& expected,
                            const std::map<Outcome, int>& observed, int n_draws) {
  double chi2 = 0, pooled_e = 0, pooled_o = 0;
  int bins = 0;
  for (const auto& [outcome, p] : expected) {
    const double e = p * n_draws;
    const auto it = observed.find(outcome);
    const double o = it == observed.end() ? 0 : it->second;
    if (e < 5) {
      pooled_e += e;
      pooled_o += o;
      continue;
    }
    chi2 += (o - e) * (o - e) / e;
    ++bins;
  }
  if (pooled_e > 0) {
    chi2 += (pooled_o - pooled_e) * (pooled_o - pooled_e) / pooled_e;
    ++bins;
  }
  return {chi2, bins, chi_square_p_value(chi2, bins - 1)};
}

}  // namespace vela::test
