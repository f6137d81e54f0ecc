"""The design document in ``docs/`` holds what the code and the README cite.

Docstrings, comments and the README cite sections of the design document as
``design §N.M`` (also ``§N.M`` alone, and ranges such as ``§3.1-3.8``). Each cited
number must be a numbered heading of ``docs/design/*.rst``, in the chapter file of its
first number. They cite the house style as ``contributing §X.N`` (a letter and a number,
also ``§X.N`` alone and lists such as ``contributing §D.4, §D.7``); each must be a
heading of ``docs/contributing.rst``, and nothing may cite a style document that is not
in the repository. The overview's map must hold: "Where a change goes" names files that
exist, and "Rooms of the source tree" names every module of ``actors`` and ``protocol``
(and no file that does not exist). The README must link the document, and the
generated error table must list every error.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

import actors
import actors.errors
from actors.errors import ActorError

ROOT = Path(__file__).resolve().parents[1]
DESIGN = ROOT / "docs" / "design"
CONTRIBUTING = ROOT / "docs" / "contributing.rst"

#: The chapter file of each top-level section number.
CHAPTERS = {
    "1": "actors.rst",
    "2": "protocol.rst",
    "3": "helpers.rst",
    "4": "scheduler.rst",
    "5": "renderer.rst",
    "6": "eventlog.rst",
    "7": "servers.rst",
}
#: Where citations may be written.
CITING = ("actors", "protocol", "examples", "tests", "benchmarks")

_NUMBER = r"\d+(?:\.\d+)?"
_CITATION = re.compile(rf"§({_NUMBER})(?:\s*[-\u2013]\s*§?({_NUMBER}))?")  # - or en dash
_HEADING = re.compile(rf"({_NUMBER})\s+\S")
_UNDERLINE = re.compile(r"([=\-~^\"'*+#])\1*")
#: Right before a § that belongs to another document ("RFC 6455 §5.3").
_OTHER_DOCUMENT = re.compile(r"RFC \d+ $")
#: A section of the house style: "§D.7", or a whole part after its name, "contributing §D".
_STYLE_SECTION = r"[A-Z](?:\.\d+)?"
_STYLE_HEADING = re.compile(rf"({_STYLE_SECTION})\s+\S")
_STYLE_CITATION = re.compile(r"(?<![\w.])§([A-Z]\.\d+)\b|\bcontributing\s+§([A-Z])(?![\w.])")
#: A citation of the style guide that used to live outside the repository (split so
#: that this file does not match itself).
_OUTSIDE_STYLE = re.compile(r"\bSTY" r"LE\b")


def numbered_headings(text: str) -> list[str]:
    """The section numbers of an rst text's headings ("3.5 The cancel ladder" → "3.5")."""
    lines = text.splitlines()
    found = []
    for title, underline in itertools.pairwise(lines):
        title = title.strip()
        match = _HEADING.match(title)
        if match and _UNDERLINE.fullmatch(underline.strip()) and len(underline) >= len(title):
            found.append(match.group(1))
    return found


def design_sections() -> dict[str, str]:
    """Section number → the chapter file that holds it."""
    sections: dict[str, str] = {}
    for path in sorted(DESIGN.glob("*.rst")):
        for number in numbered_headings(path.read_text(encoding="utf-8")):
            assert number not in sections, f"§{number} is in {sections[number]} and {path.name}"
            sections[number] = path.name
    return sections


def citations(text: str) -> set[str]:
    """Every section number a text cites, range ends included (not an RFC's sections)."""
    found: set[str] = set()
    for match in _CITATION.finditer(text):
        if not _OTHER_DOCUMENT.search(text, max(0, match.start() - 16), match.start()):
            found.update(number for number in match.groups() if number)
    return found


def style_sections() -> set[str]:
    """The labels of ``docs/contributing.rst``'s headings ("F.3 Real subprocesses" → "F.3")."""
    lines = CONTRIBUTING.read_text(encoding="utf-8").splitlines()
    found = set()
    for title, underline in itertools.pairwise(lines):
        title = title.strip()
        match = _STYLE_HEADING.match(title)
        if match and _UNDERLINE.fullmatch(underline.strip()) and len(underline) >= len(title):
            found.add(match.group(1))
    return found


def style_citations(text: str) -> set[str]:
    """Every section of the house style a text cites ("contributing §D.4, §D.7")."""
    return {
        next(group for group in match.groups() if group) for match in _STYLE_CITATION.finditer(text)
    }


def citing_files() -> list[Path]:
    files = [ROOT / "README.md"]
    for folder in CITING:
        files.extend(sorted((ROOT / folder).rglob("*.py")))
        files.extend(sorted((ROOT / folder).rglob("*.html")))
    return [path for path in files if ".venv" not in path.parts]


def test_heading_parser_reads_numbered_headings_only():
    text = "3 Helpers\n=========\n\n3.5 The cancel ladder\n---------------------\n\n"
    text += "3.6 too short\n---\n\nPlain heading\n-------------\n\n4 not a heading\n\ntext\n"
    assert numbered_headings(text) == ["3", "3.5"]


def test_citation_parser_reads_ranges():
    text = "design §3.1-3.8 and (§6.2), §1.1-§1.3, §2.1\u2013§2.2, design §4, §N.M, RFC 6455 §5.3"
    assert citations(text) == {"3.1", "3.8", "6.2", "1.1", "1.3", "2.1", "2.2", "4"}


def test_every_section_is_in_its_chapter():
    sections = design_sections()
    misplaced = {
        number: chapter
        for number, chapter in sections.items()
        if CHAPTERS.get(number.split(".")[0]) != chapter
    }
    assert not misplaced, f"sections in the wrong chapter file: {misplaced}"
    for number in CHAPTERS:
        assert number in sections, f"chapter §{number} has no numbered heading"


def test_every_cited_section_exists():
    sections = design_sections()
    missing: dict[str, list[str]] = {}
    for path in citing_files():
        for number in citations(path.read_text(encoding="utf-8")):
            if number not in sections:
                missing.setdefault(f"§{number}", []).append(str(path.relative_to(ROOT)))
    assert not missing, f"cited but not in docs/design: {missing}"


def test_style_parsers_read_headings_and_citations():
    assert "F.3" in style_sections()
    assert "A" in style_sections()
    assert "3.5" not in style_sections()
    text = "contributing §D.4, §D.7; (§A.3) and contributing §F; §N.M, design §3.5, x§B.1"
    assert style_citations(text) == {"D.4", "D.7", "A.3", "F"}


def test_every_cited_style_section_exists():
    sections = style_sections()
    missing: dict[str, list[str]] = {}
    pages = sorted((ROOT / "docs").rglob("*.rst"))
    for path in [*citing_files(), *pages]:
        for label in style_citations(path.read_text(encoding="utf-8")):
            if label not in sections:
                missing.setdefault(f"§{label}", []).append(str(path.relative_to(ROOT)))
    assert not missing, f"cited but not in docs/contributing.rst: {missing}"


def test_nothing_cites_a_style_guide_outside_the_repository():
    assert _OUTSIDE_STYLE.search("see " + "STY" + "LE rule 21")
    pages = sorted((ROOT / "docs").rglob("*.rst"))
    citing = [
        str(path.relative_to(ROOT))
        for path in [*citing_files(), *pages]
        if _OUTSIDE_STYLE.search(path.read_text(encoding="utf-8"))
    ]
    assert not citing, f"cite the house style as 'contributing §X.N' instead: {citing}"


def test_index_includes_the_house_style():
    index = (ROOT / "docs" / "index.rst").read_text(encoding="utf-8")
    assert "\n   contributing\n" in index


def test_readme_links_the_design_document():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "](docs/index.rst)" in readme
    assert (ROOT / "docs" / "index.rst").is_file()


def test_where_a_change_goes_names_existing_files():
    overview = (DESIGN / "overview.rst").read_text(encoding="utf-8")
    section = overview.split("Where a change goes\n", 1)[1]
    paths = re.findall(r"``((?:actors|protocol|examples)/[\w/.]+)``", section)
    assert len(paths) >= 4
    absent = [path for path in paths if not (ROOT / path).exists()]
    assert not absent, f"named in 'Where a change goes' but not in the tree: {absent}"


def test_rooms_map_every_runtime_module():
    overview = (DESIGN / "overview.rst").read_text(encoding="utf-8")
    rooms = overview.split("Rooms of the source tree\n", 1)[1].split("Where a change goes\n")[0]
    named = set(re.findall(r"``(?:[\w/]*/)?(\w+\.(?:py|html))``", rooms))
    tree = [
        path
        for folder in ("actors", "protocol", "examples")
        for path in (ROOT / folder).rglob("*")
        if path.suffix in (".py", ".html")
    ]
    unknown = named - {path.name for path in tree}
    tree = [path for path in tree if path.name != "__init__.py"]
    assert not unknown, f"the rooms name files that do not exist: {sorted(unknown)}"
    unmapped = [
        str(path.relative_to(ROOT))
        for path in tree
        if path.parts[len(ROOT.parts)] in ("actors", "protocol") and path.name not in named
    ]
    assert not unmapped, f"modules missing from 'Rooms of the source tree': {unmapped}"


def _subclasses(cls: type[ActorError]) -> set[type[ActorError]]:
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= _subclasses(sub)
    return found


def test_error_table_lists_every_error_class():
    errors_page = (ROOT / "docs" / "errors.rst").read_text(encoding="utf-8")
    assert ".. error-table::" in errors_page  # generated from actors.errors.__all__
    exported = {getattr(actors.errors, name) for name in actors.errors.__all__}
    ours = {
        cls
        for cls in _subclasses(ActorError) | {ActorError}
        if cls.__module__.split(".")[0] in ("actors", "protocol")
    }
    assert ours - exported == set(), "error classes missing from actors.errors.__all__"
    codes = [cls.code for cls in ours]
    assert len(codes) == len(set(codes)), "two error classes share a code"
    # contributing §C.1: a class is named for its code, so a code in a log names its class.
    misnamed = {
        cls.__name__: cls.code
        for cls in ours
        if cls.__name__ != "".join(part.capitalize() for part in cls.code.split("_"))
    }
    assert misnamed == {}, "error classes not named for their codes"


def _declared_names() -> dict[str, tuple[str, ...]]:
    # The kinds are the embedder's declaration (design §4.11): the scheduler chapter names
    # the default tiers and kind, and the preview server's declaration as its example.
    from examples.preview.app.runtime_kinds import PREVIEW_KINDS

    return {
        "default tiers": tuple(actors.TIERS),
        "default kinds": tuple(kind.name for kind in actors.SchedulerConfig().kinds),
        "preview server's kinds": tuple(kind.name for kind in PREVIEW_KINDS),
    }


@pytest.mark.parametrize("what", ["default tiers", "default kinds", "preview server's kinds"])
def test_scheduler_chapter_names_the_declared_tiers_and_kinds(what):
    scheduler = (DESIGN / "scheduler.rst").read_text(encoding="utf-8")
    names = _declared_names()[what]
    assert names
    missing = [name for name in names if f"``{name}``" not in scheduler]
    assert not missing, f"the {what} are not named in scheduler.rst: {missing}"
