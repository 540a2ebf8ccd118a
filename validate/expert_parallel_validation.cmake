# The CPU expert-parallel validations: each scenario in validate/scenarios_expert_parallel/ runs one
# process per rank, its MoE blocks dispatching and combining tokens with all-to-alls over gloo
# (validate/expert_parallel_capture.py), and every rank's trace is compared with the rank's
# plan (`oomcast compare`, through check_tensor_parallel.sh), under OOMCAST_PYTHON. Skipped
# (exit 77) without torch, failed under CI=true. A scenario may state its own tolerance with
# `# validation-tolerance: N%` (validate/cpu_validation.cmake).
file(GLOB OOMCAST_EP_SCENARIOS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/validate/scenarios_expert_parallel/*.yaml)
foreach(scenario ${OOMCAST_EP_SCENARIOS})
  get_filename_component(name ${scenario} NAME_WE)
  oomcast_validation_tolerance(${scenario} tolerance)
  add_test(NAME expert_parallel_validation.${name}
           COMMAND sh ${PROJECT_SOURCE_DIR}/validate/check_tensor_parallel.sh $<TARGET_FILE:oomcast> ${scenario}
                   ${PROJECT_BINARY_DIR}/expert_parallel_validation ${tolerance} ${OOMCAST_PYTHON})
  # Two processes each import torch 2.13: tens of seconds on CI's two cores.
  set_tests_properties(expert_parallel_validation.${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
                       ENVIRONMENT OOMCAST_MESH_CAPTURE=expert_parallel_capture.py
                       LABELS "cpu_validation;expert_parallel")
endforeach()
