#!/usr/bin/python3
"""The runner's unclear edges from issue 33 (defects 5 and 6), as a user
meets them on the command line: each is refused with exit 2 and a message
that says what is wrong, before anything runs or is written.

- --max-minutes 0: refused (it used to mean "no limit" without saying so);
- --assume-gpu '': refused (it used to be ignored);
- --shard 0/0: "N ... must be >= 1" (it used to say "(0/1 to 0/1)");
- a symlink loop as data.path: named as a loop (it used to "not exist");
- runner merge OUT inside an input, OUT the input, an input inside OUT.
"""

import os
import subprocess
import sys
import tempfile

from e2e_helpers import RUNNER, report, write_mlp_experiment


def runner(*args):
    p = subprocess.run([RUNNER, *args], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


def expect_refused(fails, what, args, needle):
    code, out = runner(*args)
    if code != 2 or needle not in out:
        fails.append(f"{what}: exit {code}, expected 2 and {needle!r}:\n{out}")


def main():
    fails = []
    with tempfile.TemporaryDirectory(prefix="mpb_edges_") as tmp:
        exp = write_mlp_experiment(tmp, "edges", steps=4, warmup_steps=1, repeats=1, batch_size=8, width=16,
                                   input_dim=8, eval_samples=16, matrix="fusion: [off, on]")
        out = os.path.join(tmp, "results")
        # --dry-run: before the fix these ran (exit 0); nothing would be measured either way.
        expect_refused(fails, "--max-minutes 0", [exp, "--dry-run", "--out", out, "--max-minutes", "0"],
                       "more than 0 minutes")
        expect_refused(fails, "--assume-gpu ''", [exp, "--dry-run", "--out", out, "--assume-gpu", ""],
                       "--assume-gpu '': name a GPU")
        expect_refused(fails, "--shard 0/0", [exp, "--dry-run", "--out", out, "--shard", "0/0"], "must be >= 1")
        code, text = runner("--help")
        if "0 is refused" not in text:
            fails.append(f"--help does not say what --max-minutes 0 does:\n{text}")

        loop_a, loop_b = os.path.join(tmp, "loop_a"), os.path.join(tmp, "loop_b")
        os.symlink(loop_b, loop_a)
        os.symlink(loop_a, loop_b)
        text_exp = os.path.join(tmp, "text.yaml")
        with open(text_exp, "w") as f:
            f.write(f"name: text\nmodel: {{kind: bert, seq_len: 32}}\ndata:\n  kind: text\n  path: {loop_a}\n")
        expect_refused(fails, "data.path a symlink loop", [text_exp, "--dry-run", "--out", out],
                       "is a symlink loop (ELOOP")

        # merge: the refusal comes before the inputs are read, so empty
        # directories stand in for shards.
        sh = os.path.join(tmp, "sh")
        shards = [os.path.join(sh, f"edges.shard-{i}-of-2") for i in range(2)]
        for d in shards:
            os.makedirs(d)
        expect_refused(fails, "merge OUT = an input", ["merge", shards[0], *shards], "is the input")
        expect_refused(fails, "merge OUT inside an input", ["merge", os.path.join(shards[1], "m"), *shards],
                       "lies inside the input")
        expect_refused(fails, "merge input inside OUT", ["merge", sh, *shards], "lies inside OUT")
        expect_refused(fails, "merge OUT by another spelling",
                       ["merge", os.path.join(shards[1], "..", os.path.basename(shards[0])), *shards],
                       "is the input")
        if os.listdir(shards[0]) or os.listdir(shards[1]):
            fails.append(f"a refused merge wrote into a shard: {os.listdir(shards[0])} {os.listdir(shards[1])}")
    return report(fails)


if __name__ == "__main__":
    sys.exit(main())
