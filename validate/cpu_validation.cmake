# The CPU validation tests: one per scenario in validate/scenarios/, each capturing the
# scenario with real PyTorch (validate/capture.py) and comparing it with the planner
# (`oomcast compare`), under OOMCAST_PYTHON (the venv's torch 2.13). Skipped (exit 77) where it
# has no torch, failed under CI=true (validate/require_torch.sh).
set(OOMCAST_VALIDATION_TOLERANCE "3%" CACHE STRING "largest per-phase error of the CPU validation, of the real peak")

# The tolerance of one validation scenario: OOMCAST_VALIDATION_TOLERANCE, unless the scenario has
# a known, documented gap and says `# validation-tolerance: N%` on a line of its own. Reconfigures
# when the scenario changes. (Also used by validate/captured_validation.cmake.)
function(oomcast_validation_tolerance scenario result)
  set(tolerance ${OOMCAST_VALIDATION_TOLERANCE})
  file(STRINGS ${scenario} own_tolerance REGEX "^# validation-tolerance: [0-9.]+%")
  if(own_tolerance)
    string(REGEX REPLACE "^# validation-tolerance: ([0-9.]+%).*" "\\1" tolerance "${own_tolerance}")
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${scenario})
  set(${result} ${tolerance} PARENT_SCOPE)
endfunction()

file(GLOB OOMCAST_VALIDATION_SCENARIOS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/validate/scenarios/*.yaml)
foreach(scenario ${OOMCAST_VALIDATION_SCENARIOS})
  get_filename_component(name ${scenario} NAME_WE)
  oomcast_validation_tolerance(${scenario} tolerance)
  add_test(NAME cpu_validation.${name}
           COMMAND sh ${PROJECT_SOURCE_DIR}/validate/check_scenario.sh $<TARGET_FILE:oomcast> ${scenario}
                   ${PROJECT_BINARY_DIR}/cpu_validation ${tolerance} ${OOMCAST_PYTHON})
  # 600 s: a capture imports torch 2.13 twice (seconds of CPU each) and CI's two cores run two
  set_tests_properties(cpu_validation.${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS cpu_validation)
endforeach()

# Which torch the captures and CPU validations run under, alone in the test log (LastTest.log;
# every capture test prints it too): with_python.sh prints "torch VERSION (PYTHON)".
add_test(NAME cpu_validation.torch_version
         COMMAND sh ${PROJECT_SOURCE_DIR}/validate/with_python.sh ${OOMCAST_PYTHON} -c pass)
set_tests_properties(cpu_validation.torch_version PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS "cpu_validation;capture")

# The measured op facts (validate/op_facts/, read by the planner's tests) against torch now:
# fails when the kernels or the autocast lists of the venv's torch no longer match the table.
add_test(NAME op_facts.torch_2_13
         COMMAND sh ${PROJECT_SOURCE_DIR}/validate/check_op_facts.sh ${OOMCAST_PYTHON} ${PROJECT_BINARY_DIR}/op_facts)
set_tests_properties(op_facts.torch_2_13 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS cpu_validation)
