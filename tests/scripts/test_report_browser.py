#!/usr/bin/python3
"""Open index.html from a real small run in headless Chromium: does the page really render?

Checks what a file-level test cannot: the data-URI images decode in a real
browser (index.html's inline script sets <body data-images-loaded="N/M">
once images are complete with naturalWidth > 0) and a screenshot of the
page is not blank.

The results come from the real runner (MPB_RUNNER, set by CTest) on
experiments/report_smoke.yaml. Exit code 77 (CTest: skipped) for the whole
file when no Chromium or no runner is available.
Set MPB_KEEP_SCREENSHOT=PATH to keep the screenshot for a human look.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import urllib.parse

from script_test_helpers import SKIP_EXIT_CODE, SOURCE_DIR, run_script


def find_chromium():
    """$MPB_CHROMIUM ("none" = pretend there is none), Debian's chromium, or another Chromium on PATH."""
    override = os.environ.get("MPB_CHROMIUM")
    if override:
        return None if override == "none" else override
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return "/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None


CHROMIUM = find_chromium()
RUNNER = os.environ.get("MPB_RUNNER", "")
HAVE_RUNNER = bool(RUNNER) and os.access(RUNNER, os.X_OK)
SHOT_WIDTH, SHOT_HEIGHT = 1400, 6000
# Loaded after the report's own scripts in a copy of index.html (the page itself is unchanged):
# for every table cell, the width of its longest word (split where a cell may wrap: spaces, and
# the ',' and '=' of a cell id's <wbr>) in the cell's own font, against the cell's content
# width. A canvas measures, so the probe never reflows the table it measures.
NARROW_PROBE = """<script>
window.addEventListener('load', function () {
  var ctx = document.createElement('canvas').getContext('2d'), narrow = [];
  var cells = document.querySelectorAll('td, th');
  for (var i = 0; i < cells.length; i++) {
    var style = getComputedStyle(cells[i]);
    ctx.font = style.font;
    var need = 0, word = '';
    cells[i].textContent.split(/[\\s,=]+/).forEach(function (w) {
      var width = ctx.measureText(w).width;
      if (width > need) { need = width; word = w; }
    });
    var have = cells[i].clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    if (need > have + 1) narrow.push(word + ': ' + Math.round(need) + ' px wide in a ' + Math.round(have) + ' px column');
  }
  document.body.setAttribute('data-narrow', encodeURIComponent(JSON.stringify(narrow)));
});
</script>"""
SMOKE_YAML = os.path.join(os.environ.get("MPB_SOURCE_DIR", SOURCE_DIR), "experiments", "report_smoke.yaml")


def chromium(profile, *args, timeout=120):
    """Run headless Chromium with a throwaway profile; returns CompletedProcess."""
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           "--hide-scrollbars", "--no-first-run", f"--user-data-dir={profile}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


@unittest.skipIf(CHROMIUM is None, "chromium is not installed")
@unittest.skipIf(not HAVE_RUNNER, "MPB_RUNNER is not set to an executable runner")
class ReportInBrowser(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="mpb-browser-")
        tmp = cls._tmp.name
        run = subprocess.run([RUNNER, SMOKE_YAML, "--out", os.path.join(tmp, "results"), "--quiet"],
                             capture_output=True, text=True, timeout=600)
        if run.returncode != 0:
            raise AssertionError(f"runner failed:\n{run.stdout}\n{run.stderr}")
        results = os.path.join(tmp, "results", "report_smoke")
        cls.out = os.path.join(tmp, "report")
        proc = run_script("report.py", results, "--out", cls.out)
        if proc.returncode != 0:
            raise AssertionError(f"report.py failed:\n{proc.stdout}\n{proc.stderr}")
        cls.pngs = sorted(f for f in os.listdir(cls.out) if f.endswith(".png"))
        cls.url = "file://" + os.path.join(cls.out, "index.html")
        cls.profile = os.path.join(tmp, "profile")
        # virtual-time-budget lets the load event and the image callbacks run before the dump.
        cls.dom = chromium(cls.profile, "--virtual-time-budget=10000", "--dump-dom", cls.url)
        cls.screenshot = os.path.join(tmp, "screenshot.png")
        # 6000 px tall: on a busy machine the report's Notes and Noise sections grow (one line per
        # busy round) and push the plots down; at 3000 px they could fall out of the shot.
        cls.shot = chromium(cls.profile, "--virtual-time-budget=10000", f"--screenshot={cls.screenshot}",
                            f"--window-size={SHOT_WIDTH},{SHOT_HEIGHT}", cls.url)
        keep = os.environ.get("MPB_KEEP_SCREENSHOT")      # for a human look: path to copy it to
        if keep and os.path.exists(cls.screenshot):
            shutil.copy(cls.screenshot, keep)

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def test_every_image_loaded(self):
        self.assertEqual(self.dom.returncode, 0, self.dom.stderr[-2000:])
        match = re.search(r'<body[^>]*\bdata-images-loaded="(\d+)/(\d+)"', self.dom.stdout)
        self.assertIsNotNone(match, "index.html's image-check script did not run:\n" + self.dom.stdout[:500])
        loaded, total = int(match.group(1)), int(match.group(2))
        self.assertEqual(total, len(self.pngs), f"images in page vs PNGs written ({self.pngs})")
        self.assertEqual(loaded, total, "some embedded images did not decode")
        # speedup, memory, convergence, loss scale, gradient histograms (the
        # smoke matrix has no checkpointing axis)
        self.assertGreaterEqual(total, 5)

    def test_no_column_narrower_than_its_longest_word(self):
        """At 1280 and 1920 px no table cell is narrower than its longest word (issue 41: the "Does
        it train as well?" cell column shrank to three characters, one syllable a line)."""
        with open(os.path.join(self.out, "index.html"), encoding="utf-8") as f:
            page = f.read()
        probe = os.path.join(self.out, "narrow_probe.html")
        with open(probe, "w", encoding="utf-8") as f:
            f.write(page.replace("</body>", NARROW_PROBE + "</body>"))
        for width in (1280, 1920):
            dom = chromium(self.profile, "--virtual-time-budget=10000", f"--window-size={width},900",
                           "--dump-dom", "file://" + probe)
            self.assertEqual(dom.returncode, 0, dom.stderr[-2000:])
            match = re.search(r'data-narrow="([^"]*)"', dom.stdout)
            self.assertIsNotNone(match, "the probe did not run")
            narrow = json.loads(urllib.parse.unquote(match.group(1)))
            self.assertEqual(narrow, [], f"at {width} px")

    def test_screenshot_is_not_blank(self):
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.image as mpimg
        import numpy as np

        self.assertEqual(self.shot.returncode, 0, self.shot.stderr[-2000:])
        self.assertTrue(os.path.isfile(self.screenshot), "no screenshot written")
        with open(self.screenshot, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        image = mpimg.imread(self.screenshot)[..., :3]
        self.assertEqual(image.shape[:2], (SHOT_HEIGHT, SHOT_WIDTH))
        colours = np.unique((image.reshape(-1, 3) * 255).astype(np.uint8), axis=0)
        self.assertGreater(len(colours), 50, "screenshot is (nearly) a single colour")
        # the figures must be in the picture, not just text: coloured (non-grey) pixels
        saturation = image.max(axis=2) - image.min(axis=2)
        self.assertGreater(float((saturation > 0.2).mean()), 0.01, "no coloured plot pixels in the screenshot")


if __name__ == "__main__":
    if CHROMIUM is None:
        print("chromium not found: skipping the browser test", file=sys.stderr)
        sys.exit(SKIP_EXIT_CODE)
    if not HAVE_RUNNER:
        print("MPB_RUNNER not set: skipping the browser test (it needs a real run)", file=sys.stderr)
        sys.exit(SKIP_EXIT_CODE)
    unittest.main()
