"""The docs hold together (CPU).

Every relative link in the README and under docs/ names a file that exists and, where it
names an anchor, a heading of that file (GitHub's anchors: the heading lowercased, every
character but letters, digits, spaces, hyphens and underscores dropped, spaces made
hyphens, a repeated anchor suffixed -1, -2, ...). Every results file under docs/bench is
cited by the README, a doc, a script or the package (the docs keep only what they cite),
and every results file cited as ``docs/bench/NAME`` exists.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
BENCH = DOCS / "bench"
PAGES = sorted([ROOT / "README.md", *DOCS.rglob("*.md")])

_FENCE = re.compile(r"^(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_CITED = re.compile(r"(?<![:\w/])docs/bench/([a-z0-9_.\-{},*]+)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text (before duplicate suffixes)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def _prose_lines(path: Path):
    """(line number, line) of a page's lines outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if _FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


@functools.lru_cache(maxsize=None)
def anchors(path: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    out = set()
    for _, line in _prose_lines(path):
        m = _HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return frozenset(out)


def links(path: Path):
    for number, line in _prose_lines(path):
        for target in _LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, mailto: ...
                continue
            yield number, target


def test_slugs_follow_github():
    assert slug("The combine's NaN/Inf test, and a re-tune (2026-12-04)") == (
        "the-combines-naninf-test-and-a-re-tune-2026-12-04")
    assert slug("The `auto` kernel at n <= 4096") == "the-auto-kernel-at-n--4096"
    assert slug("Stage 4-5: integers_and residues") == "stage-4-5-integers_and-residues"


def test_repeated_headings_take_suffixes(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# A\n## Open\n```\n## Open\n```\n### Open\n")
    assert anchors(page) == {"a", "open", "open-1"}


def test_pages_are_found():
    assert ROOT / "README.md" in PAGES and DOCS / "benchmarks.md" in PAGES


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_resolve(page):
    broken = []
    for number, target in links(page):
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        if not dest.exists():
            broken.append(f"line {number}: {target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"line {number}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def _citing_texts():
    for path in [*PAGES, *(ROOT / "scripts").iterdir(), *(ROOT / "ozaki_cutlass").rglob("*.py")]:
        if path.is_file() and path.suffix in (".md", ".py", ".sh"):
            yield path, path.read_text()


def expand(name: str) -> list[str]:
    """A cited name's brace alternatives: ``run-{1,2}.json`` is run-1.json and run-2.json."""
    m = re.search(r"\{([^{}]*)\}", name)
    if not m:
        return [name]
    return [x for alt in m.group(1).split(",") for x in expand(name[: m.start()] + alt + name[m.end() :])]


def cited_names(text: str) -> list[str]:
    """The results files a text cites: ``docs/bench/NAME`` (braces and globs allowed), a
    link into bench/, or a backquoted bare file name; ``COMMIT:docs/bench/NAME`` names a
    file of an older tree (``git show``), not one of this one."""
    names = [n for m in _CITED.findall(text) for n in expand(m.rstrip("."))]
    names += re.findall(r"\]\((?:\.\./)*bench/([^)#\s]+)\)", text)
    names += [n for n in re.findall(r"`([0-9]{4}-[0-9]{2}-[0-9]{2}-[a-z0-9_.\-]+)`", text) if (BENCH / n).exists()]
    return names


def test_brace_and_git_citations():
    assert cited_names("`docs/bench/x-{1,2}.json`, `git show 414c5f6:docs/bench/y.json`") == [
        "x-1.json", "x-2.json"]


def test_every_results_file_is_cited():
    cited = {n for _, text in _citing_texts() for n in cited_names(text)}
    files = sorted(p.name for p in BENCH.iterdir() if p.is_file())
    uncited = [name for name in files if not any(fnmatch.fnmatchcase(name, c) for c in cited)]
    assert not uncited, f"{len(uncited)} results files no text cites: {uncited}"


def test_every_cited_results_file_exists():
    missing = [f"{path.relative_to(ROOT)}: {name}" for path, text in _citing_texts()
               for name in sorted(set(cited_names(text))) if not any(BENCH.glob(name))]
    assert not missing, "\n".join(missing)
