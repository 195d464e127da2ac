"""Design notes: every ``NOTE [name]`` cited anywhere is defined exactly once (STYLE.md).

A definition is a line that starts (after an optional ``#``) with ``NOTE [name]`` and then ends,
or goes on after ``--`` or ``:``; any other ``NOTE [name]`` is a citation, also one wrapped over
lines or comments, or split between two string literals of a message.
"""
import collections
import pathlib
import re

from conftest import REPO

ROOT = pathlib.Path(REPO)
DEFINITION = re.compile(r"^\s*(?:#\s*)?NOTE:? \[([^\]]+)\](?:\s*$|\s+--|:\s)")
CITATION = re.compile(r"NOTE:?\s+\[([^\]]+)\]")
# A line break, with what continues a comment or a string literal on the next line.
CONTINUATION = re.compile(r"\s*\"?\s*\n\s*(?:#\s*)?\"?")


def defining_files():
    for folder in ("gluon_cf", "export", "tests"):
        yield from sorted((ROOT / folder).rglob("*.py"))


def citing_files():
    yield from (path for path in defining_files() if path.name != "test_notes.py")
    yield from [ROOT / "README.md", ROOT / "ARCHITECTURE.md"]
    yield from sorted((ROOT / "docs").rglob("*.rst"))


def definitions():
    found = collections.defaultdict(list)
    for path in defining_files():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            match = DEFINITION.match(line)
            if match:
                found[match.group(1)].append(f"{path.relative_to(ROOT)}:{number}")
    return found


def citations():
    found = collections.defaultdict(list)
    for path in citing_files():
        text = CONTINUATION.sub(" ", path.read_text())
        for match in CITATION.finditer(text):
            if len(match.group(1)) <= 80:   # longer: code that builds a message, not a note
                found[match.group(1)].append(str(path.relative_to(ROOT)))
    return found


def test_every_note_is_defined_once():
    repeated = {name: places for name, places in definitions().items() if len(places) > 1}
    assert not repeated, f"notes defined more than once: {repeated}"


def test_every_cited_note_is_defined():
    defined = definitions()
    missing = {name: sorted(set(places)) for name, places in citations().items()
               if name not in defined}
    assert not missing, f"notes cited but defined nowhere: {missing}"


def test_the_check_can_fail(tmp_path):
    """The patterns see definitions and citations as the source writes them."""
    assert DEFINITION.match("# NOTE [mx2onnx pitfalls] -- for whoever").group(1) == \
        "mx2onnx pitfalls"
    assert DEFINITION.match("    NOTE [balanced shards]: ties go").group(1) == "balanced shards"
    assert DEFINITION.match("    NOTE [slots] in ``tracing.py``)") is None
    wrapped = CONTINUATION.sub(" ", '"hangs (NOTE [user CustomOps at run "\n    "time]), so"')
    assert CITATION.search(wrapped).group(1) == "user CustomOps at run time"
    assert "recursion as ONNX loops" in definitions()
    assert "recursion as ONNX loops" in citations()
