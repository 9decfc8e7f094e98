# SPDX-License-Identifier: GPL-2.0
#
# Run sdp-decode once and check what it did; fails (FATAL_ERROR, so ctest
# reports the test failed) on any difference.  cmake -P script so the check
# needs nothing but cmake.
#
#   -DTOOL=path            the sdp-decode binary (required)
#   -DARGS=a;b             its arguments
#   -DSTDIN=file           file fed on standard input
#   -DEXPECTED_STATUS=n    required exit status (required)
#   -DEXPECTED_STDOUT=file standard output must equal this file exactly
#   -DEXPECTED_STDERR=re   standard error must match this regular expression
if(NOT DEFINED TOOL OR NOT DEFINED EXPECTED_STATUS)
  message(FATAL_ERROR "run_sdp_decode.cmake: TOOL and EXPECTED_STATUS are required")
endif()

set(stdin_args)
if(DEFINED STDIN)
  set(stdin_args INPUT_FILE ${STDIN})
endif()
execute_process(COMMAND ${TOOL} ${ARGS}
                ${stdin_args}
                RESULT_VARIABLE status
                OUTPUT_VARIABLE stdout
                ERROR_VARIABLE stderr)

set(failed FALSE)
if(NOT status STREQUAL EXPECTED_STATUS)
  message(SEND_ERROR "exit status ${status}, expected ${EXPECTED_STATUS}\nstderr:\n${stderr}")
  set(failed TRUE)
endif()

if(DEFINED EXPECTED_STDOUT)
  file(READ ${EXPECTED_STDOUT} expected)
  if(NOT stdout STREQUAL expected)
    # Leave the actual output next to the build for `diff` and for
    # regenerating the expectation after an intended format change.
    # One file per way of feeding the input, so parallel tests do not race.
    if(DEFINED STDIN)
      set(actual_file ${CMAKE_CURRENT_BINARY_DIR}/sdp_decode_actual_stdin.txt)
    else()
      set(actual_file ${CMAKE_CURRENT_BINARY_DIR}/sdp_decode_actual_file.txt)
    endif()
    file(WRITE ${actual_file} "${stdout}")
    message(SEND_ERROR "output differs from ${EXPECTED_STDOUT}\n"
                       "actual output (also in ${actual_file}):\n${stdout}")
    set(failed TRUE)
  endif()
endif()

if(DEFINED EXPECTED_STDERR AND NOT stderr MATCHES "${EXPECTED_STDERR}")
  message(SEND_ERROR "stderr does not match \"${EXPECTED_STDERR}\":\n${stderr}")
  set(failed TRUE)
endif()

if(failed)
  message(FATAL_ERROR "sdp-decode check failed")
endif()
