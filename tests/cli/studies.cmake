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
if(NOT n_study EQUAL 3)
  message(FATAL_ERROR "study-sampling: ${n_study} rows, expected 3 (rdu, random, all)")
endif()
# --resume with --seeds 2 adds seed 1's three runs and keeps seed 0's rows as they were.
file(STRINGS ${OUT}/study/sampling.csv before)
run(study-sampling -d k80=${DATA}/k80/pooling --rates 0.5,1 --samplers rdu,random --seeds 2 --epochs 1 --min-steps 0
    --test-fraction 0.3 --quiet --resume -o ${OUT}/study)
file(STRINGS ${OUT}/study/sampling.csv after)
list(SUBLIST after 0 4 after_head)
list(LENGTH after n_after)
if(NOT n_after EQUAL 7 OR NOT "${after_head}" STREQUAL "${before}")
  message(FATAL_ERROR "study-sampling --resume: ${n_after} lines (expected 7), first rows kept: "
          "'${after_head}' vs '${before}'")
endif()
# --first-seed 1 --seeds 1 gives seed 1's rows of the 2-seed run (timings aside): a seed's runs do not
# depend on the other seeds, so a study can be split into jobs by seed.
run(study-sampling -d k80=${DATA}/k80/pooling --rates 0.5,1 --samplers rdu,random --seeds 1 --first-seed 1 --epochs 1
    --min-steps 0 --test-fraction 0.3 --quiet -o ${OUT}/study-seed1)
function(seed1_rows file var)  # seed 1's rows without the three timing columns (13-15)
  file(STRINGS ${file} rows REGEX "^[a-z]+,[0-9.]+,1,")
  set(out "")
  foreach(row IN LISTS rows)
    string(REPLACE "," ";" fields "${row}")
    list(REMOVE_AT fields 12 13 14)
    list(JOIN fields "," row)
    list(APPEND out "${row}")
  endforeach()
  set(${var} "${out}" PARENT_SCOPE)
endfunction()
seed1_rows(${OUT}/study/sampling.csv seed1_of_two)
seed1_rows(${OUT}/study-seed1/sampling.csv seed1_alone)
list(LENGTH seed1_alone n_seed1)
if(NOT n_seed1 EQUAL 3 OR NOT seed1_alone STREQUAL seed1_of_two)
  message(FATAL_ERROR "study-sampling --first-seed 1 --seeds 1 differs from seed 1 of --seeds 2 (${n_seed1} rows):\n"
                      "${seed1_alone}\n---\n${seed1_of_two}")
endif()
# sampling.md pairs the two seeds: rdu minus random at 50%, with each seed's difference.
file(READ ${OUT}/study/sampling.md study_md)
set(pair_re "[+-][0-9]+\\.[0-9]+ ± [0-9]+\\.[0-9]+ \\([+-][0-9]+\\.[0-9]+, [+-][0-9]+\\.[0-9]+\\) (ahead|behind|level)")
if(NOT study_md MATCHES "\\| rdu - random \\| 50% \\| ${pair_re} \\|" OR NOT study_md MATCHES "\\| random - all data \\| 50% \\|")
  message(FATAL_ERROR "sampling.md has no paired-by-seed rows for 2 seeds:\n${study_md}")
endif()
# test_tasks.csv: one row per run and test task, seed 0's rows kept by --resume.
file(STRINGS ${OUT}/study/test_tasks.csv task_rows)
list(LENGTH task_rows n_task_rows)
list(FILTER task_rows INCLUDE REGEX "^rdu,0.5,0,")
list(LENGTH task_rows n_rdu0)
math(EXPR want "1 + 6 * ${n_rdu0}")
if(n_rdu0 LESS 1 OR NOT n_task_rows EQUAL want)
  message(FATAL_ERROR "test_tasks.csv: ${n_task_rows} lines for ${n_rdu0} test tasks x 6 runs")
endif()
# Nothing left to run: the same command again trains nothing.
execute_process(COMMAND ${TCLM} study-sampling -d k80=${DATA}/k80/pooling --rates 0.5,1 --samplers rdu,random --seeds 2
                --epochs 1 --min-steps 0 --test-fraction 0.3 --quiet --resume -o ${OUT}/study
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
if(NOT rc EQUAL 0 OR NOT err MATCHES "6 runs kept, 0 run now")
  message(FATAL_ERROR "study-sampling --resume, nothing to run: rc ${rc}:\n${err}")
endif()
# Other options (here the split) are refused, naming what differs.
execute_process(COMMAND ${TCLM} study-sampling -d k80=${DATA}/k80/pooling --rates 0.5,1 --samplers rdu,random --seeds 2
                --epochs 1 --min-steps 0 --test-fraction 0.4 --quiet --resume -o ${OUT}/study
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
if(rc EQUAL 0 OR NOT err MATCHES "ran with other options" OR NOT err MATCHES "now: test-fraction=0.4")
  message(FATAL_ERROR "study-sampling --resume accepted other options: rc ${rc}:\n${err}")
endif()
# A per-task row of a run that sampling.csv lacks (killed in between) is dropped on resume.
file(APPEND ${OUT}/study/test_tasks.csv "random,0.5,7,\"k80\",\"x\",\"pooling\",10,0.1,1,1,0.5\n")
run(study-sampling -d k80=${DATA}/k80/pooling --rates 0.5,1 --samplers rdu,random --seeds 2 --epochs 1 --min-steps 0
    --test-fraction 0.3 --quiet --resume -o ${OUT}/study)
file(STRINGS ${OUT}/study/test_tasks.csv task_rows2)
list(LENGTH task_rows2 n_task_rows2)
if(NOT n_task_rows2 EQUAL n_task_rows)
  message(FATAL_ERROR "test_tasks.csv kept a row of an unfinished run: ${n_task_rows2} lines, not ${n_task_rows}")
endif()
# A damaged row is refused, naming the file and line.
file(APPEND ${OUT}/study/sampling.csv "random,0.5,2,12\n")
execute_process(COMMAND ${TCLM} study-sampling -d k80=${DATA}/k80/pooling --rates 0.5 --samplers random --seeds 3
                --epochs 1 --min-steps 0 --test-fraction 0.3 --quiet --resume -o ${OUT}/study
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
if(rc EQUAL 0 OR NOT err MATCHES "sampling.csv:8: 4 fields, expected 18")
  message(FATAL_ERROR "study-sampling --resume accepted a damaged row: rc ${rc}:\n${err}")
endif()

# --curves: one row per epoch of the run, and the kept epoch's test top-1 there equals the final
# evaluation's in sampling.csv (the same model, evaluated during training and after it).
run(study-sampling -d k80=${DATA}/k80/pooling --rates 0.5 --samplers random --seeds 1 --epochs 3 --patience 100
    --min-steps 0 --test-fraction 0.3 --quiet --curves -o ${OUT}/curves)
count_lines(${OUT}/curves/curves.csv n_curve)
if(NOT n_curve EQUAL 3)
  message(FATAL_ERROR "study-sampling --curves: ${n_curve} rows, expected 3 (one per epoch)")
endif()
file(STRINGS ${OUT}/curves/sampling.csv srows)
list(GET srows 1 srow)
string(REPLACE "," ";" sf "${srow}")
list(GET sf 5 s_top1)
list(GET sf 16 s_best)
file(STRINGS ${OUT}/curves/curves.csv crow REGEX "^random,0.5,0,${s_best},")
string(REPLACE "," ";" cf "${crow}")
list(GET cf 8 c_top1)
if(NOT c_top1 STREQUAL s_top1)
  message(FATAL_ERROR "curves.csv: epoch ${s_best}'s test top-1 ${c_top1}, sampling.csv's ${s_top1}")
endif()
# --resume --curves keeps a whole curve and drops a partial one (here: a run's curve cut to 2 rows).
file(READ ${OUT}/curves/curves.csv curves_whole)
run(study-sampling -d k80=${DATA}/k80/pooling --rates 0.5 --samplers random --seeds 1 --epochs 3 --patience 100
    --min-steps 0 --test-fraction 0.3 --quiet --curves --resume -o ${OUT}/curves)
file(READ ${OUT}/curves/curves.csv curves_again)
if(NOT curves_again STREQUAL curves_whole)
  message(FATAL_ERROR "study-sampling --resume --curves changed a whole curve:\n${curves_again}")
endif()
file(STRINGS ${OUT}/curves/curves.csv crows_all)
list(SUBLIST crows_all 0 3 crows_cut)
list(JOIN crows_cut "\n" crows_cut)
file(WRITE ${OUT}/curves/curves.csv "${crows_cut}\n")
execute_process(COMMAND ${TCLM} study-sampling -d k80=${DATA}/k80/pooling --rates 0.5 --samplers random --seeds 1
                --epochs 3 --patience 100 --min-steps 0 --test-fraction 0.3 --quiet --curves --resume -o ${OUT}/curves
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
count_lines(${OUT}/curves/curves.csv n_cut)
if(NOT rc EQUAL 0 OR NOT err MATCHES "1 kept runs have a partial curve" OR NOT n_cut EQUAL 0)
  message(FATAL_ERROR "study-sampling --resume --curves kept a partial curve (${n_cut} rows): rc ${rc}:\n${err}")
endif()

# transfer: k80 -> v100 with TCL and target-only, 2 seeds: per seed, 2 TCL phases x 2 platforms for
# the knowledge base (after KD), as many for the active column (after CL, method tcl:ac), + 1
# target-only row = 9 rows, 18 in all; and a deployable knowledge base that tclm eval accepts.
set(transfer_args -d k80=${DATA}/k80/pooling -d v100=${DATA}/v100/pooling --sources k80 --target v100 --budget 0.3
    --methods tcl,target-only --epochs-cl 1 --epochs-kd 1 --epochs 1 --min-steps 0 --test-fraction 0.3 --quiet)
run(transfer ${transfer_args} --seeds 2 -o ${OUT}/transfer)
if(NOT EXISTS ${OUT}/transfer/kb.tclm OR NOT last_out MATCHES ",kb\\.tclm}")
  message(FATAL_ERROR "transfer with method tcl wrote or listed no kb.tclm:\n${last_out}")
endif()
count_lines(${OUT}/transfer/phases.csv n_phases)
file(STRINGS ${OUT}/transfer/phases.csv ac_rows REGEX "^tcl:ac,0,(1,learn k80|2,learn v100),v100,")
list(LENGTH ac_rows n_ac)
file(READ ${OUT}/transfer/transfer.md transfer_md)
if(NOT n_phases EQUAL 18 OR NOT n_ac EQUAL 2 OR NOT transfer_md MATCHES "tcl \\(active column after CL\\)")
  message(FATAL_ERROR "transfer wrote ${n_phases} phase rows (want 18, with the active column's tcl:ac rows):\n${transfer_md}")
endif()
# tcl minus target-only, paired over the 2 seeds (target and source); every option recorded.
file(READ ${OUT}/transfer/transfer_options.txt transfer_options)
if(NOT transfer_md MATCHES "\\| tcl - target-only \\| ${pair_re} \\|" OR NOT transfer_options MATCHES "lambda=0")
  message(FATAL_ERROR "transfer.md has no paired tcl - target-only row, or transfer_options.txt no lambda:\n"
          "${transfer_md}\n${transfer_options}")
endif()
# tools/paired_phases.py (pairs phases.csv files of separate jobs) agrees with transfer.md's table (on this
# slice both models score ~1, so it checks the format and the +0.000 / level rules more than the arithmetic).
find_program(PYTHON3 python3)
if(PYTHON3)
  execute_process(COMMAND ${PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/../../tools/paired_phases.py
                  --a tcl ${OUT}/transfer/phases.csv --b target-only ${OUT}/transfer/phases.csv --platforms v100
                  RESULT_VARIABLE rc OUTPUT_VARIABLE py_out ERROR_VARIABLE py_err)
  string(REGEX MATCH "\\| tcl - target-only \\| ([^|]+) \\| ([^|]+) \\| ([^|]+) \\|" m_cpp "${transfer_md}")
  set(cpp_cells "${CMAKE_MATCH_1}|${CMAKE_MATCH_2}|${CMAKE_MATCH_3}")
  string(REGEX MATCH "\\| v100 \\| 0,1 \\| ([^|]+) \\| ([^|]+) \\| ([^|]+) \\|" m_py "${py_out}")
  set(py_cells "${CMAKE_MATCH_1}|${CMAKE_MATCH_2}|${CMAKE_MATCH_3}")
  if(NOT rc EQUAL 0 OR NOT m_py OR NOT py_cells STREQUAL cpp_cells)
    message(FATAL_ERROR "paired_phases.py disagrees with transfer.md (rc ${rc}):\n${py_out}${py_err}\nvs '${cpp_cells}'")
  endif()
  # test_tasks.csv holds every evaluation's test tasks: as many rows per phases.csv row as the platform
  # has test tasks, whose top1 average to that row's top1_task_mean (the definition of the task mean).
  execute_process(COMMAND ${PYTHON3} -c [=[
import csv, sys, collections
d = sys.argv[1]
tasks = collections.defaultdict(list)
for r in csv.DictReader(open(d + "/test_tasks.csv")):
    tasks[(r["method"], r["seed"], r["phase"], r["platform"])].append(float(r["top1"]))
rows = list(csv.DictReader(open(d + "/phases.csv")))
counts = {p: {len(v) for k, v in tasks.items() if k[3] == p} for p in ("k80", "v100")}
assert len(tasks) == len(rows) and all(len(c) == 1 for c in counts.values()), (len(tasks), len(rows), counts)
for r in rows:
    t = tasks[(r["method"], r["seed"], r["phase"], r["platform"])]
    assert abs(sum(t) / len(t) - float(r["top1_task_mean"])) < 2e-6, (r, t)
print(len(rows), "evaluations,", sum(map(len, tasks.values())), "task rows")
]=] ${OUT}/transfer RESULT_VARIABLE rc OUTPUT_VARIABLE py_out ERROR_VARIABLE py_err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "transfer's test_tasks.csv does not match phases.csv:\n${py_out}${py_err}")
  endif()
endif()
# --first-seed 1 --seeds 1 runs seed 1 alone, and it must give seed 1's rows of the 2-seed run digit
# for digit: nothing carries from one seed to the next (RNG state, caches), so seeds can run in
# parallel jobs.
# The other baselines (finetune with its source model, mtl, full) are checked the same way.
function(check_seed1_alone two_seed_dir want_rows)
  run(transfer ${ARGN} --first-seed 1 --seeds 1 -o ${two_seed_dir}-seed1)
  file(STRINGS ${two_seed_dir}/phases.csv seed1_of_two REGEX "^[a-z:-]+,1,")
  file(STRINGS ${two_seed_dir}-seed1/phases.csv seed1_alone REGEX "^[a-z:-]+,1,")
  list(LENGTH seed1_alone n_seed1)
  if(NOT n_seed1 EQUAL want_rows OR NOT seed1_alone STREQUAL seed1_of_two)
    message(FATAL_ERROR "transfer ${ARGN} --first-seed 1 --seeds 1 differs from seed 1 of --seeds 2 (${n_seed1} rows, "
                        "want ${want_rows}):\n${seed1_alone}\n---\n${seed1_of_two}")
  endif()
endfunction()
check_seed1_alone(${OUT}/transfer 9 ${transfer_args})
# One seed gives a difference but no paired verdict (a verdict needs the spread of 2 seeds or more);
# transfer.md says what pooled and task-mean top-1 are.
file(READ ${OUT}/transfer-seed1/transfer.md one_seed_md)
if(NOT one_seed_md MATCHES "\\| tcl - target-only \\| [+-][0-9]+\\.[0-9]+ \\(1 seed: no paired verdict\\) \\|"
   OR one_seed_md MATCHES "(ahead|behind|level) \\|" OR NOT one_seed_md MATCHES "top-1 \\(pooled\\): over all test tasks")
  message(FATAL_ERROR "transfer.md of one seed: a paired verdict, or no difference / pooled line:\n${one_seed_md}")
endif()
set(baseline_args ${transfer_args})
list(TRANSFORM baseline_args REPLACE "^tcl,target-only$" "finetune,mtl,full")
run(transfer ${baseline_args} --seeds 2 -o ${OUT}/transfer-baselines)
# Without method tcl there is no knowledge base: none is written, and the list of results names none.
if(EXISTS ${OUT}/transfer-baselines/kb.tclm OR last_out MATCHES "kb\\.tclm")
  message(FATAL_ERROR "transfer --methods finetune,mtl,full wrote or listed a kb.tclm:\n${last_out}")
endif()
file(STRINGS ${OUT}/transfer-baselines/phases.csv baseline_rows REGEX "^[a-z:-]+,1,")
list(LENGTH baseline_rows n_baseline_rows)
# per seed: the source model and finetune on both platforms, mtl on both, full on the target = 7 rows
if(NOT n_baseline_rows EQUAL 7)
  message(FATAL_ERROR "transfer --methods finetune,mtl,full wrote ${n_baseline_rows} rows for seed 1, want 7")
endif()
check_seed1_alone(${OUT}/transfer-baselines 7 ${baseline_args})
run(eval -m ${OUT}/transfer/kb.tclm -d v100=${DATA}/v100/pooling --test-fraction 0.3)
if(NOT last_out MATCHES "pairwise")
  message(FATAL_ERROR "eval of the knowledge base printed no report:\n${last_out}")
endif()
# --test-fraction 0: the knowledge base to deploy learns every task. The target's pool is then all of
# the V100 slice's 6,000 programs (tclm info counts them; with --test-fraction 0.3 a third of its tasks
# are held out); nothing is evaluated, so there is no phases.csv, and a baseline is refused.
set(deploy_args -d k80=${DATA}/k80/pooling -d v100=${DATA}/v100/pooling --sources k80 --target v100 --budget 0.3
    --epochs-cl 1 --epochs-kd 1 --min-steps 0 --test-fraction 0 --quiet)
run(info -d v100=${DATA}/v100/pooling --json ${OUT}/v100-info.json)
file(READ ${OUT}/v100-info.json v100_info)
string(JSON v100_programs GET "${v100_info}" platforms 0 programs)
run(transfer ${deploy_args} --methods tcl -o ${OUT}/transfer-deploy)
file(READ ${OUT}/transfer-deploy/transfer.json deploy_json)
string(JSON deploy_pool GET "${deploy_json}" target_pool)
file(READ ${OUT}/transfer/transfer.json split_json)
string(JSON split_pool GET "${split_json}" target_pool)
file(READ ${OUT}/transfer-deploy/transfer.md deploy_md)
if(NOT deploy_pool EQUAL v100_programs OR NOT split_pool LESS v100_programs OR EXISTS ${OUT}/transfer-deploy/phases.csv
   OR NOT EXISTS ${OUT}/transfer-deploy/kb.tclm OR NOT deploy_md MATCHES "nothing was evaluated")
  message(FATAL_ERROR "transfer --test-fraction 0: target pool ${deploy_pool} of ${v100_programs} programs (with test "
          "tasks: ${split_pool}), or a phases.csv, or no kb.tclm:\n${deploy_md}")
endif()
# The target's KD phase distils on the programs the budget left unmeasured as well: every program of
# its training tasks (the slice's but its validation tasks'), more than the budget measured.
string(JSON deploy_kd GET "${deploy_json}" ckd_phases 1 phase kd_programs)
string(JSON deploy_measured GET "${deploy_json}" target_programs_measured)
# --candidates: a pool of one of the slice's tasks, its file twice (every program once: a pool of 1,000),
# is what KD distils on instead. A pool of none of the target's training workloads is refused.
file(GLOB v100_files ${DATA}/v100/pooling/*.log.gz)
list(GET v100_files 0 one_task)
file(COPY ${one_task} DESTINATION ${OUT}/pool/a)
file(COPY ${one_task} DESTINATION ${OUT}/pool/b)
run(transfer ${deploy_args} --valid-fraction 0 --methods tcl --candidates ${OUT}/pool -o ${OUT}/transfer-pool)
file(READ ${OUT}/transfer-pool/transfer.json pool_json)
string(JSON pool_kd GET "${pool_json}" ckd_phases 1 phase kd_programs)
string(JSON pool_platform GET "${pool_json}" ckd_phases 1 phase platform)
math(EXPR deploy_kd_rest "${deploy_kd} % 1000")
if(NOT deploy_kd GREATER deploy_measured OR NOT deploy_kd_rest EQUAL 0 OR deploy_kd GREATER v100_programs
   OR NOT pool_kd EQUAL 1000 OR NOT pool_platform STREQUAL "v100")
  message(FATAL_ERROR "the target's KD phase distilled on ${deploy_kd} programs (want whole tasks of the slice's "
          "${v100_programs}, more than the ${deploy_measured} measured) and on ${pool_kd} with --candidates (want 1000)")
endif()
execute_process(COMMAND ${TCLM} transfer ${deploy_args} --methods tcl --candidates ${DATA}/v100/depthwise
                -o ${OUT}/transfer-pool-other RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 1 OR NOT err MATCHES "--candidates: the pool has no program of the target's")
  message(FATAL_ERROR "transfer --candidates with a pool of other workloads: rc ${rc}:\n${err}")
endif()
execute_process(COMMAND ${TCLM} transfer ${deploy_args} --methods tcl,target-only -o ${OUT}/transfer-deploy-baseline
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 1 OR NOT err MATCHES "--methods target-only: --test-fraction 0 leaves no test tasks")
  message(FATAL_ERROR "transfer --test-fraction 0 with a baseline: rc ${rc}:\n${err}")
endif()
message("sample ok: ${n_picked} picks, study rows: ${n_study}, curve rows: ${n_curve}, transfer rows: ${n_phases}")
