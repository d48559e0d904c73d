# build_nvcc_check (tests/build/CMakeLists.txt): runs CHECK with `cmake -E echo` (and `-E false`)
# as nvcc, whose "report" is its arguments.
set(out ${WORK}/nvcc_check_image.cubin)
function(check_with args)
  file(WRITE ${out} "an image")
  execute_process(COMMAND ${CMAKE_COMMAND} -DNVCC=${CMAKE_COMMAND} "-DARGS=${args}" -DOUT=${out} -P ${CHECK}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
  set(rc ${rc} PARENT_SCOPE)
  set(log "${o}${e}" PARENT_SCOPE)
endfunction()

# ptxas's line for serialised wgmmas (as CUDA 13's ptxas prints it)
check_with("-E|echo|ptxas info    : (C7520) Potential Performance Loss: wgmma.mma_async instructions are serialized due to program dependence on compiler-inserted WG.AR in divergent path in the function 'k'")
if(rc EQUAL 0)
  message(FATAL_ERROR "a report of serialised wgmmas passed:\n${log}")
endif()
if(NOT log MATCHES "ptxas serialised warpgroup MMAs" OR NOT log MATCHES "C7520")
  message(FATAL_ERROR "the failure does not name the serialisation:\n${log}")
endif()
if(EXISTS ${out})
  message(FATAL_ERROR "the image of a serialised kernel was left for the build to embed")
endif()

# a clean report: passes, keeps the image, prints nothing of ptxas's report
check_with("-E|echo|ptxas info    : Used 128 registers, used 16 barriers")
if(NOT rc EQUAL 0 OR NOT EXISTS ${out})
  message(FATAL_ERROR "a clean report failed (${rc}) or lost its image:\n${log}")
endif()
if(log MATCHES "Used 128 registers")
  message(FATAL_ERROR "ptxas's report printed without VERBOSE:\n${log}")
endif()

# the compiler failing
check_with("-E|false")
if(rc EQUAL 0 OR NOT log MATCHES "nvcc failed")
  message(FATAL_ERROR "a failing nvcc passed (${rc}):\n${log}")
endif()
message(STATUS "MetraleNvccCheck.cmake: serialised wgmmas fail, a clean report passes, nvcc's failure fails")
