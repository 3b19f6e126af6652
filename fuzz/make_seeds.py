#!/usr/bin/env python3
"""Writes the seed corpora fuzz/corpus/records/ and fuzz/corpus/ms_database/.

Real pieces (a few lines each) come from files with a license that allows copying them:
  tests/data/tvm_ci_logs/*.json.gz       TVM tutorial logs, Apache-2.0
  data/records/{k80,v100,mi50}/          Roller artifact Ansor logs, MIT (data/licenses/roller-MIT.txt)
  ../shared/data/bennu/.../ms/results/   a MetaSchedule database from lac-dcc/bennu, MIT
                                         (../shared/data/licenses/bennu-MIT.txt)
The other seeds are hand-made, one problem each, named after it. fuzz/corpus/weights/ is made by
fuzz/make_weights_seeds.cpp. Deterministic: gzip members are written with mtime 0.

    python3 fuzz/make_seeds.py            # from the repository root
"""
import glob
import gzip
import io
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")
BENNU_MS = os.path.join(ROOT, "..", "shared", "data", "bennu", "benchmarks", "microkernels", "ms", "results", "red")


def gz(data: bytes) -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, compresslevel=9) as f:
        f.write(data)
    return buf.getvalue()


def write(target: str, name: str, data) -> None:
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    os.makedirs(os.path.join(CORPUS, target), exist_ok=True)
    with open(os.path.join(CORPUS, target, name), "wb") as f:
        f.write(data)
    print(f"{target}/{name}: {len(data)} bytes")


def lines_of(path: str, n: int, skip_comments=True, max_len=None):
    out = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            if skip_comments and line.startswith("#"):
                continue
            if max_len and len(line) > max_len:
                continue
            out.append(line)
            if len(out) == n:
                break
    return "".join(out)


def first_with(path_glob: str, needle: str, max_len=2500):
    for path in sorted(glob.glob(path_glob, recursive=True)):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                if needle in line and len(line) <= max_len:
                    return line
    raise SystemExit(f"no line with {needle!r} in {path_glob}")


# A small valid record, the base of most hand-made variants.
GOOD = {
    "i": [["[\"matmul\", 64, 64, 64, \"float32\"]", "llvm -keys=cpu -mcpu=skylake", [4, 64, 64, 0, 0, 0, 0, 0], "", 0, []],
          [[], [["SP", 2, 0, 64, [4, 2], 1], ["SP", 2, 3, 64, [8], 1], ["RE", 2, [0, 3, 1, 4, 2]],
                ["FU", 2, [0, 1]], ["AN", 2, 0, 3], ["PR", 2, 0, "auto_unroll_max_step$16"], ["AN", 2, 3, 2]]]],
    "r": [[0.00123, 0.00125], 0, 0.25, 1700000000],
    "v": "v0.6",
}


def rec(**changes) -> str:
    r = json.loads(json.dumps(GOOD))
    for k, v in changes.items():
        r[k] = v
    return json.dumps(r)


def steps_record(steps) -> str:
    r = json.loads(json.dumps(GOOD))
    r["i"][1][1] = steps
    return json.dumps(r)


def records() -> None:
    t = "records"
    ci = os.path.join(ROOT, "tests", "data", "tvm_ci_logs")
    write(t, "real_tvm_ci_matmul_with_comment.json", lines_of(os.path.join(ci, "matmul.json.gz"), 3, skip_comments=False))
    write(t, "real_tvm_ci_conv2d_2lines.json.gz", gz(lines_of(os.path.join(ci, "conv2d.json.gz"), 2).encode()))
    write(t, "real_tvm_ci_resnet18_cuda_v03.json", lines_of(os.path.join(ci, "resnet-18-NHWC-B1-cuda.json.gz"), 3, max_len=1500))
    write(t, "real_tvm_ci_resnet50_llvm.json", lines_of(os.path.join(ci, "resnet-50-NHWC-B1-llvm.json.gz"), 2, max_len=1500))
    write(t, "real_tvm_ci_sparse_dense.json", lines_of(os.path.join(ci, "sparse_dense.json.gz"), 1))
    write(t, "real_tvm_ci_rfactor_compute_root.json", first_with(os.path.join(ci, "*.json.gz"), '["RF"', 4000))
    recs = os.path.join(ROOT, "data", "records")
    write(t, "real_roller_k80_pooling.json", lines_of(sorted(glob.glob(os.path.join(recs, "k80", "pooling", "*.gz")))[0], 2))
    write(t, "real_roller_v100_cache_read_write.json", first_with(os.path.join(recs, "v100", "**", "*.gz"), '["CHW"', 3000))
    write(t, "real_roller_mi50_ffsp.json.gz", gz(first_with(os.path.join(recs, "mi50", "**", "*.gz"), '["FFSP"', 3000).encode()))

    good = rec()
    write(t, "hand_valid_all_step_kinds.json", steps_record(
        [["AN", 0, 0, 1], ["FU", 0, [0, 1]], ["PR", 0, 0, "debug_skip_region"], ["RE", 0, [1, 0]],
         ["SP", 0, 0, 0, [None, 4], 0], ["FSP", 1, 0, 4, 2], ["FFSP", 1, 1, [4], 1, True], ["SA", 0, 1, 32, 4],
         ["CA", 1, 0, 2], ["CI", 2], ["CR", 3], ["CHR", 0, "shared", [1]], ["CHW", 1, "local"], ["RF", 0, 2, 1]]) + "\n")
    write(t, "hand_versions_v02_to_v05.json", "".join(
        json.dumps({"i": [["[\"k\"]", "cuda"] + extra, [[], [["CI", 1]]]], "r": [[1e-3], 0, 1.0, 1600000000], "v": v}) + "\n"
        for v, extra in [("v0.2", []), ("v0.3", []), ("v0.4", [[-1, 16, 64]]), ("v0.5", [[-1, 16, 64], ""])]))
    write(t, "empty.json", b"")
    write(t, "comments_blank_lines_crlf.json", "# comment\r\n\r\n   \t\r\n" + good + "\r\n#" + good + "\r\n")
    write(t, "no_final_newline.json", good)
    write(t, "truncated_line.json", good + "\n" + good[: len(good) // 2] + "\n" + good[:7])
    write(t, "wrong_json_types.json", "\n".join([
        rec(i="i"), rec(r={"costs": 1}), rec(v=6), json.dumps([GOOD]), "42", "\"str\"", "null",
        rec(r=[["0.1"], 0, 1, 2]), rec(r=[[0.1], "0", 1, 2]), rec(r=[[0.1], 0.5, 1, 2]),
        steps_record([[2, 0]]), steps_record(["SP"]), steps_record([[]]), steps_record([["XX", 1]]),
        steps_record([["SP", 2, 0, {"a": 1}, [1], 1]]), steps_record([["CHR", 0, "a", "b"]]),
        steps_record([["SP", 0, 0, 8, [1], [2]]]), steps_record([["SP", 0, 0, 8, [[1]], 1]]),
        rec(i=[[1, 2], [[], []]]), rec(i=[["", "llvm"], [[], []]]), rec(i=[["k"], [[], []]]), rec(i=[["k", "t"]]),
        '{"i": [["k", "t"], [[], []]]}', '{"r": [[1], 0]}', rec(r=[[1]]),
    ]) + "\n")
    write(t, "huge_numbers.json", "\n".join([
        steps_record([["SP", 0, 0, 10 ** 30, [10 ** 19, -10 ** 19], 1]]),
        steps_record([["SP", 9223372036854775807, -9223372036854775808, 9223372036854775807,
                       [9223372036854775807, 9223372036854775807, 9223372036854775807], 1]]),
        steps_record([["SP", 0, 0, 1e18, [1e18, 1e18, 1e18, 1e18, 1e18], 1], ["FU", 0, [0, 1, 2, 3, 4, 5]],
                      ["AN", 0, 0, 1]]),
        steps_record([["FSP", 0, 0, 0, -9223372036854775808], ["FFSP", 0, 0, [0], -9223372036854775808, 1]]),
        steps_record([["AN", 0, 0, 1.5]]), steps_record([["AN", 0, 0, 1e400]]),
        steps_record([["SP", 0, 0, 8, [2.0, -0.0, 1e18], 1]]),
        rec(r=[[1e308, 1e-320], 0, 1.7976931348623157e308, 1e300]),
        rec(r=[[1e-3], 4294967296, 1, 9223372036854775807]),
        rec(r=[[1e-3], -9223372036854775808, 1, -1e19]),
        rec(r=[[1e-3], 0, 1, 18446744073709551615]),
        rec(r=[[1e400], 0, 1, 2]),
    ]) + "\n")
    write(t, "costs_nan_inf_negative_zero.json", "\n".join([
        rec(r=[[0.0], 0, 0.0, 0]), rec(r=[[-1.0, -0.0], 0, -5, -1]), rec(r=[[1e10], 0, 1e10, 1]),
        rec(r=[[], 0, 1, 2]), rec(r=[[1e-3], 7, 1, 2]),
        good.replace("0.00123", "NaN"), good.replace("0.00123", "Infinity"), good.replace("0.00123", "-inf"),
        good.replace("0.00123", "1e999"),
    ]) + "\n")
    write(t, "deep_nesting_5000.json", "[" * 5000 + "]" * 5000 + "\n" + '{"i": ' + "[" * 5000 + "\n")
    write(t, "deep_nesting_in_step.json", steps_record([["SP", 0, 0, 8, [1], 1]]).replace("[1]", "[" * 3000 + "1" + "]" * 3000) + "\n")
    gb = good.encode()
    write(t, "invalid_utf8.json", gb.replace(b"matmul", b"mat\xffmul\xc3") + b"\n" + gb.replace(b"skylake", b"\xe2\x82") +
          b"\n" + gb.replace(b"debug", b"x").replace(b"auto_unroll", b"\xed\xa0\x80auto") + b"\n")
    write(t, "escaped_control_chars_and_quotes.json", "\n".join([
        good.replace("matmul", "mat\\nmul\\u0000\\t\\u001f"),
        good.replace("skylake", "sky\\\"lake\\\\"),
        good.replace("debug", "x").replace("auto_unroll_max_step$16", "pragma\\u0007$1"),
        rec(v="v0.6\"}"), rec(v="v\\u0001"),
        good.replace("matmul", "\\ud800"),
    ]) + "\n")
    write(t, "duplicate_keys.json", good[:-1] + ', "i": ' + json.dumps(GOOD["i"]) + ', "r": [[5.0], 0, 1, 2]}\n')
    write(t, "trailing_content.json", good + " {}\n" + good + " x\n" + good + ",\n")
    write(t, "metaschedule_line_in_ansor_file.json", '[0, [[[], []], [1.0], {"kind": "llvm"}, []]]\n' + good + "\n")
    write(t, "program_line_trace.json", '[[["GetBlock",[],["C","main"],["b0"]],["GetLoops",["b0"],[],["l1","l2"]],'
          '["SamplePerfectTile",["l1"],[2,16],["v3","v4"]],["Split",["l1","v3","v4"],[1,0],["l5","l6"]]],[[2,[4,8]]]]\n')
    plain = (good + "\n") * 3
    z = gz(plain.encode())
    write(t, "gzip_valid.json.gz", z)
    write(t, "gzip_truncated.json.gz", z[: len(z) // 2])
    write(t, "gzip_header_only.json.gz", z[:10])
    write(t, "gzip_bad_crc.json.gz", z[:-8] + b"\0\0\0\0" + z[-4:])
    write(t, "gzip_two_members.json.gz", z + gz(b"# second member\n" + good.encode() + b"\n"))
    write(t, "gzip_member_then_garbage.json.gz", z + b"garbage after the member\n")
    write(t, "gzip_of_gzip.json.gz", gz(z))
    write(t, "gzip_magic_then_text.json", b"\x1f\x8b" + good.encode() + b"\n")
    write(t, "nul_bytes.json", good.replace("llvm", "ll\0vm") + "\n\0\0\0\n")


def ms_database() -> None:
    t = "ms_database"
    table_lines, tuning_lines = [], []
    with gzip.open(os.path.join(BENNU_MS, "database_workload.json.gz"), "rt") as f:
        for line in f:
            h, mod = json.loads(line)[:2]
            table_lines.append(json.dumps([h, mod[:80]]))  # the reader only uses the hash
    with gzip.open(os.path.join(BENNU_MS, "database_tuning_record.json.gz"), "rt") as f:
        for line in f:
            tuning_lines.append(line.rstrip("\n"))
    tuning_lines.sort(key=len)
    table = "\n".join(table_lines) + "\n"
    real = "\n".join(tuning_lines[:2]) + "\n"
    write(t, "real_bennu_red_2records", table + "\0" + real)
    write(t, "real_bennu_red_gzip_both", gz(table.encode()) + b"\0" + gz(real.encode()))
    write(t, "real_bennu_red_no_table", real)
    write(t, "real_bennu_trace_lines_only", "\n".join(json.dumps(json.loads(l)[1][0]) for l in tuning_lines[:1]) + "\n")

    h = json.loads(table_lines[0])[0]
    tbl = json.dumps([h, "AAAA"]) + "\n"
    trace = [[["GetBlock", [], ["C", "main"], ["b0"]], ["GetLoops", ["b0"], [], ["l1", "l2", "l3"]],
              ["SamplePerfectTile", ["l1"], [2, 16], ["v4", "v5"]], ["Split", ["l1", "v4", None], [1, 0], ["l6", "l7"]],
              ["Fuse", ["l6", "l2"], [1], ["l8"]], ["Parallel", ["l8"], [], []], ["Vectorize", ["l7"], [], []],
              ["Bind", ["l3"], ["threadIdx.x"], []], ["SampleCategorical", [], [[0, 16, 64], [0.3, 0.3, 0.4]], ["v9"]],
              ["Annotate", ["b0", "v9"], ["meta_schedule.unroll_explicit"], []],
              ["CacheRead", ["b0"], [0, "shared"], ["b10"]], ["ComputeAt", ["b10", "l6"], [1, -1], []],
              ["EnterPostproc", [], [], []], ["Unannotate", ["b0"], ["meta_schedule.parallel"], []],
              ["MysteryInstruction", [], [], []]],
             [[2, [4, 4]], [8, 1]]]

    def tr(t_, secs=(1e-4,), target=None, wl=0):
        return json.dumps([wl, [t_, list(secs) if secs is not None else None,
                                target if target is not None else {"kind": "llvm", "mcpu": "znver2", "num-cores": 8}, []]])

    write(t, "hand_valid_all_kinds", tbl + "\0" + tr(trace) + "\n" + tr(trace, secs=None, target="llvm -mcpu=x") + "\n")
    write(t, "workload_index_out_of_range", tbl + "\0" + "\n".join(
        tr(trace, wl=w) for w in [-1, 1, 10 ** 30, 9223372036854775807, 1.5, "0", None]) + "\n")
    write(t, "run_secs_variants", tbl + "\0" + "\n".join([
        tr(trace, secs=[]), tr(trace, secs=[1e10]), tr(trace, secs=[-1, 0]), tr(trace, secs=[1e308, 1e-320]),
        tr(trace, secs=[True]), json.dumps([0, [trace, ["x"], {}, []]]), json.dumps([0, [trace, {"a": 1}, {}, []]]),
        json.dumps([0, [trace, 5, {}, []]]), json.dumps([0, [trace, [1e-4], 42, []]]),
        json.dumps([0, [trace, [1e-4], {"kind": 5, "num-cores": -3, "mcpu": ""}, []]]),
        json.dumps([0, [trace, [1e-4], {"kind": "cuda", "num-cores": 1e30, "arch": "sm_80"}, []]]),
    ]) + "\n")
    write(t, "wrong_shapes", tbl + "\0" + "\n".join([
        "[]", "[0]", "[0, []]", "[0, [1, 2, 3]]", "{}", "0", '"x"', "[0, [[], [1], {}]]", "[0, [[[]], [1], {}]]",
        "[0, [[[1]], [1], {}]]", "[0, [[[[\"Split\"]]], [1], {}]]", "[0, [[[[\"Split\", 1, 2, 3]]], [1], {}]]",
        "[0, [[[], 5], [1], {}]]", "[0, [[[], [[1]]], [1], {}]]", "[0, [[[], [[\"a\", 2]]], [1], {}]]",
        "[0, [[[[5, [], [], []]]], [1], {}]]", "[0, [[[[\"Fuse\", [], [], []]], [[0, 1, 2]]], [1], {}]]",
    ]) + "\n")
    huge = [[["GetLoops", ["b0"], [], ["l1", "l2"]],
             ["Split", ["l1", 9223372036854775807, 9223372036854775807, None], [], ["l3", "l4", "l5"]],
             ["Split", ["l3", 3037000500, 3037000500], [], ["l6", "l7"]], ["Fuse", ["l6", "l7", "l4", "l5"], [], ["l8"]],
             ["Split", ["l8", None, 7], [], ["l9", "l10"]], ["Fuse", ["l9", "l10", "l9", "l10"], [], ["l11"]],
             ["Parallel", ["l11"], [], []], ["SampleCategorical", [], [[1, 2]], ["v12"]],
             ["SamplePerfectTile", ["l2"], [4, -1], ["v13", "v14", "v15", "v16"]],
             ["Split", ["l2", "v13", "v14", "v15", "v16"], [], ["l17", "l18", "l19", "l20"]],
             ["Annotate", ["l17", -9223372036854775808], ["pragma_auto_unroll_max_step"], []]],
            [[7, 5], [8, [9223372036854775807, 9223372036854775807, -9223372036854775808, 1e300]]]]
    write(t, "huge_numbers", tbl + "\0" + tr(huge) + "\n" + tr([huge[0], [[7, -1], [7, 1e300]]]) + "\n")
    write(t, "deep_nesting", tbl + "\0" + "[0, [" + "[" * 4000 + "]" * 4000 + "]]\n" + "[" * 5000 + "\n")
    write(t, "bad_table_lines", "\n".join(["not json", "[]", "[5, 6]", "{}", json.dumps([h, "m"]), "[\"\", \"\"]"]) +
          "\n\0" + tr(trace, wl=4) + "\n" + tr(trace, wl=0) + "\n")
    write(t, "empty_table", "\0" + tr(trace) + "\n")
    write(t, "empty_both", "\0")
    write(t, "empty", "")
    zt = gz(tbl.encode())
    zr = gz((tr(trace) + "\n").encode())
    write(t, "gzip_truncated_both", zt[: len(zt) // 2] + b"\0" + zr[: len(zr) // 2])
    write(t, "invalid_utf8_and_nul", tbl.encode() + b"\0" + tr(trace).encode().replace(b"main", b"ma\xffin") + b"\n" +
          tr(trace).encode() + b"\0\n")
    write(t, "ansor_line_in_tuning_file", tbl + "\0" + rec() + "\n" + tr(trace) + "\n")


def main() -> None:
    records()
    ms_database()


if __name__ == "__main__":
    sys.exit(main())
