// A PyTorch profiler (Kineto) trace, as `shardscope import` and every timeline-reading command
// read it: imported from text, its report written, summarized, and its timeline written and read
// back.
#include "fuzz_target.hpp"
#include "shardscope/core/analysis.hpp"
#include "shardscope/traces/kineto_import.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardscope;
  fuzz::expect_clean_errors([&] {
    const auto imported = traces::import_kineto_text(fuzz::as_text(data, size), "trace.json");
    (void)traces::import_report_text(imported.report);
    (void)analysis::summarize(imported.timeline);
    (void)timeline_from_json(timeline_to_json(imported.timeline), "written");
  });
  return 0;
}
