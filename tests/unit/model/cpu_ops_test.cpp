// The element-wise kernels of cpu_ops.hpp: silu_mul against a double-precision reference, and
// its batch invariance (an element's result does not depend on the row's length or its index).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "model/cpu/cpu_ops.hpp"

using namespace conveyor::model;

namespace {

double silu_ref(double g, double u) { return g / (1.0 + std::exp(-g)) * u; }

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

} // namespace

BOOST_AUTO_TEST_SUITE(cpu_ops)

BOOST_AUTO_TEST_CASE(silu_mul_matches_a_double_reference) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> wide(-100.0f, 100.0f), narrow(-6.0f, 6.0f), up(-3.0f, 3.0f);
  std::vector<float> g, u;
  for (int i = 0; i < 4000; ++i) {
    g.push_back(i % 2 ? wide(rng) : narrow(rng));
    u.push_back(up(rng));
  }
  // Edges: zero of both signs, tiny, exp8's underflow bound either side, huge, one element left over.
  for (float x : {0.0f, -0.0f, 1e-30f, -1e-30f, 87.0f, -87.0f, 87.5f, -87.5f, 88.7f, -88.7f, 1e30f, -1e30f, 3.4e38f, -3.4e38f, 0.5f})
    for (float y : {1.0f, -0.75f}) {
      g.push_back(x);
      u.push_back(y);
    }
  std::vector<float> out(g.size());
  silu_mul(g.data(), u.data(), out.data(), static_cast<int32_t>(g.size()));
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double want = silu_ref(g[i], u[i]);
    BOOST_TEST_REQUIRE(std::isfinite(out[i]), "g " << g[i] << " u " << u[i] << " gives " << out[i]);
    const double err = std::abs(out[i] - want) / std::max(std::abs(want), 1e-30);
    // Below e^-87 the reference's g * e^g is subnormal or zero; ours flushes it to zero.
    if (std::abs(want) > 1e-30) worst = std::max(worst, err);
    else BOOST_TEST(std::abs(out[i]) <= 1e-30, "g " << g[i] << " gives " << out[i]);
  }
  BOOST_TEST(worst < 4e-7, "worst relative error " << worst);
}

BOOST_AUTO_TEST_CASE(silu_mul_gives_an_element_the_same_bits_wherever_it_sits) {
  std::mt19937 rng(9);
  std::normal_distribution<float> n(0.0f, 4.0f);
  std::vector<float> g(37), u(37);
  for (size_t i = 0; i < g.size(); ++i) {
    g[i] = n(rng);
    u[i] = n(rng);
  }
  std::vector<float> whole(g.size());
  silu_mul(g.data(), u.data(), whole.data(), static_cast<int32_t>(g.size()));
  for (int32_t first = 0; first < 37; first += 3)
    for (int32_t len = 1; first + len <= 37; len += 5) {
      std::vector<float> part(static_cast<size_t>(len));
      silu_mul(&g[static_cast<size_t>(first)], &u[static_cast<size_t>(first)], part.data(), len);
      for (int32_t i = 0; i < len; ++i)
        BOOST_TEST(same_bits(part[static_cast<size_t>(i)], whole[static_cast<size_t>(first + i)]), "first " << first << " len " << len << " i " << i);
    }
}

BOOST_AUTO_TEST_SUITE_END()
