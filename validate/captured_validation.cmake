# The CPU validation of captured models: one test per scenario in validate/captured/, each
# capturing capture/examples/NAME.py into a graph file, planning it at sizes the capture did not
# run and comparing with the model file's real training loop (validate/check_captured.sh).
# Under OOMCAST_PYTHON (the venv's torch 2.13): skipped (exit 77) where it has no torch, failed
# under CI=true.
# validate/capture_corpus/ holds model files written in the styles real users write (issue 25),
# each beside its scenario (NAME.py, NAME.yaml).
file(GLOB OOMCAST_CAPTURED_SCENARIOS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/validate/captured/*.yaml
     ${PROJECT_SOURCE_DIR}/validate/capture_corpus/*.yaml)
foreach(scenario ${OOMCAST_CAPTURED_SCENARIOS})
  get_filename_component(name ${scenario} NAME_WE)
  oomcast_validation_tolerance(${scenario} tolerance)
  add_test(NAME cpu_validation.captured.${name}
           COMMAND sh ${PROJECT_SOURCE_DIR}/validate/check_captured.sh $<TARGET_FILE:oomcast> ${name}
                   ${PROJECT_BINARY_DIR}/cpu_validation ${tolerance} ${OOMCAST_PYTHON})
  set_tests_properties(cpu_validation.captured.${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
                       LABELS "cpu_validation;capture")
endforeach()
