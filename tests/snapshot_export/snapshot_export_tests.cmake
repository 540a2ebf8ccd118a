# `plan --export-snapshot`: the round trip through `oomcast replay`, and the keys and types
# of a real torch.cuda.memory._snapshot() as Python's pickle loads them.
function(oomcast_export_test name)
  add_test(NAME snapshot_export_${name}
           COMMAND ${OOMCAST_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/check_snapshot_export.py $<TARGET_FILE:oomcast>
                   ${PROJECT_BINARY_DIR}/snapshot_exports ${name}
                   ${PROJECT_SOURCE_DIR}/tests/data/cs336_kk_2p7b_fp32_step_ctx128.pickle.gz -- ${ARGN}
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(snapshot_export_${name} PROPERTIES TIMEOUT 600)
endfunction()
find_program(OOMCAST_PYTHON3 NAMES python3)
if(OOMCAST_PYTHON3)
  oomcast_export_test(gpt2_small scenarios/gpt2-small-b8-amp-bf16.yaml)
  oomcast_export_test(llama_oom scenarios/llama-2-7b-fp32-adamw-oom.yaml)
  oomcast_export_test(resnet_alloc_conf scenarios/resnet-18-custom-gpu-alloc-conf.yaml)
endif()

# Snapshot analysis and diff on the real fixtures. Expected call sites checked by hand: a
# Python walk over each fixture's device trace (alloc / free_completed by address, frames of
# each alloc) gives the same sites and requested bytes at the peak (docs/pictures.md).
oomcast_cli_test(replay_names_the_call_sites_at_the_peak 0
                 "1.90 GiB +45.9% +4 blocks +model_memory_usage/profile_grad.py:11 <module> +\\(via nn/modules/linear.py:117 forward\\)"
                 replay tests/data/hfblog_linear_10k_50k_grad.pickle.gz)
oomcast_cli_test(replay_names_autograd_nodes_without_python_frames 0
                 "2.00 GiB +66.1% +4 blocks +DivBackward0 \\(autograd backward, no Python frame\\).*512.00 MiB +16.5% +1 blocks +cs336_systems/trace_peak_memory.py:7 custom_softmax"
                 replay tests/data/cs336_silmont_naive_attn_b8_l4096_d16_fwdbwd.pickle.gz)
oomcast_cli_test(replay_json_carries_the_analysis 0 "\"peak_site\": \"cs336_basics/optimizers.py:100 step\""
                 replay tests/data/cs336_kk_2p7b_fp32_step_ctx128.pickle.gz --json)
oomcast_cli_test(diff_pairs_moved_lines_and_names_the_peak_difference 0
                 "peak allocated B - A: -190.73 MiB.*381.47 MiB +190.73 MiB +-190.73 MiB .*profile_grad.py:10 <module>  \\| B: model_memory_usage/profile_no_grad.py:12 <module>"
                 diff tests/data/hfblog_linear_10k_50k_grad.pickle.gz tests/data/hfblog_linear_10k_50k_nograd.pickle.gz)
oomcast_cli_test(diff_of_forward_and_full_step 0
                 "peak allocated B - A: \\+33.14 GiB.*\\+12.75 GiB .*BmmBackward0"
                 diff tests/data/cs336_kk_2p7b_fp32_fwd_ctx128.pickle.gz tests/data/cs336_kk_2p7b_fp32_step_ctx128.pickle.gz)
oomcast_cli_test(diff_rejects_a_trace 2 "diff compares snapshot pickles"
                 diff tests/data/cli/oom.trace tests/data/hfblog_linear_10k_50k_grad.pickle.gz)
oomcast_cli_test(export_snapshot_refuses_the_cpu_device 2 "the cpu device has no caching allocator to snapshot"
                 plan scenarios/gpt2-tiny-cpu.yaml --export-snapshot cpu.pickle)
