// A timeline (shardscope.timeline/3), as the GUI, `summarize` and `compare` open it: parsed and,
// when valid, summarized (with its critical path and a range), written back and read again.
#include "fuzz_target.hpp"
#include "shardscope/core/analysis.hpp"
#include "shardscope/core/timeline.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardscope;
  fuzz::expect_clean_errors([&] {
    const Timeline timeline = timeline_from_json(fuzz::as_text(data, size), "timeline.json");
    (void)analysis::summarize(timeline);
    (void)analysis::summarize_range(timeline, 0, timeline.end_time() / 2);
    (void)timeline_from_json(timeline_to_json(timeline), "written");  // what we write, we read
  });
  return 0;
}
