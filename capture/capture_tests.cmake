# The capture's tests (capture/tests/check_capture.py): one per example model file in
# capture/examples/ and one per bad-input case. They run under OOMCAST_PYTHON (the venv's torch
# 2.13) through validate/with_python.sh: skipped (exit 77) where it has no torch or yaml, failed
# under CI=true; $OOMCAST_VALIDATE_PYTHON, when set at test time, runs them under another torch.
set(run_with_torch sh ${PROJECT_SOURCE_DIR}/validate/with_python.sh ${OOMCAST_PYTHON})
file(GLOB OOMCAST_CAPTURE_EXAMPLES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/capture/examples/*.py)
# decoder_70b.py is the benchmark's 70B shape (bench/capture_bench.py); decoder_4096.py, the same
# code at 6.7B, is the test of it
list(FILTER OOMCAST_CAPTURE_EXAMPLES EXCLUDE REGEX "decoder_70b[.]py$")
foreach(example ${OOMCAST_CAPTURE_EXAMPLES})
  get_filename_component(name ${example} NAME_WE)
  add_test(NAME capture.example.${name}
           COMMAND ${run_with_torch} ${PROJECT_SOURCE_DIR}/capture/tests/check_capture.py example ${name})
  set_tests_properties(capture.example.${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS capture)
endforeach()
# A bad model file: one line on stderr, exit 2, no graph file, in bounded time (loops_forever
# waits out its --timeout 20 s; every other case ends as soon as it is refused).
foreach(case no_model forward_fails data_dependent data_dependent_init loops_forever loops_over_ops
        more_memory_than_the_machine missing_package size_dependent_program)
  add_test(NAME capture.bad.${case}
           COMMAND ${run_with_torch} ${PROJECT_SOURCE_DIR}/capture/tests/check_capture.py bad ${case})
  set_tests_properties(capture.bad.${case} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS capture)
endforeach()
# What model() allocates and frees while it builds the model (capture/construction.py).
foreach(case tied template short_lived)
  add_test(NAME capture.construction.${case}
           COMMAND ${run_with_torch} ${PROJECT_SOURCE_DIR}/capture/tests/check_capture.py construction ${case})
  set_tests_properties(capture.construction.${case} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS capture)
endforeach()
# The validate/models.py families, captured (capture/tests/family_model.py), plan as their presets.
foreach(preset mlp gpt2-tiny llama-tiny bert-base resnet-50 vit-b-16)
  add_test(NAME capture.preset.${preset}
           COMMAND ${run_with_torch} ${PROJECT_SOURCE_DIR}/capture/tests/check_capture.py preset ${preset}
                   $<TARGET_FILE:oomcast>)
  set_tests_properties(capture.preset.${preset} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS capture)
endforeach()
# F.scaled_dot_product_attention captured as the `attention` op (torch 2.x; skipped under 1.13).
add_test(NAME capture.sdpa.causal
         COMMAND ${run_with_torch} ${PROJECT_SOURCE_DIR}/capture/tests/check_capture.py sdpa causal
                 $<TARGET_FILE:oomcast>)
set_tests_properties(capture.sdpa.causal PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS capture)
# -o naming the model file itself is refused before anything runs (issue 33: the user's code
# replaced by YAML). Runs on a copy in the build tree; needs no torch.
add_test(NAME capture.refuses_to_overwrite_the_model
         COMMAND ${CMAKE_COMMAND} -E env sh -c
                 "cp '${PROJECT_SOURCE_DIR}/capture/examples/linear.py' '${PROJECT_BINARY_DIR}/capture_model_copy.py' && python3 '${PROJECT_SOURCE_DIR}/capture/oomcast_capture.py' '${PROJECT_BINARY_DIR}/capture_model_copy.py' -o '${PROJECT_BINARY_DIR}/capture_model_copy.py'; test $? -eq 2 && cmp -s '${PROJECT_SOURCE_DIR}/capture/examples/linear.py' '${PROJECT_BINARY_DIR}/capture_model_copy.py'")
set_tests_properties(capture.refuses_to_overwrite_the_model PROPERTIES LABELS capture)
# Classes of code users write (issue 25, capture/tests/check_capture_classes.py): a dead tensor's
# reused storage address, writes into views of a zeros_like, a value-dependent size stated by the
# model file, a 4.3B-parameter model made by torch.zeros on the CPU (nothing materialised), a stack of
# identical layers folded into a repeat, torch.utils.checkpoint called inside forward, repeat_interleave
# by Python ints (and by values computed in __init__: refused at the __init__ line), einops absent,
# nn.LSTM as the CPU's fused oneDNN layers.
foreach(case address_reuse writes_into_views stated_shape unmaterialised repeat_fold checkpoint_regions
        repeat_interleave einops_absent fused_lstm)
  add_test(NAME capture.class.${case}
           COMMAND ${run_with_torch} ${PROJECT_SOURCE_DIR}/capture/tests/check_capture_classes.py ${case})
  set_tests_properties(capture.class.${case} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS capture)
endforeach()
