"""Random programs through @gluon_cf.autograph (hypothesis): the rewrite of ifs, loops,
break, continue, early returns, appends and liveness must keep Python's meaning exactly.

hypothesis writes small functions of nested if/elif/else, for and while loops, break,
continue, return, conditional expressions, and/or/not, augmented assignments and list
appends, on Python ints. Each is written to a file (autograph reads source), converted, and
run against the unconverted function on random arguments. On Python values every converted
statement runs as Python, so the two must agree to the letter: this checks the rewriting
itself (flags and guards, code moved into branches, loop variables), which the tensor paths
share. ``test_autograph.py`` checks the tensor paths against plain Python on NDArrays.
"""
import importlib.util
import itertools

from hypothesis import HealthCheck, given, settings, strategies as st

import gluon_cf

_modules = itertools.count()


@st.composite
def blocks(draw, depth=0, loops=()):
    """Lines (indent, text) of a block of 1-3 statements; ``loops``: enclosing loops' names."""
    lines = []
    for _ in range(draw(st.integers(1, 3))):
        kinds = ["assign", "assign", "aug", "append", "ifexp"]
        if depth < 3:
            kinds += ["if", "if", "for", "while"]
        if loops:
            kinds += ["break", "continue", "use_loop"]
        kinds += ["return"]
        kind = draw(st.sampled_from(kinds))
        k = draw(st.integers(0, 9))
        if kind == "assign":
            lines.append((0, draw(st.sampled_from([
                f"x = (x * 3 + {k}) % 101", f"y = (y + x + {k}) % 97", "x, y = y, x",
                f"z = x - {k}", "x = z if z > 0 else x"]))))
        elif kind == "aug":
            lines.append((0, draw(st.sampled_from([f"x += {k}", f"y -= {k}", "acc += [x]"]))))
        elif kind == "append":
            lines.append((0, draw(st.sampled_from(["acc.append(x)", "acc.append(y - x)"]))))
        elif kind == "ifexp":
            lines.append((0, f"y = x if x > {k} else y + 1"))
        elif kind == "use_loop":
            lines.append((0, f"x = (x + {loops[-1]}) % 89"))
        elif kind in ("break", "continue"):
            lines.append((0, kind))
        elif kind == "return":
            lines.append((0, draw(st.sampled_from(["return x - y", "return acc", "return"]))))
        elif kind == "if":
            test = draw(st.sampled_from([f"x > {k * 10}", f"y % 2 == 0 and x < {k * 10}",
                                         f"not (x == {k})", f"x > y or y > {k * 10}"]))
            lines.append((0, f"if {test}:"))
            lines += [(d + 1, t) for d, t in draw(blocks(depth + 1, loops))]
            if draw(st.booleans()):
                lines.append((0, f"elif y > {k * 5}:"))
                lines += [(d + 1, t) for d, t in draw(blocks(depth + 1, loops))]
            if draw(st.booleans()):
                lines.append((0, "else:"))
                lines += [(d + 1, t) for d, t in draw(blocks(depth + 1, loops))]
        elif kind == "for":
            name = f"i{depth}"
            lines.append((0, f"for {name} in range({k % 5}):"))
            lines += [(d + 1, t) for d, t in draw(blocks(depth + 1, loops + (name,)))]
        elif kind == "while":
            name = f"w{depth}"
            lines.append((0, f"{name} = 0"))
            lines.append((0, f"while {name} < {k % 5}:"))
            lines.append((1, f"{name} += 1"))        # first: the loop ends, continue or not
            lines += [(d + 1, t) for d, t in draw(blocks(depth + 1, loops + (name,)))]
    return lines


def _load(source, tmp_path):
    path = tmp_path / f"program_{next(_modules)}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.f


def _outcome(fn, *args):
    try:
        return ("value", fn(*args))
    except Exception as err:                 # e.g. a variable read before any assignment
        return ("error", type(err).__name__)


def test_random_programs_keep_their_meaning(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("programs")

    @settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
    @given(blocks(), st.integers(-20, 120), st.integers(-20, 120))
    def check(lines, x, y):
        body = "\n".join("    " * (d + 1) + t for d, t in lines)
        source = f"def f(x, y):\n    acc = []\n    z = 0\n{body}\n    return x, y, acc\n"
        plain = _load(source, tmp_path)
        converted = gluon_cf.autograph(plain)
        want, got = _outcome(plain, x, y), _outcome(converted, x, y)
        if want[0] == "error":                   # Python's UnboundLocalError is ours too
            assert got[0] == "error", (source, want, got)
        else:
            assert got == want, (source, x, y, want, got)
    check()
