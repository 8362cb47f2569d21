#include "reference_forward.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "model/dequant.hpp"
#include "model/gguf.hpp"

namespace conveyor::model {
namespace {

using vec = std::vector<double>;

struct matrix {
  int64_t rows = 0, cols = 0;
  std::vector<float> w;
  vec mul(const vec& x) const {
    vec y(static_cast<size_t>(rows), 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0;
      for (int64_t c = 0; c < cols; ++c) s += static_cast<double>(w[static_cast<size_t>(r * cols + c)]) * x[static_cast<size_t>(c)];
      y[static_cast<size_t>(r)] = s;
    }
    return y;
  }
};

matrix load(const gguf_file& f, const std::string& name) {
  const gguf_tensor_info* t = f.find_tensor(name);
  if (!t) throw std::runtime_error("reference: missing " + name);
  matrix m{t->ne[1], t->ne[0], std::vector<float>(static_cast<size_t>(t->ne[0] * t->ne[1]))};
  const size_t row_bytes = static_cast<size_t>(t->ne[0]) / block_elems(t->type) * block_bytes(t->type);
  for (int64_t r = 0; r < m.rows; ++r)
    dequantize_row(t->type, f.tensor_data(*t) + r * row_bytes, m.w.data() + r * m.cols, m.cols);
  return m;
}

vec rms_norm(const vec& x, const matrix& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double scale = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * scale * w.w[i];
  return y;
}

double fp16(double v) { return fp16_to_fp32(fp32_to_fp16(static_cast<float>(v))); }

} // namespace

std::vector<double> reference_logits(const gguf_file& f, const std::vector<token_id>& tokens, bool kv_fp16) {
  const int64_t d = *f.get_int("llama.embedding_length"), n_layer = *f.get_int("llama.block_count");
  const int64_t n_head = *f.get_int("llama.attention.head_count");
  const int64_t n_kv = *f.get_int("llama.attention.head_count_kv");
  const int64_t hd = d / n_head, n_rot = f.get_int("llama.rope.dimension_count").value_or(hd);
  const double eps = *f.get_float("llama.attention.layer_norm_rms_epsilon");
  const double theta = f.get_float("llama.rope.freq_base").value_or(10000.0);
  const matrix embd = load(f, "token_embd.weight");
  const matrix head = f.find_tensor("output.weight") ? load(f, "output.weight") : embd;
  const matrix out_norm = load(f, "output_norm.weight");
  std::vector<float> freqs;
  if (f.find_tensor("rope_freqs.weight")) freqs = load(f, "rope_freqs.weight").w;

  // Rotates adjacent pairs (GGUF's permuted Q/K layout) of every head at position p.
  auto rope = [&](vec& v, int64_t heads, int64_t p) {
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < n_rot / 2; ++i) {
        double a = static_cast<double>(p) * std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(n_rot));
        if (!freqs.empty()) a /= freqs[static_cast<size_t>(i)];
        double& x0 = v[static_cast<size_t>(h * hd + 2 * i)];
        double& x1 = v[static_cast<size_t>(h * hd + 2 * i + 1)];
        const double r0 = x0 * std::cos(a) - x1 * std::sin(a), r1 = x0 * std::sin(a) + x1 * std::cos(a);
        x0 = r0;
        x1 = r1;
      }
  };

  std::vector<std::vector<vec>> K(static_cast<size_t>(n_layer)), V(static_cast<size_t>(n_layer));
  vec x;
  for (size_t p = 0; p < tokens.size(); ++p) {
    x.assign(static_cast<size_t>(d), 0.0);
    for (int64_t i = 0; i < d; ++i) x[static_cast<size_t>(i)] = embd.w[static_cast<size_t>(tokens[p] * d + i)];
    for (int64_t l = 0; l < n_layer; ++l) {
      const std::string b = "blk." + std::to_string(l) + ".";
      vec h = rms_norm(x, load(f, b + "attn_norm.weight"), eps);
      vec q = load(f, b + "attn_q.weight").mul(h), k = load(f, b + "attn_k.weight").mul(h), v = load(f, b + "attn_v.weight").mul(h);
      rope(q, n_head, static_cast<int64_t>(p));
      rope(k, n_kv, static_cast<int64_t>(p));
      if (kv_fp16)
        for (size_t i = 0; i < k.size(); ++i) k[i] = fp16(k[i]), v[i] = fp16(v[i]);
      K[static_cast<size_t>(l)].push_back(k);
      V[static_cast<size_t>(l)].push_back(v);
      vec attn(static_cast<size_t>(n_head * hd), 0.0);
      for (int64_t hq = 0; hq < n_head; ++hq) {
        const int64_t hk = hq / (n_head / n_kv);
        vec s(p + 1);
        for (size_t j = 0; j <= p; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < hd; ++e) dot += q[static_cast<size_t>(hq * hd + e)] * K[static_cast<size_t>(l)][j][static_cast<size_t>(hk * hd + e)];
          s[j] = dot / std::sqrt(static_cast<double>(hd));
        }
        const double mx = *std::max_element(s.begin(), s.end());
        double sum = 0;
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (size_t j = 0; j <= p; ++j)
          for (int64_t e = 0; e < hd; ++e)
            attn[static_cast<size_t>(hq * hd + e)] += s[j] / sum * V[static_cast<size_t>(l)][j][static_cast<size_t>(hk * hd + e)];
      }
      const vec o = load(f, b + "attn_output.weight").mul(attn);
      for (int64_t i = 0; i < d; ++i) x[static_cast<size_t>(i)] += o[static_cast<size_t>(i)];
      h = rms_norm(x, load(f, b + "ffn_norm.weight"), eps);
      vec g = load(f, b + "ffn_gate.weight").mul(h);
      const vec u = load(f, b + "ffn_up.weight").mul(h);
      for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
      const vec dn = load(f, b + "ffn_down.weight").mul(g);
      for (int64_t i = 0; i < d; ++i) x[static_cast<size_t>(i)] += dn[static_cast<size_t>(i)];
    }
  }
  return head.mul(rms_norm(x, out_norm, eps));
}

double max_rel_error(const std::vector<float>& a, const std::vector<double>& b) {
  double err = 0, mag = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    err = std::max(err, std::abs(static_cast<double>(a[i]) - b[i]));
    mag = std::max(mag, std::abs(b[i]));
  }
  return err / mag;
}

} // namespace conveyor::model
