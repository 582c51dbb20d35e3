#pragma once
// Entry points of the two API lowerers (private to core).

#include "lowerer.hpp"

namespace shardscope::lowering {

Schedule lower_fsdp2(const Scenario& scenario);
Schedule lower_fsdp1(const Scenario& scenario);

}  // namespace shardscope::lowering
