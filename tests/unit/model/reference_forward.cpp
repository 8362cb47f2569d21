#include "reference_forward.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "model/formats/dequant.hpp"
#include "model/formats/gguf.hpp"

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
  const std::string arch = *f.get_string("general.architecture"), a = arch + ".";
  const int64_t d = *f.get_int(a + "embedding_length"), n_layer = *f.get_int(a + "block_count");
  const int64_t n_head = *f.get_int(a + "attention.head_count");
  const int64_t n_kv = *f.get_int(a + "attention.head_count_kv");
  const int64_t hd = f.get_int(a + "attention.key_length").value_or(d / n_head);
  const int64_t n_rot = f.get_int(a + "rope.dimension_count").value_or(hd);
  const double eps = *f.get_float(a + "attention.layer_norm_rms_epsilon");
  const double theta = f.get_float(a + "rope.freq_base").value_or(10000.0);
  // llama.cpp's rule: rope.scaling.factor (or the older rope.scale_linear) divides every angle.
  const double factor = f.get_float(a + "rope.scaling.factor").value_or(f.get_float(a + "rope.scale_linear").value_or(0.0));
  const double pos_scale = factor != 0.0 ? 1.0 / factor : 1.0;
  const bool neox = arch != "llama";  // qwen2, qwen3: halves rotate together
  const matrix embd = load(f, "token_embd.weight");
  const matrix head = f.find_tensor("output.weight") ? load(f, "output.weight") : embd;
  const matrix out_norm = load(f, "output_norm.weight");
  std::vector<float> freqs;
  if (f.find_tensor("rope_freqs.weight")) freqs = load(f, "rope_freqs.weight").w;

  // Rotates pairs of every head at position p: adjacent (GGUF's permuted Llama Q/K) or halves.
  auto rope = [&](vec& v, int64_t heads, int64_t p) {
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < n_rot / 2; ++i) {
        double a = static_cast<double>(p) * std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(n_rot));
        if (!freqs.empty()) a /= freqs[static_cast<size_t>(i)];
        a *= pos_scale;
        double& x0 = v[static_cast<size_t>(h * hd + (neox ? i : 2 * i))];
        double& x1 = v[static_cast<size_t>(h * hd + (neox ? i + n_rot / 2 : 2 * i + 1))];
        const double r0 = x0 * std::cos(a) - x1 * std::sin(a), r1 = x0 * std::sin(a) + x1 * std::cos(a);
        x0 = r0;
        x1 = r1;
      }
  };
  // Qwen2's biases and Qwen3's per-head norms, when the file has them.
  auto add_bias = [&](vec& v, const std::string& name) {
    if (!f.find_tensor(name)) return;
    const matrix b = load(f, name);
    for (size_t i = 0; i < v.size(); ++i) v[i] += b.w[i];
  };
  auto head_norm = [&](vec& v, int64_t heads, const std::string& name) {
    if (!f.find_tensor(name)) return;
    const matrix w = load(f, name);
    for (int64_t h = 0; h < heads; ++h) {
      const vec part(v.begin() + h * hd, v.begin() + (h + 1) * hd);
      const vec y = rms_norm(part, w, eps);
      std::copy(y.begin(), y.end(), v.begin() + h * hd);
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
      add_bias(q, b + "attn_q.bias");
      add_bias(k, b + "attn_k.bias");
      add_bias(v, b + "attn_v.bias");
      head_norm(q, n_head, b + "attn_q_norm.weight");
      head_norm(k, n_kv, b + "attn_k_norm.weight");
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
