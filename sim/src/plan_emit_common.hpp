#pragma once
// Internals shared by the --emit writers (plan_emit.cpp, plan_emit_python.cpp).
#include <string>
#include <string_view>

#include "shardscope/sim/plan_emit.hpp"

namespace shardscope::sim::detail {

/// "shardscope's prediction ..." lines, each starting with `prefix` ("" in a docstring, "# " in
/// TOML).
std::string prediction_lines(const EmitContext& c, std::string_view prefix);

/// The fsdp2 or fsdp1 Python module.
std::string emit_python(EmitTarget target, const Scenario& s, const EmitContext& c);

}  // namespace shardscope::sim::detail
