#include "shardscope/core/schedule_io.hpp"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "json_lines.hpp"
#include "label_table.hpp"
#include "shardscope/core/error.hpp"
#include "shardscope/core/json_field.hpp"

namespace shardscope {
namespace {

using Json = nlohmann::ordered_json;

Json ids(const IdList& v) {
  Json out = Json::array();
  for (auto x : v) out.push_back(x);
  return out;
}

struct KernelShapeJson {
  Json& j;
  void operator()(const Gemm& g) const {
    j["m"] = g.m;
    j["n"] = g.n;
    j["k"] = g.k;
    j["batch"] = g.batch;
    j["transpose_a"] = g.transpose_a;
    j["transpose_b"] = g.transpose_b;
    j["input"] = to_string(g.input);
    j["output"] = to_string(g.output);
  }
  void operator()(const Attention& a) const {
    j["batch"] = a.batch;
    j["heads"] = a.heads;
    j["kv_heads"] = a.kv_heads;
    j["q_len"] = a.q_len;
    j["kv_len"] = a.kv_len;
    j["head_dim"] = a.head_dim;
    j["causal"] = a.causal;
    j["backward"] = a.backward;
    j["dtype"] = to_string(a.dtype);
  }
  void operator()(const MemoryBound& m) const {
    j["bytes"] = m.bytes;
    j["flops"] = m.flops;
  }
  void operator()(const CrossEntropy& l) const {
    j["tokens"] = l.tokens;
    j["vocab"] = l.vocab;
    j["backward"] = l.backward;
    j["logits"] = to_string(l.logits);
  }
  void operator()(const OptimizerUpdate& o) const {
    j["elements"] = o.elements;
    j["optimizer"] = to_string(o.optimizer);
    j["dtype"] = to_string(o.dtype);
  }
};

Json kernel_set_json(const KernelSet& set, std::size_t) {
  Json out = Json::array();
  for (const Kernel& k : set) {
    Json j;
    j["kind"] = to_string(k.kind());
    j["label"] = k.label;
    j["repeat"] = k.repeat;
    std::visit(KernelShapeJson{j}, k.shape);
    out.push_back(std::move(j));
  }
  return out;
}

Json op_json(const Schedule& s, const Op& op, std::size_t index) {
  Json j;
  j["id"] = index;
  detail::put_op_placement(j, op);
  j["flops"] = op.flops;
  if (op.attention_flops > 0) j["attention_flops"] = op.attention_flops;
  if (op.fixed_time) j["fixed_time_ns"] = *op.fixed_time;
  if (const auto label = op_label(s, op); !label.empty()) j["label"] = label;
  if (op.kernels != kNone) j["kernels"] = op.kernels;
  j["deps"] = ids(op.deps);
  j["allocs"] = ids(op.allocs);
  j["frees"] = ids(op.frees);
  j["uses"] = ids(op.uses);
  return j;
}

// Strict field access that records problems instead of throwing.
class Fields {
 public:
  Fields(std::string origin, std::vector<Problem>& problems)
      : origin_(std::move(origin)), problems_(problems) {}

  const nlohmann::json* get(const nlohmann::json& obj, const std::string& path, const char* key,
                            bool required = true) {
    if (!obj.is_object()) {
      problem(path, "expected an object");
      return nullptr;
    }
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (required) problem(path + "." + key, "missing");
      return nullptr;
    }
    return &*it;
  }
  std::int64_t integer(const nlohmann::json& obj, const std::string& path, const char* key,
                       std::int64_t min, std::int64_t max) {
    const auto* v = get(obj, path, key);
    if (!v) return min;
    if (!v->is_number_integer() || v->get<std::int64_t>() < min || v->get<std::int64_t>() > max) {
      problem(path + "." + key,
              fmt::format("expected an integer in {}..{}, got {}", min, max, v->dump()));
      return min;
    }
    return v->get<std::int64_t>();
  }
  double number(const nlohmann::json& obj, const std::string& path, const char* key) {
    const auto* v = get(obj, path, key);
    if (!v) return 0;
    if (!v->is_number() || v->get<double>() < 0) {
      problem(path + "." + key, fmt::format("expected a number ≥ 0, got {}", v->dump()));
      return 0;
    }
    return v->get<double>();
  }
  std::string text(const nlohmann::json& obj, const std::string& path, const char* key) {
    const auto* v = get(obj, path, key);
    if (!v) return {};
    if (!v->is_string()) {
      problem(path + "." + key, fmt::format("expected a string, got {}", v->dump()));
      return {};
    }
    return v->get<std::string>();
  }
  bool boolean(const nlohmann::json& obj, const std::string& path, const char* key) {
    const auto* v = get(obj, path, key);
    if (!v) return false;
    if (!v->is_boolean()) {
      problem(path + "." + key, fmt::format("expected true or false, got {}", v->dump()));
      return false;
    }
    return v->get<bool>();
  }
  template <typename E>
  E enumeration(const nlohmann::json& obj, const std::string& path, const char* key,
                std::optional<E> (*parse)(std::string_view), E fallback, std::string_view allowed) {
    const std::string s = text(obj, path, key);
    if (s.empty()) return fallback;
    if (auto v = parse(s)) return *v;
    problem(path + "." + key, fmt::format("unknown value '{}'", s), std::string(allowed));
    return fallback;
  }
  std::vector<std::int32_t> id_list(const nlohmann::json& obj, const std::string& path,
                                    const char* key) {
    std::vector<std::int32_t> out;
    const auto* v = get(obj, path, key);
    if (!v) return out;
    if (!v->is_array()) {
      problem(path + "." + key, "expected a list of ids");
      return out;
    }
    for (const auto& x : *v) {
      if (!x.is_number_integer()) {
        problem(path + "." + key, fmt::format("expected integer ids, got {}", x.dump()));
        continue;
      }
      out.push_back(json_integer<std::int32_t>(x));
    }
    return out;
  }
  const nlohmann::json& array(const nlohmann::json& root, const char* key) {
    static const nlohmann::json kEmpty = nlohmann::json::array();
    const auto* v = get(root, "", key);
    if (!v) return kEmpty;
    if (!v->is_array()) {
      problem(key, "expected a list");
      return kEmpty;
    }
    return *v;
  }
  void problem(const std::string& key, std::string message, std::string allowed = {}) {
    problems_.push_back({origin_, key.starts_with('.') ? key.substr(1) : key, std::move(message),
                         std::move(allowed)});
  }

 private:
  std::string origin_;
  std::vector<Problem>& problems_;
};

constexpr std::int64_t kMaxId = std::numeric_limits<std::int32_t>::max();
constexpr std::int64_t kMaxCount = std::numeric_limits<std::int64_t>::max();

// One kernel of kernel_sets[set][index]; a missing or wrong field is a problem naming it.
Kernel read_kernel(Fields& f, const nlohmann::json& j, const std::string& p) {
  Kernel k;
  const std::string kind_name = f.text(j, p, "kind");
  const std::optional<KernelKind> kind = parse_kernel_kind(kind_name);
  if (!kind) {  // its other fields mean nothing without a kind
    if (!kind_name.empty())
      f.problem(p + ".kind", fmt::format("unknown value '{}'", kind_name),
                std::string(kKernelKindNames));
    return k;
  }
  k.label = f.text(j, p, "label");
  k.repeat = f.integer(j, p, "repeat", 1, kMaxCount);
  const auto count = [&](const char* key, std::int64_t min = 0) {
    return f.integer(j, p, key, min, kMaxCount);
  };
  const auto dtype = [&](const char* key) {
    return f.enumeration(j, p, key, parse_dtype, DType::fp32, kDTypeNames);
  };
  switch (*kind) {
    case KernelKind::gemm:
      k.shape = Gemm{count("m"),
                     count("n"),
                     count("k"),
                     count("batch", 1),
                     f.boolean(j, p, "transpose_a"),
                     f.boolean(j, p, "transpose_b"),
                     dtype("input"),
                     dtype("output")};
      break;
    case KernelKind::attention:
      k.shape = Attention{count("batch", 1),
                          count("heads", 1),
                          count("kv_heads", 1),
                          count("q_len"),
                          count("kv_len"),
                          count("head_dim"),
                          f.boolean(j, p, "causal"),
                          f.boolean(j, p, "backward"),
                          dtype("dtype")};
      break;
    case KernelKind::memory:
      k.shape = MemoryBound{count("bytes"), f.number(j, p, "flops")};
      break;
    case KernelKind::loss:
      k.shape = CrossEntropy{count("tokens"), count("vocab"), f.boolean(j, p, "backward"),
                             dtype("logits")};
      break;
    case KernelKind::optimizer:
      k.shape = OptimizerUpdate{
          count("elements"),
          f.enumeration(j, p, "optimizer", parse_optimizer, Optimizer::adamw, kOptimizerNames),
          dtype("dtype")};
      break;
  }
  return k;
}

}  // namespace

std::string schedule_to_json(const Schedule& s) {
  std::string out = "{\n";
  out += fmt::format("  \"schema\": {},\n", Json(kScheduleSchema).dump());
  out += fmt::format("  \"name\": {},\n", Json(s.name).dump());
  out += fmt::format("  \"world_size\": {},\n", s.world_size);
  out += fmt::format("  \"iterations\": {},\n", s.iterations);
  out += fmt::format("  \"tokens_per_iteration\": {},\n", s.tokens_per_iteration);
  detail::emit_json_array(out, "streams", s.streams, detail::stream_json, false);
  detail::emit_json_array(out, "communicators", s.communicators, detail::communicator_json, false);
  detail::emit_json_array(
      out, "groups", s.groups,
      [](const ParamGroup& x, std::size_t) {
        Json j;
        j["name"] = x.name;
        j["numel"] = x.numel;
        j["sharded_numel"] = x.sharded_numel;
        j["dtype"] = to_string(x.dtype);
        j["is_root"] = x.is_root;
        return j;
      },
      false);
  detail::emit_json_array(
      out, "buffers", s.buffers,
      [&s](const Buffer& x, std::size_t i) {
        Json j;
        j["name"] = buffer_name(s, static_cast<BufferId>(i));
        j["size"] = x.size;
        j["dtype"] = to_string(x.dtype);
        j["category"] = to_string(x.category);
        j["group"] = x.group;
        j["location"] = to_string(x.location);
        j["live_at_start"] = x.live_at_start;
        return j;
      },
      false);
  detail::emit_json_array(out, "kernel_sets", s.kernel_sets, kernel_set_json, false);
  detail::emit_json_array(
      out, "ops", s.ops, [&s](const Op& op, std::size_t i) { return op_json(s, op, i); }, true);
  out += "}\n";
  return out;
}

Schedule schedule_from_json(std::string_view text, const std::string& origin) {
  const nlohmann::json root = detail::parse_json(text, origin);
  std::vector<Problem> problems;
  Fields f(origin, problems);
  Schedule s;
  if (!root.is_object()) throw ValidationError({Problem{origin, "", "expected a JSON object", ""}});
  if (f.text(root, "", "schema") == "shardscope.schedule/1") {
    f.problem("schema",
              "shardscope.schedule/1 is an older IR format (compute ops carry no kernels): lower "
              "the scenario again with this shardscope (lower --json)",
              std::string(kScheduleSchema));
    throw ValidationError(std::move(problems));
  }
  if (f.text(root, "", "schema") != kScheduleSchema) {
    f.problem("schema", "not a shardscope schedule", std::string(kScheduleSchema));
    throw ValidationError(std::move(problems));
  }
  s.name = f.text(root, "", "name");
  s.world_size = static_cast<int>(f.integer(root, "", "world_size", 1, kMaxId));
  s.iterations = static_cast<int>(f.integer(root, "", "iterations", 1, kMaxId));
  s.tokens_per_iteration =
      f.integer(root, "", "tokens_per_iteration", 0, std::numeric_limits<std::int64_t>::max());
  const auto& streams = f.array(root, "streams");
  for (std::size_t i = 0; i < streams.size(); ++i) {
    const std::string p = fmt::format("streams[{}]", i);
    s.streams.push_back({f.text(streams[i], p, "name"),
                         f.enumeration(streams[i], p, "kind", parse_stream_kind,
                                       StreamKind::compute, "cpu, compute, communication, copy")});
  }
  const auto& comms = f.array(root, "communicators");
  for (std::size_t i = 0; i < comms.size(); ++i) {
    const std::string p = fmt::format("communicators[{}]", i);
    s.communicators.push_back({f.text(comms[i], p, "name"),
                               static_cast<int>(f.integer(comms[i], p, "size", 1, kMaxId)),
                               static_cast<int>(f.integer(comms[i], p, "nodes", 1, kMaxId))});
  }
  const auto& groups = f.array(root, "groups");
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const std::string p = fmt::format("groups[{}]", i);
    ParamGroup g;
    g.name = f.text(groups[i], p, "name");
    g.numel = f.integer(groups[i], p, "numel", 0, std::numeric_limits<std::int64_t>::max());
    g.sharded_numel =
        f.integer(groups[i], p, "sharded_numel", 0, std::numeric_limits<std::int64_t>::max());
    g.dtype = f.enumeration(groups[i], p, "dtype", parse_dtype, DType::fp32, kDTypeNames);
    g.is_root = f.boolean(groups[i], p, "is_root");
    s.groups.push_back(std::move(g));
  }
  const auto& buffers = f.array(root, "buffers");
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    const std::string p = fmt::format("buffers[{}]", i);
    Buffer b;
    // A name read back is kept whole (it need not follow the lowering's pattern).
    b.name.label = static_cast<std::int32_t>(s.buffer_labels.size());
    s.buffer_labels.push_back(f.text(buffers[i], p, "name"));
    b.size = f.integer(buffers[i], p, "size", 0, std::numeric_limits<std::int64_t>::max());
    b.dtype = f.enumeration(buffers[i], p, "dtype", parse_dtype, DType::fp32, kDTypeNames);
    b.category =
        f.enumeration(buffers[i], p, "category", parse_buffer_category, BufferCategory::workspace,
                      "a buffer category such as sharded_params, activations");
    b.group = static_cast<GroupId>(f.integer(buffers[i], p, "group", kNone, kMaxId));
    b.location =
        f.enumeration(buffers[i], p, "location", parse_location, Location::gpu, "gpu, host");
    b.live_at_start = f.boolean(buffers[i], p, "live_at_start");
    s.buffers.push_back(b);
  }
  const auto& kernel_sets = f.array(root, "kernel_sets");
  for (std::size_t i = 0; i < kernel_sets.size(); ++i) {
    const std::string p = fmt::format("kernel_sets[{}]", i);
    KernelSet& set = s.kernel_sets.emplace_back();
    if (!kernel_sets[i].is_array()) {
      f.problem(p, "expected a list of kernels");
      continue;
    }
    for (std::size_t k = 0; k < kernel_sets[i].size(); ++k)
      set.push_back(read_kernel(f, kernel_sets[i][k], fmt::format("{}[{}]", p, k)));
  }
  const auto& ops = f.array(root, "ops");
  LabelTable op_labels;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const std::string p = fmt::format("ops[{}]", i);
    const auto& j = ops[i];
    if (f.integer(j, p, "id", 0, kMaxId) != static_cast<std::int64_t>(i)) {
      f.problem(p + ".id", "op ids must equal their position in issue order", fmt::format("{}", i));
    }
    Op op;
    op.kind = f.enumeration(j, p, "kind", parse_op_kind, OpKind::forward,
                            "an op kind such as all_gather, forward");
    op.stream = static_cast<StreamId>(f.integer(j, p, "stream", 0, kMaxId));
    op.group = static_cast<GroupId>(f.integer(j, p, "group", kNone, kMaxId));
    op.phase = f.enumeration(j, p, "phase", parse_phase, Phase::forward,
                             "forward, backward, optimizer, checkpoint");
    op.iteration = static_cast<int>(f.integer(j, p, "iteration", 0, kMaxId));
    op.microbatch = static_cast<int>(f.integer(j, p, "microbatch", 0, kMaxId));
    op.comm = static_cast<CommId>(f.integer(j, p, "comm", kNone, kMaxId));
    op.bytes = f.integer(j, p, "bytes", 0, std::numeric_limits<std::int64_t>::max());
    op.flops = f.number(j, p, "flops");
    if (j.is_object() && j.contains("attention_flops"))
      op.attention_flops = f.number(j, p, "attention_flops");
    if (j.is_object() && j.contains("fixed_time_ns")) {
      op.fixed_time = f.integer(j, p, "fixed_time_ns", 0, std::numeric_limits<std::int64_t>::max());
    }
    if (j.is_object() && j.contains("label"))
      op.label = op_labels.id(s.op_labels, f.text(j, p, "label"));
    if (j.is_object() && j.contains("kernels"))
      op.kernels = static_cast<std::int32_t>(f.integer(j, p, "kernels", 0, kMaxId));
    op.deps = f.id_list(j, p, "deps");
    op.allocs = f.id_list(j, p, "allocs");
    op.frees = f.id_list(j, p, "frees");
    op.uses = f.id_list(j, p, "uses");
    s.ops.push_back(std::move(op));
  }
  throw_if_any(std::move(problems));
  return s;
}

}  // namespace shardscope
