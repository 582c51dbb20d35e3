# SHARDSCOPE_WITH_CUDA / SHARDSCOPE_WITH_QT take AUTO|ON|OFF.
#   AUTO: use the feature when its packages are found, skip it otherwise.
#   ON:   the feature is required; configuration fails with a clear message when missing.
#   OFF:  never look for it.
# With CUDA, exec/cuda builds the CUDA/NCCL backend (`shardscope run --backend cuda`).
set(SHARDSCOPE_WITH_CUDA "AUTO" CACHE STRING "Look for the CUDA toolkit and NCCL (AUTO|ON|OFF)")
set_property(CACHE SHARDSCOPE_WITH_CUDA PROPERTY STRINGS AUTO ON OFF)
set(SHARDSCOPE_WITH_QT "AUTO" CACHE STRING "Build the Qt6 desktop GUI (AUTO|ON|OFF)")
set_property(CACHE SHARDSCOPE_WITH_QT PROPERTY STRINGS AUTO ON OFF)

function(_shardscope_check_tristate name)
  if(NOT ${name} MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "${name}=${${name}} is not allowed; use AUTO, ON or OFF")
  endif()
endfunction()

# Sets SHARDSCOPE_HAVE_CUDA (CUDA toolkit + NCCL found and wanted).
macro(shardscope_resolve_cuda)
  _shardscope_check_tristate(SHARDSCOPE_WITH_CUDA)
  set(SHARDSCOPE_HAVE_CUDA OFF)
  if(NOT SHARDSCOPE_WITH_CUDA STREQUAL "OFF")
    find_package(CUDAToolkit QUIET)
    if(CUDAToolkit_FOUND)
      find_package(NCCL QUIET)
    endif()
    if(CUDAToolkit_FOUND AND NCCL_FOUND AND TARGET CUDA::cublasLt AND CUDAToolkit_NVCC_EXECUTABLE)
      set(SHARDSCOPE_HAVE_CUDA ON)
    elseif(SHARDSCOPE_WITH_CUDA STREQUAL "ON")
      message(FATAL_ERROR
        "SHARDSCOPE_WITH_CUDA=ON but the CUDA toolkit (found: ${CUDAToolkit_FOUND}) "
        "or NCCL (found: ${NCCL_FOUND}) is missing. Install the CUDA toolkit with NCCL, "
        "or configure with -DSHARDSCOPE_WITH_CUDA=AUTO or OFF.")
    endif()
  endif()
  add_feature_info(CUDA SHARDSCOPE_HAVE_CUDA "CUDA toolkit, cuBLASLt and NCCL: the CUDA/NCCL backend of `run` (SHARDSCOPE_WITH_CUDA=${SHARDSCOPE_WITH_CUDA})")
endmacro()

# Sets SHARDSCOPE_HAVE_QT (Qt6 Widgets + Charts found and wanted).
macro(shardscope_resolve_qt)
  _shardscope_check_tristate(SHARDSCOPE_WITH_QT)
  set(SHARDSCOPE_HAVE_QT OFF)
  if(NOT SHARDSCOPE_WITH_QT STREQUAL "OFF")
    find_package(Qt6 6.2 QUIET COMPONENTS Core Gui Widgets Charts Svg Test)
    if(Qt6_FOUND)
      set(SHARDSCOPE_HAVE_QT ON)
    elseif(SHARDSCOPE_WITH_QT STREQUAL "ON")
      message(FATAL_ERROR
        "SHARDSCOPE_WITH_QT=ON but Qt6 Widgets/Charts/Svg were not found. "
        "Run scripts/install-deps (Debian: qt6-base-dev qt6-charts-dev qt6-svg-dev libqt6opengl6-dev), "
        "or configure with -DSHARDSCOPE_WITH_QT=AUTO or OFF.")
    endif()
  endif()
  add_feature_info(Qt SHARDSCOPE_HAVE_QT "Qt6 desktop GUI (SHARDSCOPE_WITH_QT=${SHARDSCOPE_WITH_QT})")
endmacro()
