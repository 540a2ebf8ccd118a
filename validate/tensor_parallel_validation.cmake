# The CPU tensor-parallel validations: each scenario in validate/scenarios_parallel/ runs on its
# ranks with real DTensor TP over gloo (validate/tensor_parallel_capture.py) and every rank's
# trace is compared with that rank's plan (`oomcast compare`), under OOMCAST_PYTHON. Skipped
# (exit 77) without torch, failed under CI=true. A scenario may state its own tolerance with
# `# validation-tolerance: N%` (validate/cpu_validation.cmake).
file(GLOB OOMCAST_TP_SCENARIOS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/validate/scenarios_parallel/*.yaml)
foreach(scenario ${OOMCAST_TP_SCENARIOS})
  get_filename_component(name ${scenario} NAME_WE)
  oomcast_validation_tolerance(${scenario} tolerance)
  add_test(NAME tensor_parallel_validation.${name}
           COMMAND sh ${PROJECT_SOURCE_DIR}/validate/check_tensor_parallel.sh $<TARGET_FILE:oomcast> ${scenario}
                   ${PROJECT_BINARY_DIR}/tensor_parallel_validation ${tolerance} ${OOMCAST_PYTHON})
  # Two processes each import torch 2.13: tens of seconds on CI's two cores.
  set_tests_properties(tensor_parallel_validation.${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
                       LABELS "cpu_validation;tensor_parallel")
endforeach()
