# Fails when a folder includes a folder above it in the flow, or a third-party library its
# layer must not use. The flow, lowest first: base, sim, scenario, planner, advisor, then the
# two front ends side by side: cli (the executable) and python/bindings (the Python extension);
# each folder may include only itself and the folders before it, and neither front end the
# other (bench/, fuzz/, tests/ and validate/ sit outside the chain and may include any library
# folder).
set(LAYERS base sim scenario planner advisor cli)
# Third-party headers each layer may not include (sim stays standard-library only).
set(FORBIDDEN_base "yaml-cpp|boost/|Eigen|CLI/|nlohmann|fmt/|nanobind/|Python.h")
set(FORBIDDEN_sim "yaml-cpp|boost/|Eigen|CLI/|nlohmann|fmt/|nanobind/|Python.h")
set(FORBIDDEN_scenario "boost/|Eigen|CLI/|nanobind/|Python.h")
set(FORBIDDEN_planner "Eigen|CLI/|nanobind/|Python.h")
set(FORBIDDEN_advisor "CLI/|nanobind/|Python.h")
set(FORBIDDEN_cli "nanobind/|Python.h")

# names_after(OUT LIST INDEX): the entries of LIST after position INDEX (the ones above it).
function(names_after out list index)
  set(above "")
  list(LENGTH list count)
  math(EXPR next "${index} + 1")
  if(next LESS count)
    math(EXPR last "${count} - 1")
    foreach(upper RANGE ${next} ${last})
      list(GET list ${upper} name)
      list(APPEND above "${name}")
    endforeach()
  endif()
  set(${out} "${above}" PARENT_SCOPE)
endfunction()

# check_includes(WHO folder FILES... ABOVE folders... [FORBIDDEN regex] RULE text): fails on the first file
# whose #include names one of the ABOVE folders (each a path prefix such as "advisor" or
# "planner/jobs") or matches FORBIDDEN; RULE is the flow the message cites.
function(check_includes)
  cmake_parse_arguments(C "" "WHO;FORBIDDEN;RULE" "FILES;ABOVE" ${ARGN})
  foreach(path ${C_FILES})
    file(STRINGS ${path} lines REGEX "^[ \t]*#[ \t]*include")
    foreach(line ${lines})
      foreach(folder ${C_ABOVE})
        if(line MATCHES "[\"<]${folder}/")
          message(FATAL_ERROR "${path}: ${C_WHO} must not include ${folder}/ (${C_RULE}): '${line}'")
        endif()
      endforeach()
      if(NOT "${C_FORBIDDEN}" STREQUAL "" AND line MATCHES "${C_FORBIDDEN}")
        message(FATAL_ERROR "${path}: ${C_WHO} must not include '${line}' (${C_RULE})")
      endif()
    endforeach()
  endforeach()
endfunction()

string(REPLACE ";" ", " FLOW "flow, lowest first: ${LAYERS}")
set(checked 0)
list(LENGTH LAYERS count)
math(EXPR last "${count} - 1")
foreach(index RANGE ${last})
  list(GET LAYERS ${index} layer)
  names_after(above "${LAYERS}" ${index})
  file(GLOB_RECURSE files ${SOURCE_DIR}/${layer}/*.h ${SOURCE_DIR}/${layer}/*.cc)
  check_includes(WHO ${layer}/ FILES ${files} ABOVE ${above} FORBIDDEN "${FORBIDDEN_${layer}}"
                 RULE "${FLOW}")
  list(LENGTH files file_count)
  math(EXPR checked "${checked} + ${file_count}")
endforeach()

# python/bindings sits where cli sits: above advisor, beside cli (it calls the functions the
# CLI's commands call, never the CLI), and cli must not include python/ either.
file(GLOB_RECURSE binding_files ${SOURCE_DIR}/python/bindings/*.h ${SOURCE_DIR}/python/bindings/*.cc)
check_includes(WHO python/bindings/ FILES ${binding_files} ABOVE cli python FORBIDDEN "CLI/"
               RULE "it sits beside cli, above advisor")
list(LENGTH binding_files binding_count)
math(EXPR checked "${checked} + ${binding_count}")
file(GLOB_RECURSE cli_files ${SOURCE_DIR}/cli/*.h ${SOURCE_DIR}/cli/*.cc)
check_includes(WHO cli/ FILES ${cli_files} ABOVE python RULE "the two front ends sit side by side")

# Inside planner/ the same rule between its rooms, lowest first: ops (the op catalogue),
# families (the model builders), parallel (the data-parallel ranks), timing (the step-time
# model: reads the layer graph and the device's throughput, never writes an allocation), jobs
# (training, forward, generate: the drivers of the runner, the schedule and the timing).
# planner/'s own files (layer graph, graph runner, schedule writer, checkpointing, optimizers)
# are the schedule's core, read by every room; they may include ops/, families/ and parallel/
# (model_setup builds through ops/, the graph export through families/, PlannedTrace holds
# the ParallelSummary, and the graph runner calls a rank through parallel/runner_hooks.h: that
# interface stays with the ranks that implement it, the runner only calls it), but never
# timing/ or jobs/. Tests (*_test.cc, *_test_support.h) may plan a whole job to get their
# input, so they are held only to the rule between folders above.
set(PLANNER_ROOMS ops families parallel timing jobs)
string(REPLACE ";" ", " ROOM_RULE "inside planner/, lowest first: ${PLANNER_ROOMS}")
# library_files(OUT FILES...): FILES without the tests.
function(library_files out)
  set(kept "")
  foreach(path ${ARGN})
    if(NOT path MATCHES "_test\\.cc$|_test_support\\.h$")
      list(APPEND kept "${path}")
    endif()
  endforeach()
  set(${out} "${kept}" PARENT_SCOPE)
endfunction()
file(GLOB core_files ${SOURCE_DIR}/planner/*.h ${SOURCE_DIR}/planner/*.cc)
library_files(core_files ${core_files})
check_includes(WHO planner/ FILES ${core_files} ABOVE planner/timing planner/jobs RULE "${ROOM_RULE}")
list(LENGTH PLANNER_ROOMS room_count)
math(EXPR last_room "${room_count} - 1")
foreach(index RANGE ${last_room})
  list(GET PLANNER_ROOMS ${index} room)
  names_after(above_rooms "${PLANNER_ROOMS}" ${index})
  list(TRANSFORM above_rooms PREPEND "planner/")
  file(GLOB_RECURSE room_files ${SOURCE_DIR}/planner/${room}/*.h ${SOURCE_DIR}/planner/${room}/*.cc)
  library_files(room_files ${room_files})
  check_includes(WHO planner/${room}/ FILES ${room_files} ABOVE ${above_rooms} RULE "${ROOM_RULE}")
endforeach()

if(NOT DEFINED MIN_FILES)
  set(MIN_FILES 50)
endif()
if(checked LESS ${MIN_FILES})
  message(FATAL_ERROR "layering: only ${checked} files found under ${SOURCE_DIR}: wrong SOURCE_DIR?")
endif()
message(STATUS "layering: ${checked} files in ${LAYERS} and python/bindings include only their own folder and those below it; inside planner/: ${PLANNER_ROOMS}")
