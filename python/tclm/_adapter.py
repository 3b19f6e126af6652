"""What the tuner adapters (tclm.metaschedule, tclm.ansor) share: opening a model of the right
feature encoding, and online fine-tuning.

Both adapters keep what the tuner measured in a standard record store (a MetaSchedule JSON database,
an Ansor log file) and, once enough new successful measurements arrived, fine-tune the current model
on that store with ``tclm train --init`` (libtorch, in the tclm tool), then reload the engine. A
fine-tuning is skipped while the training time so far exceeds ``max_train_share`` of the wall time
since the tuner was created, so that training never dominates tuning.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import List, Optional

from . import Engine, cli, feature_version_name


def open_engine(path: str, feature_version: int, tuner: str, how_to_train: str, threads: int) -> Engine:
    """The engine of the weights file `path`; ValueError naming both encodings when the model was
    trained on another feature encoding than `feature_version` (what `tuner` reads)."""
    engine = Engine(path)
    if engine.feature_version != feature_version:
        raise ValueError(f"{path}: a model trained on {engine.feature_encoding}; {tuner} needs one trained on "
                         f"{feature_version_name(feature_version)} ({how_to_train})")
    engine.threads = threads
    return engine


class FineTuner:
    """Decides when to fine-tune and runs ``tclm train --init`` on a record store.

    Parameters
    ----------
    work_dir : str
        Fine-tuned models go to ``work_dir/model-N/best.tclm``.
    data : str
        The record store ``tclm train -d local=DATA`` reads (a MetaSchedule database directory or an
        Ansor log file).
    min_new_records : int
        Fine-tune once at least this many new successful measurements arrived since the last time.
    max_train_share : float
        Skip while training seconds > max_train_share x wall seconds since creation.
    epochs, seed, threads, max_steps : the ``tclm train`` options of every fine-tuning (patience
        max(3, epochs // 3), early stopping on the measured tasks, nothing held out).
    """

    def __init__(self, work_dir: str, data: str, min_new_records: int = 32, max_train_share: float = 0.25,
                 epochs: int = 100, seed: int = 0, threads: int = 0, max_steps: Optional[int] = None):
        self.work_dir = work_dir
        self.data = data
        self.min_new_records = min_new_records
        self.max_train_share = max_train_share
        self.epochs = epochs
        self.seed = seed
        self.threads = threads
        self.max_steps = max_steps
        self.created = time.time()
        self.train_seconds = 0.0
        self.trainings = 0
        self.new_records = 0
        self.log: List[dict] = []
        self._warned = False

    def due(self) -> bool:
        """Enough new measurements and the training share still under max_train_share."""
        if self.new_records < self.min_new_records:
            return False
        return self.train_seconds <= self.max_train_share * (time.time() - self.created)

    def run(self, model_path: Optional[str]) -> Optional[str]:
        """Fine-tunes model_path (None: trains from scratch) on the store; returns the new model's path,
        or None when training failed (said once on stderr, the whole message kept in ``log``)."""
        t0 = time.time()
        out = os.path.join(self.work_dir, f"model-{self.trainings + 1}")
        args = ["train", "-d", f"local={self.data}", "--test-fraction", "0", "--valid-fraction", "0",
                "--epochs", str(self.epochs), "--patience", str(max(3, self.epochs // 3)), "--seed", str(self.seed),
                "--threads", str(self.threads), "-o", out, "--quiet"]
        if self.max_steps:
            args += ["--max-steps", str(self.max_steps)]
        if model_path is not None:
            args += ["--init", model_path]
        try:
            result = cli(args, check=False)
        except OSError as e:  # the tclm tool is missing or cannot run: a failed training, not a failed search
            result = subprocess.CompletedProcess(args, 127, "", f"cannot run the tclm tool: {e}")
        seconds = time.time() - t0
        self.train_seconds += seconds
        entry = {"new_records": self.new_records, "seconds": seconds, "returncode": result.returncode}
        self.log.append(entry)
        if result.returncode == 0:
            self.trainings += 1
            self.new_records = 0
            return os.path.join(out, "best.tclm")
        entry["error"] = (result.stderr or "")[-2000:]
        if not self._warned:
            self._warned = True
            last = (result.stderr or "").strip().splitlines()[-1:] or ["(no output)"]
            print(f"tclm: fine-tuning failed (exit {result.returncode}): {last[0]}; tuning continues with the "
                  f"previous model", file=sys.stderr)
        return None
