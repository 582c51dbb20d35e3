#include <charconv>

#include "shardscope/core/schedule.hpp"

namespace shardscope {

std::string buffer_name(const Schedule& s, BufferId id) {
  const Buffer& b = s.buffers[static_cast<std::size_t>(id)];
  const BufferName& n = b.name;
  std::string out;
  if (n.group_prefix && b.group != kNone)
    out.append(s.groups[static_cast<std::size_t>(b.group)].name).push_back('/');
  if (n.label != kNone) out.append(s.buffer_labels[static_cast<std::size_t>(n.label)]);
  char digits[16];
  if (n.iteration != kNone) {
    out.append("@i");
    out.append(digits, std::to_chars(digits, digits + sizeof digits, n.iteration).ptr);
  }
  if (n.microbatch != kNone) {
    out.push_back('m');
    out.append(digits, std::to_chars(digits, digits + sizeof digits, n.microbatch).ptr);
  }
  return out;
}

}  // namespace shardscope
