"""``tclm tune``: tune a whole network on this CPU with a tclm model, compile it with the best schedules
found and measure its end-to-end latency.

    tclm tune --network resnet-18 --trials 1000 --model kb.tclm --out out/tune/resnet-18
    tclm tune --onnx model.onnx --input data:1x3x224x224 --trials 1000 --model kb.tclm --out out/tune/mine
    tclm tune --scheduler metaschedule --network resnet-18 --trials 1000 --model ms.tclm --out out/tune/rn18-ms

``--scheduler ansor`` (the default; TVM 0.19 in .venv-ansor, Relay networks, tclm._tune_ansor) runs
Ansor's task scheduler over every task of the network with :class:`tclm.ansor.TclmAnsorModel`;
``--scheduler metaschedule`` (TVM 0.26 in .venv-tvm, Relax networks, tclm._tune_ms) runs MetaSchedule
with :class:`tclm.metaschedule.TclmCostModel`. ``--help`` with a scheduler lists that scheduler's
options.
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--scheduler", choices=["ansor", "metaschedule"], default="ansor")
    a, _ = p.parse_known_args(argv)
    if a.scheduler == "ansor":
        from ._tune_ansor import main as run
    else:
        from ._tune_ms import main as run
    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
