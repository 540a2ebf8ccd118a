# `oomcast export-graph SCENARIO -o FILE`, then `oomcast plan SCENARIO --json` with and without
# `--set model=FILE`: the exported graph file must plan to the same peaks, the same fit and the
# same per-phase rows as the model it was exported from. Used by tests/CMakeLists.txt.
#   cmake -DOOMCAST=... -DSOURCE_DIR=... -DSCENARIO=... -DGRAPH=... [-DOVERRIDES=a=b;c=d] -P this
set(sets "")
foreach(override IN LISTS OVERRIDES)
  list(APPEND sets --set "${override}")
endforeach()
execute_process(COMMAND ${OOMCAST} export-graph ${SCENARIO} ${sets} -o ${GRAPH}
                WORKING_DIRECTORY ${SOURCE_DIR} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT code EQUAL 0)
  message(FATAL_ERROR "export-graph exited ${code}:\n${out}${err}")
endif()

function(plan_json result)
  execute_process(COMMAND ${OOMCAST} plan ${SCENARIO} ${sets} ${ARGN} --json
                  WORKING_DIRECTORY ${SOURCE_DIR} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT code EQUAL 0 AND NOT code EQUAL 1)
    message(FATAL_ERROR "plan ${ARGN} exited ${code}:\n${out}${err}")
  endif()
  set(${result} "${out}" PARENT_SCOPE)
endfunction()
plan_json(original)
plan_json(exported --set "model=${GRAPH}")

# The second plan must have planned the file, not the scenario's own model.
string(JSON planned_model GET "${exported}" model)
if(NOT planned_model MATCHES "-export$")
  message(FATAL_ERROR "--set model=${GRAPH} planned model '${planned_model}', not the exported graph")
endif()
foreach(key peak_allocated_bytes peak_reserved_bytes fits phases)
  string(JSON want GET "${original}" ${key})
  string(JSON got GET "${exported}" ${key})
  if(NOT want STREQUAL got)
    message(FATAL_ERROR "${key}: the exported graph plans to ${got}, the model to ${want}")
  endif()
endforeach()
string(JSON peak GET "${original}" peak_allocated_bytes)
message(STATUS "ok: ${GRAPH} plans like ${SCENARIO} (peak allocated ${peak} B)")
