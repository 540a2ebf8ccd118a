# The CPU validation of compiled models (issue 27): one test per scenario in validate/compiled/,
# each capturing its model file as torch.compile runs it, planning it at sizes the capture did not
# run and comparing with a real compiled training loop (inductor's CPU backend) recorded by the
# allocation hook (validate/check_compiled.sh). Under OOMCAST_PYTHON (the venv's torch 2.13):
# skipped (exit 77) where it has no torch, failed under CI=true. Inductor compiles C++ kernels with
# the machine's g++: each test spends most of its time there.
file(GLOB OOMCAST_COMPILED_SCENARIOS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/validate/compiled/*.yaml)
foreach(scenario ${OOMCAST_COMPILED_SCENARIOS})
  get_filename_component(name ${scenario} NAME_WE)
  oomcast_validation_tolerance(${scenario} tolerance)
  add_test(NAME cpu_validation.compiled.${name}
           COMMAND sh ${PROJECT_SOURCE_DIR}/validate/check_compiled.sh $<TARGET_FILE:oomcast> ${name}
                   ${PROJECT_BINARY_DIR}/cpu_validation ${tolerance} ${OOMCAST_PYTHON})
  set_tests_properties(cpu_validation.compiled.${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900
                       LABELS "cpu_validation;capture;compile")
endforeach()
# The compiled capture runs on fake tensors: a 12.5 GB model is captured under an 8 GB limit.
add_test(NAME capture.compiled.fake_tensors
         COMMAND sh ${PROJECT_SOURCE_DIR}/validate/compiled/check_fake_capture.sh
                 ${PROJECT_BINARY_DIR}/cpu_validation/compiled-fake ${OOMCAST_PYTHON})
set_tests_properties(capture.compiled.fake_tensors PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS "capture;compile")
