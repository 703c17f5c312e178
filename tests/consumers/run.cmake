# tests/consumers/run.cmake: one consumer test, run by ctest as `cmake -D STEP=... -P run.cmake`.
#   STEP=install: install the optrace build into the temporary prefix (a fresh one);
#   STEP=<consumer>: configure, build and run the project in tests/consumers/<consumer>;
#   STEP=debug_build: configure without a build type and expect the warning and the #error.
# The settings of the enclosing build (compiler, generator, where Torch and simdjson are)
# come from consumers.cmake, written at configure time next to this test's build folder.
cmake_minimum_required(VERSION 3.18)
include(${SETTINGS})

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer ${STEP}: ${what} failed (${rc}): ${ARGN}")
  endif()
endfunction()

if(STEP STREQUAL "install")
  file(REMOVE_RECURSE ${OPTRACE_PREFIX})
  run("cmake --install" ${CMAKE_COMMAND} --install ${OPTRACE_BINARY_DIR} --prefix ${OPTRACE_PREFIX})
  return()
endif()

set(src ${OPTRACE_SOURCE_DIR}/tests/consumers/${STEP})
set(bin ${OPTRACE_CONSUMERS_DIR}/${STEP})
set(build_type ${CMAKE_BUILD_TYPE})
if(STEP STREQUAL "debug_build")
  set(build_type "")  # what a user gets who forgets it: no NDEBUG
endif()
# Release with -O1: the consumers check CMake's wiring (targets, paths, the tool where each way
# puts it), not the code, which the enclosing build compiles at -O3 with the same warnings; -O1
# takes 40% less time (the vendored CLI's main.cpp: 73 s at -O3, 45 s at -O1). Not -O0: there the
# front end keeps c10 templates that call into libtorch (createVectorLikeFromList<vector<Tensor>>)
# and does not link without it (docs/ci.md).
set(args
  -DCMAKE_BUILD_TYPE=${build_type}
  "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG"
  -DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}
  "-DCMAKE_CXX_FLAGS=${OPTRACE_CONSUMER_CXX_FLAGS}"
  -DOPTRACE_SOURCE_DIR=${OPTRACE_SOURCE_DIR})
# What a user passes: where libtorch and simdjson are (here: where the enclosing build found
# them), and for find_package, the prefix optrace was installed into.
set(prefix_path ${CMAKE_PREFIX_PATH})
if(STEP STREQUAL "add_subdirectory")
  list(APPEND args -DOPTRACE_CONSUMER_CLI=${OPTRACE_TEST_CONSUMER_CLI})
endif()
if(STEP STREQUAL "find_package")
  list(PREPEND prefix_path ${OPTRACE_PREFIX})
  list(APPEND args -DOPTRACE_PREFIX=${OPTRACE_PREFIX})
endif()
string(REPLACE ";" "\\;" prefix_path "${prefix_path}")
list(APPEND args "-DCMAKE_PREFIX_PATH=${prefix_path}" -DTorch_DIR=${Torch_DIR} -Dsimdjson_DIR=${simdjson_DIR})

if(STEP STREQUAL "fetchcontent")
  # The snippet in the consumer's CMakeLists.txt must be docs/install.md's, character for character.
  file(READ ${src}/CMakeLists.txt consumer)
  string(REGEX MATCH "# --- docs/install.md's FetchContent snippet ---\n(.*)# --- end of the snippet ---" _ "${consumer}")
  set(snippet "${CMAKE_MATCH_1}")
  file(READ ${OPTRACE_SOURCE_DIR}/docs/install.md readme)
  string(FIND "${readme}" "```cmake\n${snippet}```" at)
  if(snippet STREQUAL "" OR at EQUAL -1)
    message(FATAL_ERROR "consumer fetchcontent: docs/install.md has no ```cmake block equal to the snippet in "
                        "${src}/CMakeLists.txt:\n${snippet}")
  endif()
  # Offline: FetchContent takes the checkout instead of cloning the URL.
  list(APPEND args -DFETCHCONTENT_SOURCE_DIR_OPTRACE=${OPTRACE_SOURCE_DIR} -DFETCHCONTENT_QUIET=OFF)
endif()

if(STEP STREQUAL "debug_build")
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${src} -B ${bin} -G ${CMAKE_GENERATOR}
                  -DCMAKE_MAKE_PROGRAM=${CMAKE_MAKE_PROGRAM} ${args}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT err MATCHES "optrace: no CMAKE_BUILD_TYPE leaves NDEBUG undefined")
    message(FATAL_ERROR "consumer debug_build: configure (${rc}) did not warn about NDEBUG:\n${out}\n${err}")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${bin} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT "${out}${err}" MATCHES "#error \"optrace/op_tracer.hpp needs NDEBUG, as libtorch is built with it")
    message(FATAL_ERROR "consumer debug_build: the build (${rc}) did not stop at optrace's #error:\n${out}\n${err}")
  endif()
  message(STATUS "configure warned and the build stopped at the #error, as expected")
  return()
endif()

run("configure" ${CMAKE_COMMAND} -S ${src} -B ${bin} -G ${CMAKE_GENERATOR}
    -DCMAKE_MAKE_PROGRAM=${CMAKE_MAKE_PROGRAM} ${args})
run("build" ${CMAKE_COMMAND} --build ${bin})
if(STEP STREQUAL "fetchcontent")
  run("the program" ${bin}/my_app)
else()
  run("the program" ${bin}/record)
endif()
# The optrace tool where each way puts it: bin/ of the install prefix; optrace::cli in a project
# that adds optrace with OPTRACE_BUILD_CLI on.
set(trace ${OPTRACE_SOURCE_DIR}/tests/data/peer/mlp.hf_op_trace.json)
if(STEP STREQUAL "find_package")
  run("the installed optrace tool" ${OPTRACE_PREFIX}/bin/optrace summary ${trace})
elseif(STEP STREQUAL "add_subdirectory" AND OPTRACE_TEST_CONSUMER_CLI)
  file(READ ${bin}/optrace_cli_path.txt cli)
  run("the optrace tool built in the project" ${cli} summary ${trace})
endif()
