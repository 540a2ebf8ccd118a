# Runs the oomcast binary with ARGS (a ;-list), then checks its exit code (EXPECT_CODE) and
# that its combined output matches EXPECT_REGEX. Used by the CLI tests in tests/CMakeLists.txt.
# ENV_NAME / ENV_VALUE, when given, set one environment variable for the run. COPY_FROM /
# COPY_TO, when given, copy a file first (a test that must not risk a file of the source tree
# runs on the copy). STDOUT_FILE, when given, receives standard output (e.g. /dev/full).
# STDIN_FILE, when given (relative to SOURCE_DIR), is fed to standard input (`explain -`).
if(DEFINED ENV_NAME)
  set(ENV{${ENV_NAME}} "${ENV_VALUE}")
endif()
if(DEFINED COPY_FROM)
  configure_file(${SOURCE_DIR}/${COPY_FROM} ${COPY_TO} COPYONLY)
endif()
if(DEFINED STDIN_FILE)
  execute_process(COMMAND ${OOMCAST} ${ARGS}
                  WORKING_DIRECTORY ${SOURCE_DIR} INPUT_FILE ${SOURCE_DIR}/${STDIN_FILE}
                  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
elseif(DEFINED STDOUT_FILE)
  execute_process(COMMAND ${OOMCAST} ${ARGS}
                  WORKING_DIRECTORY ${SOURCE_DIR}
                  RESULT_VARIABLE code OUTPUT_FILE ${STDOUT_FILE} ERROR_VARIABLE err)
  set(out "")
else()
  execute_process(COMMAND ${OOMCAST} ${ARGS}
                  WORKING_DIRECTORY ${SOURCE_DIR}
                  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
endif()
set(all "${out}${err}")
if(NOT code EQUAL EXPECT_CODE)
  message(FATAL_ERROR "exit code ${code}, expected ${EXPECT_CODE}\n${all}")
endif()
if(NOT all MATCHES "${EXPECT_REGEX}")
  message(FATAL_ERROR "output does not match '${EXPECT_REGEX}':\n${all}")
endif()
message(STATUS "ok: exit ${code}, output matches '${EXPECT_REGEX}'")
