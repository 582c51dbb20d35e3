// A timeline (shardscope.timeline/1), as the GUI opens it: parsed and, when valid, written back
// and read again.
#include "fuzz_target.hpp"
#include "shardscope/core/timeline.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardscope;
  fuzz::expect_clean_errors([&] {
    const Timeline timeline = timeline_from_json(fuzz::as_text(data, size), "timeline.json");
    (void)timeline.end_time();
    (void)timeline_from_json(timeline_to_json(timeline), "written");  // what we write, we read
  });
  return 0;
}
