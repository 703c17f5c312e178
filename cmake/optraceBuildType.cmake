# cmake/optraceBuildType.cmake: warns, when a project configures optrace in (add_subdirectory,
# FetchContent, find_package), that its build type leaves NDEBUG undefined: packaged libtorch is
# built with NDEBUG, and optrace/op_tracer.hpp refuses to compile without it (an #error).
# Multi-config generators choose the type at build time: nothing to check here.
get_property(optrace_multi_config GLOBAL PROPERTY GENERATOR_IS_MULTI_CONFIG)
if(NOT optrace_multi_config AND NOT CMAKE_BUILD_TYPE MATCHES "^(Release|RelWithDebInfo|MinSizeRel)$"
   AND NOT CMAKE_CXX_FLAGS MATCHES "-DNDEBUG")
  if(CMAKE_BUILD_TYPE STREQUAL "")
    set(optrace_build_type "no CMAKE_BUILD_TYPE")
  else()
    set(optrace_build_type "CMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE}")
  endif()
  message(WARNING "optrace: ${optrace_build_type} leaves NDEBUG undefined, and libtorch is built with "
    "it: optrace/op_tracer.hpp (OpTracer; optrace.hpp includes it) will not compile. Configure with "
    "-DCMAKE_BUILD_TYPE=Release or RelWithDebInfo; a Debug build can use optrace's other headers.")
endif()
unset(optrace_multi_config)
unset(optrace_build_type)
