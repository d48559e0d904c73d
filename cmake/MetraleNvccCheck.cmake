# Runs nvcc for one kernel image (cmake/MetraleCuda.cmake) with ptxas's report, and fails the build
# where ptxas serialised a kernel's warpgroup MMAs: each wgmma then waits for the one before it.
# ptxas says so only as an info line (C7510-C7520: a wgmma under divergent code, too few registers
# for the accumulators in flight, ...), and on 2026-12-07 two prepared forms of the whole-head
# core ran 8-17 % slower for it unnoticed (docs/perf-prefill.md part 32).
#   cmake -DNVCC=... -DARGS=a|b|... -DOUT=file [-DVERBOSE=ON] -P MetraleNvccCheck.cmake
string(REPLACE "|" ";" args "${ARGS}")
execute_process(COMMAND ${NVCC} ${args} -Xptxas -v RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(all "${out}${err}")
if(VERBOSE)
  message("${all}")
else()
  # what nvcc would have printed without -Xptxas -v: everything but ptxas's report
  string(REPLACE "\n" ";" lines "${all}")
  set(rest "")
  foreach(l IN LISTS lines)
    if(NOT l MATCHES "^ptxas info" AND NOT l MATCHES "^[ \t]*[0-9]+ bytes stack frame" AND NOT l MATCHES "^[ \t]*$")
      string(APPEND rest "${l}\n")
    endif()
  endforeach()
  if(NOT rest STREQUAL "")
    message("${rest}")
  endif()
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nvcc failed (${rc})")
endif()
string(REGEX MATCHALL "[^\n]*wgmma.mma_async instructions are serialized[^\n]*" serial "${all}")
if(serial)
  file(REMOVE ${OUT})
  string(REPLACE ";" "\n" serial "${serial}")
  message(FATAL_ERROR "ptxas serialised warpgroup MMAs (every wgmma waits for the one before):\n${serial}")
endif()
