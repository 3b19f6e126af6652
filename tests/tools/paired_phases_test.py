#!/usr/bin/env python3
"""tools/paired_phases.py on hand-made transfer outputs whose differences are known.

Two held-out sets (split seeds 1 and 3), seeds 0 and 1 each: four runs of tcl and of finetune in
separate directories. Pairing by seed alone would mix the sets (seed 0 of split seed 1 with seed 0 of
split seed 3); the script must pair within a set and report all four differences.
"""
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "paired_phases.py")
HEADER = "method,seed,phase_index,phase,platform,top1,top5,pairwise,random_top1,top1_task_mean,random_top1_task_mean\n"
OPTIONS = ('split="task"\nsplit-seed={split}\ntest-fraction={test}\nvalid-fraction=0.1\ntuning-split={tuning}\n'
           'sources="{sources}"\ntarget="mi50"\nseeds=1\n')


def write_run(root, name, split, rows, tuning="false", options=True, test="0.2", sources="k80"):
    d = os.path.join(root, name)
    os.makedirs(d)
    with open(os.path.join(d, "phases.csv"), "w") as f:
        f.write(HEADER)
        for method, seed, phase_index, phase, platform, v in rows:
            # top1 = v, top1_task_mean = v + 0.1, top5 = v + 0.2: three columns with the same differences
            f.write(f"{method},{seed},{phase_index},{phase},{platform},{v:.6f},{v + 0.2:.6f},0.5,0.1,{v + 0.1:.6f},0.1\n")
    if options:
        with open(os.path.join(d, "transfer_options.txt"), "w") as f:
            f.write(OPTIONS.format(split=split, tuning=tuning, test=test, sources=sources))
    return os.path.join(d, "phases.csv")


def tcl_rows(seed, target_end, source_after, source_end):
    """A two-phase tcl run (source k80, target mi50): every phase evaluates both platforms."""
    return [("tcl", seed, 1, "learn k80", "k80", source_after), ("tcl", seed, 1, "learn k80", "mi50", 0.30),
            ("tcl", seed, 2, "learn mi50", "k80", source_end), ("tcl", seed, 2, "learn mi50", "mi50", target_end)]


def run(*args):
    p = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


class PairedPhases(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        # tcl's target figure per (split seed, seed); finetune 0.5 on split seed 1 and 0.4 on split seed 3
        self.tcl = {(1, 0): 0.60, (1, 1): 0.52, (3, 0): 0.44, (3, 1): 0.30}
        self.ft = {1: 0.50, 3: 0.40}
        self.tcl_files, self.ft_files = [], []
        for (split, seed), v in self.tcl.items():
            self.tcl_files.append(write_run(self.root, f"tcl-{split}-{seed}", split,
                                            tcl_rows(seed, v, 0.90, 0.90 - 0.01 * (seed + split))))
            self.ft_files.append(write_run(self.root, f"ft-{split}-{seed}", split,
                                           [("finetune", seed, 1, "final", "mi50", self.ft[split])]))

    def tearDown(self):
        self.tmp.cleanup()

    def test_pairs_within_each_held_out_set(self):
        rc, out, err = run("--a", "tcl", *self.tcl_files, "--b", "finetune", *self.ft_files, "--platforms", "mi50")
        self.assertEqual(rc, 0, err)
        # differences +0.10, +0.02 (split seed 1), +0.04, -0.10 (split seed 3): mean +0.015, sample std 0.0839
        row = "| mi50 | split seed 1: 0,1; split seed 3: 0,1 | +0.015 ± 0.084 (+0.100, +0.020, +0.040, -0.100) level |"
        self.assertIn(row, out)
        # every column carries the same differences (the rows were written with fixed offsets)
        self.assertEqual(out.count("+0.015 ± 0.084"), 3, out)

    def test_one_set_lists_seeds_only(self):
        files = [f for f in self.tcl_files if "tcl-1-" in f]
        rc, out, err = run("--a", "tcl", *files, "--b", "finetune", *self.ft_files, "--platforms", "mi50")
        self.assertEqual(rc, 0, err)
        # +0.10 and +0.02: mean +0.06, std 0.0566: ahead
        self.assertIn("| mi50 | 0,1 | +0.060 ± 0.057 (+0.100, +0.020) ahead |", out)

    def test_tuning_split_is_another_set(self):
        tuned = write_run(self.root, "ft-tuning", 1, [("finetune", 0, 1, "final", "mi50", 0.0)], tuning="true")
        files = [f for f in self.tcl_files if "tcl-1-0" in f]
        rc, out, err = run("--a", "tcl", *files, "--b", "finetune", tuned, "--platforms", "mi50")
        self.assertEqual(rc, 0, err)
        self.assertIn("| mi50 | - | - | - | - |", out)
        # a tuning split pairs with the tuning split of its split seed, listed after the test split of it:
        # +0.10 (split seed 1) and 0.25 - 0.0 (its tuning split): mean +0.175, sample std 0.106
        tcl_tuned = write_run(self.root, "tcl-tuning", 1, tcl_rows(0, 0.25, 0.9, 0.9), tuning="true")
        rc, out, err = run("--a", "tcl", *files, tcl_tuned, "--b", "finetune", tuned, *self.ft_files, "--platforms", "mi50")
        self.assertEqual(rc, 0, err)
        self.assertIn("| mi50 | split seed 1: 0; split seed 1 (tuning): 0 | +0.175 ± 0.106 (+0.100, +0.250) ahead |", out)

    def test_other_orders_or_fractions_under_one_split_seed_are_an_error(self):
        other_order = write_run(self.root, "tcl-v100", 1, tcl_rows(2, 0.5, 0.9, 0.9), sources="v100")
        rc, out, err = run("--kept", "tcl", self.tcl_files[0], other_order, "--platforms", "k80")
        self.assertNotEqual(rc, 0)
        self.assertIn("other sources", err)
        self.assertEqual(out, "")
        # the same between --a and --b: fine-tuning of another order must not leave the pair silently empty
        ft_other_order = write_run(self.root, "ft-v100", 1, [("finetune", 0, 1, "final", "mi50", 0.5)], sources="v100")
        rc, out, err = run("--a", "tcl", self.tcl_files[0], "--b", "finetune", ft_other_order, "--platforms", "mi50")
        self.assertNotEqual(rc, 0)
        self.assertIn("other sources", err)
        other_fraction = write_run(self.root, "tcl-test-0.3", 1, tcl_rows(2, 0.5, 0.9, 0.9), test="0.3")
        rc, out, err = run("--kept", "tcl", self.tcl_files[0], other_fraction, "--platforms", "k80")
        self.assertNotEqual(rc, 0)
        self.assertIn("other test-fraction", err)

    def test_kept(self):
        rc, out, err = run("--kept", "tcl", *self.tcl_files, "--platforms", "k80")
        self.assertEqual(rc, 0, err)
        # end - after = -0.01 * (seed + split seed): -0.01, -0.02, -0.03, -0.04; mean -0.025, std 0.0129: lost
        self.assertIn("-0.025 ± 0.013 (-0.010, -0.020, -0.030, -0.040) lost |", out)

    def test_kept_needs_the_platforms_own_phase(self):
        rc, out, err = run("--kept", "finetune", *self.ft_files, "--platforms", "mi50")
        self.assertNotEqual(rc, 0)
        self.assertIn("no phase 'learn mi50'", err)

    def test_a_run_counted_twice_is_an_error(self):
        again = write_run(self.root, "tcl-again", 1, tcl_rows(0, 0.99, 0.9, 0.9))
        rc, out, err = run("--a", "tcl", *self.tcl_files, again, "--b", "finetune", *self.ft_files, "--platforms", "mi50")
        self.assertNotEqual(rc, 0)
        self.assertIn("counted twice", err)
        self.assertIn("tcl-again", err)
        self.assertIn("tcl-1-0", err)

    def test_an_unfinished_run_is_an_error(self):
        partial = write_run(self.root, "tcl-partial", 2, tcl_rows(0, 0.5, 0.9, 0.9)[:2])
        rc, out, err = run("--a", "tcl", *self.tcl_files, partial, "--b", "finetune", *self.ft_files, "--platforms", "mi50")
        self.assertNotEqual(rc, 0)
        self.assertIn("end at different phases", err)
        self.assertIn("tcl-partial", err)
        self.assertEqual(out, "")

    def test_options_file_is_required(self):
        bare = write_run(self.root, "bare", 1, tcl_rows(5, 0.5, 0.9, 0.9), options=False)
        rc, out, err = run("--a", "tcl", bare, "--b", "finetune", *self.ft_files, "--platforms", "mi50")
        self.assertNotEqual(rc, 0)
        self.assertIn("bare", err)
        self.assertIn("no transfer_options.txt", err)

    def test_unknown_method_is_an_error(self):
        rc, out, err = run("--a", "tlc", *self.tcl_files, "--b", "finetune", *self.ft_files, "--platforms", "mi50")
        self.assertNotEqual(rc, 0)
        self.assertIn("no row of method tlc", err)


if __name__ == "__main__":
    unittest.main()
