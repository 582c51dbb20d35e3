// A Hugging Face config.json, as `model.hf_config` reads it.
#include "fuzz_target.hpp"
#include "shardscope/core/hf_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardscope;
  fuzz::expect_clean_errors(
      [&] { (void)hf_config_from_text(fuzz::as_text(data, size), "config.json"); });
  return 0;
}
