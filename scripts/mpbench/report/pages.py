"""Writing the report: index.html (figures inlined as data URIs) and report.md.

Why a module of its own: both files carry the same sections in the same order
(machine, notes, noise, cells, then each figure with its caption and notes);
only the markup differs. Figures name cells in full (labels.plot_names), so
they need no key table of their own. The content comes from report.tables,
report.noise and report.labels; the figures from report.plots' Plot records.
"""

import base64
import html
import re

from mpbench import output as mo
from mpbench.report.decision import decision_line
from mpbench.report.estimates import ESTIMATE_COLUMNS, estimate_legend, estimate_rows, has_estimates
from mpbench.report.labels import KEY_COLUMNS, key_rows
from mpbench.report.noise import noise_lines
from mpbench.report.tables import machine_rows, summary_columns, summary_legend, summary_rows
from mpbench.report.verdict import COLUMNS as VERDICT_COLUMNS
from mpbench.report.verdict import PLOT_NAME as VERDICT_PLOT
from mpbench.report.verdict import TITLE as VERDICT_TITLE
from mpbench.report.verdict import verdict_legend, verdict_rows, verdict_status


IMAGE_CHECK_SCRIPT = """
<script>
// Sets the body attribute data-images-loaded to "loaded/total" as images decode, so a headless browser test
// (tests/scripts/test_report_browser.py) can tell that every embedded figure rendered.
function mpbCountImages() {
  var imgs = document.images, ok = 0;
  for (var i = 0; i < imgs.length; i++) if (imgs[i].complete && imgs[i].naturalWidth > 0) ok++;
  document.body.setAttribute('data-images-loaded', ok + '/' + imgs.length);
}
for (var i = 0; i < document.images.length; i++) document.images[i].addEventListener('load', mpbCountImages);
window.addEventListener('load', mpbCountImages);
mpbCountImages();
</script>
"""

CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1400px; color: #222; padding: 0 1em; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; }
th { background: #f0f0f0; text-align: left; }
.scroll { overflow-x: auto; }
/* break-word, not anywhere: 'anywhere' lowers a cell's minimum width to one character, so beside
   no-wrap numbers a text column shrank to a syllable a line; break-word breaks a word only when it
   alone is wider than the 32em cap. */
td.text { max-width: 32em; overflow-wrap: break-word; }
/* A cell id wraps only where <wbr> allows (after ',' and '='): 'anywhere' would let a table of
   no-wrap numbers squeeze it to one character per line. */
td.id { min-width: 14em; max-width: 32em; overflow-wrap: break-word; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.notes li { margin: 0.2em 0; overflow-wrap: anywhere; }
figure { margin: 1.5em 0; }
figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { color: #555; max-width: 60em; }
p.legend { color: #555; max-width: 60em; font-size: 0.9em; }
"""


def wrappable_id(cell_id):
    """A cell id as HTML that may break after each ',' and '=' (between settings), nowhere else."""
    return html.escape(cell_id).replace(",", ",<wbr>").replace("=", "=<wbr>")


def html_table(header, rows, numeric_from=1, id_column=None):
    """A plain HTML table (scrolls sideways if too wide); columns from `numeric_from` are right-aligned;
    column `id_column` holds cell ids, wrapped between settings (wrappable_id)."""
    out = ["<div class=scroll><table>"]
    if header:
        out.append("<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>")
    for row in rows:
        cells = [f"<td class=id>{wrappable_id(v)}</td>" if i == id_column else
                 f"<td class={'num' if i >= numeric_from else 'text'}>{html.escape(v)}</td>"
                 for i, v in enumerate(row)]
        out.append("<tr>" + "".join(cells) + "</tr>")
    return "\n".join(out + ["</table></div>"])


def write_html(rs, plots, notes, path):
    """index.html with every image inlined as a base64 data URI."""
    decision = decision_line(rs)
    parts = [
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        f"<title>mpbench report: {html.escape(rs.experiment)}</title><style>{CSS}</style></head><body>",
        f"<h1>mpbench report: {html.escape(rs.experiment)}</h1>",
        f"<p>{len(rs.cells)} cells on <b>{html.escape(rs.machine_label())}</b>. "
        "See docs/REPORTS.md for how to read each figure.</p>",
        *([f"<p class=decision><b>{html.escape(decision)}</b></p>"] if decision else []),
        "<h2>Machine and versions</h2>",
        html_table(None, machine_rows(rs), numeric_from=99),
    ]
    if notes:
        parts.append("<h2>Notes</h2><ul class=notes>" +
                     "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
    parts.append("<h2>Noise</h2><ul class=notes>" +
                 "".join(f"<li>{html.escape(n)}</li>" for n in noise_lines(rs)) + "</ul>")
    # The id column wraps between settings; the key legend below gives each key's settings apart.
    parts += ["<h2>Cells</h2>", html_table(summary_columns(rs), summary_rows(rs), numeric_from=2, id_column=1),
              f"<p class=legend>{html.escape(summary_legend(rs))}</p>",
              "<p class=legend>Cell key:</p>", html_table(KEY_COLUMNS, key_rows(rs), numeric_from=99)]
    if has_estimates(rs):
        parts += ["<h2>Estimated vs measured time</h2>", html_table(ESTIMATE_COLUMNS, estimate_rows(rs), numeric_from=2),
                  f"<p class=legend>{html.escape(estimate_legend(rs))}</p>"]
    for p in plots:
        if p.name == VERDICT_PLOT:           # the verdict table, above its figure and the loss curves
            status = verdict_status(rs)
            parts.append(f"<h2>{html.escape(VERDICT_TITLE)}</h2>" + (
                f"<p>{html.escape(status)}</p>" if status else
                html_table(VERDICT_COLUMNS, verdict_rows(rs), numeric_from=3) +
                f"<p class=legend>{html.escape(verdict_legend(rs))}</p>"))
        if not p.file:
            continue
        with open(p.file, "rb") as f:
            data = base64.b64encode(f.read()).decode("ascii")
        parts.append(f"<figure><h2>{html.escape(p.title)}</h2>"
                     f"<img src=\"data:image/png;base64,{data}\" alt=\"{html.escape(p.title)}\">"
                     f"<figcaption>{html.escape(p.caption)}</figcaption></figure>")
        if p.notes:
            parts.append("<ul class=notes>" + "".join(f"<li>{html.escape(n)}</li>" for n in p.notes) + "</ul>")
    parts += [IMAGE_CHECK_SCRIPT, "</body></html>"]
    mo.write_output(path, "\n".join(parts))


_MD_SPECIAL = str.maketrans({"\\": "\\\\", "|": "\\|", "`": "\\`", "*": "\\*",
                             "<": "&lt;", ">": "&gt;", "&": "&amp;", "\n": " ", "\r": " "})


# A "]" that would close a link's text: "[x](url)", "[x][ref]", "[x]: url" (a definition).
_MD_LINK_CLOSE = re.compile(r"\](?=[(\[:])")


def md_escape(text):
    """Text from the result files (experiment names, cell ids, notes) as literal Markdown: a `|`
    would split a table cell, `<b>` or `<script>` would be HTML to a Markdown renderer, `*` and a
    backtick emphasis and code (issue 33 defect 7; index.html escapes with html.escape), and a "]"
    before "(", "[" or ":" would make "[x](javascript:...)" a live link or "![](http://host/px)" a
    remote image (issue 43 item 8): it is escaped, which renders the same. Other square brackets
    stay: the speed-up column's "[lo–hi]" reads as text, and "[a]" alone is no link."""
    return _MD_LINK_CLOSE.sub(r"\\]", str(text).translate(_MD_SPECIAL))


def markdown_table(header, rows, text_columns=1):
    """A Markdown table; columns from `text_columns` on are right-aligned (numbers)."""
    lines = ["| " + " | ".join(md_escape(h) for h in header) + " |",
             "|" + "|".join(["---"] * text_columns + ["---:"] * (len(header) - text_columns)) + "|"]
    lines += ["| " + " | ".join(md_escape(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def write_markdown(rs, plots, notes, path):
    """report.md: the same content, images referenced by file name beside it."""
    lines = [f"# mpbench report: {md_escape(rs.experiment)}", "",
             f"{len(rs.cells)} cells on **{md_escape(rs.machine_label())}**.", ""]
    decision = decision_line(rs)
    lines += [f"**{md_escape(decision)}**", ""] if decision else []
    lines += ["## Machine and versions", ""]
    lines += [f"- **{md_escape(k)}**: {md_escape(v)}" for k, v in machine_rows(rs)]
    if notes:
        lines += ["", "## Notes", ""] + [f"- {md_escape(n)}" for n in notes]
    lines += ["", "## Noise", ""] + [f"- {md_escape(n)}" for n in noise_lines(rs)]
    lines += ["", "## Cells", "", markdown_table(summary_columns(rs), summary_rows(rs), text_columns=2), "",
              md_escape(summary_legend(rs)), ""]
    if has_estimates(rs):
        lines += ["## Estimated vs measured time", "",
                  markdown_table(ESTIMATE_COLUMNS, estimate_rows(rs), text_columns=2), "",
                  md_escape(estimate_legend(rs)), ""]
    for p in plots:
        if p.name == VERDICT_PLOT:           # the verdict table, above its figure and the loss curves
            status = verdict_status(rs)
            lines += [f"## {md_escape(VERDICT_TITLE)}", ""] + ([md_escape(status), ""] if status else [
                markdown_table(VERDICT_COLUMNS, verdict_rows(rs), text_columns=3), "",
                md_escape(verdict_legend(rs)), ""])
        if p.file:
            title = md_escape(p.title)
            lines += [f"## {title}", "", f"![{title}]({p.name})", "", md_escape(p.caption), ""]
            lines += [f"- {md_escape(n)}" for n in p.notes] + ([""] if p.notes else [])
    mo.write_output(path, "\n".join(lines))
