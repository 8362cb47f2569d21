// paged_kv::attend (keys in lanes, GQA heads sharing each K/V row, block-wise walk) against a
// straightforward double reference on random data: head sizes with and without a vector tail,
// block sizes that do and do not divide the context, a shuffled block table, the fp16-inputs
// path, and bit-identical results for a head whether it is attended alone or in a group, for a
// kv head alone or with the others, and for a row alone or with the rows after it; all for both storages. The f16 storage against the f32 one holding the same values (bit for bit), store /
// load round trips, and the pool's size.
#include <boost/test/unit_test.hpp>

#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "model/cpu/paged_kv.hpp"
#include "model/formats/dequant.hpp"

namespace conveyor::model {
namespace {

double fp16(double x) { return fp16_to_fp32(fp32_to_fp16(static_cast<float>(x))); }

struct fixture {
  int32_t layers = 2, blocks, bs, n_kv = 2, hd;
  paged_kv kv;
  std::vector<block_id> table;

  // Random fp16-representable K and V everywhere, so both storages hold the same values.
  fixture(int32_t block_size, int32_t head_dim, int32_t positions, std::mt19937& rng, kv_storage st,
          cpu_isa isa = cpu_best_isa(), int32_t kv_heads = 2)
      : blocks((positions + block_size - 1) / block_size + 3), bs(block_size), n_kv(kv_heads), hd(head_dim),
        kv(layers, blocks, block_size, n_kv, head_dim, st, isa), table(static_cast<size_t>(blocks)) {
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), rng);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> k(static_cast<size_t>(n_kv * hd)), v(k.size());
    for (int32_t l = 0; l < layers; ++l)
      for (block_id b = 0; b < blocks; ++b)
        for (int32_t s = 0; s < bs; ++s) {
          for (size_t e = 0; e < k.size(); ++e) {
            k[e] = static_cast<float>(fp16(u(rng)));
            v[e] = static_cast<float>(fp16(u(rng)));
          }
          kv.store(l, b, s, k.data(), v.data());
        }
  }

  std::vector<float> row(int32_t l, int32_t j, bool want_v) const {
    std::vector<float> k(static_cast<size_t>(n_kv * hd)), v(k.size());
    kv.load(l, table[static_cast<size_t>(j / bs)], j % bs, k.data(), v.data());
    return want_v ? v : k;
  }

  // One head, in double, in the obvious order.
  std::vector<double> reference(int32_t l, int32_t pos, int32_t kvh, const float* q, float scale, bool f16) const {
    std::vector<double> s(static_cast<size_t>(pos + 1)), out(static_cast<size_t>(hd), 0.0);
    for (int32_t j = 0; j <= pos; ++j) {
      const std::vector<float> kr = row(l, j, false);
      const float* kj = kr.data() + kvh * hd;
      double dot = 0;
      for (int32_t e = 0; e < hd; ++e) dot += (f16 ? fp16(q[e]) : q[e]) * double{kj[e]};
      s[static_cast<size_t>(j)] = dot * scale;
    }
    const double mx = *std::max_element(s.begin(), s.end());
    double sum = 0;
    for (double& e : s) sum += (e = std::exp(e - mx));
    for (int32_t j = 0; j <= pos; ++j) {
      const std::vector<float> vr = row(l, j, true);
      const float* vj = vr.data() + kvh * hd;
      const double p = f16 ? fp16(s[static_cast<size_t>(j)] / sum) : s[static_cast<size_t>(j)] / sum;
      for (int32_t e = 0; e < hd; ++e) out[static_cast<size_t>(e)] += p * vj[e];
    }
    return out;
  }
};

const char* name(kv_storage s) { return s == kv_storage::f16 ? "f16" : "f32"; }

} // namespace

BOOST_AUTO_TEST_SUITE(paged_kv_attend)

BOOST_AUTO_TEST_CASE(attend_matches_scalar_reference) {
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (int32_t bs : {16, 5})
    for (int32_t hd : {64, 6, 24, 130})
      for (int32_t pos : {0, 1, 4, 15, 16, 77})
        for (bool f16 : {false, true})
          for (kv_storage st : {kv_storage::f32, kv_storage::f16}) {
            fixture fx(bs, hd, pos + 1, rng, st);
            const int32_t n_q = 3, l = 1, kvh = 1;
            const float scale = 3.0f / std::sqrt(static_cast<float>(hd));  // peaky enough to matter
            std::vector<float> q(static_cast<size_t>(n_q * hd)), out(q.size(), NAN);
            for (float& x : q) x = g(rng);
            fx.kv.attend(l, fx.table.data(), pos, kvh, n_q, q.data(), scale, out.data(), f16);
            // fp16 probabilities can round the other way than the double reference's: one fp16 ulp.
            const double tol = f16 ? 2e-3 : 2e-5;
            for (int32_t i = 0; i < n_q; ++i) {
              const auto ref = fx.reference(l, pos, kvh, &q[static_cast<size_t>(i * hd)], scale, f16);
              double err = 0;
              for (int32_t e = 0; e < hd; ++e)
                err = std::max(err, std::abs(out[static_cast<size_t>(i * hd + e)] - ref[static_cast<size_t>(e)]));
              BOOST_TEST(err < tol, name(st) << " bs " << bs << " hd " << hd << " pos " << pos << " f16 " << f16
                                             << " head " << i << " max abs error " << err);
            }
          }
}

BOOST_AUTO_TEST_CASE(a_head_gives_the_same_bits_alone_or_grouped) {
  std::mt19937 rng(11);
  std::normal_distribution<float> g(0.0f, 1.0f);
  // P · V takes a call's heads three at a time, 32 dimensions a pass: 2, 3 and 20 heads (groups
  // of 3 and a last 2), head sizes with and without a remainder past the passes.
  for (int32_t hd : {64, 24, 130})
    for (int32_t n_q : {2, 3, 20})
      for (bool f16 : {false, true})
        for (kv_storage st : {kv_storage::f32, kv_storage::f16}) {
          const int32_t bs = 16, pos = 40;
          fixture fx(bs, hd, pos + 1, rng, st);
          std::vector<float> q(static_cast<size_t>(n_q * hd)), grouped(q.size()), alone(q.size());
          for (float& x : q) x = g(rng);
          fx.kv.attend(0, fx.table.data(), pos, 0, n_q, q.data(), 0.125f, grouped.data(), f16);
          for (int32_t i = 0; i < n_q; ++i)
            fx.kv.attend(0, fx.table.data(), pos, 0, 1, &q[static_cast<size_t>(i * hd)], 0.125f,
                         &alone[static_cast<size_t>(i * hd)], f16);
          BOOST_TEST(grouped == alone, name(st) << " hd " << hd << " n_q " << n_q << " f16 " << f16);
        }
}

// Several kv heads in one call (attend_heads, a block's pieces of every head in one sweep): each
// head's rows bit for bit those of the head attended alone; 2, 3 and 12 kv heads (12 x 3 queries
// pass what one call takes: the heads go one by one), rows split across calls, block sizes that
// give 4, 2 or 1 blocks a score call and the scalar lanes, strided queries and results.
BOOST_AUTO_TEST_CASE(kv_heads_give_the_same_bits_together_or_alone) {
  std::mt19937 rng(37);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (int32_t n_kv : {2, 3, 12})
    for (int32_t bs : {16, 8, 32, 5})
      for (int32_t hd : {64, 24})
        for (int32_t n_q : {1, 3})
          for (int32_t n_rows : {1, 3, 6})
            for (int32_t pos0 : {0, 17, 70})
              for (kv_storage st : {kv_storage::f32, kv_storage::f16}) {
                const bool f16 = pos0 != 17;
                fixture fx(bs, hd, pos0 + n_rows, rng, st, cpu_best_isa(), n_kv);
                const int32_t width = n_kv * n_q * hd, q_stride = width + 5, out_stride = width + 3;
                std::vector<float> q(static_cast<size_t>(n_rows * q_stride)), together(static_cast<size_t>(n_rows * out_stride), NAN),
                    alone(together.size(), NAN);
                for (float& x : q) x = g(rng);
                fx.kv.attend_heads(1, fx.table.data(), pos0, n_rows, 0, n_kv, n_q, q.data(), q_stride, 0.3f, together.data(),
                                   out_stride, f16);
                for (int32_t h = 0; h < n_kv; ++h)
                  fx.kv.attend(1, fx.table.data(), pos0, n_rows, h, n_q, &q[static_cast<size_t>(h * n_q * hd)], q_stride, 0.3f,
                               &alone[static_cast<size_t>(h * n_q * hd)], out_stride, f16);
                for (int32_t r = 0; r < n_rows; ++r)
                  BOOST_TEST(std::memcmp(&together[static_cast<size_t>(r * out_stride)], &alone[static_cast<size_t>(r * out_stride)],
                                         sizeof(float) * static_cast<size_t>(width)) == 0,
                             name(st) << " kv " << n_kv << " bs " << bs << " hd " << hd << " n_q " << n_q << " rows " << n_rows
                                      << " pos0 " << pos0 << " row " << r);
              }
}

// attend() in two parts (score_keys over ranges of keys, then attend_values, as one long run
// spread over threads): the same bits as attend() in one call, whatever the ranges and their
// order; rows crossing block ends, 1-4 query heads, both storages, fp16 inputs or not.
BOOST_AUTO_TEST_CASE(scores_by_ranges_of_keys_give_the_same_bits) {
  std::mt19937 rng(43);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (int32_t bs : {16, 5, 32})
    for (int32_t hd : {64, 40})
      for (int32_t n_q : {1, 3, 4})
        for (int32_t n_rows : {1, 6})
          for (int32_t pos0 : {0, 37, 300})
            for (kv_storage st : {kv_storage::f32, kv_storage::f16}) {
              const bool f16 = pos0 != 37;
              fixture fx(bs, hd, pos0 + n_rows, rng, st, cpu_best_isa(), 2);
              const int32_t kvh = 1, width = n_q * hd, q_stride = width + 5, out_stride = width + 3, n_max = pos0 + n_rows;
              std::vector<float> q(static_cast<size_t>(n_rows * q_stride)), whole(static_cast<size_t>(n_rows * out_stride), NAN);
              for (float& x : q) x = g(rng);
              fx.kv.attend(1, fx.table.data(), pos0, n_rows, kvh, n_q, q.data(), q_stride, 0.3f, whole.data(), out_stride, f16);
              const int32_t s_stride = fx.kv.score_stride(n_max);
              for (int32_t blocks : {1, 3, 1000}) {
                std::vector<float> s(static_cast<size_t>(n_rows * n_q * s_stride), NAN), parts(whole.size(), NAN);
                const int32_t ranges = (n_max + blocks * bs - 1) / (blocks * bs);
                for (int32_t x = ranges - 1; x >= 0; --x)  // the last range first
                  fx.kv.score_keys(1, fx.table.data(), pos0, n_rows, kvh, n_q, q.data(), q_stride, 0.3f, f16, x * blocks * bs,
                                   std::min(n_max, (x + 1) * blocks * bs), s.data(), s_stride);
                fx.kv.attend_values(1, fx.table.data(), pos0, n_rows, kvh, n_q, s.data(), s_stride, f16, parts.data(), out_stride);
                for (int32_t r = 0; r < n_rows; ++r)
                  BOOST_TEST(std::memcmp(&whole[static_cast<size_t>(r * out_stride)], &parts[static_cast<size_t>(r * out_stride)],
                                         sizeof(float) * static_cast<size_t>(width)) == 0,
                             name(st) << " bs " << bs << " hd " << hd << " n_q " << n_q << " rows " << n_rows << " pos0 " << pos0
                                      << " blocks " << blocks << " row " << r);
              }
            }
  fixture fx(16, 64, 40, rng, kv_storage::f16);
  std::vector<float> q(64 * 40), s(1000, 0.0f), out(64 * 40);
  BOOST_CHECK_THROW(fx.kv.score_keys(0, fx.table.data(), 0, 1, 0, 0, q.data(), 0, 1.0f, false, 0, 16, s.data(), 32), std::invalid_argument);
  BOOST_CHECK_THROW(fx.kv.attend_values(0, fx.table.data(), 0, 1, 0, fx.kv.split_max_heads() + 1, s.data(), 32, false, out.data(), 0),
                    std::invalid_argument);
}

// Several consecutive rows of one sequence in one call (a prompt chunk, a decode with drafts):
// each row's heads bit for bit those of the row attended alone; rows crossing block ends, more
// queries than one call takes (split), strided queries and results, both storages, fp16 inputs.
BOOST_AUTO_TEST_CASE(rows_give_the_same_bits_together_or_alone) {
  std::mt19937 rng(29);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (int32_t bs : {16, 5})
    for (int32_t hd : {64, 24})
      for (int32_t n_q : {1, 3})
        for (int32_t n_rows : {1, 2, 7, 12})
          for (int32_t pos0 : {0, 3, 14, 40})
            for (bool f16 : {false, true})
              for (kv_storage st : {kv_storage::f32, kv_storage::f16}) {
                fixture fx(bs, hd, pos0 + n_rows, rng, st);
                const int32_t q_stride = n_q * hd + 5, out_stride = n_q * hd + 3, kvh = 1;
                std::vector<float> q(static_cast<size_t>(n_rows * q_stride)), together(static_cast<size_t>(n_rows * out_stride), NAN);
                for (float& x : q) x = g(rng);
                fx.kv.attend(1, fx.table.data(), pos0, n_rows, kvh, n_q, q.data(), q_stride, 0.3f, together.data(), out_stride, f16);
                for (int32_t r = 0; r < n_rows; ++r) {
                  std::vector<float> alone(static_cast<size_t>(n_q * hd));
                  fx.kv.attend(1, fx.table.data(), pos0 + r, kvh, n_q, &q[static_cast<size_t>(r * q_stride)], 0.3f, alone.data(), f16);
                  const float* t = &together[static_cast<size_t>(r * out_stride)];
                  BOOST_TEST(std::memcmp(t, alone.data(), alone.size() * sizeof(float)) == 0,
                             name(st) << " bs " << bs << " hd " << hd << " n_q " << n_q << " rows " << n_rows << " pos0 " << pos0
                                      << " f16 " << f16 << " row " << r);
                }
              }
}

// The same fp16 values in both storages: every attend result bit for bit the same, for head sizes
// of 64, 128 and 80 (no 64-wide PV chunk tail), block sizes 1, 16 and 32, 1 to 8 heads.
BOOST_AUTO_TEST_CASE(f16_storage_attends_like_f32_storage_of_the_same_values) {
  std::mt19937 rng(23);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (int32_t hd : {64, 128, 80})
    for (int32_t bs : {1, 16, 32}) {
      const int32_t positions = 1100;
      std::mt19937 fill_rng = rng;  // the same values and table in both
      fixture a(bs, hd, positions, fill_rng, kv_storage::f32);
      fill_rng = rng;
      fixture b(bs, hd, positions, fill_rng, kv_storage::f16);
      rng = fill_rng;
      BOOST_REQUIRE(a.table == b.table);
      for (int32_t pos : {0, 3, 31, 32, 33, 130, 517, 1099})
        for (int32_t n_q = 1; n_q <= 8; ++n_q)
          for (bool f16 : {false, true}) {
            const int32_t l = (pos + n_q) % 2, kvh = n_q % 2;
            std::vector<float> q(static_cast<size_t>(n_q * hd)), out_a(q.size(), NAN), out_b(q.size(), NAN);
            for (float& x : q) x = g(rng);
            const float scale = 2.0f / std::sqrt(static_cast<float>(hd));
            a.kv.attend(l, a.table.data(), pos, kvh, n_q, q.data(), scale, out_a.data(), f16);
            b.kv.attend(l, b.table.data(), pos, kvh, n_q, q.data(), scale, out_b.data(), f16);
            BOOST_TEST(std::memcmp(out_a.data(), out_b.data(), sizeof(float) * out_a.size()) == 0,
                       "hd " << hd << " bs " << bs << " pos " << pos << " n_q " << n_q << " f16 " << f16);
          }
    }
}

// Keys in lanes (attn_kernels.hpp): a key's score is one FMA chain over the head's dimensions
// whatever the vector width, so the scalar, AVX2 (8 keys a vector) and AVX-512 (16) kernels give
// the same bits, for block sizes that take 16, 8 or only scalar lanes, one query (8 chunks a
// tile) to many (queries 6 at a time, chunks 4 or 2), and rows of a verification or a prompt.
BOOST_AUTO_TEST_CASE(every_isa_gives_the_same_bits) {
  std::vector<cpu_isa> isas{cpu_isa::scalar};
  for (cpu_isa i : {cpu_isa::avx2, cpu_isa::avxvnni, cpu_isa::avx512})
    if (cpu_isa_available(i)) isas.push_back(i);
  BOOST_TEST_MESSAGE("ISAs compared: " << isas.size());
  std::mt19937 rng(31);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (int32_t hd : {64, 80})
    for (int32_t bs : {16, 8, 32, 12})
      for (kv_storage st : {kv_storage::f16, kv_storage::f32}) {
        const int32_t positions = 420, n_q = 3, kvh = 1;
        std::vector<std::unique_ptr<fixture>> fx;
        for (cpu_isa isa : isas) {
          std::mt19937 fill_rng = rng;  // the same values and table in each
          fx.push_back(std::make_unique<fixture>(bs, hd, positions, fill_rng, st, isa));
        }
        rng.discard(1);
        for (int32_t n_rows : {1, 9, 16})
          for (int32_t pos0 : {0, 17, 200, 400}) {
            const int32_t heads = n_rows == 1 ? 1 : n_q, stride = heads * hd;
            std::vector<float> q(static_cast<size_t>(n_rows * stride));
            for (float& x : q) x = g(rng);
            std::vector<std::vector<float>> out;
            for (const auto& f : fx) {
              out.emplace_back(q.size(), NAN);
              f->kv.attend(0, f->table.data(), pos0, n_rows, kvh, heads, q.data(), stride, 0.2f, out.back().data(), stride, true);
            }
            for (size_t i = 1; i < out.size(); ++i)
              BOOST_TEST(std::memcmp(out[0].data(), out[i].data(), sizeof(float) * q.size()) == 0,
                         cpu_isa_name(isas[i]) << " vs scalar: hd " << hd << " bs " << bs << " " << name(st) << " rows " << n_rows << " pos0 " << pos0);
          }
      }
}

BOOST_AUTO_TEST_CASE(store_load_round_trip) {
  // Rows of 2 * 7 = 14 values: an 8-wide F16C step and a scalar tail.
  const int32_t n_kv = 2, hd = 7, row = n_kv * hd;
  const float inf = std::numeric_limits<float>::infinity();
  const float sub = std::ldexp(1.0f, -24);  // the smallest fp16 subnormal
  // (input, its fp16 value): ties go to even.
  const std::vector<std::pair<float, float>> cases = {
      {1.0f + std::ldexp(1.0f, -11), 1.0f},                                         // tie, down to even
      {1.0f + 3 * std::ldexp(1.0f, -11), 1.0f + std::ldexp(1.0f, -9)},             // tie, up to even
      {1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20), 1.0f + std::ldexp(1.0f, -10)},  // above the tie
      {-2.5f, -2.5f},
      {65504.0f, 65504.0f},
      {65519.0f, 65504.0f},
      {65520.0f, inf},  // a tie; even is inf
      {1e6f, inf},
      {-inf, -inf},
      {1.5f * sub, 2 * sub},  // subnormal tie, up to even
      {2.5f * sub, 2 * sub},  // down to even
      {0.5f * sub, 0.0f},     // tie with 0
      {0.75f * sub, sub},
      {0.1f, fp16_to_fp32(fp32_to_fp16(0.1f))},
  };
  BOOST_REQUIRE(static_cast<int32_t>(cases.size()) == row);
  std::vector<float> k(row), v(row), want_k(row), want_v(row);
  for (int32_t e = 0; e < row; ++e) {
    k[e] = cases[e].first;
    want_k[e] = cases[e].second;
    v[e] = -cases[row - 1 - e].first;  // the other way round, so each value is in a vector and a tail lane
    want_v[e] = -cases[row - 1 - e].second;
  }
  for (kv_storage st : {kv_storage::f16, kv_storage::f32}) {
    paged_kv kv(3, 4, 5, n_kv, hd, st);
    BOOST_TEST((kv.storage() == st));
    kv.store(2, 3, 4, k.data(), v.data());  // the very last slot of the pool
    kv.store(1, 2, 0, k.data(), v.data());
    std::vector<float> gk(row, NAN), gv(row, NAN);
    for (auto [l, b, s] : {std::tuple{2, 3, 4}, std::tuple{1, 2, 0}}) {
      kv.load(l, b, s, gk.data(), gv.data());
      const std::vector<float>& ek = st == kv_storage::f16 ? want_k : k;
      const std::vector<float>& ev = st == kv_storage::f16 ? want_v : v;
      BOOST_TEST(std::memcmp(gk.data(), ek.data(), sizeof(float) * row) == 0, name(st));
      BOOST_TEST(std::memcmp(gv.data(), ev.data(), sizeof(float) * row) == 0, name(st));
    }
    // Neighbours are untouched (zero from construction).
    for (auto [l, b, s] : {std::tuple{2, 3, 3}, std::tuple{1, 1, 4}, std::tuple{1, 2, 1}, std::tuple{0, 2, 0}}) {
      kv.load(l, b, s, gk.data(), gv.data());
      BOOST_TEST(std::all_of(gk.begin(), gk.end(), [](float x) { return x == 0.0f; }), name(st));
      BOOST_TEST(std::all_of(gv.begin(), gv.end(), [](float x) { return x == 0.0f; }), name(st));
    }
  }
  // Random values: f16 storage gives exactly fp32_to_fp16's rounding, f32 storage the bits.
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0.0f, 100.0f);
  paged_kv h(1, 2, 3, n_kv, hd, kv_storage::f16), f(1, 2, 3, n_kv, hd, kv_storage::f32);
  for (int it = 0; it < 200; ++it) {
    for (int32_t e = 0; e < row; ++e) {
      k[e] = g(rng) * std::ldexp(1.0f, it % 40 - 20);
      v[e] = g(rng);
    }
    h.store(0, 1, 2, k.data(), v.data());
    f.store(0, 1, 2, k.data(), v.data());
    std::vector<float> hk(row), hv(row), fk(row), fv(row);
    h.load(0, 1, 2, hk.data(), hv.data());
    f.load(0, 1, 2, fk.data(), fv.data());
    for (int32_t e = 0; e < row; ++e) {
      BOOST_TEST(hk[e] == fp16_to_fp32(fp32_to_fp16(k[e])));
      BOOST_TEST(hv[e] == fp16_to_fp32(fp32_to_fp16(v[e])));
    }
    BOOST_TEST(fk == k);
    BOOST_TEST(fv == v);
  }
}

BOOST_AUTO_TEST_CASE(block_bytes_and_pool_memory) {
  // 2 (K and V) * layers * block_size * n_head_kv * head_dim * value size
  BOOST_TEST(paged_kv::block_bytes(32, 16, 8, 128, kv_storage::f16) == int64_t{2} * 32 * 16 * 8 * 128 * 2);
  BOOST_TEST(paged_kv::block_bytes(32, 16, 8, 128, kv_storage::f32) == int64_t{2} * 32 * 16 * 8 * 128 * 4);
  BOOST_TEST(paged_kv::block_bytes(1, 1, 1, 6, kv_storage::f16) == 24);
  // What the pool allocates: block_bytes per block, so the f16 pool is half the f32 one.
  const int32_t layers = 4, blocks = 64, bs = 16, n_kv = 2, hd = 64;
  int64_t held[2] = {0, 0};
  for (kv_storage st : {kv_storage::f16, kv_storage::f32}) {
    const size_t before = mallinfo2().hblkhd + mallinfo2().uordblks;
    {
      paged_kv kv(layers, blocks, bs, n_kv, hd, st);
      held[st == kv_storage::f32] = static_cast<int64_t>(mallinfo2().hblkhd + mallinfo2().uordblks - before);
    }
  }
  if (held[1] == 0) {  // a sanitizer's allocator: glibc's counters see nothing
    BOOST_TEST_MESSAGE("mallinfo2 does not see this allocator; pool size not measured");
    return;
  }
  const int64_t want = blocks * paged_kv::block_bytes(layers, bs, n_kv, hd, kv_storage::f16);
  BOOST_TEST(held[0] >= want);
  BOOST_TEST(held[0] < want + 2 * 8192);  // two mmap'd vectors, each rounded up to pages
  BOOST_TEST(held[1] >= 2 * want);
  BOOST_TEST(held[1] < 2 * want + 2 * 8192);
}

// The pool is reserved, not touched: nothing is resident until a position is written, a write
// commits only pages of its block (K and V of every kv head, spread over the block's piece of each
// layer), and reading commits nothing.
BOOST_AUTO_TEST_CASE(memory_is_committed_as_positions_are_written) {
  const int32_t n_layer = 4, blocks = 2048, block_size = 16, n_kv = 2, hd = 64;
  for (kv_storage s : {kv_storage::f16, kv_storage::f32}) {
    paged_kv kv(n_layer, blocks, block_size, n_kv, hd, s);
    const int64_t reserved = paged_kv::block_bytes(n_layer, block_size, n_kv, hd, s) * blocks;
    BOOST_TEST(reserved > (int64_t{16} << 20));
    BOOST_TEST(kv.resident_bytes() == 0);
    std::vector<float> k(n_kv * hd, 0.5f), v(n_kv * hd, -0.25f), out_k(k.size()), out_v(v.size());
    for (int32_t layer = 0; layer < n_layer; ++layer) kv.store(layer, 1000, 3, k.data(), v.data());
    const int64_t page = 4096, piece = paged_kv::block_bytes(1, block_size, n_kv, hd, s) / 2;  // K (or V) of a block and layer
    const int64_t most = 2 * n_layer * (piece / page + 1) * page;  // a piece may straddle one more page
    BOOST_TEST(kv.resident_bytes() > 0);
    BOOST_TEST(kv.resident_bytes() <= most);
    kv.load(0, 7, 0, out_k.data(), out_v.data());  // never written: zeros, and nothing committed
    BOOST_TEST(out_k[0] == 0.0f);
    BOOST_TEST(kv.resident_bytes() <= most);
    kv.load(2, 1000, 3, out_k.data(), out_v.data());
    BOOST_TEST(out_k[5] == 0.5f);
    BOOST_TEST(out_v[5] == -0.25f);
  }
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::model
