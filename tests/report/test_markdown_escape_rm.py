"""report.md shows a label as given (referee RM, finding 2).

Only `|` was escaped: a label `x]y *w*` ended a figure's alt text at its `]` (no image
linked) and rendered `*w*` italic; `<script>` went into report.md verbatim; a newline split
a table row. Now table cells, headings, figure captions and alt text are backslash-escaped
(as the HTML report shows them as plain text), tags are escaped in paragraphs and list
items, and the sweep's config refuses control characters in labels."""

import re
from pathlib import Path

import pandas as pd
import pytest

from kvstats.report.document import Document, md_table
from kvstats.sweep import SweepConfig

LABEL = "x]y *w* <script>a|b</script> _e_ `c` \\ [l](u) ~s~"
# what Markdown reads in a text: a backslash escapes the next character (CommonMark, "Backslash
# escapes": any ASCII punctuation), so an unescaped special is one not preceded by an odd
# number of backslashes; a "<" is markup only where it opens a tag, a ">" never in a cell
UNESCAPED = re.compile(r"(?<!\\)(?:\\\\)*(?:[][*|`~]|<(?=[A-Za-z/!?]))")


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def test_a_table_cell_shows_the_label_verbatim_in_one_row():
    md = md_table(pd.DataFrame({"scheme": [LABEL, "KQV"], "n": [3, 3]}))
    rows = md.splitlines()
    assert len(rows) == 4
    cell = rows[2][2:-2].rsplit(" | ", 1)[0]
    assert not UNESCAPED.search(cell.replace("\\\\", "")), cell
    assert _unescape(cell) == LABEL
    # no emphasis inside a word (GFM): a metric's name as it was
    assert md_table(pd.DataFrame({"m": ["snr_v"]})).splitlines()[2] == "| snr_v |"


def test_headings_and_figure_captions_are_escaped_and_the_image_is_linked(tmp_path):
    fig = tmp_path / "figures" / "crossover_x.png"
    fig.parent.mkdir()
    fig.write_bytes(b"\x89PNG")
    doc = Document()
    doc.h(2, f"gaussian, {LABEL}")
    doc.fig(fig, f"Paired dominance ({LABEL} vs KQV)")
    doc.ul([f"pair {LABEL}: `code` and **bold** kept"])
    md = doc.markdown(tmp_path)
    heading = md.splitlines()[0]
    assert _unescape(heading) == f"## gaussian, {LABEL}"
    # the image: alt text up to the first unescaped ']', then the link
    link = re.search(r"!\[((?:\\.|[^\]\\])*)\]\(([^)]*)\)", md)
    assert link is not None and link.group(2) == "figures/crossover_x.png"
    assert _unescape(link.group(1)) == f"Paired dominance ({LABEL} vs KQV)"
    item = next(line for line in md.splitlines() if line.startswith("- "))
    assert re.search(r"(?<!\\)<", item) is None and "\\<script>" in item
    assert "`code` and **bold** kept" in item


@pytest.mark.parametrize("label", ["x]y\nz", "a\tb", "a\rb", "a\u2028b"])
def test_the_config_refuses_control_characters_in_a_label(label):
    with pytest.raises(ValueError, match=r"\[\[schemes\]\] label .* must hold no control character"):
        SweepConfig.from_dict({"schemes": [{"name": "KV", "label": label}, "KQV"],
                               "distributions": ["gaussian"], "comparisons": []})


def test_the_config_refuses_the_winners_separator_in_a_scheme_label():
    """crossovers.csv's winners split at '; ' (docs/usage.md): a label 'KV; n = 9: fp16'
    gave a budget n = 9 that does not exist (referee RM, finding 4)."""
    with pytest.raises(ValueError, match=r"label 'KV; n = 9: fp16' must not hold '; '"):
        SweepConfig.from_dict({"schemes": [{"name": "KV", "label": "KV; n = 9: fp16"}, "KQV"],
                               "distributions": ["gaussian"], "comparisons": []})
    # a ':' and a ';' without the space stay allowed (--comparison resolves A:B by the labels)
    SweepConfig.from_dict({"schemes": [{"name": "KV", "label": "KV:fp16;x"}, "KQV"],
                           "distributions": ["gaussian"], "comparisons": []})


def test_no_built_in_schemes_default_label_is_refused():
    """The rule refuses no label a config gets without a 'label': every built-in's name and
    its display with its defaults as params."""
    from kvstats.quant.registry import BUILTIN, scheme_def
    from kvstats.sweep import SchemeSpec
    from kvstats.sweep.config import _CONTROL, _WINNERS_SEP

    for name in BUILTIN:
        sdef = scheme_def(name)
        for spec in (SchemeSpec(name), SchemeSpec(name, dict(sdef.defaults))):
            label = spec.display()
            assert not _CONTROL.search(label) and _WINNERS_SEP not in label, label
