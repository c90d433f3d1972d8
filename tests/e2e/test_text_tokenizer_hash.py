#!/usr/bin/python3
"""A text cell's JSON names its SentencePiece tokenizer (issue 31 §2, "cached by
content hash, its hash in the resolved config"; docs/RESULTS.md, "data").

Real runs of a tiny BERT on a small corpus written here: the cell JSON and each
repeat carry data.tokenizer {kind, model_hash, corpus_hash, cache_key, pieces,
vocab}; a second run on the same corpus with an EMPTY tokenizer cache (so the
tokenizer is trained again, not read back) gives the same hashes; a changed
corpus gives a different model and corpus hash, while config_hash, which covers
the user's settings only, stays the same. The cell also carries
data.context_free_loss, the same in every repeat and run of one corpus.
"""

import json
import os
import random
import subprocess
import sys
import tempfile

from e2e_helpers import RUNNER, cells_of, report

WORDS = ("the a of and to in is that for it with as was on by function module value returns object string "
         "number list error exception called default argument class method file python type when which").split()


def corpus(seed):
    """60 documents of Zipf-like sentences, separated by form feeds (as
    scripts/extract_text_corpus.py writes), so the split is by document."""
    rng = random.Random(seed)
    docs = []
    for _ in range(60):
        sentences = []
        for _ in range(6):
            n = rng.randint(6, 15)
            s = " ".join(WORDS[min(len(WORDS) - 1, int(len(WORDS) * rng.random() ** 3))] for _ in range(n))
            sentences.append(s.capitalize() + ".")
        docs.append(" ".join(sentences))
    return "\n\f\n".join(docs) + "\n"


def run_cell(tmp, name, text):
    path = os.path.join(tmp, name + ".txt")
    with open(path, "w") as f:
        f.write(text)
    exp = os.path.join(tmp, name + ".yaml")
    with open(exp, "w") as f:
        # The experiment's name and settings are the same for every corpus
        # (data.path names a file of the same name in each run's directory).
        f.write("name: tokhash\nsteps: 6\nwarmup_steps: 1\nrepeats: 2\nbatch_size: 4\nnumerics_every: 0\n"
                "model: {kind: bert, size: tiny, layers: 1, hidden: 32, heads: 2, seq_len: 16}\n"
                "data: {kind: text, path: corpus.txt, vocab: 84, eval_samples: 8}\n")
    os.makedirs(os.path.join(tmp, name), exist_ok=True)
    os.replace(path, os.path.join(tmp, name, "corpus.txt"))
    os.replace(exp, os.path.join(tmp, name, "exp.yaml"))
    out = os.path.join(tmp, name, "results")
    cache = os.path.join(tmp, name, "cache")  # a fresh tokenizer cache per run: each run trains its own
    env = dict(os.environ, OMP_NUM_THREADS="1", XDG_CACHE_HOME=cache)
    # Run from the run's directory: data.path "corpus.txt" is the same text in every config.
    p = subprocess.run([os.path.abspath(RUNNER), "exp.yaml", "--device", "cpu", "--out", out, "--quiet"], cwd=os.path.join(tmp, name),
                       capture_output=True, text=True, env=env, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"run {name} exited {p.returncode}:\n{p.stdout}{p.stderr}")
    cells = cells_of(os.path.join(out, "tokhash"))  # results/<experiment name>/
    if len(cells) != 1:
        raise RuntimeError(f"run {name}: expected one cell, got {sorted(cells)}")
    return next(iter(cells.values()))


def main():
    fails = []
    with tempfile.TemporaryDirectory(prefix="mpb_tokhash_") as tmp:
        a = run_cell(tmp, "a", corpus(1))
        again = run_cell(tmp, "again", corpus(1))
        changed = run_cell(tmp, "changed", corpus(2))
        tok = a.get("data", {}).get("tokenizer")
        if not tok:
            fails.append(f"the cell JSON has no data.tokenizer: {json.dumps(a.get('data'))}")
            return report(fails)
        for key in ("model_hash", "corpus_hash", "cache_key"):
            v = tok.get(key, "")
            if len(v) != 16 or any(ch not in "0123456789abcdef" for ch in v):
                fails.append(f"data.tokenizer.{key} is not 16 hex digits: {v!r}")
        if tok.get("kind") != "sentencepiece" or tok.get("pieces") != 80 or tok.get("vocab") != 84:
            fails.append(f"kind/pieces/vocab: {tok}")
        for i, rep in enumerate(a["repeats"]):
            if rep.get("data", {}).get("tokenizer") != tok:
                fails.append(f"repeat {i}'s data.tokenizer differs from the cell's: {rep.get('data')}")
        if tok["model_hash"] in json.dumps(a["config"]) or tok["corpus_hash"] in json.dumps(a["config"]):
            fails.append("the tokenizer's hash leaked into config (config_hash would move with the corpus)")
        # The best context-free loss on the held-out tokens (docs/RESULTS.md, "data"): the
        # same in every repeat and for the same corpus; its value is checked against an
        # independent count in tests/models (MlmData) and tests/e2e/test_text_sanity.cpp.
        cf = a["data"].get("context_free_loss")
        if not (isinstance(cf, dict) and isinstance(cf.get("loss"), float) and 0 < cf["loss"] < 20
                and isinstance(cf.get("labels"), int) and cf["labels"] > 0):
            fails.append(f"data.context_free_loss is not {{loss > 0, labels > 0}}: {cf}")
        for i, rep in enumerate(a["repeats"]):
            if rep.get("data", {}).get("context_free_loss") != cf:
                fails.append(f"repeat {i}'s data.context_free_loss differs from the cell's: {rep.get('data')}")
        if again["data"].get("context_free_loss") != cf:
            fails.append(f"the same corpus gave context_free_loss {again['data'].get('context_free_loss')}, first {cf}")
        t2 = again["data"]["tokenizer"]
        if t2 != tok:
            fails.append(f"the same corpus, trained again in an empty cache, gave {t2}, first {tok}")
        t3 = changed["data"]["tokenizer"]
        for key in ("model_hash", "corpus_hash", "cache_key"):
            if t3[key] == tok[key]:
                fails.append(f"a changed corpus kept {key} {tok[key]}")
        if not (a["config_hash"] == again["config_hash"] == changed["config_hash"]):
            fails.append(f"config_hash moved with the corpus: {a['config_hash']}, {again['config_hash']}, "
                         f"{changed['config_hash']}")
    return report(fails)


if __name__ == "__main__":
    sys.exit(main())
