# The CPU pipeline-parallel validations: each scenario in validate/scenarios_pipeline/ runs one
# process per stage with torch.distributed.pipelining over gloo
# (validate/pipeline_parallel_capture.py) and every rank's trace is compared with that stage's
# plan (`oomcast compare`, through check_tensor_parallel.sh), under OOMCAST_PYTHON. Skipped
# (exit 77) without torch, failed under CI=true. A scenario may state its own tolerance with
# `# validation-tolerance: N%` (validate/cpu_validation.cmake).
file(GLOB OOMCAST_PP_SCENARIOS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/validate/scenarios_pipeline/*.yaml)
foreach(scenario ${OOMCAST_PP_SCENARIOS})
  get_filename_component(name ${scenario} NAME_WE)
  oomcast_validation_tolerance(${scenario} tolerance)
  add_test(NAME pipeline_parallel_validation.${name}
           COMMAND sh ${PROJECT_SOURCE_DIR}/validate/check_tensor_parallel.sh $<TARGET_FILE:oomcast> ${scenario}
                   ${PROJECT_BINARY_DIR}/pipeline_parallel_validation ${tolerance} ${OOMCAST_PYTHON})
  # Two processes each import torch 2.13: tens of seconds on CI's two cores.
  set_tests_properties(pipeline_parallel_validation.${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
                       ENVIRONMENT OOMCAST_MESH_CAPTURE=pipeline_parallel_capture.py
                       LABELS "cpu_validation;pipeline_parallel")
endforeach()
