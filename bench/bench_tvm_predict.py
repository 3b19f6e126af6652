"""What a MetaSchedule search round pays its cost model: TVM's default XGBoost model against tclm.

In MetaSchedule a cost model's ``predict(context, candidates)`` receives schedules, so its price includes
turning them into features: TVM's XGBModel extracts per-store features (``PerStoreFeature``: lowers
each candidate and walks its buffer stores) and runs XGBoost; tclm's ``TclmCostModel`` serializes each
candidate's trace to JSON and scores it through the libtorch-free engine. This benchmark times both on
the same candidates, end to end and by part.

Inputs: a pool of distinct post-processed candidates of one workload (``tclm.collect.candidate_pool``,
TVM's own sampling of the design space); the XGBoost model is fitted on the measured records of a
collected MetaSchedule database (``tclm collect`` output, real latencies of this machine), so its tree
count is that of a real tuning run; the tclm model is a trace-encoding model (``tclm train`` on such
databases). Each figure is the median of ``--reps`` runs on the whole pool.

Usage (the .venv-tvm of scripts/setup-python.sh):
    .venv-tvm/bin/python bench/bench_tvm_predict.py --model out/local-ms/best.tclm \
        --database out/collect/matmul-128 --workload matmul-512 --pool 2000
Prints a table and one JSON line (prefix "JSON ").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time


def median_seconds(fn, reps):
    fn()  # warm-up
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="tclm weights trained on MetaSchedule traces")
    p.add_argument("--database", required=True,
                   help="MetaSchedule JSON database directory with measured records (fits the XGBoost model)")
    p.add_argument("--workload", default="matmul-512", help="candidates come from this tclm.tune_bench workload")
    p.add_argument("--pool", type=int, default=2000, help="candidates to score (MetaSchedule's population is 2048)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    args = p.parse_args(argv)

    from tvm.s_tir import Schedule
    from tvm.target import Target

    from tclm.collect import candidate_pool
    from tclm.metaschedule import TclmCostModel, trace_json
    from tclm.tune_bench import llvm_target, make_workload

    from tvm.s_tir import meta_schedule as ms

    target = Target(llvm_target(args.cores))
    mod = make_workload(args.workload)
    t0 = time.time()
    schedules, stats = candidate_pool(mod, target, args.pool, seed=1)
    print(f"pool: {len(schedules)} candidates of {args.workload} in {time.time() - t0:.1f} s ({stats})", file=sys.stderr)
    context = ms.TuneContext(mod=mod, target=target, space_generator="post-order-apply", task_name="bench",
                             num_threads=args.cores, rand_state=1)
    arg_info = ms.arg_info.ArgInfo.from_prim_func(mod)
    candidates = [ms.MeasureCandidate(s, arg_info) for s in schedules]

    # XGBoost fitted on the measured records of the database (their own workload and schedules).
    db = ms.database.JSONDatabase(path_workload=os.path.join(args.database, "database_workload.json"),
                                  path_tuning_record=os.path.join(args.database, "database_tuning_record.json"),
                                  allow_missing=False)
    records = [r for r in db.get_all_tuning_records()
               if r.run_secs and all(0 < float(getattr(x, "value", x)) < 1e9 for x in r.run_secs)]
    train_mod = records[0].workload.mod
    train_ctx = ms.TuneContext(mod=train_mod, target=target, space_generator="post-order-apply",
                               task_name="fit", num_threads=args.cores, rand_state=1)
    train_args = ms.arg_info.ArgInfo.from_prim_func(train_mod["main"])
    train_cands, results = [], []
    for r in records:
        sch = Schedule(train_mod)
        r.trace.apply_to_schedule(sch, remove_postproc=False)
        train_cands.append(ms.MeasureCandidate(sch, train_args))
        results.append(ms.runner.RunnerResult(run_secs=list(r.run_secs), error_msg=None))
    xgb = ms.cost_model.XGBModel(num_warmup_samples=0)
    t0 = time.time()
    xgb.update(train_ctx, train_cands, results)
    fit_s = time.time() - t0
    booster = xgb.booster
    trees = booster.num_boosted_rounds() if booster is not None else 0
    print(f"XGBModel: fitted on {len(records)} measured records in {fit_s:.1f} s, {trees} trees", file=sys.stderr)

    tclm = TclmCostModel(model=args.model, work_dir=os.path.join("out", "bench-tvm-predict"), retrain=False,
                         threads=args.cores)
    extractor = ms.feature_extractor.PerStoreFeature()

    t = {}
    t["xgb_predict"] = median_seconds(lambda: xgb.predict(context, candidates), args.reps)
    t["xgb_features"] = median_seconds(lambda: extractor.extract_from(context, candidates), args.reps)
    feats = [f.numpy() for f in extractor.extract_from(context, candidates)]
    t["tclm_predict"] = median_seconds(lambda: tclm.predict(context, candidates), args.reps)
    t["tclm_trace_json"] = median_seconds(lambda: [trace_json(c.sch) for c in candidates], args.reps)
    lines = [trace_json(c.sch) for c in candidates]
    t["tclm_engine"] = median_seconds(lambda: tclm.engine.predict_lines(lines), args.reps)
    n = len(candidates)
    rows = [
        ("TVM XGBModel.predict (features + XGBoost)", "xgb_predict"),
        ("  of which PerStoreFeature extraction", "xgb_features"),
        ("tclm TclmCostModel.predict (trace JSON + engine)", "tclm_predict"),
        ("  of which Trace.as_json + json.dumps (Python)", "tclm_trace_json"),
        ("  of which engine: parse + featurize + score", "tclm_engine"),
    ]
    print(f"\n{n} candidates of {args.workload}, {args.cores} cores; XGBoost {trees} trees; "
          f"{statistics.mean(len(f) for f in feats):.1f} store features rows per candidate; tclm model {args.model}")
    print(f"{'path':52s} {'candidates/s':>13s} {'ms/round':>10s}")
    for label, k in rows:
        print(f"{label:52s} {n / t[k]:13.0f} {t[k] * 1e3:10.1f}")
    print(f"tclm / XGBModel end to end: {t['xgb_predict'] / t['tclm_predict']:.1f}x")
    out = {"bench": "tvm_predict", "workload": args.workload, "candidates": n, "cores": args.cores,
           "xgb_trees": trees, "xgb_fit_records": len(records)}
    out.update({f"{k}_per_s": round(n / v) for k, v in t.items()})
    print("JSON " + json.dumps(out))


if __name__ == "__main__":
    main()
