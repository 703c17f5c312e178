# tests/consumers/run.cmake: one consumer test, run by ctest as `cmake -D STEP=... -P run.cmake`.
#   STEP=install: install the optrace build into the temporary prefix (a fresh one);
#   STEP=<consumer>: configure, build and run the project in tests/consumers/<consumer>.
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
set(args
  -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE}
  -DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}
  "-DCMAKE_CXX_FLAGS=${OPTRACE_CONSUMER_CXX_FLAGS}"
  -DOPTRACE_SOURCE_DIR=${OPTRACE_SOURCE_DIR})
# What a user passes: where libtorch and simdjson are (here: where the enclosing build found
# them), and for find_package, the prefix optrace was installed into.
set(prefix_path ${CMAKE_PREFIX_PATH})
if(STEP STREQUAL "find_package")
  list(PREPEND prefix_path ${OPTRACE_PREFIX})
  list(APPEND args -DOPTRACE_PREFIX=${OPTRACE_PREFIX})
endif()
string(REPLACE ";" "\\;" prefix_path "${prefix_path}")
list(APPEND args "-DCMAKE_PREFIX_PATH=${prefix_path}" -DTorch_DIR=${Torch_DIR} -Dsimdjson_DIR=${simdjson_DIR})

if(STEP STREQUAL "fetchcontent")
  # A release archive of the checkout: what a user's FetchContent(URL ...) downloads.
  set(archive ${OPTRACE_CONSUMERS_DIR}/optrace-src.tar)  # not gzip: its header holds a time, and the hash must follow the content
  file(MAKE_DIRECTORY ${OPTRACE_CONSUMERS_DIR})
  execute_process(COMMAND ${CMAKE_COMMAND} -E tar cf ${archive} -- CMakeLists.txt cmake include
                  WORKING_DIRECTORY ${OPTRACE_SOURCE_DIR} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer fetchcontent: could not make ${archive}")
  endif()
  file(SHA256 ${archive} sha)
  list(APPEND args -DOPTRACE_ARCHIVE=${archive} -DOPTRACE_ARCHIVE_SHA256=${sha} -DFETCHCONTENT_QUIET=OFF)
endif()

run("configure" ${CMAKE_COMMAND} -S ${src} -B ${bin} -G ${CMAKE_GENERATOR}
    -DCMAKE_MAKE_PROGRAM=${CMAKE_MAKE_PROGRAM} ${args})
run("build" ${CMAKE_COMMAND} --build ${bin})
run("the program" ${bin}/record)
