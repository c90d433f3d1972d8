#!/usr/bin/python3
"""scripts' slugify() spells result file names exactly as the runner's cell_slug()
(runner/experiment/matrix.cpp): the expected values are the ones tests/runner/experiment/test_slug.cpp
and test_matrix.cpp pin for the C++ side."""

import unittest

import script_test_helpers  # noqa: F401  (puts scripts/ on sys.path)
from mpbench.results.values import SLUG_MAX_CHARS, slugify


class Slugify(unittest.TestCase):

    def test_same_file_names_as_the_runner(self):
        pinned = {
            "precision=fp32,fusion=off,model.width=512": "precision=fp32__fusion=off__model.width=512",
            "data.path=corpus_en.txt": "data.path=corpus_en.txt",
            "data.path=corpus/en.txt": "data.path=corpus_en.txt-053fccb4",
            "loss_scale=dynamic{init:1024;growth_interval:100}":
                "loss_scale=dynamic_init_1024_growth_interval_100_-fee87dec",
            "inject_nonfinite=[5,9],fusion=on": "inject_nonfinite=_5__9___fusion=on-f326f7e3",
            "loss_scale=static{value:1024}": "loss_scale=static_value_1024_-857934b4",
            "a=b/c d": "a=b_c_d-62aacd79",
        }
        for cell_id, slug in pinned.items():
            self.assertEqual(slugify(cell_id), slug, cell_id)

    def test_long_ids_are_bounded(self):
        cell_id = ",".join(f"model.some_long_key_{i}=1" for i in range(15))
        self.assertEqual(len(slugify(cell_id)), SLUG_MAX_CHARS)


if __name__ == "__main__":
    unittest.main()
