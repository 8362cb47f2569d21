// The tensor table (model/formats/tensor_table.hpp) every loader reads: its rows are consistent
// (ids in order, unique names, fused groups adjacent and in slot order), graph_tensors names
// exactly what tiny_model's independent writer puts in a file, and the Hugging Face names are
// convert_hf_to_gguf.py's.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <set>

#include "model/formats/gguf.hpp"
#include "model/formats/llama_config.hpp"
#include "model/formats/tensor_table.hpp"
#include "model_files.hpp"
#include "tiny_model.hpp"

namespace conveyor::model {
namespace {

/// A config whose graph reads every row: untied head, Llama 3 rope_freqs, Q/K/V biases, Q/K norms.
llama_config every_switch_on() {
  return llama_config{.arch = "llama", .name = "every switch on", .n_embd = 64, .n_layer = 2, .n_head = 4, .n_head_kv = 2,
                      .head_dim = 16, .n_ff = 96, .vocab_size = 300, .n_rot = 16, .tied_output = false,
                      .has_rope_freqs = true, .qkv_bias = true, .qk_norm = true};
}

std::set<std::string> names_in(const gguf_file& f) {
  std::set<std::string> n;
  for (const gguf_tensor_info& t : f.tensors()) n.insert(t.name);
  return n;
}

} // namespace

BOOST_AUTO_TEST_SUITE(tensor_table_rows)

BOOST_AUTO_TEST_CASE(ids_index_the_table_and_names_are_unique) {
  std::set<std::string> gguf, hf;
  for (const tensor_row& r : tensor_table()) {
    BOOST_TEST(&tensor_spec(r.id) == &r);
    BOOST_TEST(gguf.insert(r.gguf).second, "GGUF name " << r.gguf << " twice");
    if (r.hf) BOOST_TEST(hf.insert(r.hf).second, "Hugging Face name " << r.hf << " twice");
  }
  // The model's own tensors first, then a layer's: names with and without a prefix never mix.
  const auto first_layer = std::find_if(tensor_table().begin(), tensor_table().end(), [](const tensor_row& r) { return r.per_layer; });
  BOOST_TEST(std::all_of(first_layer, tensor_table().end(), [](const tensor_row& r) { return r.per_layer; }));
}

BOOST_AUTO_TEST_CASE(fused_groups_are_adjacent_rows_in_slot_order) {
  for (tensor_group g : {tensor_group::qkv, tensor_group::qkv_bias, tensor_group::gate_up}) {
    const auto rows = group_rows(g);
    BOOST_TEST_REQUIRE(rows.size() >= 2u);
    size_t members = 0;
    for (const tensor_row& r : tensor_table()) members += r.group == g;
    BOOST_TEST(members == rows.size());  // no member outside the adjacent run
    for (size_t i = 0; i < rows.size(); ++i) {
      BOOST_TEST((rows[i].group == g));
      BOOST_TEST(size_t{rows[i].slot} == i);
      // Matrices stack rows of one length; vectors (biases) are laid end to end.
      BOOST_TEST((rows[i].rows == tensor_dim::one ? rows[0].rows == tensor_dim::one : rows[i].cols == rows[0].cols));
      BOOST_TEST(rows[i].per_layer);
      BOOST_TEST((rows[i].when == rows[0].when));
    }
  }
  for (const tensor_row& r : tensor_table())
    if (r.group == tensor_group::none) BOOST_TEST(int{r.slot} == 0);
}

BOOST_AUTO_TEST_CASE(fused_layouts_are_the_executors) {
  const tensor_params p = tensor_params::of(every_switch_on());
  BOOST_TEST(p.group_elems(tensor_group::qkv) == (p.q + 2 * p.kv) * p.embd);
  BOOST_TEST(p.group_elems(tensor_group::qkv_bias) == p.q + 2 * p.kv);
  BOOST_TEST(p.group_elems(tensor_group::gate_up) == 2 * p.ff * p.embd);
  const auto qkv = group_rows(tensor_group::qkv);
  BOOST_TEST((qkv[0].id == tensor_id::attn_q && qkv[1].id == tensor_id::attn_k && qkv[2].id == tensor_id::attn_v));
  const auto gate_up = group_rows(tensor_group::gate_up);
  BOOST_TEST((gate_up[0].id == tensor_id::ffn_gate && gate_up[1].id == tensor_id::ffn_up));
}

BOOST_AUTO_TEST_CASE(names_and_shapes) {
  const tensor_params p = tensor_params::of(every_switch_on());
  BOOST_TEST(gguf_name(tensor_id::attn_q, 3) == "blk.3.attn_q.weight");
  BOOST_TEST(gguf_name(tensor_id::output) == "output.weight");
  BOOST_TEST(hf_name(tensor_spec(tensor_id::attn_q), 3) == "model.layers.3.self_attn.q_proj.weight");
  BOOST_TEST(hf_name(tensor_spec(tensor_id::ffn_up), 0) == "model.layers.0.mlp.up_proj.weight");
  BOOST_TEST(hf_name(tensor_spec(tensor_id::token_embd)) == "model.embed_tokens.weight");
  BOOST_TEST(hf_name(tensor_spec(tensor_id::rope_freqs)).empty());  // computed from config.json
  BOOST_TEST(p.ne0(tensor_spec(tensor_id::attn_output)) == p.q);
  BOOST_TEST(p.ne1(tensor_spec(tensor_id::attn_output)) == p.embd);
  BOOST_TEST(p.hf_shape(tensor_spec(tensor_id::ffn_down)) == (std::vector<int64_t>{p.embd, p.ff}));
  BOOST_TEST(p.hf_shape(tensor_spec(tensor_id::attn_k_norm)) == (std::vector<int64_t>{p.head}));
  // Only Q and K rows are permuted for adjacent-pair RoPE, over their own head counts.
  for (const tensor_row& r : tensor_table()) {
    const bool permuted = r.permute != hf_permute::none;
    BOOST_TEST(permuted == (r.id == tensor_id::attn_q || r.id == tensor_id::attn_k), r.gguf);
  }
  BOOST_TEST((tensor_spec(tensor_id::attn_k).permute == hf_permute::kv_heads));
}

BOOST_AUTO_TEST_CASE(every_row_is_in_the_graph_when_its_switch_is_on) {
  llama_config c = every_switch_on();
  for (const tensor_row& r : tensor_table()) BOOST_TEST(tensor_params::of(c).reads(r), r.gguf);
  const std::vector<std::string> all = graph_tensors(c);
  BOOST_TEST(all.size() == 4 + 2 * (tensor_table().size() - 4));
  for (const tensor_row& r : tensor_table())
    for (int32_t l = 0; l < (r.per_layer ? c.n_layer : 1); ++l)
      BOOST_TEST(std::count(all.begin(), all.end(), gguf_name(r, l)) == 1, gguf_name(r, l));
  c.tied_output = true;
  c.has_rope_freqs = c.qkv_bias = c.qk_norm = false;
  const std::vector<std::string> plain = graph_tensors(c);
  for (const tensor_row& r : tensor_table())
    BOOST_TEST((std::count(plain.begin(), plain.end(), gguf_name(r, 0)) == 1) == (r.when == tensor_when::always), r.gguf);
}

// tiny_model spells every name itself, as llama.cpp's writer does: the graph of the file's config
// is exactly the file's tensors, with every switch off and with every one on.
BOOST_AUTO_TEST_CASE(graph_tensors_are_what_a_writer_puts_in_the_file) {
  tiny_llama_spec plain;
  tiny_llama_spec all;
  all.arch = "qwen3";
  all.attn_bias = true;
  all.tied = false;
  all.output = ggml_type::q8_0;  // rows of 96: not a multiple of Q6_K's 256
  tiny_llama_spec llama3;
  llama3.tied = false;
  llama3.output = ggml_type::q8_0;
  llama3.rope_freqs = true;
  int i = 0;
  for (const tiny_llama_spec& s : {plain, all, llama3}) {
    const std::string path = testing::temp_path("tensor_table_" + std::to_string(i++) + ".gguf");
    write_tiny_llama(path, s);
    const gguf_file f = gguf_file::open(path);
    const llama_config c = llama_config::from_gguf(f);
    const std::vector<std::string> g = graph_tensors(c);
    BOOST_TEST(std::set<std::string>(g.begin(), g.end()) == names_in(f), s.arch);
    BOOST_TEST(g.size() == f.tensors().size());
  }
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::model
