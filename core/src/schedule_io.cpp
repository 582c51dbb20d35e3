#include "shardscope/core/schedule_io.hpp"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "json_fields.hpp"
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

Json kernel_set_json(const KernelSet& set, std::size_t) {
  Json out = Json::array();
  for (const Kernel& k : set) {
    Json j;
    j["kind"] = to_string(k.kind());
    j["label"] = k.label;
    j["repeat"] = k.repeat;
    std::visit(detail::KernelShapeJson{j}, k.shape);
    out.push_back(std::move(j));
  }
  return out;
}

Json ref_json(const BufferRef& r) {
  Json j;
  j["buffer"] = r.buffer;
  j["count"] = r.count;
  j["dtype"] = to_string(r.dtype);
  j["offset"] = r.offset;
  if (r.rank_chunk) j["rank_chunk"] = true;
  return j;
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
  if (op.input.named()) j["input"] = ref_json(op.input);
  if (op.output.named()) j["output"] = ref_json(op.output);
  return j;
}

constexpr std::int64_t kMaxId = std::numeric_limits<std::int32_t>::max();

// One kernel of kernel_sets[set][index]; a missing or wrong field is a problem naming it.
Kernel read_kernel(detail::Fields& f, const nlohmann::json& j, const std::string& p) {
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
  k.repeat = f.integer(j, p, "repeat", 1, std::numeric_limits<std::int64_t>::max());
  k.shape = detail::read_kernel_shape(f, j, p, *kind);
  return k;
}

// An op's "input" or "output" region; absent: not named.
BufferRef read_ref(detail::Fields& f, const nlohmann::json& op, const std::string& p,
                   const char* field) {
  BufferRef r;
  if (!op.is_object() || !op.contains(field)) return r;
  const std::string at = fmt::format("{}.{}", p, field);
  const auto& j = op[field];
  r.buffer = static_cast<BufferId>(f.integer(j, at, "buffer", 0, kMaxId));
  r.count = f.integer(j, at, "count", 1, std::numeric_limits<std::int64_t>::max());
  r.dtype = f.enumeration(j, at, "dtype", parse_dtype, DType::fp32, kDTypeNames);
  r.offset = f.integer(j, at, "offset", 0, std::numeric_limits<std::int64_t>::max());
  if (j.is_object() && j.contains("rank_chunk")) r.rank_chunk = f.boolean(j, at, "rank_chunk");
  return r;
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
        j["pool"] = to_string(x.pool);
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
  detail::Fields f(origin, problems);
  Schedule s;
  if (!root.is_object()) throw ValidationError({Problem{origin, "", "expected a JSON object", ""}});
  const std::string schema = f.text(root, "", "schema");
  if (schema == "shardscope.schedule/1" || schema == "shardscope.schedule/2") {
    f.problem("schema",
              fmt::format("{} is an older IR format ({}): lower the scenario again with this "
                          "shardscope (lower --json)",
                          schema,
                          schema.ends_with('1') ? "compute ops carry no kernels"
                                                : "collectives and copies do not name the buffers "
                                                  "and dtype they read and write"),
              std::string(kScheduleSchema));
    throw ValidationError(std::move(problems));
  }
  if (schema != kScheduleSchema) {
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
    b.pool = f.enumeration(buffers[i], p, "pool", parse_memory_pool, MemoryPool::caching_allocator,
                           "caching_allocator, process_group");
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
    op.input = read_ref(f, j, p, "input");
    op.output = read_ref(f, j, p, "output");
    s.ops.push_back(std::move(op));
  }
  throw_if_any(std::move(problems));
  return s;
}

}  // namespace shardscope
