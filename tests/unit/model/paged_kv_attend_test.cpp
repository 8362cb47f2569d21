// paged_kv::attend (AVX2 dots, GQA heads sharing each K/V row, block-wise walk) against a
// straightforward double reference on random data: head sizes with and without a vector tail,
// block sizes that do and do not divide the context, a shuffled block table, the fp16-inputs
// path, and bit-identical results for a head whether it is attended alone or in a group.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "model/dequant.hpp"
#include "model/paged_kv.hpp"

namespace conveyor::model {
namespace {

double fp16(double x) { return fp16_to_fp32(fp32_to_fp16(static_cast<float>(x))); }

struct fixture {
  int32_t layers = 2, blocks, bs, n_kv = 2, hd;
  paged_kv kv;
  std::vector<block_id> table;

  fixture(int32_t block_size, int32_t head_dim, int32_t positions, std::mt19937& rng)
      : blocks((positions + block_size - 1) / block_size + 3), bs(block_size), hd(head_dim),
        kv(layers, blocks, block_size, n_kv, head_dim), table(static_cast<size_t>(blocks)) {
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), rng);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (int32_t l = 0; l < layers; ++l)
      for (block_id b = 0; b < blocks; ++b)
        for (int32_t s = 0; s < bs; ++s)
          for (int32_t e = 0; e < n_kv * hd; ++e) {
            kv.k(l, b, s)[e] = static_cast<float>(fp16(u(rng)));
            kv.v(l, b, s)[e] = static_cast<float>(fp16(u(rng)));
          }
  }

  // One head, in double, in the obvious order.
  std::vector<double> reference(int32_t l, int32_t pos, int32_t kvh, const float* q, float scale, bool f16) const {
    std::vector<double> s(static_cast<size_t>(pos + 1)), out(static_cast<size_t>(hd), 0.0);
    for (int32_t j = 0; j <= pos; ++j) {
      const float* kj = kv.k(l, table[static_cast<size_t>(j / bs)], j % bs) + kvh * hd;
      double dot = 0;
      for (int32_t e = 0; e < hd; ++e) dot += (f16 ? fp16(q[e]) : q[e]) * double{kj[e]};
      s[static_cast<size_t>(j)] = dot * scale;
    }
    const double mx = *std::max_element(s.begin(), s.end());
    double sum = 0;
    for (double& e : s) sum += (e = std::exp(e - mx));
    for (int32_t j = 0; j <= pos; ++j) {
      const float* vj = kv.v(l, table[static_cast<size_t>(j / bs)], j % bs) + kvh * hd;
      const double p = f16 ? fp16(s[static_cast<size_t>(j)] / sum) : s[static_cast<size_t>(j)] / sum;
      for (int32_t e = 0; e < hd; ++e) out[static_cast<size_t>(e)] += p * vj[e];
    }
    return out;
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(paged_kv_attend)

BOOST_AUTO_TEST_CASE(attend_matches_scalar_reference) {
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (int32_t bs : {16, 5})
    for (int32_t hd : {64, 6, 24, 130})
      for (int32_t pos : {0, 1, 4, 15, 16, 77})
        for (bool f16 : {false, true}) {
          fixture fx(bs, hd, pos + 1, rng);
          const int32_t n_q = 3, l = 1, kvh = 1;
          const float scale = 3.0f / std::sqrt(static_cast<float>(hd));  // peaky enough to matter
          std::vector<float> q(static_cast<size_t>(n_q * hd)), out(q.size(), NAN);
          for (float& x : q) x = g(rng);
          std::vector<float> scores(static_cast<size_t>(n_q * (pos + 1)));
          fx.kv.attend(l, fx.table.data(), pos, kvh, n_q, q.data(), scale, out.data(), scores.data(), f16);
          // fp16 probabilities can round the other way than the double reference's: one fp16 ulp.
          const double tol = f16 ? 2e-3 : 2e-5;
          for (int32_t i = 0; i < n_q; ++i) {
            const auto ref = fx.reference(l, pos, kvh, &q[static_cast<size_t>(i * hd)], scale, f16);
            double err = 0;
            for (int32_t e = 0; e < hd; ++e)
              err = std::max(err, std::abs(out[static_cast<size_t>(i * hd + e)] - ref[static_cast<size_t>(e)]));
            BOOST_TEST(err < tol, "bs " << bs << " hd " << hd << " pos " << pos << " f16 " << f16 << " head " << i
                                        << " max abs error " << err);
          }
        }
}

BOOST_AUTO_TEST_CASE(a_head_gives_the_same_bits_alone_or_grouped) {
  std::mt19937 rng(11);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (int32_t n_q : {3, 20})  // 20 heads of 64 exceed one call's 16 and are split
    for (bool f16 : {false, true}) {
      const int32_t hd = 64, bs = 16, pos = 40;
      fixture fx(bs, hd, pos + 1, rng);
      std::vector<float> q(static_cast<size_t>(n_q * hd)), grouped(q.size()), alone(q.size());
      for (float& x : q) x = g(rng);
      std::vector<float> scores(static_cast<size_t>(n_q * (pos + 1)));
      fx.kv.attend(0, fx.table.data(), pos, 0, n_q, q.data(), 0.125f, grouped.data(), scores.data(), f16);
      for (int32_t i = 0; i < n_q; ++i)
        fx.kv.attend(0, fx.table.data(), pos, 0, 1, &q[static_cast<size_t>(i * hd)], 0.125f,
                     &alone[static_cast<size_t>(i * hd)], scores.data(), f16);
      BOOST_TEST(grouped == alone);
    }
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::model
