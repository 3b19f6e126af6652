"""The tuning benchmark's operators as Ansor (TVM 0.19 auto_scheduler) workloads.

Ansor finds a workload by the name of a function registered with ``auto_scheduler.register_workload``;
its builder workers import this module by name to find them, so they live at module level here (the
module imports tvm.auto_scheduler, so only the Ansor path of tclm.tune_bench imports it). The shapes
are those of tclm.tune_bench.WORKLOADS: ``matmul`` (n, m, k) computes C[n, m] = A[n, k] B[k, m] and
``conv2d_nhwc`` (n, h, w, ci, co, kernel, stride, padding) a 2-D convolution in NHWC / HWIO layout,
float32, as MetaSchedule's te_workload functions of the same names.
"""

from tvm import auto_scheduler, te, tir


@auto_scheduler.register_workload
def tclm_bench_matmul(n, m, k):
    a = te.placeholder((n, k), name="A")
    b = te.placeholder((k, m), name="B")
    r = te.reduce_axis((0, k), name="k")
    c = te.compute((n, m), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    return [a, b, c]


@auto_scheduler.register_workload
def tclm_bench_conv2d_nhwc(n, h, w, ci, co, kernel, stride, padding):
    x = te.placeholder((n, h, w, ci), name="X")
    wt = te.placeholder((kernel, kernel, ci, co), name="W")
    hp, wp = h + 2 * padding, w + 2 * padding
    pad = te.compute(
        (n, hp, wp, ci),
        lambda b, i, j, c: tir.if_then_else(
            tir.all(i >= padding, i < h + padding, j >= padding, j < w + padding), x[b, i - padding, j - padding, c],
            tir.const(0.0, "float32")),
        name="pad")
    ho, wo = (hp - kernel) // stride + 1, (wp - kernel) // stride + 1
    rc = te.reduce_axis((0, ci), name="rc")
    rh = te.reduce_axis((0, kernel), name="rh")
    rw = te.reduce_axis((0, kernel), name="rw")
    y = te.compute(
        (n, ho, wo, co),
        lambda b, i, j, o: te.sum(pad[b, i * stride + rh, j * stride + rw, rc] * wt[rh, rw, rc, o], axis=[rh, rw, rc]),
        name="conv2d")
    return [x, wt, y]


#: tclm.tune_bench's function names -> the registered Ansor workload.
FUNCTIONS = {"matmul": tclm_bench_matmul, "conv2d_nhwc": tclm_bench_conv2d_nhwc}
