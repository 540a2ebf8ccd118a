# [hostile] CLI tests: one per class of bad or extreme input (issue 10). Each asserts the
# exit code and that the message names the key (or flag) and the limit or the fix.
function(oomcast_cli_env_test name env_name env_value expect_code expect_regex)
  add_test(NAME cli_hostile_${name}
           COMMAND ${CMAKE_COMMAND} -DOOMCAST=$<TARGET_FILE:oomcast> -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
                   "-DARGS=${ARGN}" -DEXPECT_CODE=${expect_code} "-DEXPECT_REGEX=${expect_regex}"
                   -DENV_NAME=${env_name} "-DENV_VALUE=${env_value}"
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/cli/run_cli_case.cmake)
endfunction()
set(small scenarios/gpt2-small-b8-amp-bf16.yaml)

# Sizes that multiply the work: refused with the key and the limit, exit 2.
oomcast_cli_test(hostile_grad_accum_beyond_the_work_limit 2 "grad_accum_steps.*over the limit of 20000000"
                 plan ${small} --set grad_accum_steps=262144)
oomcast_cli_test(hostile_layers_beyond_the_limit 2 "'model.layers' 1,000,000,000 .*exceeds the limit of 1,024 layers"
                 plan ${small} --set model.layers=1000000000)
oomcast_cli_test(hostile_eval_batches_beyond_the_limit 2 "eval.batches"
                 plan ${small} --set eval.batches=1000000000)
oomcast_cli_test(hostile_deepspeed_json_accumulation_limit 2
                 "ds_accum_2m.json:1: error: 'gradient_accumulation_steps' 2000000 exceeds the limit of 1048576"
                 plan tests/data/hostile/ds_accum_2m.yaml)
oomcast_cli_test(hostile_sweep_grid_beyond_the_limit 2 "the grid has 4294967296 combinations \\(65536 x 65536\\), over the limit"
                 sweep ${small} --grid "batch_size=1..65536 seq_len=1..65536")
oomcast_cli_test(hostile_tensor_beyond_any_device 2 "batch_size 16,777,216 x seq_len 1,024 x model.vocab .* 2\\^44 elements"
                 plan ${small} --set batch_size=16777216)
# Files that are not what they claim: bounded reads, exit 2.
oomcast_cli_test(hostile_scenario_from_dev_zero 2 "/dev/zero: error: the YAML file holds more than 64 MiB"
                 plan /dev/zero)
oomcast_cli_test(hostile_trace_from_dev_zero 2 "/dev/zero: error: not a text trace \\(it contains NUL bytes\\)"
                 replay /dev/zero)
oomcast_cli_test(hostile_scenario_is_a_directory 2 "cannot read the YAML file: it is a directory"
                 plan scenarios)
oomcast_cli_test(hostile_deepspeed_config_is_a_directory 2 "cannot read the DeepSpeed config file: it is a directory"
                 plan tests/data/hostile/ds_config_is_a_directory.yaml)
# Many iterations: a steady-state window, said so (exact for gpt2-small, a cycle of a few iterations;
# approximate for the 70B ZeRO-3 job, whose small pool keeps shifting one block).
oomcast_cli_test(hostile_long_job_extrapolates_an_exact_cycle 0
                 "steady state: iteration [0-9]+ left the allocator exactly as iteration [0-9]+ did.*of 1000 iterations"
                 plan ${small} --set iterations=1000)
oomcast_cli_test(hostile_thousand_iterations_extrapolate_from_a_steady_state 0
                 "steady state \\(approximate\\): after 32 planned iterations .*iterations 32-999 are taken to repeat"
                 plan scenarios/llama-2-70b-zero3-offload.yaml --set iterations=1000)
# Silent wrong answers, now answered.
oomcast_cli_test(hostile_snapshot_on_a_smaller_device 1 "on a device with 100.00 MiB usable \\(100.00 MiB total, 0.00 MiB outside the allocator\\): OOM at event [0-9]+"
                 replay tests/data/hfblog_linear_10k_50k_grad.pickle.gz --device-memory 100MiB --context-memory 0B)
oomcast_cli_test(hostile_mid_run_snapshot_on_a_smaller_device 1
                 "on a device with [0-9.]+ MiB usable \\(40960.00 MiB total, [0-9.]+ MiB outside the allocator\\): the window starts with 42644.00 MiB reserved, more than fits"
                 replay tests/data/cs336_kk_2p7b_fp32_step_ctx128.pickle.gz --device-memory 40GiB)
# A device counts the CUDA context outside the allocator, as plan does; --device takes a profile.
oomcast_cli_test(hostile_replay_device_memory_counts_the_cuda_context 1
                 "on a device with [0-9.]+ MiB usable \\(40960.00 MiB total, [1-9][0-9.]+ MiB outside the allocator\\)"
                 replay tests/data/cs336_kk_2p7b_fp32_step_ctx128.pickle.gz --device-memory 40GiB)
oomcast_cli_test(hostile_replay_takes_a_device_profile 1
                 "on a device with [0-9.]+ MiB usable \\(40325.00 MiB total, [1-9][0-9.]+ MiB outside the allocator\\)"
                 replay tests/data/cs336_kk_2p7b_fp32_step_ctx128.pickle.gz --device a100-40gb)
oomcast_cli_test(hostile_replay_device_profile_typo 2 "--device: no GPU profile 'a100-40g' \\(did you mean 'a100-40gb'\\?\\)"
                 replay tests/data/cli/oom.trace --device a100-40g)
oomcast_cli_test(hostile_snapshot_device_index_it_lacks 2 "--device-index 5: the snapshot has no device 5; its devices: 0"
                 replay tests/data/cs336_kk_2p7b_fp32_step_ctx128.pickle.gz --device-index 5)
oomcast_cli_test(hostile_search_a_parameter_the_model_fixes 2 "--param image_size: the scenario does not let 'image_size' vary"
                 search scenarios/vit-b-16-amp-bf16-rtx4090.yaml --param image_size)
oomcast_cli_test(hostile_search_a_batch_size_deepspeed_fixes 2
                 "--param batch_size: the scenario does not let 'batch_size' vary.*train_micro_batch_size_per_gpu"
                 search scenarios/llama-2-70b-zero3-offload.yaml)
oomcast_cli_test(hostile_sweep_misspelt_axis 2 "axis 'batch_szie': .*did you mean 'batch_size'"
                 sweep ${small} --grid "batch_szie=1,2")
oomcast_cli_test(hostile_sweep_where_every_row_fails 2 "every combination was rejected; the first: .*flash"
                 sweep ${small} --grid "precision=fp32")
oomcast_cli_test(hostile_emit_trace_over_its_input 2 "would overwrite the input file"
                 plan scenarios/gpt2-tiny-cpu.yaml --emit-trace scenarios/gpt2-tiny-cpu.yaml)
oomcast_cli_test(hostile_emit_trace_to_a_full_disk 2 "/dev/full: error: writing the trace file failed"
                 plan scenarios/gpt2-tiny-cpu.yaml --emit-trace /dev/full)
oomcast_cli_test(hostile_deepspeed_bf16_auto_is_said 0 "bf16.enabled is \"auto\" in .*resolved from the scenario's precision fp32"
                 plan tests/data/hostile/ds_bf16_auto.yaml)
oomcast_cli_test(hostile_override_conflict_names_the_override 2
                 "--set precision=fp32: fp32 clashes with 'attention: flash' \\(line 9\\).*--set attention=mem_efficient"
                 plan ${small} --set precision=fp32)
# Habits.
oomcast_cli_test(hostile_version 0 "^oomcast [0-9]+\\.[0-9]+\\.[0-9]+" --version)
oomcast_cli_test(hostile_mistyped_flag 2 "unknown flag '--jsn' for 'oomcast plan' \\(did you mean '--json'\\?\\)"
                 plan ${small} --jsn)
oomcast_cli_test(hostile_size_without_a_unit 2 "--device-memory: '80' has no unit: write 80GiB"
                 replay tests/data/cli/oom.trace --device-memory 80)
oomcast_cli_test(hostile_search_max_zero 2 "--max"
                 search ${small} --max 0)
oomcast_cli_test(hostile_plan_json_has_memory_stats 0 "\"memory_stats\": {.*\"allocated_bytes.all.peak\".*\"num_alloc_retries\""
                 plan ${small} --json)
oomcast_cli_test(hostile_unknown_gpu_is_not_a_typo 2 "unknown device profile 'a5000' \\(no profile for that GPU"
                 plan ${small} --set device=a5000)
oomcast_cli_env_test(environment_alloc_conf_is_honoured PYTORCH_CUDA_ALLOC_CONF "expandable_segments:True" 0
                     "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.*note: using PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True from the environment"
                     plan ${small})

# Every command README.md and docs/*.md show runs as shown.
find_program(OOMCAST_PYTHON3 python3)
if(OOMCAST_PYTHON3)
  add_test(NAME documented_commands
           COMMAND ${OOMCAST_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/cli/run_documented_commands.py
                   --oomcast $<TARGET_FILE:oomcast> --source ${PROJECT_SOURCE_DIR})
  set_tests_properties(documented_commands PROPERTIES TIMEOUT 1200)
endif()

# [hostile] issue 33: no lost file, no silent wrong answer.
# Every output flag refuses an input of the same command and a path another output takes. The
# inputs are copies in the build tree, so a regression cannot destroy a file of the source tree.
function(oomcast_cli_copy_test name copy_from copy_to expect_code expect_regex)
  add_test(NAME cli_hostile_${name}
           COMMAND ${CMAKE_COMMAND} -DOOMCAST=$<TARGET_FILE:oomcast> -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
                   "-DARGS=${ARGN}" -DEXPECT_CODE=${expect_code} "-DEXPECT_REGEX=${expect_regex}"
                   -DCOPY_FROM=${copy_from} -DCOPY_TO=${copy_to}
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/cli/run_cli_case.cmake)
endfunction()
set(copies ${PROJECT_BINARY_DIR}/hostile_copies)
oomcast_cli_copy_test(replay_html_over_its_snapshot tests/data/hfblog_linear_10k_50k_grad.pickle.gz
                      ${copies}/snap.pickle.gz 2 "--html .*snap.pickle.gz would overwrite the input file"
                      replay ${copies}/snap.pickle.gz --html ${copies}/snap.pickle.gz)
oomcast_cli_copy_test(replay_html_over_its_trace tests/data/cli/oom.trace ${copies}/x.trace 2
                      "--html .*x.trace would overwrite the input file" replay ${copies}/x.trace --html ${copies}/x.trace)
oomcast_cli_copy_test(doctor_html_over_its_snapshot tests/data/hfblog_linear_10k_50k_grad.pickle.gz
                      ${copies}/doc.pickle.gz 2 "--html .*doc.pickle.gz would overwrite the input file"
                      doctor ${copies}/doc.pickle.gz --html ${copies}/doc.pickle.gz)
oomcast_cli_copy_test(whatif_html_over_its_scenario scenarios/gpt2-tiny-cpu.yaml ${copies}/s.yaml 2
                      "--html .*s.yaml would overwrite the input file" whatif ${copies}/s.yaml --html ${copies}/s.yaml)
oomcast_cli_copy_test(export_graph_over_its_scenario scenarios/gpt2-tiny-cpu.yaml ${copies}/e.yaml 2
                      "-o .*e.yaml would overwrite the input file" export-graph ${copies}/e.yaml -o ${copies}/e.yaml)
oomcast_cli_test(hostile_two_outputs_to_one_path 2 "--export-snapshot .*same.out is also the path of --html"
                 plan scenarios/gpt2-tiny-cpu.yaml --html ${copies}/same.out --export-snapshot ${copies}/same.out)
# A report that cannot be written is not a success.
add_test(NAME cli_hostile_stdout_to_a_full_disk
         COMMAND ${CMAKE_COMMAND} -DOOMCAST=$<TARGET_FILE:oomcast> -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
                 "-DARGS=plan;scenarios/gpt2-tiny-cpu.yaml;--json" -DEXPECT_CODE=2
                 "-DEXPECT_REGEX=writing the output failed" -DSTDOUT_FILE=/dev/full
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/cli/run_cli_case.cmake)
# Numbers that compare false everywhere are refused, not answered.
oomcast_cli_test(hostile_search_margin_nan 2 "--margin must be a number" search ${small} --margin nan)
oomcast_cli_test(hostile_replay_memory_fraction_nan 2 "--memory-fraction must be above 0"
                 replay tests/data/cli/oom.trace --device-memory 100MiB --memory-fraction nan)
oomcast_cli_test(hostile_replay_memory_fraction_zero 2 "--memory-fraction must be above 0"
                 replay tests/data/cli/oom.trace --device-memory 100MiB --memory-fraction 0)
# A parameter the job does not read is refused; the generate job's own lengths can be searched.
oomcast_cli_test(hostile_search_seq_len_of_a_generate_job 2 "has no effect on a generate job.*job.prompt_len"
                 search scenarios/llama-2-7b-generate-4k-a100-40gb.yaml --param seq_len)
oomcast_cli_test(hostile_search_a_length_distribution_from_dev_zero 2 "holds more than 64 MiB"
                 search ${small} --param seq_len --seq-len-distribution /dev/zero)
# Polish: a release newer than any modelled one, zero threads.
oomcast_cli_test(hostile_torch_version_from_the_future 2 "'allocator.torch_version' 99.0 is newer than the newest release"
                 plan ${small} --set allocator.torch_version=99.0)
oomcast_cli_test(hostile_replay_torch_version_from_the_future 2 "--torch-version: '2.99' is newer"
                 replay tests/data/cli/oom.trace --torch-version 2.99)
oomcast_cli_test(hostile_sweep_zero_jobs 2 "^error: --jobs: must be a count of at least 1 \\(threads\\); got '0'"
                 sweep ${small} --grid "batch_size=1,2" --jobs 0)
oomcast_cli_test(hostile_search_negative_jobs 2 "^error: --jobs: must be a count of at least 1 .*got '-1'"
                 search ${small} --jobs -1)
oomcast_cli_test(hostile_whatif_jobs_not_a_number 2 "^error: --jobs: must be a count of at least 1 .*got 'x'"
                 whatif ${small} --jobs x)
oomcast_cli_test(paged_adamw_8bit_plans_as_adamw8bit 0 "adamw8bit" plan ${small} --set optimizer=paged_adamw_8bit)
# A refusal (here a tensor beyond any device) ends a search as a limit, never as "does not fit".
oomcast_cli_test(hostile_search_reports_a_refusal_as_a_limit 0
                 "largest batch_size that fits: [0-9]+.*the search stopped at a limit, not at out of memory: batch_size [0-9]+ is refused \\(.*2\\^44 elements"
                 search scenarios/gpt2-tiny-cpu.yaml --param batch_size --max 16777216)

# Model-parallel meshes the job cannot have (issue 29): one line naming the key, exit 2. The
# regexes are anchored at both ends of the output, so the refusal is that line alone.
set(mesh scenarios/llama-3-8b-tp8-pp4.yaml)
oomcast_cli_test(hostile_world_size_the_mesh_does_not_divide 2
                 "^[^\n]*error: --set parallel.world_size=48: 'parallel.world_size' 48 is not divisible by the mesh: [^\n]* = 32\n$"
                 plan ${mesh} --set parallel.world_size=48)
oomcast_cli_test(hostile_tensor_parallel_beyond_the_heads 2
                 "^[^\n]*error: [^\n]*'parallel.tensor_parallel' 64 does not divide the model's heads \\(32\\)[^\n]*\n$"
                 plan ${mesh} --set parallel.tensor_parallel=64 --set parallel.world_size=256)
oomcast_cli_test(hostile_tensor_parallel_beyond_the_kv_heads 2
                 "^[^\n]*error: [^\n]*'parallel.tensor_parallel' 16 does not divide the model's kv_heads \\(8\\)[^\n]*\n$"
                 plan ${mesh} --set parallel.tensor_parallel=16)
oomcast_cli_test(hostile_more_pipeline_stages_than_layers 2
                 "^[^\n]*llama-3-8b-tp8-pp4.yaml:[0-9]+:[0-9]+: error: 'parallel.pipeline_parallel' 4 stages is more than the model's 2 layers\n$"
                 plan ${mesh} --set model.layers=2)
