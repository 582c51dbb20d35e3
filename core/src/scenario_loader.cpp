// Reads a scenario tree section by section with a ConfigReader, then checks cross-field rules.
// Every problem is collected; nothing throws until the end.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <set>

#include "shardscope/core/calibration.hpp"
#include "shardscope/core/config_reader.hpp"
#include "shardscope/core/device_profile.hpp"
#include "shardscope/core/hf_config.hpp"
#include "shardscope/core/model_presets.hpp"
#include "shardscope/core/scenario.hpp"
#include "shardscope/core/scenario_keys.hpp"

namespace shardscope {
namespace {

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const auto& p : model_presets()) names.emplace_back(p.name);
  return names;
}

std::string joined_model_presets() {
  std::string out;
  for (const auto& p : model_presets()) out += (out.empty() ? "" : ", ") + std::string(p.name);
  return out;
}

std::string joined_cluster_presets() {
  std::string out;
  for (const auto& p : cluster_presets()) out += (out.empty() ? "" : ", ") + std::string(p.name);
  return out;
}

template <typename T>
void set_if(std::optional<T> v, T& target) {
  if (v) target = *v;
}

void set_if(std::optional<std::int64_t> v, int& target) {
  if (v) target = static_cast<int>(*v);
}

// ---------------------------------------------------------------- reading by the key table
// Each reader takes the key's bounds and choices from scenario_keys.cpp (key_of), so the file
// format, `shardscope keys` and docs/scenario.md agree.

// A choice key's value as the enum its choices name (the i-th choice is the i-th enumerator).
template <typename E>
std::optional<E> read_choice(ConfigReader& r, std::string_view path) {
  const auto text = r.get_enum(path, split_choices(key_of(path).choices));
  if (!text) return std::nullopt;
  return parse_choice<E>(path, *text);
}

// A range problem the reader just added says the range with the key's unit; the text is built
// only then, not for every key read.
void explain_range(ConfigReader& r, std::size_t problems_before, const ScenarioKey& k) {
  if (r.problems().size() > problems_before &&
      r.problems().back().message.ends_with("out of range")) {
    r.problems().back().allowed = key_range_text(k);
  }
}

std::optional<std::int64_t> read_int(ConfigReader& r, std::string_view path) {
  const ScenarioKey& k = key_of(path);
  const std::size_t before = r.problems().size();
  auto value = r.get_int(path, static_cast<std::int64_t>(k.min), static_cast<std::int64_t>(k.max));
  explain_range(r, before, k);
  return value;
}

std::optional<double> read_number(ConfigReader& r, std::string_view path) {
  const ScenarioKey& k = key_of(path);
  const std::size_t before = r.problems().size();
  auto value = r.get_number(path, k.min, k.max);
  explain_range(r, before, k);
  return value;
}

// A unit-carrying value (size, duration, bandwidth, FLOP rate) within its key's physical range.
template <typename T>
std::optional<T> in_range(ConfigReader& r, std::string_view path, std::optional<T> value,
                          std::string (*format)(T)) {
  if (!value) return value;
  const ScenarioKey& k = key_of(path);
  const auto v = static_cast<double>(*value);
  if (v < k.min || v > k.max) {
    r.add_problem(path, fmt::format("{} is out of range", format(*value)), key_range_text(k));
    return std::nullopt;
  }
  return value;
}

std::optional<Bytes> read_bytes(ConfigReader& r, std::string_view path, bool allow_zero = false) {
  return in_range<Bytes>(r, path, r.get_bytes(path, allow_zero), format_bytes);
}
std::optional<TimeNs> read_duration(ConfigReader& r, std::string_view path) {
  return in_range<TimeNs>(r, path, r.get_duration(path), format_duration);
}
std::optional<BytesPerSecond> read_bandwidth(ConfigReader& r, std::string_view path) {
  return in_range<BytesPerSecond>(r, path, r.get_bandwidth(path), format_bandwidth);
}
std::optional<FlopsPerSecond> read_flops_rate(ConfigReader& r, std::string_view path) {
  return in_range<FlopsPerSecond>(r, path, r.get_flops_rate(path), format_flops_rate);
}

// FSDP mixed precision casts parameters for compute and gradients for reduction; PyTorch has no
// fp8 path there (fp8 training is torchao's Float8Linear, which shardscope does not model).
std::optional<DType> read_mp_dtype(ConfigReader& r, std::string_view path) {
  auto d = r.get_dtype(path);
  if (d == DType::fp8) {
    r.add_problem(path,
                  "fp8 is not an FSDP mixed-precision dtype (fp8 training is torchao's "
                  "Float8Linear, not modelled)",
                  fmt::format("allowed: {}", key_of(path).choices));
    return std::nullopt;
  }
  return d;
}

std::string type_word(const ConfigTree& v) {
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_string()) return fmt::format("the text '{}'", v.get<std::string>());
  if (v.is_array()) return "a list";
  return "a mapping";
}

std::string keys_below(std::string_view section) {
  std::string out;
  for (const auto& k : scenario_keys()) {
    if (k.path.size() <= section.size() + 1 || !k.path.starts_with(section) ||
        k.path[section.size()] != '.')
      continue;
    const auto leaf = k.path.substr(section.size() + 1);
    if (leaf.find('.') != std::string_view::npos || leaf.find('[') != std::string_view::npos)
      continue;
    if (!out.empty()) out += ", ";
    out += leaf;
  }
  return out;
}

// Checks the shape of the tree against the key table before any value is read: a scalar where a
// section belongs (`training: 5`, `fsdp.mixed_precision: bf16`) would otherwise hide every key of
// that section; a key with no value (`seq_len:`) would silently mean "the default".
void check_shape(ConfigReader& r, const ConfigTree& node, std::string& path, std::string& norm);

// One key of the tree, `key` its table entry: only sections and lists are walked into.
void check_key_shape(ConfigReader& r, const ScenarioKey& key, const ConfigTree& value,
                     std::string& path, std::string& norm) {
  switch (key.type) {
    case KeyType::section:
      if (value.is_object()) {
        check_shape(r, value, path, norm);
      } else if (!value.is_null()) {
        r.add_problem(path, fmt::format("is {}, but it is a section of keys", type_word(value)),
                      fmt::format("keys: {}", keys_below(norm)));
        r.mark_subtree_known(path);
      }
      return;
    case KeyType::list:
      if (value.is_array()) {
        norm += "[]";
        for (std::size_t i = 0; i < value.size(); ++i) {
          const std::size_t before = path.size();
          path += fmt::format("[{}]", i);
          if (!value[i].is_object()) {
            r.add_problem(
                path, fmt::format("is {}, but each item is a section of keys", type_word(value[i])),
                fmt::format("keys: {}", keys_below(norm)));
          }
          check_shape(r, value[i], path, norm);
          path.resize(before);
        }
      } else if (!value.is_null()) {
        r.add_problem(path, fmt::format("is {}, but it is a list", type_word(value)),
                      std::string(key.models));
        r.mark_subtree_known(path);
      }
      return;
    default:  // a value: its type is the typed reader's to check
      if (value.is_null()) {
        r.add_problem(path, "has no value", "a value, or leave the key out to use the default");
      }
      return;
  }
}

void check_shape(ConfigReader& r, const ConfigTree& node, std::string& path, std::string& norm) {
  if (!node.is_object()) return;
  const std::size_t path_size = path.size(), norm_size = norm.size();
  for (const auto& [name, value] : node.items()) {
    if (!path.empty()) path += '.';
    path += name;
    if (!norm.empty()) norm += '.';
    norm += name;
    // Keys not in the table are left for the reader's unknown-key report.
    if (const ScenarioKey* key = find_scenario_key(norm))
      check_key_shape(r, *key, value, path, norm);
    path.resize(path_size);
    norm.resize(norm_size);
  }
}

// ---------------------------------------------------------------- model
void read_transformer_shape(ConfigReader& r, TransformerConfig& c) {
  set_if(read_int(r, "model.hidden"), c.hidden);
  set_if(read_int(r, "model.layers"), c.layers);
  set_if(read_int(r, "model.heads"), c.heads);
  if (auto kv = read_int(r, "model.kv_heads")) c.kv_heads = *kv;
  set_if(read_int(r, "model.ffn_hidden"), c.ffn_hidden);
  set_if(read_int(r, "model.vocab"), c.vocab);
  set_if(read_int(r, "model.max_seq"), c.max_seq);
  set_if(read_choice<MlpKind>(r, "model.mlp"), c.mlp);
  set_if(read_choice<NormKind>(r, "model.norm"), c.norm);
  set_if(read_choice<PosEmbedding>(r, "model.pos_emb"), c.pos_emb);
  set_if(r.get_bool("model.parallel_residual"), c.parallel_residual);
  set_if(r.get_bool("model.norm_bias"), c.norm_bias);
  if (auto bias = r.get_bool("model.bias")) c.qkv_bias = c.out_proj_bias = c.mlp_bias = *bias;
  set_if(r.get_bool("model.qkv_bias"), c.qkv_bias);
  set_if(r.get_bool("model.out_proj_bias"), c.out_proj_bias);
  set_if(r.get_bool("model.mlp_bias"), c.mlp_bias);
  set_if(r.get_bool("model.tie_embeddings"), c.tie_embeddings);
  // Read by hand, not read_choice: the memory-efficient kernel gets its own reason.
  if (auto v = r.get_string("model.attention")) {
    if (const auto kind = parse_choice<AttentionKind>("model.attention", *v)) {
      c.attention = *kind;
    } else {
      r.add_problem("model.attention",
                    *v == "efficient"
                        ? "the memory-efficient kernel is not modelled yet (its speed against "
                          "flash is not measured); its memory is flash's"
                        : fmt::format("unknown attention '{}'", *v),
                    fmt::format("allowed: {}", key_of("model.attention").choices));
    }
  }
  set_if(read_number(r, "model.dropout"), c.dropout);
}

void check_transformer_shape(ConfigReader& r, const TransformerConfig& c) {
  const std::vector<std::pair<const char*, std::int64_t>> required{
      {"model.hidden", c.hidden},
      {"model.layers", c.layers},
      {"model.heads", c.heads},
      {"model.ffn_hidden", c.ffn_hidden},
      {"model.vocab", c.vocab}};
  bool complete = true;
  for (const auto& [key, value] : required) {
    if (value <= 0) {
      r.add_problem(key, "required for model.family: transformer", "a positive integer");
      complete = false;
    }
  }
  if (!complete) return;
  if (c.hidden % c.heads != 0) {
    r.add_problem("model.heads", fmt::format("{} heads do not divide hidden {}", c.heads, c.hidden),
                  "a divisor of model.hidden");
  }
  if (c.kv_heads <= 0 || c.heads % c.kv_heads != 0) {
    r.add_problem("model.kv_heads",
                  fmt::format("{} kv heads do not divide {} heads", c.kv_heads, c.heads),
                  "a divisor of model.heads");
  }
  if (c.pos_emb == PosEmbedding::learned && c.max_seq <= 0) {
    r.add_problem("model.max_seq", "required with pos_emb: learned (it sizes the position table)",
                  "a positive integer");
  }
}

void read_custom_groups(ConfigReader& r, ModelSpec& m) {
  const std::size_t n = r.list_size("model.groups");
  if (n == 0) {
    r.add_problem("model.groups",
                  "model.family: custom needs a non-empty list of groups in forward order",
                  "each with name, params, and forward_flops or forward_time_ms");
    return;
  }
  std::set<std::string> names;
  for (std::size_t i = 0; i < n; ++i) {
    const std::string base = fmt::format("model.groups[{}]", i);
    CustomGroup g;
    if (auto name = r.get_string(base + ".name")) {
      g.name = *name;
      if (!names.insert(g.name).second)
        r.add_problem(base + ".name", fmt::format("duplicate group name '{}'", g.name),
                      "unique names");
    } else {
      r.add_problem(base + ".name", "every group needs a name", "e.g. root, layers.0");
    }
    if (auto p = read_int(r, base + ".params")) {
      g.params = *p;
    } else if (!r.has(base + ".params")) {
      r.add_problem(base + ".params", "every group needs a parameter count", "an integer ≥ 0");
    }
    if (auto v = read_number(r, base + ".forward_flops")) g.forward_flops = *v;
    if (auto v = read_number(r, base + ".backward_flops")) g.backward_flops = *v;
    if (auto v = read_bytes(r, base + ".activation_bytes")) g.activation_bytes = *v;
    if (auto v = read_number(r, base + ".forward_time_ms")) g.forward_time = ms_to_ns(*v);
    if (auto v = read_number(r, base + ".backward_time_ms")) g.backward_time = ms_to_ns(*v);
    if (auto v = read_number(r, base + ".all_gather_time_ms")) g.all_gather_time = ms_to_ns(*v);
    if (auto v = read_number(r, base + ".reduce_scatter_time_ms"))
      g.reduce_scatter_time = ms_to_ns(*v);
    if (!g.forward_flops && !g.forward_time) {
      r.add_problem(base, "a group needs forward_flops or forward_time_ms", "one of the two");
    }
    m.groups.push_back(std::move(g));
  }
  // Groups listed before "root" run outside every FSDP module, so they cannot hold FSDP parameters.
  const auto root = std::find_if(m.groups.begin(), m.groups.end(),
                                 [](const CustomGroup& g) { return g.name == "root"; });
  for (auto it = m.groups.begin(); it != root && root != m.groups.end(); ++it) {
    if (it->params > 0) {
      r.add_problem(
          fmt::format("model.groups[{}].params", it - m.groups.begin()),
          "a group before root is outside every FSDP module and cannot hold FSDP parameters",
          "params: 0, or list it after root");
    }
  }
}

ModelSpec read_model(ConfigReader& r, const std::filesystem::path& base_dir) {
  ModelSpec m;
  const auto preset = r.get_string("model.preset");
  const auto family = r.get_enum("model.family", split_choices(key_of("model.family").choices));
  const auto hf = r.get_string("model.hf_config");
  const int sources = (preset ? 1 : 0) + (family ? 1 : 0) + (hf ? 1 : 0);
  if (sources > 1) {
    r.add_problem("model", "give exactly one of model.preset, model.family or model.hf_config", "");
  }
  if (sources == 0 && !r.problems().empty()) return m;  // a wrong-typed key was already reported
  if (sources == 0) {
    r.add_problem("model", "no model given",
                  "model.preset (" + joined_model_presets() + "), model.family or model.hf_config");
  }
  bool source_ok = sources == 1;  // shape checks only make sense on a model that loaded
  if (preset) {
    if (auto spec = find_model_preset(*preset)) {
      m = *spec;
    } else {
      source_ok = false;
      auto names = preset_names();
      const auto guess = closest_match(*preset, names);
      r.add_problem("model.preset",
                    fmt::format("unknown model preset '{}'{}", *preset,
                                guess.empty() ? "" : fmt::format("; did you mean '{}'?", guess)),
                    "allowed: " + joined_model_presets());
    }
  } else if (hf) {
    std::filesystem::path path(*hf);
    if (path.is_relative() && !base_dir.empty()) path = base_dir / path;
    try {
      m.transformer = load_hf_config(path);
      m.name = *hf;
    } catch (const ValidationError& e) {
      source_ok = false;
      for (auto p : e.problems()) {
        p.key = p.key.empty() ? "model.hf_config" : "model.hf_config → " + p.key;
        p.file = r.file();
        r.problems().push_back(std::move(p));
      }
    }
  } else if (family) {
    m.family = *family == "custom" ? ModelFamily::custom : ModelFamily::transformer;
    m.name = std::string(*family);
  }
  // Shape keys refine a preset or an HF config, or define a transformer; groups define a custom
  // model.
  if (m.family == ModelFamily::transformer) {
    read_transformer_shape(r, m.transformer);
    if (m.transformer.kv_heads == 0) m.transformer.kv_heads = m.transformer.heads;
    if (source_ok) check_transformer_shape(r, m.transformer);
    r.reject_if_present("model.groups", "only used with model.family: custom");
  } else {
    read_custom_groups(r, m);
    for (const char* key :
         {"model.hidden", "model.layers", "model.heads", "model.kv_heads", "model.ffn_hidden",
          "model.vocab", "model.mlp", "model.norm", "model.pos_emb", "model.max_seq", "model.bias",
          "model.tie_embeddings", "model.attention", "model.dropout"}) {
      r.reject_if_present(key, "only used with model.family: transformer");
    }
  }
  if (auto name = r.get_string("model.name")) m.name = *name;
  return m;
}

// ---------------------------------------------------------------- cluster
// A file another of shardscope's commands wrote, named by `key` relative to the scenario; its
// problems become the scenario's, under that key.
template <typename T, typename Load>
std::shared_ptr<const T> read_linked_file(ConfigReader& r, const char* key,
                                          const std::string& given,
                                          const std::filesystem::path& base_dir, Load load,
                                          const char* expected) {
  std::filesystem::path path(given);
  if (path.is_relative() && !base_dir.empty()) path = base_dir / path;
  try {
    return load(path.string());
  } catch (const ValidationError& e) {
    for (auto p : e.problems()) {
      p.key = p.key.empty() ? std::string(key) : fmt::format("{} → {}", key, p.key);
      p.message = fmt::format("{}: {}", path.string(), p.message);
      p.file = r.file();
      r.problems().push_back(std::move(p));
    }
  } catch (const Error& e) {
    r.add_problem(key, e.what(), expected);
  }
  return nullptr;
}

ClusterSpec read_cluster(ConfigReader& r, const std::filesystem::path& base_dir) {
  ClusterSpec c = *find_cluster_preset("h100-sxm-80gb");
  if (auto preset = r.get_string("cluster.preset")) {
    if (auto spec = find_cluster_preset(*preset)) {
      c = *spec;
    } else {
      r.add_problem("cluster.preset", fmt::format("unknown cluster preset '{}'", *preset),
                    "allowed: " + joined_cluster_presets());
    }
  }
  set_if(read_int(r, "cluster.nodes"), c.nodes);
  set_if(read_int(r, "cluster.gpus_per_node"), c.gpus_per_node);
  if (auto domain = read_int(r, "cluster.nvlink.domain"))
    c.nvlink_domain = static_cast<int>(*domain);
  if (c.nvlink_domain > 0 && c.nvlink_domain % c.gpus_per_node != 0) {
    r.add_problem("cluster.nvlink.domain",
                  fmt::format("{} GPUs is not a whole number of {}-GPU nodes", c.nvlink_domain,
                              c.gpus_per_node),
                  "a multiple of cluster.gpus_per_node");
  }
  set_if(read_bytes(r, "cluster.gpu.memory"), c.gpu.memory);
  set_if(read_flops_rate(r, "cluster.gpu.peak_flops.fp32"), c.gpu.peak_flops.fp32);
  set_if(read_flops_rate(r, "cluster.gpu.peak_flops.bf16"), c.gpu.peak_flops.bf16);
  set_if(read_flops_rate(r, "cluster.gpu.peak_flops.fp16"), c.gpu.peak_flops.fp16);
  set_if(read_flops_rate(r, "cluster.gpu.peak_flops.fp8"), c.gpu.peak_flops.fp8);
  set_if(read_bandwidth(r, "cluster.gpu.hbm_bandwidth"), c.gpu.hbm_bandwidth);
  if (auto sms = read_int(r, "cluster.gpu.sm_count")) c.gpu.sm_count = static_cast<int>(*sms);
  set_if(read_number(r, "cluster.gpu.tdp_w"), c.gpu.tdp_w);
  set_if(r.get_bool("cluster.gpu.multicast"), c.gpu.multicast);
  set_if(read_number(r, "cluster.gpu.matmul_efficiency"), c.gpu.matmul_efficiency);
  set_if(read_number(r, "cluster.gpu.attention_efficiency"), c.gpu.attention_efficiency);
  set_if(read_number(r, "cluster.gpu.fp8_matmul_efficiency"), c.gpu.fp8_matmul_efficiency);
  set_if(read_number(r, "cluster.gpu.cudnn_attention_efficiency"),
         c.gpu.cudnn_attention_efficiency);
  set_if(read_number(r, "cluster.gpu.triton_attention_efficiency"),
         c.gpu.triton_attention_efficiency);
  set_if(read_number(r, "cluster.gpu.triton_attention_overhead"), c.gpu.triton_attention_overhead);
  set_if(read_number(r, "cluster.gpu.contention_scale"), c.gpu.contention_scale);
  set_if(read_number(r, "cluster.gpu.triton_attention_head_dim_overhead"),
         c.gpu.triton_attention_head_dim_overhead);
  if (auto cap = read_number(r, "cluster.gpu.power_cap_w")) c.gpu.power_cap_w = *cap;
  if (auto profile = r.get_string("cluster.gpu.device_profile")) {
    c.gpu.device_profile = read_linked_file<DeviceProfile>(
        r, "cluster.gpu.device_profile", *profile, base_dir, shared_device_profile,
        "a profile written by profile-device");
  }
  if (auto calibration = r.get_string("cluster.calibration")) {
    c.calibration =
        read_linked_file<Calibration>(r, "cluster.calibration", *calibration, base_dir,
                                      shared_calibration, "a calibration written by calibrate");
  }
  set_if(read_bytes(r, "cluster.gpu.context_memory", true), c.gpu.context_memory);
  set_if(read_bytes(r, "cluster.gpu.cublas_workspace", true), c.gpu.cublas_workspace);
  set_if(read_bytes(r, "cluster.nccl.buffsize"), c.nccl.buffsize);
  set_if(read_int(r, "cluster.nccl.channels"), c.nccl.channels);
  set_if(read_bandwidth(r, "cluster.nvlink.bandwidth"), c.nvlink.bandwidth);
  set_if(read_duration(r, "cluster.nvlink.latency"), c.nvlink.latency);
  set_if(read_bandwidth(r, "cluster.network.bandwidth"), c.network.bandwidth);
  if (auto nics = read_int(r, "cluster.network.nics_per_node"))
    c.nics_per_node = static_cast<int>(*nics);
  set_if(read_duration(r, "cluster.network.latency"), c.network.latency);
  set_if(read_choice<NetworkFabric>(r, "cluster.network.fabric"), c.fabric);
  set_if(read_bandwidth(r, "cluster.pcie.bandwidth"), c.pcie.pinned_bandwidth);
  set_if(read_bandwidth(r, "cluster.pcie.pageable_bandwidth"), c.pcie.pageable_bandwidth);
  set_if(read_duration(r, "cluster.pcie.latency"), c.pcie.latency);
  set_if(read_duration(r, "cluster.cpu.launch_overhead"), c.cpu.launch_overhead);
  set_if(read_duration(r, "cluster.cpu.fsdp_hook_overhead"), c.cpu.fsdp_hook_overhead);
  set_if(read_bandwidth(r, "cluster.cpu.optimizer_bandwidth"), c.cpu.adam_bytes_per_s);
  if (c.gpu.power_cap_w && *c.gpu.power_cap_w > c.gpu.tdp_w) {
    r.add_problem(
        "cluster.gpu.power_cap_w",
        fmt::format("{} W is above the board limit of {} W", *c.gpu.power_cap_w, c.gpu.tdp_w),
        fmt::format("at most cluster.gpu.tdp_w ({} W)", c.gpu.tdp_w));
  }
  return c;
}

// ---------------------------------------------------------------- training
TrainingSpec read_training(ConfigReader& r) {
  TrainingSpec t;
  set_if(read_int(r, "training.seq_len"), t.seq_len);
  set_if(read_int(r, "training.micro_batch"), t.micro_batch);
  set_if(read_int(r, "training.grad_accum"), t.grad_accum);
  set_if(read_int(r, "training.iterations"), t.iterations);
  set_if(read_choice<Optimizer>(r, "training.optimizer"), t.optimizer);
  set_if(read_choice<OptimizerImpl>(r, "training.optimizer_impl"), t.optimizer_impl);
  set_if(read_choice<Synchronize>(r, "training.synchronize"), t.synchronize);
  if (auto ac = r.get_string("training.activation_checkpointing")) {
    const std::string_view v = *ac;
    std::int64_t n = 0;
    if (v == "none") {
      t.activation_checkpointing = ActivationCheckpointing::none;
    } else if (v == "full") {
      t.activation_checkpointing = ActivationCheckpointing::full;
    } else if (v == "selective_op") {
      t.activation_checkpointing = ActivationCheckpointing::selective_op;
    } else if (v.starts_with("every_") &&
               std::from_chars(v.data() + 6, v.data() + v.size(), n).ptr == v.data() + v.size() &&
               n >= 1) {
      t.activation_checkpointing =
          n == 1 ? ActivationCheckpointing::full : ActivationCheckpointing::every_n;
      t.checkpoint_every = n;
    } else {
      r.add_problem("training.activation_checkpointing",
                    fmt::format("'{}' is not a checkpointing policy", v),
                    "allowed: none, full, selective_op, every_N (N ≥ 1)");
    }
  }
  set_if(read_choice<LossRecipe>(r, "training.loss"), t.loss);
  set_if(read_int(r, "training.loss_chunk_tokens"), t.loss_chunk_tokens);
  if (r.has("training.loss_chunk_tokens") && t.loss != LossRecipe::chunked) {
    r.add_problem(
        "training.loss_chunk_tokens",
        fmt::format("sets the chunk of a chunked loss, but training.loss is {}", to_string(t.loss)),
        "training.loss: chunked, or remove training.loss_chunk_tokens");
  }
  if (auto autocast =
          r.get_enum("training.autocast", split_choices(key_of("training.autocast").choices))) {
    if (*autocast == "bf16") t.autocast = DType::bf16;
    if (*autocast == "fp16") t.autocast = DType::fp16;
  }
  set_if(read_choice<Fp8Recipe>(r, "training.fp8"), t.fp8);
  GenerationSpec& g = t.generation;
  set_if(read_int(r, "training.generation.calls"), g.calls);
  set_if(read_int(r, "training.generation.batch"), g.batch);
  set_if(read_int(r, "training.generation.prompt_tokens"), g.prompt_tokens);
  set_if(read_int(r, "training.generation.new_tokens"), g.new_tokens);
  set_if(r.get_bool("training.generation.keep_unsharded"), g.keep_unsharded);
  set_if(read_choice<KvCache>(r, "training.generation.kv_cache"), g.kv_cache);
  return t;
}

// ---------------------------------------------------------------- allocator
// PYTORCH_CUDA_ALLOC_CONF's settings, refused where PyTorch's CUDAAllocatorConfig refuses them.
void read_allocator(ConfigReader& r, AllocatorParams& a) {
  set_if(r.get_bool("allocator.expandable_segments"), a.expandable_segments);
  if (auto mb = read_int(r, "allocator.max_split_size_mb")) a.max_split_size = *mb * kMiB;
  if (auto n = read_int(r, "allocator.roundup_power2_divisions")) {
    if (!std::has_single_bit(static_cast<std::uint64_t>(*n))) {
      r.add_problem("allocator.roundup_power2_divisions",
                    fmt::format("{} is not a power of two", *n), "1, 2, 4, 8, 16, 32 or 64");
    }
    a.roundup_power2_divisions = static_cast<int>(*n);
  }
  if (auto f = read_number(r, "allocator.memory_fraction")) {
    if (*f <= 0) r.add_problem("allocator.memory_fraction", "is 0", "a fraction in (0, 1]");
    a.memory_fraction = *f;
  }
  set_if(read_number(r, "allocator.tight_margin"), a.tight_margin);
  if (auto t = read_number(r, "allocator.garbage_collection_threshold")) {
    if (*t <= 0 || *t >= 1) {
      r.add_problem("allocator.garbage_collection_threshold",
                    fmt::format("{:g} is not strictly between 0 and 1", *t), "0 < T < 1");
    } else if (!r.has("allocator.memory_fraction")) {
      r.add_problem("allocator.garbage_collection_threshold",
                    "has no effect: PyTorch's allocator collects garbage only when a memory "
                    "fraction is set (torch.cuda.set_per_process_memory_fraction)",
                    "set allocator.memory_fraction too, or remove the threshold");
    }
    a.garbage_collection_threshold = *t;
  }
}

// ---------------------------------------------------------------- fsdp
struct FsdpRead {
  FsdpPolicy policy;
  bool strategy_given = false;
  std::optional<std::int64_t> mesh_replicate;
  std::optional<std::int64_t> mesh_shard;
};

// "_BatchNorm, SyncBatchNorm" as its names; empty entries dropped.
// ---------------------------------------------------------------- variation

// A NODE:FACTOR or RANK:FACTOR list, each index inside the world.
std::map<int, double> read_factor_list(ConfigReader& r, std::string_view path, int count,
                                       const char* what) {
  const auto text = r.get_string(path);
  if (!text) return {};
  const char* const word = what == std::string_view("RANK") ? "rank" : "node";
  std::string bad;
  auto factors = parse_factor_list(*text, &bad);
  if (!bad.empty()) {
    r.add_problem(
        path, fmt::format("'{}' is not {}:FACTOR", bad, what),
        fmt::format("items like \"3:1.1, 5:1.2\" ({} 0..{}, factor in (0, 100])", word, count - 1));
  }
  for (auto it = factors.begin(); it != factors.end();) {
    if (it->first < count) {
      ++it;
      continue;
    }
    r.add_problem(path, fmt::format("{} {} is not in the cluster", word, it->first),
                  fmt::format("0..{}", count - 1));
    it = factors.erase(it);
  }
  return factors;
}

VariationSpec read_variation(ConfigReader& r, const ClusterSpec& cluster) {
  VariationSpec v;
  set_if(read_number(r, "variation.gpu_sigma"), v.gpu_sigma);
  v.slow_ranks = read_factor_list(r, "variation.slow_ranks", cluster.world_size(), "RANK");
  v.slow_nodes = read_factor_list(r, "variation.slow_nodes", cluster.nodes, "NODE");
  v.slow_links = read_factor_list(r, "variation.slow_links", cluster.nodes, "NODE");
  set_if(read_number(r, "variation.jitter"), v.jitter);
  set_if(read_duration(r, "variation.issue_delay"), v.issue_delay);
  if (auto seed = read_int(r, "variation.seed")) v.seed = static_cast<std::uint64_t>(*seed);
  return v;
}

std::vector<std::string> split_class_names(std::string_view text) {
  std::vector<std::string> out;
  for (std::string_view name : split_choices(text)) {
    while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    if (!name.empty()) out.emplace_back(name);
  }
  return out;
}

FsdpRead read_fsdp(ConfigReader& r) {
  FsdpRead out;
  FsdpPolicy& f = out.policy;
  set_if(read_choice<FsdpApi>(r, "fsdp.api"), f.api);
  if (auto s = read_choice<ShardingStrategy>(r, "fsdp.sharding_strategy")) {
    f.sharding_strategy = *s;
    out.strategy_given = true;
  }
  out.mesh_replicate = read_int(r, "fsdp.mesh.replicate");
  out.mesh_shard = read_int(r, "fsdp.mesh.shard");
  if (r.has("fsdp.reshard_after_forward")) {
    if (auto as_bool = r.get_bool("fsdp.reshard_after_forward"); as_bool) {
      f.reshard_after_forward.mode =
          *as_bool ? ReshardAfterForward::Mode::on : ReshardAfterForward::Mode::off;
    } else if (!r.problems().empty() && r.problems().back().key == "fsdp.reshard_after_forward") {
      r.problems().pop_back();  // not a bool: try an int
      if (auto size = read_int(r, "fsdp.reshard_after_forward")) {
        f.reshard_after_forward = {ReshardAfterForward::Mode::to_size, *size};
      } else if (!r.problems().empty() && r.problems().back().key == "fsdp.reshard_after_forward") {
        // It takes a boolean too: say so, not only "expected an integer".
        auto& problem = r.problems().back();
        if (problem.message.starts_with("expected an integer"))
          problem.message.replace(0, std::string_view("expected an integer").size(),
                                  "expected true, false or an integer");
        problem.allowed = "true, false, or an int > 1 that divides fsdp.mesh.shard and is smaller";
      }
    }
  }
  set_if(r.get_bool("fsdp.reshard_root_after_forward"), f.reshard_root_after_forward);
  set_if(r.get_bool("fsdp.reshard_last_after_forward"), f.reshard_last_after_forward);
  set_if(read_choice<BackwardPrefetch>(r, "fsdp.backward_prefetch"), f.backward_prefetch);
  set_if(r.get_bool("fsdp.forward_prefetch"), f.forward_prefetch);
  set_if(read_int(r, "fsdp.forward_prefetch_modules"), f.forward_prefetch_modules);
  set_if(read_int(r, "fsdp.backward_prefetch_modules"), f.backward_prefetch_modules);
  set_if(read_int(r, "fsdp.unshard_ahead"), f.unshard_ahead);
  set_if(read_choice<AllGatherBuffer>(r, "fsdp.all_gather_buffer"), f.all_gather_buffer);
  set_if(read_choice<CommBufferPool>(r, "fsdp.comm_buffer_pool"), f.comm_buffer_pool);
  set_if(r.get_bool("fsdp.limit_all_gathers"), f.limit_all_gathers);
  auto& mp = f.mixed_precision;
  if (auto d = read_mp_dtype(r, "fsdp.mixed_precision.param_dtype")) mp.param_dtype = d;
  if (auto d = read_mp_dtype(r, "fsdp.mixed_precision.reduce_dtype")) mp.reduce_dtype = d;
  set_if(r.get_bool("fsdp.mixed_precision.keep_low_precision_grads"), mp.keep_low_precision_grads);
  if (auto d = read_mp_dtype(r, "fsdp.mixed_precision.output_dtype")) mp.output_dtype = d;
  set_if(read_choice<OutputCastModules>(r, "fsdp.mixed_precision.output_dtype_modules"),
         mp.output_dtype_modules);
  if (auto d = read_mp_dtype(r, "fsdp.mixed_precision.buffer_dtype")) mp.buffer_dtype = d;
  if (auto cast = r.get_bool("fsdp.mixed_precision.cast_forward_inputs"))
    mp.cast_forward_inputs = cast;
  set_if(r.get_bool("fsdp.mixed_precision.cast_root_forward_inputs"), mp.cast_root_forward_inputs);
  if (auto classes = r.get_string("fsdp.mixed_precision.module_classes_to_ignore"))
    mp.module_classes_to_ignore = split_class_names(*classes);
  set_if(r.get_bool("fsdp.cpu_offload.params"), f.cpu_offload.params);
  set_if(r.get_bool("fsdp.cpu_offload.pin_memory"), f.cpu_offload.pin_memory);
  set_if(read_int(r, "fsdp.wrap.blocks_per_group"), f.blocks_per_group);
  set_if(read_choice<SyncSchedule>(r, "fsdp.requires_gradient_sync"), f.requires_gradient_sync);
  set_if(read_choice<SyncSchedule>(r, "fsdp.requires_all_reduce"), f.requires_all_reduce);
  set_if(read_choice<SyncSchedule>(r, "fsdp.is_last_backward"), f.is_last_backward);
  set_if(r.get_bool("fsdp.reshard_after_backward"), f.reshard_after_backward);
  set_if(r.get_bool("fsdp.separate_reduce_scatter_group"), f.separate_reduce_scatter_group);
  set_if(r.get_bool("fsdp.post_optim_event"), f.post_optim_event);
  set_if(read_int(r, "fsdp.checkpoint.every"), f.checkpoint.every);
  set_if(read_choice<StateDictType>(r, "fsdp.checkpoint.state_dict_type"),
         f.checkpoint.state_dict_type);
  set_if(r.get_bool("fsdp.checkpoint.offload_to_cpu"), f.checkpoint.offload_to_cpu);
  set_if(r.get_bool("fsdp.checkpoint.rank0_only"), f.checkpoint.rank0_only);
  return out;
}

void check_fsdp(ConfigReader& r, FsdpRead& in, const ClusterSpec& cluster) {
  FsdpPolicy& f = in.policy;
  const std::int64_t world = cluster.world_size();
  for (const auto& key : scenario_keys()) {
    if (!key_applies(key, f.api) && r.has(key.path)) {
      r.add_problem(
          key.path,
          fmt::format("is an {} knob, but fsdp.api is {}", to_string(*key.api), to_string(f.api)),
          std::string(key.instead));
    }
  }
  const bool hybrid_strategy =
      f.api == FsdpApi::fsdp1 && (f.sharding_strategy == ShardingStrategy::hybrid_shard ||
                                  f.sharding_strategy == ShardingStrategy::hybrid_shard_zero2);
  // Resolve the mesh: replicate × shard = world size.
  if (in.mesh_replicate || in.mesh_shard) {
    if (f.api == FsdpApi::fsdp1 && !hybrid_strategy) {
      r.add_problem("fsdp.mesh",
                    "under fsdp1 a mesh is only used with HYBRID_SHARD or _HYBRID_SHARD_ZERO2",
                    "remove fsdp.mesh or set fsdp.sharding_strategy: HYBRID_SHARD");
    }
    const std::int64_t rep = in.mesh_replicate.value_or(
        in.mesh_shard ? world / std::max<std::int64_t>(1, *in.mesh_shard) : 1);
    const std::int64_t shard = in.mesh_shard.value_or(world / std::max<std::int64_t>(1, rep));
    if (rep * shard != world) {
      r.add_problem(
          "fsdp.mesh",
          fmt::format("replicate {} × shard {} = {} is not the world size {} ({} nodes × {} GPUs)",
                      rep, shard, rep * shard, world, cluster.nodes, cluster.gpus_per_node),
          "replicate × shard = cluster.nodes × cluster.gpus_per_node");
    }
    f.mesh_replicate = rep;
    f.mesh_shard = shard;
  } else if (hybrid_strategy) {
    if (cluster.nodes == 1) {
      r.add_problem("fsdp.sharding_strategy",
                    fmt::format("{} with one node and no mesh has nothing to replicate across",
                                to_string(f.sharding_strategy)),
                    "add nodes, give fsdp.mesh.replicate/shard, or use FULL_SHARD");
    }
    f.mesh_replicate =
        cluster.nodes;  // FSDP1's default: shard within a node, replicate across nodes
    f.mesh_shard = cluster.gpus_per_node;
  } else if (f.api == FsdpApi::fsdp1 && f.sharding_strategy == ShardingStrategy::no_shard) {
    f.mesh_replicate = world;
    f.mesh_shard = 1;
  } else if (f.api == FsdpApi::fsdp1 && world == 1) {
    // FSDP1 runs NO_SHARD whatever strategy a world of one asks for (_init_core_state: "FSDP is
    // switching to use NO_SHARD ... since the world size is 1"), so shardscope lowers what runs.
    f.sharding_strategy = ShardingStrategy::no_shard;
    f.mesh_replicate = 1;
    f.mesh_shard = 1;
  } else {
    f.mesh_replicate = 1;
    f.mesh_shard = world;
  }
  if (f.reshard_after_forward.mode == ReshardAfterForward::Mode::to_size) {
    const std::int64_t size = f.reshard_after_forward.size;
    if (size == f.mesh_shard || f.mesh_shard % size != 0) {
      r.add_problem(
          "fsdp.reshard_after_forward",
          fmt::format("{} must be a divisor of the shard size {} other than 1 and {} itself", size,
                      f.mesh_shard, f.mesh_shard),
          "true, false, or such a divisor");
    }
  }
  if (f.comm_buffer_pool == CommBufferPool::process_group &&
      f.all_gather_buffer != AllGatherBuffer::caching_allocator) {
    // FSDPParamGroup.set_allocate_memory_from_process_group's AssertionError.
    r.add_problem("fsdp.comm_buffer_pool",
                  "cannot call set_allocate_memory_from_process_group() when all gather comm is "
                  "custom (PyTorch refuses it with fsdp.all_gather_buffer: persistent)",
                  "caching_allocator, or fsdp.all_gather_buffer: caching_allocator");
  }
  if (f.checkpoint.rank0_only && f.checkpoint.state_dict_type != StateDictType::full) {
    r.add_problem("fsdp.checkpoint.rank0_only", "only applies to FULL_STATE_DICT",
                  "set state_dict_type: FULL_STATE_DICT or remove it");
  }
}

// MixedPrecision's fields in combination: what PyTorch itself refuses, with its reason, and the
// two combinations shardscope does not model (docs/semantics.md, "Mixed-precision casts").
void check_mixed_precision(ConfigReader& r, const Scenario& s) {
  const auto& mp = s.fsdp.mixed_precision;
  // FSDP1's auto-wrap gives every module of these classes its own unit without mixed precision
  // (_wrap_utils.py, _override_module_mixed_precision). Batch norms are the default and no
  // modelled architecture has one; of any other class shardscope cannot say which modules are.
  if (s.fsdp.api == FsdpApi::fsdp1) {
    static constexpr std::array<std::string_view, 6> kBatchNorms{
        "_BatchNorm", "_NormBase", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm"};
    for (const std::string& name : mp.module_classes_to_ignore) {
      if (std::find(kBatchNorms.begin(), kBatchNorms.end(), name) != kBatchNorms.end()) continue;
      r.add_problem("fsdp.mixed_precision.module_classes_to_ignore",
                    fmt::format("not modelled: '{}' is not a batch-norm class, and shardscope "
                                "cannot tell which of the model's modules FSDP1 would wrap in "
                                "their own full-precision unit",
                                name),
                    "batch-norm classes (_BatchNorm, BatchNorm1d/2d/3d, SyncBatchNorm)");
    }
  }
  if (s.fsdp.api != FsdpApi::fsdp2 || !mp.output_dtype) return;
  const std::string_view key = "fsdp.mixed_precision.output_dtype";
  if (s.model.family != ModelFamily::transformer) {
    r.add_problem(key, "not modelled for a custom model: its groups give no output shapes",
                  "remove it, or describe the model as a transformer");
    return;
  }
  const DType out = *mp.output_dtype;
  // Between blocks the residual stream is in the parameters' dtype (under autocast too: the
  // residual adds run in their inputs' dtype), and so is a chunked loss's input.
  const DType residual = param_dtype(mp);
  if (out == residual) return;  // _cast_fp_tensor returns a tensor already in the dtype
  const std::string allowed = fmt::format("{}, or output_dtype_modules: root", to_string(residual));
  // Every block's output cast to `out` reaches modules that cast no input: the root's final
  // norm and output head run inside the root module, whose pre-forward cast only the model's
  // inputs (token ids) see.
  if (mp.output_dtype_modules == OutputCastModules::every_module) {
    if (!s.training.autocast) {
      r.add_problem(key,
                    fmt::format("PyTorch refuses this: every block's output is cast to {}, the "
                                "root's output head (inside the root module, which casts none "
                                "of its own layers' inputs) multiplies it by {} weights, and "
                                "F.linear raises \"expected m1 and m2 to have the same dtype\" "
                                "(mat1 and mat2 on CUDA)",
                                to_string(out), to_string(residual)),
                    allowed);
    } else {
      r.add_problem(key,
                    fmt::format("not modelled: under autocast every block's output cast to {} "
                                "would run the root's final norm and the next blocks' residual "
                                "stream in {}",
                                to_string(out), to_string(out)),
                    allowed);
    }
    return;
  }
  if (s.training.loss == LossRecipe::chunked) {
    r.add_problem(
        key,
        fmt::format("with training.loss: chunked the root returns hidden states, which "
                    "the chunked loss multiplies by the output head's {} weight: cast "
                    "to {} they are {}",
                    to_string(residual), to_string(out),
                    s.training.autocast
                        ? "not modelled (autocast would cast them back)"
                        : "refused by PyTorch (\"expected m1 and m2 to have the same dtype\")"),
        fmt::format("{}, or training.loss: upcast_fp32 or fused", to_string(residual)));
  }
}

// Generation runs the model's own blocks on its prompts: it needs a transformer's shapes, and the
// same integer bounds as a training micro-batch.
void check_generation(ConfigReader& r, const Scenario& s) {
  const GenerationSpec& g = s.training.generation;
  if (!r.has("training.generation")) return;
  if (s.model.family != ModelFamily::transformer) {
    r.add_problem("training.generation",
                  "generates with a transformer's blocks and KV cache; model.family custom has "
                  "no attention shapes",
                  "a transformer model, or remove training.generation");
    return;
  }
  // keep_unsharded restores each module's setting with set_reshard_after_forward, which takes
  // only a bool (FSDPModule.set_reshard_after_forward raises on an int).
  if (g.keep_unsharded && s.fsdp.api == FsdpApi::fsdp2 &&
      s.fsdp.reshard_after_forward.mode == ReshardAfterForward::Mode::to_size) {
    r.add_problem("training.generation.keep_unsharded",
                  fmt::format("cannot give the blocks back reshard_after_forward: {} after the "
                              "call: PyTorch's set_reshard_after_forward refuses it "
                              "(\"reshard_after_forward should be a bool, got <class 'int'>\")",
                              s.fsdp.reshard_after_forward.size),
                  "false, or fsdp.reshard_after_forward: true or false");
  }
  constexpr std::int64_t kMaxTokens = std::int64_t{1} << 27;
  const std::int64_t positions = g.prompt_tokens + g.new_tokens;
  if (g.batch * positions > kMaxTokens) {
    r.add_problem("training.generation.batch",
                  fmt::format("batch {} × (prompt {} + new {} tokens) = {} cached positions",
                              format_count(g.batch), format_count(g.prompt_tokens),
                              format_count(g.new_tokens), format_count(g.batch * positions)),
                  fmt::format("at most {} positions per call", format_count(kMaxTokens)));
  }
  const auto& c = s.model.transformer;
  if (c.pos_emb == PosEmbedding::learned && c.max_seq > 0 && positions > c.max_seq) {
    r.add_problem("training.generation.new_tokens",
                  fmt::format("prompt {} + new {} tokens is longer than the learned position "
                              "table ({} positions)",
                              g.prompt_tokens, g.new_tokens, c.max_seq),
                  fmt::format("prompt_tokens + new_tokens at most model.max_seq = {}", c.max_seq));
  }
}

// TransformerEngine's fp8 Linear: what TE itself refuses and what shardscope does not model.
void check_fp8(ConfigReader& r, const Scenario& s) {
  if (s.training.fp8 == Fp8Recipe::none) return;
  const std::string_view key = "training.fp8";
  if (s.model.family != ModelFamily::transformer) {
    r.add_problem(key, "replaces a transformer's projections; model.family custom has none",
                  "none, or describe the model as a transformer");
    return;
  }
  const GpuSpec& gpu = s.cluster.gpu;
  if (!(gpu.peak_flops.fp8 > gpu.peak_flops.bf16)) {
    r.add_problem(key,
                  fmt::format("{} has no fp8 tensor cores (its fp8 peak is not above its bf16 "
                              "peak): TransformerEngine's fp8_autocast refuses to run there",
                              gpu.name),
                  "none, or a Hopper or later GPU (cluster.gpu.peak_flops.fp8)");
  }
  // TE's Linear runs in the activation dtype outside its fp8 GEMMs: autocast's, else the
  // parameters'. fp32 activations are not a recipe anyone trains fp8 with.
  const DType activations = s.training.autocast.value_or(param_dtype(s.fsdp.mixed_precision));
  if (activations == DType::fp32) {
    r.add_problem(key,
                  "not modelled with fp32 activations: fp8 training runs TE's Linear under bf16 "
                  "autocast or on bf16 parameters",
                  "training.autocast: bf16, or fsdp.mixed_precision.param_dtype: bf16");
  }
  if (s.training.activation_checkpointing == ActivationCheckpointing::selective_op) {
    r.add_problem(key,
                  "not modelled with training.activation_checkpointing: selective_op (which "
                  "of TE's fp8 tensors the op-level policy keeps)",
                  "none, full or every_N");
  }
  if (s.training.generation.calls > 0) {
    r.add_problem(key,
                  "not modelled with training.generation (the generation's forwards through TE's "
                  "fp8 modules)",
                  "none, or training.generation.calls: 0");
  }
}

}  // namespace

Scenario read_scenario(const ConfigTree& tree, const std::string& file,
                       const std::filesystem::path& base_dir) {
  ConfigReader r(tree, file);
  Scenario s;
  s.source = file;
  r.get_string("name");
  r.get_string("description");
  if (!tree.is_object()) {
    r.add_problem("", "a scenario must be a mapping with model, cluster, training and fsdp", "");
    throw ValidationError(r.take_problems());
  }
  {
    std::string path, norm;
    check_shape(r, tree, path, norm);
  }
  s.model = read_model(r, base_dir);
  s.cluster = read_cluster(r, base_dir);
  s.training = read_training(r);
  FsdpRead fsdp = read_fsdp(r);
  check_fsdp(r, fsdp, s.cluster);
  s.fsdp = fsdp.policy;
  read_allocator(r, s.allocator);
  s.variation = read_variation(r, s.cluster);
  if (s.model.family == ModelFamily::transformer &&
      s.model.transformer.pos_emb == PosEmbedding::learned && s.model.transformer.max_seq > 0 &&
      s.training.seq_len > s.model.transformer.max_seq) {
    r.add_problem("training.seq_len",
                  fmt::format("{} is longer than the learned position table ({} positions)",
                              s.training.seq_len, s.model.transformer.max_seq),
                  fmt::format("at most model.max_seq = {}", s.model.transformer.max_seq));
  }
  // PyTorch's Adam and AdamW group each parameter with its gradient and refuse a gradient of
  // another dtype (torch/optim/adamw.py, _multi_tensor_adamw: "Tensors of the same index must be
  // on the same device and the same dtype"; the single-tensor path fails in lerp_): FSDP1's
  // keep_low_precision_grads leaves reduce-dtype gradients on parameters of another dtype.
  const auto& mp = s.fsdp.mixed_precision;
  const DType grad_dtype = mp.reduce_dtype.value_or(param_dtype(mp));
  if (s.fsdp.api == FsdpApi::fsdp1 && mp.keep_low_precision_grads && grad_dtype != DType::fp32 &&
      s.training.optimizer != Optimizer::sgd) {
    r.add_problem("fsdp.mixed_precision.keep_low_precision_grads",
                  fmt::format("keeps {} gradients on fp32 parameters, which PyTorch's {} refuses "
                              "(its foreach step needs one dtype per parameter and gradient)",
                              to_string(grad_dtype), to_string(s.training.optimizer)),
                  "false, or training.optimizer: sgd");
  }
  check_mixed_precision(r, s);
  // The chunked loss applies the output head after the root's forward (group_compute.cpp,
  // ComputePosition::after_root), where a resharded root has only the weight's shard.
  if (s.fsdp.api == FsdpApi::fsdp2 && s.fsdp.reshard_root_after_forward &&
      s.training.loss == LossRecipe::chunked) {
    r.add_problem("fsdp.reshard_root_after_forward",
                  "reshards the output head the chunked loss applies after forward",
                  "false, or training.loss: upcast_fp32 or fused");
  }
  check_generation(r, s);
  check_fp8(r, s);
  // Each factor is bounded by the key table; their product must also stay within what lowering's
  // integer arithmetic (tokens × hidden × bytes per element) holds.
  constexpr std::int64_t kMaxTokensPerMicrobatch = std::int64_t{1} << 27;
  if (s.training.seq_len * s.training.micro_batch > kMaxTokensPerMicrobatch) {
    r.add_problem(
        "training.micro_batch",
        fmt::format("seq_len {} × micro_batch {} = {} tokens per micro-batch",
                    format_count(s.training.seq_len), format_count(s.training.micro_batch),
                    format_count(s.training.seq_len * s.training.micro_batch)),
        fmt::format("at most {} tokens per micro-batch", format_count(kMaxTokensPerMicrobatch)));
  }
  // Math attention keeps [micro_batch, heads, s, s] probabilities per block: bound that product
  // too (2^48 elements, a PiB in fp32, is far beyond any GPU and within the integer arithmetic).
  constexpr double kMaxAttentionScores = 0x1p48;
  if (s.model.family == ModelFamily::transformer &&
      s.model.transformer.attention == AttentionKind::math) {
    const double scores = static_cast<double>(s.training.micro_batch) *
                          static_cast<double>(s.model.transformer.heads) *
                          static_cast<double>(s.training.seq_len) *
                          static_cast<double>(s.training.seq_len);
    if (scores > kMaxAttentionScores) {
      r.add_problem("model.attention",
                    fmt::format("math attention would keep {:.3g} attention probabilities per "
                                "block (micro_batch × heads × seq_len²)",
                                scores),
                    "flash, or a shorter sequence");
    }
  }
  r.finish();
  throw_if_any(r.take_problems());
  return s;
}

namespace {

// The top-level keys of a PyTorch profiler (Kineto) trace that no scenario has.
constexpr std::string_view kTraceKeys[] = {"traceEvents", "schemaVersion", "deviceProperties",
                                           "distributedInfo"};

void refuse_if_not_a_scenario(const ConfigTree& tree, const std::string& file) {
  if (const auto it = tree.find("schema"); it != tree.end() && it->is_string()) {
    const auto schema = it->get<std::string>();
    throw ValidationError(
        {Problem{file, "schema", fmt::format("is a {} file, not a scenario", schema),
                 schema.starts_with("shardscope.schedule/")
                     ? "simulate takes a schedule IR; validate, lower and sweep take scenarios"
                     : "a scenario (.yaml, .yml or .json with model, cluster, training, fsdp)"}});
  }
  for (const auto key : kTraceKeys) {
    if (tree.contains(std::string(key))) {
      throw ValidationError(
          {Problem{file, std::string(key), "is a PyTorch profiler trace, not a scenario",
                   "summarize, compare, import and calibrate read traces; a scenario has model, "
                   "cluster, training, fsdp"}});
    }
  }
}

}  // namespace

ConfigTree load_scenario_tree(const std::filesystem::path& path,
                              const std::vector<std::string>& overrides) {
  ConfigTree tree = load_config_file(path);
  refuse_if_not_a_scenario(tree, path.string());
  std::vector<Problem> problems;
  for (const auto& o : overrides) apply_override(tree, o, problems);
  throw_if_any(std::move(problems));
  return tree;
}

Scenario load_scenario(const std::filesystem::path& path,
                       const std::vector<std::string>& overrides) {
  return read_scenario(load_scenario_tree(path, overrides), path.string(), path.parent_path());
}

std::vector<Problem> key_value_problems(std::string_view assignment) {
  std::vector<Problem> problems;
  ConfigTree tree = ConfigTree::object();
  apply_override(tree, assignment, problems);
  if (!problems.empty()) return problems;
  const std::string path(assignment.substr(0, assignment.find('=')));
  const ScenarioKey* key = find_scenario_key(normalise_key_path(path));
  if (!key) return {{"", path, "not a scenario key", "see shardscope keys"}};
  ConfigReader r(tree, "");
  switch (key->type) {
    case KeyType::integer:
      read_int(r, path);
      break;
    case KeyType::number:
      read_number(r, path);
      break;
    case KeyType::boolean:
      r.get_bool(path);
      break;
    case KeyType::text:
      r.get_string(path);
      break;
    case KeyType::choice:
      r.get_enum(path, split_choices(key->choices));
      break;
    case KeyType::dtype:
      r.get_dtype(path);
      break;
    case KeyType::bytes:
      read_bytes(r, path);
      break;
    case KeyType::duration:
      read_duration(r, path);
      break;
    case KeyType::bandwidth:
      read_bandwidth(r, path);
      break;
    case KeyType::flops_rate:
      read_flops_rate(r, path);
      break;
    // A section, a list and reshard_after_forward's two types are read with their context.
    case KeyType::section:
    case KeyType::list:
    case KeyType::bool_or_int:
      break;
  }
  return r.take_problems();
}

Scenario scenario_from_text(std::string_view text, const std::vector<std::string>& overrides) {
  ConfigTree tree = parse_config_text(text, "<text>");
  std::vector<Problem> problems;
  for (const auto& o : overrides) apply_override(tree, o, problems);
  throw_if_any(std::move(problems));
  return read_scenario(tree, "<text>");
}

}  // namespace shardscope
