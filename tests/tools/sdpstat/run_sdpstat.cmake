# SPDX-License-Identifier: GPL-2.0
#
# Run sdpstat once and check what it did; fails (FATAL_ERROR, so ctest reports
# the test failed) on any difference.  cmake -P script, like
# tests/tools/run_sdp_decode.cmake, with exact comparison of standard error
# too (sdpstat's error messages name files and lines, so they are part of the
# output worth pinning down).
#
#   -DTOOL=path              the sdpstat binary (required)
#   -DNAME=name              the test's name, for the files the actual output
#                            is left in on failure (required)
#   -DACTUAL_DIR=dir         where those files go (required: the script runs
#                            in the fixture directory, which is not the build)
#   -DARGS=a;b               its arguments
#   -DEXPECTED_STATUS=n      required exit status (required)
#   -DEXPECTED_STDOUT=file   standard output must equal this file exactly
#   -DEXPECTED_STDERR=file   standard error must equal this file exactly
#   -DSTDOUT_MATCHES=re      standard output must match this regular expression
#   -DSTDERR_MATCHES=re      standard error must match this regular expression
if(NOT DEFINED TOOL OR NOT DEFINED NAME OR NOT DEFINED ACTUAL_DIR
   OR NOT DEFINED EXPECTED_STATUS)
  message(FATAL_ERROR
          "run_sdpstat.cmake: TOOL, NAME, ACTUAL_DIR and EXPECTED_STATUS are required")
endif()

execute_process(COMMAND ${TOOL} ${ARGS}
                RESULT_VARIABLE status
                OUTPUT_VARIABLE stdout
                ERROR_VARIABLE stderr)

set(failed FALSE)
if(NOT status STREQUAL EXPECTED_STATUS)
  message(SEND_ERROR "exit status ${status}, expected ${EXPECTED_STATUS}\nstderr:\n${stderr}")
  set(failed TRUE)
endif()

# Leaves the actual output next to the build (one file per test, so parallel
# tests do not race) for `diff` and for regenerating an expectation after an
# intended format change.
foreach(stream stdout stderr)
  string(TOUPPER ${stream} STREAM)
  if(DEFINED EXPECTED_${STREAM})
    file(READ ${EXPECTED_${STREAM}} expected)
    if(NOT ${stream} STREQUAL expected)
      set(actual_file ${ACTUAL_DIR}/${NAME}.actual.${stream})
      file(WRITE ${actual_file} "${${stream}}")
      message(SEND_ERROR "${stream} differs from ${EXPECTED_${STREAM}}\n"
                         "actual ${stream} (also in ${actual_file}):\n${${stream}}")
      set(failed TRUE)
    endif()
  endif()
  if(DEFINED ${STREAM}_MATCHES AND NOT ${stream} MATCHES "${${STREAM}_MATCHES}")
    message(SEND_ERROR "${stream} does not match \"${${STREAM}_MATCHES}\":\n${${stream}}")
    set(failed TRUE)
  endif()
endforeach()

if(failed)
  message(FATAL_ERROR "sdpstat check ${NAME} failed")
endif()
