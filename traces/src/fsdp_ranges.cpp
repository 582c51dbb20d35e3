#include "fsdp_ranges.hpp"

#include <algorithm>

namespace shardscope::traces::detail {
namespace {

bool is_fsdp_range(std::string_view name) {
  return name.starts_with("FSDP::") || name.starts_with("FullyShardedDataParallel.");
}

/// Ranges per thread, each list by start (the longer first), so that ranges nest in order.
std::map<int, std::vector<const CpuRange*>> by_thread(const std::vector<CpuRange>& ranges) {
  std::map<int, std::vector<const CpuRange*>> out;
  for (const CpuRange& r : ranges) out[r.thread].push_back(&r);
  for (auto& [thread, list] : out) {
    std::sort(list.begin(), list.end(), [](const CpuRange* a, const CpuRange* b) {
      return a->start != b->start ? a->start < b->start : a->end > b->end;
    });
  }
  return out;
}

}  // namespace

std::optional<std::string> fsdp2_module(std::string_view range) {
  if (!range.starts_with("FSDP::")) return std::nullopt;
  if (const auto f = range.find(" for "); f != std::string_view::npos)
    return std::string(range.substr(f + 5));
  const auto open = range.find(" (");
  if (open == std::string_view::npos) return std::string("root");  // the root's fqn is ""
  if (range.back() != ')') return std::nullopt;
  const std::string_view fqn = range.substr(open + 2, range.size() - open - 3);
  return fqn.empty() ? std::string("root") : std::string(fqn);
}

std::optional<std::string> range_module(const CpuRange& range,
                                        const std::vector<std::string>& names) {
  if (range.module >= 0) return names[static_cast<std::size_t>(range.module)];
  return fsdp2_module(names[static_cast<std::size_t>(range.name)]);
}

bool starts_group_work(std::string_view range) {
  return range.starts_with("FSDP::pre_forward") || range.starts_with("FSDP::pre_backward") ||
         range.starts_with("FullyShardedDataParallel._pre_backward_hook");
}

int name_fsdp1_units(std::vector<CpuRange>& ranges, const std::vector<std::string>& names,
                     const std::function<std::int32_t(const std::string&)>& intern) {
  constexpr std::string_view kPrefix = "FullyShardedDataParallel.";
  std::vector<CpuRange*> fsdp1;
  for (CpuRange& r : ranges) {
    const std::string& name = names[static_cast<std::size_t>(r.name)];
    if (name == "FullyShardedDataParallel.forward" || name.find("_backward_hook") != name.npos ||
        name.find("_prefetch") != name.npos) {
      if (name.starts_with(kPrefix)) fsdp1.push_back(&r);
    }
  }
  std::sort(fsdp1.begin(), fsdp1.end(), [](const CpuRange* a, const CpuRange* b) {
    return a->start != b->start ? a->start < b->start : a->end > b->end;
  });
  // Units by index: -1 the root, i ≥ 0 the i-th nested unit in forward order (layers.i).
  constexpr int kRoot = -1, kNone = -2;
  const auto unit_name = [&](int u) {
    return u == kRoot ? intern("root") : intern("layers." + std::to_string(u));
  };
  std::vector<std::pair<TimeNs, int>> open_forwards;  // (end, unit) of the forwards open
  int blocks = 0, seen_blocks = 0, pre_backward = 0, post_backward = 0;
  int pre_backward_unit = kNone, post_backward_unit = kNone;
  for (CpuRange* r : fsdp1) {
    const std::string name = names[static_cast<std::size_t>(r->name)].substr(kPrefix.size());
    while (!open_forwards.empty() && open_forwards.back().first <= r->start)
      open_forwards.pop_back();
    int unit = kNone;
    if (name == "forward") {
      if (open_forwards.empty()) {  // a root forward: a new micro-batch
        unit = kRoot;
        blocks = 0;
        pre_backward = post_backward = 0;
        pre_backward_unit = post_backward_unit = kNone;
      } else {
        unit = blocks++;
        seen_blocks = std::max(seen_blocks, blocks);
      }
      open_forwards.emplace_back(r->end, unit);
    } else if (name.starts_with("_pre_backward_hook")) {
      // The root's fires first, on the model's output; the others in reverse forward order.
      const int j = pre_backward++;
      unit = j == 0 ? kRoot : blocks - j >= 0 ? blocks - j : kNone;
      pre_backward_unit = unit;
    } else if (name.starts_with("_post_backward_hook")) {
      const int j = post_backward++;
      unit = j < blocks ? blocks - 1 - j : j == blocks ? kRoot : kNone;
      post_backward_unit = unit;
    } else if (name.starts_with("_pre_forward_prefetch") && !open_forwards.empty()) {
      // Prefetches the next unit in forward order (the last forward's count bounds it).
      const int u = open_forwards.back().second + 1;
      unit = u < seen_blocks ? u : kNone;
    } else if (name.starts_with("_pre_backward_prefetch") && pre_backward_unit != kNone) {
      // Prefetches the next unit in backward order: after the root the last block.
      unit = pre_backward_unit == kRoot ? blocks - 1 : pre_backward_unit - 1;
    } else if (name.starts_with("_post_backward_prefetch") && post_backward_unit >= 0) {
      unit = post_backward_unit - 1 >= 0 ? post_backward_unit - 1 : kNone;
    }
    if (unit != kNone) r->module = unit_name(unit);
  }
  return fsdp1.empty() ? 0 : seen_blocks + 1;
}

std::map<std::string, std::int64_t> unmapped_fsdp_ranges(const std::vector<CpuRange>& ranges,
                                                         const std::vector<std::string>& names) {
  std::map<std::string, std::int64_t> out;
  for (const auto& [thread, list] : by_thread(ranges)) {
    // The ranges open, by end, and whether each is or sits inside one that names a group.
    std::vector<std::pair<TimeNs, bool>> open;
    for (const CpuRange* r : list) {
      while (!open.empty() && open.back().first <= r->start) open.pop_back();
      const std::string& name = names[static_cast<std::size_t>(r->name)];
      const bool inside_named = !open.empty() && open.back().second;
      const bool named = is_fsdp_range(name) && range_module(*r, names).has_value();
      if (is_fsdp_range(name) && !named && !inside_named) ++out[fsdp_range_kind(name)];
      open.emplace_back(r->end, named || inside_named);
    }
  }
  return out;
}

std::string fsdp_range_kind(std::string_view name) {
  std::string_view kind = name.substr(0, name.find(" ("));
  return std::string(kind.substr(0, kind.find(" for ")));
}

}  // namespace shardscope::traces::detail
