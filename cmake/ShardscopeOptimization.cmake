# The simulation path (scenario reading, lowering, the engine, sweeps) is built with -O3 in the
# optimised configurations, where sweeps run measurably faster than at -O2 (docs/performance.md).
# Everything else keeps the configuration's own flags.
function(shardscope_optimize_hot target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE
      $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CONFIG:Release,RelWithDebInfo>>:-O3>)
  endif()
endfunction()
