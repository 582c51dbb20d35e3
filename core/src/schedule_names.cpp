// Spellings of the IR enums, shared by JSON, tables and traces.
#include <array>

#include "shardscope/core/schedule.hpp"

namespace shardscope {
namespace {

template <typename E, std::size_t N>
struct EnumNames {
  std::array<std::pair<E, std::string_view>, N> entries;

  constexpr std::string_view name(E value) const {
    for (const auto& [v, n] : entries) {
      if (v == value) return n;
    }
    return "?";
  }
  constexpr std::optional<E> parse(std::string_view text) const {
    for (const auto& [v, n] : entries) {
      if (n == text) return v;
    }
    return std::nullopt;
  }
};

constexpr EnumNames<StreamKind, 4> kStreamKinds{{{{StreamKind::cpu, "cpu"},
                                                  {StreamKind::compute, "compute"},
                                                  {StreamKind::communication, "communication"},
                                                  {StreamKind::copy, "copy"}}}};

constexpr EnumNames<OpKind, 19> kOpKinds{{{{OpKind::copy_in, "copy_in"},
                                           {OpKind::all_gather, "all_gather"},
                                           {OpKind::copy_out, "copy_out"},
                                           {OpKind::forward, "forward"},
                                           {OpKind::backward, "backward"},
                                           {OpKind::recompute, "recompute"},
                                           {OpKind::reshard, "reshard"},
                                           {OpKind::reduce_copy_in, "reduce_copy_in"},
                                           {OpKind::reduce_scatter, "reduce_scatter"},
                                           {OpKind::all_reduce, "all_reduce"},
                                           {OpKind::grad_div, "grad_div"},
                                           {OpKind::h2d, "h2d"},
                                           {OpKind::d2h, "d2h"},
                                           {OpKind::optimizer_step, "optimizer_step"},
                                           {OpKind::zero_grad, "zero_grad"},
                                           {OpKind::stream_wait, "stream_wait"},
                                           {OpKind::cpu_wait, "cpu_wait"},
                                           {OpKind::state_dict, "state_dict"},
                                           {OpKind::other, "other"}}}};

constexpr EnumNames<Phase, kPhaseCount> kPhases{{{{Phase::forward, "forward"},
                                                  {Phase::backward, "backward"},
                                                  {Phase::optimizer, "optimizer"},
                                                  {Phase::checkpoint, "checkpoint"},
                                                  {Phase::generation, "generation"}}}};

constexpr EnumNames<BufferCategory, 13> kCategories{
    {{{BufferCategory::sharded_params, "sharded_params"},
      {BufferCategory::all_gather_input, "all_gather_input"},
      {BufferCategory::all_gather_output, "all_gather_output"},
      {BufferCategory::unsharded_params, "unsharded_params"},
      {BufferCategory::unsharded_grads, "unsharded_grads"},
      {BufferCategory::reduce_scatter_input, "reduce_scatter_input"},
      {BufferCategory::reduce_scatter_output, "reduce_scatter_output"},
      {BufferCategory::sharded_grads, "sharded_grads"},
      {BufferCategory::optimizer_states, "optimizer_states"},
      {BufferCategory::activations, "activations"},
      {BufferCategory::recompute, "recompute"},
      {BufferCategory::logits, "logits"},
      {BufferCategory::workspace, "workspace"}}}};

constexpr EnumNames<Location, 2> kLocations{{{{Location::gpu, "gpu"}, {Location::host, "host"}}}};
constexpr EnumNames<MemoryPool, 2> kMemoryPools{
    {{{MemoryPool::caching_allocator, "caching_allocator"},
      {MemoryPool::process_group, "process_group"}}}};

template <typename E, std::size_t N>
constexpr std::array<E, N> values_of(const EnumNames<E, N>& names) {
  std::array<E, N> out{};
  for (std::size_t i = 0; i < N; ++i) out[i] = names.entries[i].first;
  return out;
}

constexpr auto kAllOpKinds = values_of(kOpKinds);
constexpr auto kAllCategories = values_of(kCategories);
static_assert(kAllOpKinds.size() == kOpKindCount, "kOpKindCount must count every OpKind");

}  // namespace

std::string_view to_string(StreamKind kind) {
  return kStreamKinds.name(kind);
}
std::string_view to_string(OpKind kind) {
  return kOpKinds.name(kind);
}
std::string_view to_string(Phase phase) {
  return kPhases.name(phase);
}
std::string_view to_string(BufferCategory category) {
  return kCategories.name(category);
}
std::string_view to_string(Location location) {
  return kLocations.name(location);
}
std::string_view to_string(MemoryPool pool) {
  return kMemoryPools.name(pool);
}
std::optional<StreamKind> parse_stream_kind(std::string_view text) {
  return kStreamKinds.parse(text);
}
std::optional<OpKind> parse_op_kind(std::string_view text) {
  return kOpKinds.parse(text);
}
std::optional<Phase> parse_phase(std::string_view text) {
  return kPhases.parse(text);
}
std::optional<BufferCategory> parse_buffer_category(std::string_view text) {
  return kCategories.parse(text);
}
std::optional<Location> parse_location(std::string_view text) {
  return kLocations.parse(text);
}
std::optional<MemoryPool> parse_memory_pool(std::string_view text) {
  return kMemoryPools.parse(text);
}

std::span<const OpKind> all_op_kinds() {
  return kAllOpKinds;
}
std::span<const BufferCategory> all_buffer_categories() {
  return kAllCategories;
}

}  // namespace shardscope
