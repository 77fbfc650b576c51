"""A report document: blocks rendered to Markdown and to self-contained HTML, and JSON values.

Knows nothing of sweeps or statistics: :mod:`kvstats.report.render` fills a
:class:`Document` with the report's content.
"""

from __future__ import annotations

import base64
import html
import math
import os
import re
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

__all__ = ["Document", "md_table", "md_escape", "inline_html", "to_jsonable", "records"]

# What Markdown reads as markup in plain text: backslash, code, emphasis, links and images,
# HTML (a "<" only where it opens a tag: "r > 0", "α < 2" stay as written), table cells,
# strikethrough; an underscore only at a word's edge (snr_v stays as it is: GFM takes no
# emphasis inside a word); an ampersand only where it starts an entity
_MD_SPECIAL = re.compile(r"[\\`*|~]|<(?=[A-Za-z/!?])|(?<![^\W_])_|_(?![^\W_])|&(?=#?\w+;)")
# brackets: left as they are where they pair, unnested, and start no link or image ("5.46
# [5.39, 5.52]", a CI: harmless, and as every table showed it); else each escaped
_MD_BRACKETS_SAFE = re.compile(r"(?:[^][]*(?<!!)\[[^][]*\](?![(\[:]))*[^][]*")
# in paragraphs and list items, which carry the report's own `code` and **bold**: only an
# HTML tag's opening (a label "<script>"), which inline_html escapes in the HTML
_MD_TAG = re.compile(r"<(?=[A-Za-z/!?])")
# a line break inside a block would end it (a table row, a heading); the sweep's config
# refuses them in labels, and a Document of other text shows them as a space
_MD_BREAK = re.compile(r"[\r\n\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")


def md_escape(text: Any) -> str:
    """``text`` as Markdown shows it verbatim: its specials backslash-escaped, its line
    breaks as spaces (for table cells, headings, figure captions and alt text, which the
    HTML report shows as plain text too).

    Examples
    --------
    >>> print(md_escape("x]y *w* <b>|_a_ snr_v, r > 0, α < 2"))
    x\\]y \\*w\\* \\<b>\\|\\_a\\_ snr_v, r > 0, α < 2
    >>> print(md_escape("5.46 [5.39, 5.52]"))  # brackets that pair and link nothing: as they are
    5.46 [5.39, 5.52]
    """
    text = _MD_BREAK.sub(" ", str(text))
    brackets = _MD_BRACKETS_SAFE.fullmatch(text) is None
    text = _MD_SPECIAL.sub(lambda m: "\\" + m.group(0), text)
    return re.sub(r"[][]", r"\\\g<0>", text) if brackets else text


def _md_inline(text: str) -> str:
    """A paragraph's or list item's text with HTML tag openings escaped (its `code` and
    **bold** spans kept as markup) and line breaks as spaces."""
    return _MD_TAG.sub(r"\\<", _MD_BREAK.sub(" ", text))


def md_table(df: pd.DataFrame) -> str:
    """A pipe table of ``df`` (its cells as ``str``, :func:`md_escape`-d; the header's ``|``
    escaped), without the index.

    Examples
    --------
    >>> import pandas as pd
    >>> print(md_table(pd.DataFrame({"a": [1], "b": ["x|y"]})))
    | a | b |
    |---|---|
    | 1 | x\\|y |
    """
    # the header is kvstats' own words ("gap (dB) [95% CI]"): only what would break the row
    cols = [_MD_BREAK.sub(" ", str(c)).replace("|", "\\|") for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(md_escape(v) for v in row) + " |")
    return "\n".join(lines)


class Document:
    """Blocks (headings, paragraphs, lists, tables, figures) rendered to Markdown and HTML.

    Paragraphs and list items may hold Markdown's `code` and **bold** spans; HTML gets
    them as ``<code>``/``<strong>`` (:func:`inline_html`) and figures inlined as base64
    PNG, so the HTML file is self-contained.

    Examples
    --------
    >>> doc = Document()
    >>> doc.h(1, "Title"); doc.p("a `code` span")
    >>> print(doc.markdown("."))
    # Title
    <BLANKLINE>
    a `code` span
    <BLANKLINE>
    >>> "<p>a <code>code</code> span</p>" in doc.html("t")
    True
    """

    def __init__(self) -> None:
        self.blocks: list[tuple[str, Any]] = []

    def h(self, level: int, text: str) -> None:
        self.blocks.append((f"h{level}", text))

    def p(self, text: str) -> None:
        self.blocks.append(("p", text))

    def ul(self, items: Sequence[str]) -> None:
        self.blocks.append(("ul", list(items)))

    def table(self, df: pd.DataFrame) -> None:
        self.blocks.append(("table", df))

    def fig(self, path: Path, caption: str) -> None:
        self.blocks.append(("fig", (path, caption)))

    def markdown(self, root: Path) -> str:
        out = []
        for kind, value in self.blocks:
            if kind.startswith("h"):
                out.append("#" * int(kind[1]) + " " + md_escape(value))
            elif kind == "p":
                out.append(_md_inline(value))
            elif kind == "ul":
                out.append("\n".join(f"- {_md_inline(v)}" for v in value))
            elif kind == "table":
                out.append(md_table(value))
            else:
                path, caption = value
                caption = md_escape(caption)
                out.append(f"![{caption}]({os.path.relpath(path, root)})\n\n*{caption}*")
        return "\n\n".join(out) + "\n"

    def html(self, title: str) -> str:
        body = []
        for kind, value in self.blocks:
            if kind.startswith("h"):
                body.append(f"<{kind}>{html.escape(value)}</{kind}>")
            elif kind == "p":
                body.append(f"<p>{inline_html(value)}</p>")
            elif kind == "ul":
                body.append("<ul>" + "".join(f"<li>{inline_html(v)}</li>" for v in value) + "</ul>")
            elif kind == "table":
                body.append(value.to_html(index=False, escape=True, border=0, classes="t"))
            else:
                path, caption = value
                data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
                body.append(f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{data}">'
                            f"<figcaption>{html.escape(caption)}</figcaption></figure>")
        style = ("body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;"
                 "line-height:1.45}table.t{border-collapse:collapse;font-size:12px;margin:0.5em 0}"
                 "table.t td,table.t th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
                 "table.t th{background:#f2f2f2}img{max-width:100%}figcaption{font-style:italic;"
                 "font-size:13px}code{background:#f4f4f4;padding:0 3px}")
        return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                f"<title>{html.escape(title)}</title><style>{style}</style></head><body>\n"
                + "\n".join(body) + "\n</body></html>\n")


def inline_html(text: str) -> str:
    """Escape, then render Markdown's `code`, **bold** and *emphasis* spans.

    A lone asterisk (``tables/*.csv``) stays as it is, as in Markdown.

    Examples
    --------
    >>> inline_html("**p** < `a`")
    '<strong>p</strong> &lt; <code>a</code>'
    >>> inline_html("*limit*: see tables/*.csv")
    '<em>limit</em>: see tables/*.csv'
    """
    text = html.escape(text)
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
    text = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", text)
    # *word*: an asterisk after no word character, closed before one (the BOUND_NOTE's *limit*)
    return re.sub(r"(?<![\w*])\*(?=\S)([^*]+?)(?<=\S)\*(?![\w*])", r"<em>\1</em>", text)


def to_jsonable(obj: Any) -> Any:
    """``obj`` with numpy scalars and paths as Python values; non-finite floats become the
    strings "inf", "-inf", "nan" (strict JSON).

    Examples
    --------
    >>> import numpy as np
    >>> to_jsonable({"x": np.float64("inf"), 1: [np.int64(2), np.bool_(True)]})
    {'x': 'inf', '1': [2, True]}
    """
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, (np.floating, float)):
        x = float(obj)
        return x if math.isfinite(x) else ("inf" if x > 0 else "-inf" if x < 0 else "nan")
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    if isinstance(obj, Path):
        return str(obj)
    return obj


def records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """The rows of ``df`` as strict-JSON-ready dicts (:func:`to_jsonable`).

    Examples
    --------
    >>> import pandas as pd
    >>> records(pd.DataFrame({"p": [float("nan")]}))
    [{'p': 'nan'}]
    """
    return to_jsonable(df.to_dict(orient="records"))
