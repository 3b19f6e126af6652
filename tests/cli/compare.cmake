# cli.compare: tclm compare (two models) and tclm sweep (two configurations) on a small slice, one epoch.
# Checks that each writes a CSV with one row per run and a Markdown table; prints the row counts.
file(REMOVE_RECURSE ${OUT})
execute_process(COMMAND ${TCLM} compare -d k80=${DATA} --models mlp,xgboost --epochs 1 --quiet -o ${OUT}/compare
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tclm compare failed (${rc}): ${err}")
endif()
file(STRINGS ${OUT}/compare/compare.csv compare_lines)
list(LENGTH compare_lines n_compare)
math(EXPR n_compare "${n_compare} - 1")
file(READ ${OUT}/compare/compare.md table)
if(NOT table MATCHES "\\| mlp \\| 1 \\|" OR NOT table MATCHES "\\| xgboost \\| 1 \\|")
  message(FATAL_ERROR "compare.md lacks a model row:\n${table}")
endif()
# --resume: the same options reuse both finished runs (identical table, no training); other options retrain.
file(READ ${OUT}/compare/compare.csv first_csv)
execute_process(COMMAND ${TCLM} compare -d k80=${DATA} --models mlp,xgboost --epochs 1 --resume -o ${OUT}/compare
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
file(READ ${OUT}/compare/compare.csv resumed_csv)
string(REGEX MATCHALL "reusing [^\n]*result.csv" reused "${err}")
list(LENGTH reused n_reused)
if(NOT rc EQUAL 0 OR NOT n_reused EQUAL 2 OR NOT first_csv STREQUAL resumed_csv)
  message(FATAL_ERROR "compare --resume did not reuse both runs (rc ${rc}, ${n_reused} reused):\n${err}\n${resumed_csv}")
endif()
execute_process(COMMAND ${TCLM} compare -d k80=${DATA} --models mlp --epochs 2 --resume -o ${OUT}/compare
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT err MATCHES "made with other options")
  message(FATAL_ERROR "compare --resume with other options did not retrain (rc ${rc}):\n${err}")
endif()
# --first-seed: seeds 2..2 only (adding seeds to an earlier study): one run, in xgboost-s2, its CSV row seed 2.
execute_process(COMMAND ${TCLM} compare -d k80=${DATA} --models xgboost --first-seed 2 --seeds 1 --quiet
                -o ${OUT}/compare-s2 RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "compare --first-seed 2 --seeds 1 failed (${rc}): ${err}")
endif()
file(STRINGS ${OUT}/compare-s2/compare.csv s2_lines)
list(LENGTH s2_lines n_s2)
list(GET s2_lines -1 s2_row)
if(NOT n_s2 EQUAL 2 OR NOT s2_row MATCHES "^xgboost,2," OR NOT EXISTS ${OUT}/compare-s2/xgboost-s2
   OR EXISTS ${OUT}/compare-s2/xgboost-s0)
  message(FATAL_ERROR "compare --first-seed 2 --seeds 1 did not run seed 2 alone:\n${err}\n${s2_lines}")
endif()
file(WRITE ${OUT}/grid.json "{\"base\": {\"d_model\": 16}, \"vary\": {\"d_conv\": [2, 4]}}")
execute_process(COMMAND ${TCLM} sweep -d k80=${DATA} --grid ${OUT}/grid.json --epochs 1 --quiet -o ${OUT}/sweep
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tclm sweep failed (${rc}): ${err}")
endif()
file(STRINGS ${OUT}/sweep/sweep.csv sweep_lines)
list(LENGTH sweep_lines n_sweep)
math(EXPR n_sweep "${n_sweep} - 1")
message("compare rows: ${n_compare}, sweep rows: ${n_sweep}")
