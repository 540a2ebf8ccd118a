# The capture's tests (capture/tests/check_capture.py): one per example model file in
# capture/examples/ and one per bad-input case. Skipped (exit 77) where /usr/bin/python3 has
# no torch, torchvision or yaml. $OOMCAST_VALIDATE_PYTHON, when set at test time, replaces
# OOMCAST_CAPTURE_PYTHON (as in validate/check_scenario.sh), e.g. scripts/torch2-python.
set(OOMCAST_CAPTURE_PYTHON "/usr/bin/python3" CACHE STRING "the python with torch that runs the capture tests")
file(GLOB OOMCAST_CAPTURE_EXAMPLES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/capture/examples/*.py)
# decoder_70b.py is the benchmark's 70B shape (bench/capture_bench.py); decoder_4096.py, the same
# code at 6.7B, is the test of it
list(FILTER OOMCAST_CAPTURE_EXAMPLES EXCLUDE REGEX "decoder_70b[.]py$")
foreach(example ${OOMCAST_CAPTURE_EXAMPLES})
  get_filename_component(name ${example} NAME_WE)
  add_test(NAME capture.example.${name}
           COMMAND sh ${PROJECT_SOURCE_DIR}/capture/tests/with_python.sh ${OOMCAST_CAPTURE_PYTHON} ${PROJECT_SOURCE_DIR}/capture/tests/check_capture.py example ${name})
  set_tests_properties(capture.example.${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS capture)
endforeach()
foreach(case no_model forward_fails data_dependent)
  add_test(NAME capture.bad.${case}
           COMMAND sh ${PROJECT_SOURCE_DIR}/capture/tests/with_python.sh ${OOMCAST_CAPTURE_PYTHON} ${PROJECT_SOURCE_DIR}/capture/tests/check_capture.py bad ${case})
  set_tests_properties(capture.bad.${case} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS capture)
endforeach()
# What model() allocates and frees while it builds the model (capture/construction.py).
foreach(case tied template short_lived)
  add_test(NAME capture.construction.${case}
           COMMAND ${OOMCAST_CAPTURE_PYTHON} ${PROJECT_SOURCE_DIR}/capture/tests/check_capture.py construction ${case})
  set_tests_properties(capture.construction.${case} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS capture)
endforeach()
# The validate/models.py families, captured (capture/tests/family_model.py), plan as their presets.
foreach(preset mlp gpt2-tiny llama-tiny bert-base resnet-50 vit-b-16)
  add_test(NAME capture.preset.${preset}
           COMMAND sh ${PROJECT_SOURCE_DIR}/capture/tests/with_python.sh ${OOMCAST_CAPTURE_PYTHON} ${PROJECT_SOURCE_DIR}/capture/tests/check_capture.py preset ${preset}
                   $<TARGET_FILE:oomcast>)
  set_tests_properties(capture.preset.${preset} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS capture)
endforeach()
# F.scaled_dot_product_attention captured as the `attention` op (torch 2.x; skipped under 1.13).
add_test(NAME capture.sdpa.causal
         COMMAND sh ${PROJECT_SOURCE_DIR}/capture/tests/with_python.sh ${OOMCAST_CAPTURE_PYTHON} ${PROJECT_SOURCE_DIR}/capture/tests/check_capture.py sdpa causal
                 $<TARGET_FILE:oomcast>)
set_tests_properties(capture.sdpa.causal PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS capture)
# -o naming the model file itself is refused before anything runs (issue 33: the user's code
# replaced by YAML). Runs on a copy in the build tree; needs no torch.
add_test(NAME capture.refuses_to_overwrite_the_model
         COMMAND ${CMAKE_COMMAND} -E env sh -c
                 "cp '${PROJECT_SOURCE_DIR}/capture/examples/linear.py' '${PROJECT_BINARY_DIR}/capture_model_copy.py' && python3 '${PROJECT_SOURCE_DIR}/capture/oomcast_capture.py' '${PROJECT_BINARY_DIR}/capture_model_copy.py' -o '${PROJECT_BINARY_DIR}/capture_model_copy.py'; test $? -eq 2 && cmp -s '${PROJECT_SOURCE_DIR}/capture/examples/linear.py' '${PROJECT_BINARY_DIR}/capture_model_copy.py'")
set_tests_properties(capture.refuses_to_overwrite_the_model PROPERTIES LABELS capture)
