// Sweep results as the GUI's Sweep tab loads them: JSON (shardscope.sweep/1) when the input starts
// with '{', CSV otherwise; and --grid axes, one per line, as `sweep --grid` reads them.
#include "fuzz_target.hpp"
#include "shardscope/gui/sweep_table.hpp"
#include "shardscope/sim/sweep.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardscope;
  const std::string_view text = fuzz::as_text(data, size);
  fuzz::expect_clean_errors([&] {
    if (text.starts_with("{")) {
      (void)gui::sweep_rows_from_json(text, "sweep.json");
    } else {
      (void)gui::sweep_rows_from_csv(text, "sweep.csv");
    }
  });
  std::vector<Problem> problems;
  std::vector<sim::SweepAxis> axes;
  std::size_t begin = 0;
  while (begin < text.size()) {
    const auto end = std::min(text.find('\n', begin), text.size());
    if (auto axis = sim::parse_sweep_axis(text.substr(begin, end - begin), problems))
      axes.push_back(std::move(*axis));
    begin = end + 1;
  }
  sim::check_sweep_axes(axes, problems);
  return 0;
}
