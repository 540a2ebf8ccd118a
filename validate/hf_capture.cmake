# Real Hugging Face model code as the judge: one test per architecture in
# validate/hf_architectures/ (validate/check_hf_architecture.py): its tiny.json captured through
# transformers' own class, the planned parameter count equal to model.num_parameters(), and a
# training step planned at a size the capture did not run within the CPU validation's tolerance
# of the same class run for real. Skipped (exit 77) where the python has no torch or
# transformers (OOMCAST_PYTHON, the venv; or $OOMCAST_VALIDATE_PYTHON at test time); under CI=true a missing torch fails.
# Also: an HF config.json whose model_type no family reads, planned through that capture.
file(GLOB OOMCAST_HF_ARCHITECTURES LIST_DIRECTORIES true CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/validate/hf_architectures/*)
foreach(dir ${OOMCAST_HF_ARCHITECTURES})
  if(NOT IS_DIRECTORY ${dir})
    continue()
  endif()
  get_filename_component(name ${dir} NAME)
  add_test(NAME hf_capture.${name}
           COMMAND sh ${PROJECT_SOURCE_DIR}/validate/with_python.sh ${OOMCAST_PYTHON}
                   ${PROJECT_SOURCE_DIR}/validate/check_hf_architecture.py ${name}
                   --oomcast $<TARGET_FILE:oomcast> --out ${PROJECT_BINARY_DIR}/hf_capture
                   --tolerance ${OOMCAST_VALIDATION_TOLERANCE})
  set_tests_properties(hf_capture.${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS hf_capture)
endforeach()
# transformers' own generate() (validate/check_hf_generate.py): the llama family's generate job
# against LlamaForCausalLM.generate() with its DynamicCache and its StaticCache.
foreach(cache dynamic static)
  add_test(NAME hf_generate.llama-3.2-1b.${cache}
           COMMAND sh ${PROJECT_SOURCE_DIR}/validate/with_python.sh ${OOMCAST_PYTHON}
                   ${PROJECT_SOURCE_DIR}/validate/check_hf_generate.py llama-3.2-1b --cache ${cache}
                   --oomcast $<TARGET_FILE:oomcast> --out ${PROJECT_BINARY_DIR}/hf_capture
                   --tolerance ${OOMCAST_VALIDATION_TOLERANCE})
  set_tests_properties(hf_generate.llama-3.2-1b.${cache} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS hf_capture)
endforeach()
# A config.json transformers cannot build (a model_type it lacks, as with a transformers too old
# for the config; a class it lacks): one line, exit 2.
foreach(case unknown_model_type unknown_class)
  add_test(NAME hf_capture.bad.${case}
           COMMAND sh ${PROJECT_SOURCE_DIR}/validate/with_python.sh ${OOMCAST_PYTHON}
                   ${PROJECT_SOURCE_DIR}/capture/tests/check_hf_refusal.py ${case})
  set_tests_properties(hf_capture.bad.${case} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS hf_capture)
endforeach()
