# cli.studies: tclm sample, study-sampling and transfer end to end on small slices of the embedded data
# (one epoch): each must write what it promises, with one row per run. Prints the counts it checked.
file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})
function(run)
  execute_process(COMMAND ${TCLM} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "tclm ${ARGN} failed (${rc}):\n${out}\n${err}")
  endif()
  set(last_out "${out}" PARENT_SCOPE)
endfunction()
function(count_lines file var)  # lines after the header
  file(STRINGS ${file} lines)
  list(LENGTH lines n)
  math(EXPR n "${n} - 1")
  set(${var} ${n} PARENT_SCOPE)
endfunction()

# sample: the picked records, the CSV and the printed count agree.
run(sample -i ${DATA}/k80/pooling --fraction 0.1 -o ${OUT}/picked.json --csv ${OUT}/picked.csv)
string(REGEX MATCH "picked ([0-9]+) of ([0-9]+) programs in ([0-9]+) tasks" m "${last_out}")
set(n_picked ${CMAKE_MATCH_1})
set(n_tasks ${CMAKE_MATCH_3})
file(STRINGS ${OUT}/picked.json picked_lines)
list(LENGTH picked_lines n_json)
count_lines(${OUT}/picked.csv n_csv)
if(NOT n_json EQUAL n_picked OR NOT n_csv EQUAL n_picked)
  message(FATAL_ERROR "sample: printed ${n_picked}, wrote ${n_json} records and ${n_csv} CSV rows")
endif()
math(EXPR at_least "2 * ${n_tasks}")
if(n_picked LESS at_least)
  message(FATAL_ERROR "sample: ${n_picked} picks for ${n_tasks} tasks, fewer than 2 per task")
endif()

# study-sampling: two samplers at 50% and the all-data run -> 3 rows.
run(study-sampling -d k80=${DATA}/k80/pooling --rates 0.5,1 --samplers rdu,random --seeds 1 --epochs 1 --min-steps 0
    --test-fraction 0.3 --quiet -o ${OUT}/study)
count_lines(${OUT}/study/sampling.csv n_study)

# transfer: k80 -> v100 with TCL and target-only: 2 TCL phases x 2 platforms + 1 = 5 rows, and a
# deployable knowledge base that tclm eval accepts.
run(transfer -d k80=${DATA}/k80/pooling -d v100=${DATA}/v100/pooling --sources k80 --target v100 --budget 0.3
    --methods tcl,target-only --epochs-cl 1 --epochs-kd 1 --epochs 1 --min-steps 0 --test-fraction 0.3 --quiet -o ${OUT}/transfer)
count_lines(${OUT}/transfer/phases.csv n_phases)
run(eval -m ${OUT}/transfer/kb.tclm -d v100=${DATA}/v100/pooling --test-fraction 0.3)
if(NOT last_out MATCHES "pairwise")
  message(FATAL_ERROR "eval of the knowledge base printed no report:\n${last_out}")
endif()
message("sample ok: ${n_picked} picks, study rows: ${n_study}, transfer rows: ${n_phases}")
