# `cmake --install`: the headers and static libraries of core, sim and traces with a package
# config, so another project can `find_package(shardscope)` and link shardscope::core,
# shardscope::sim and shardscope::traces; and the programs shardscope and shardscope-gui.
include(CMakePackageConfigHelpers)

install(TARGETS shardscope_core shardscope_sim shardscope_exec shardscope_traces EXPORT shardscopeTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
foreach(layer core sim exec traces)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${layer}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endforeach()
install(TARGETS shardscope RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET shardscope-gui)
  install(TARGETS shardscope-gui RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

set(_config_dir ${CMAKE_INSTALL_LIBDIR}/cmake/shardscope)
install(EXPORT shardscopeTargets NAMESPACE shardscope:: DESTINATION ${_config_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/shardscopeConfig.cmake.in
  ${PROJECT_BINARY_DIR}/shardscopeConfig.cmake INSTALL_DESTINATION ${_config_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/shardscopeConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/shardscopeConfig.cmake ${PROJECT_BINARY_DIR}/shardscopeConfigVersion.cmake
        DESTINATION ${_config_dir})
