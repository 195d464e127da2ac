"""Conversion oracle: autograph's output on a large corpus of functions, compared between two
copies of the package (say main's and a branch's), and the time each conversion takes.

    python tests/tools/conversion_oracle.py BASE_ROOT NEW_ROOT [--seeds N]

Each root is a folder holding a ``gluon_cf`` package; each is imported in its own
subprocess. The corpus: every function and method (at any depth) of tests/*.py, the
notebooks' code cells and gluon_cf's examples, plus the modules the hypothesis strategies of
tests/test_autograph_programs.py write, drawn with many seeds. Each function is converted as
``convert_function`` does (its source dedented, parsed, rewritten, placed in the factory
module and located): the output compared is the converted source, a digest of the located
module (``ast.dump`` with line and column numbers), or the refusal's type and message.
Not part of the test suite (it takes minutes).
"""
import ast
import hashlib
import json
import os
import pickle
import statistics
import subprocess
import sys
import textwrap
import time

HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _functions(text, filename):
    """(key, filename, first line, lines, owner) of every def in ``text``."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    lines = text.splitlines(keepends=True)
    found = []
    stack = [(tree, None)]
    while stack:
        node, owner = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([child.lineno] + [d.lineno for d in child.decorator_list])
                found.append((f"{filename}:{first}:{child.name}", filename, first,
                              lines[first - 1:child.end_lineno], owner))
            stack.append((child, child.name if isinstance(child, ast.ClassDef) else None))
    return found


def _program_modules(seeds):
    """Module texts the random-program strategies write."""
    sys.path.insert(0, os.path.join(HERE, "tests"))
    import test_autograph_programs as tap
    from hypothesis import HealthCheck, given, seed, settings
    texts = []

    def body(lines, indent):
        return "\n".join(indent + "    " * d + t for d, t in lines)

    makers = [
        (tap.blocks(), lambda lines: (
            f"def f(x, y):\n    acc = []\n    z = 0\n{tap.CLOSURES}{body(lines, '    ')}\n"
            f"    return x, y, acc, peek(), shift()\n")),
        (tap.tensor_blocks(), lambda lines: (
            "import mxnet as mx, gluon_cf\n"
            "class Net(mx.gluon.HybridBlock):\n"
            "    @gluon_cf.autograph(max_iterations=8)\n"
            "    def hybrid_forward(self, F, x, y, seq):\n"
            "        acc = []\n        z = x\n"
            f"{body(lines, '        ')}\n        return x + y\n")),
        (tap.closure_programs(), lambda lines: tap.CLOSURE_MODULE.format(
            body=body(lines, "        "))),
        (tap.library_programs(), lambda lines: tap.LIBRARY_MODULE.format(
            body=body(lines, "        "))),
    ]
    for strategy, make in makers:
        for s in range(seeds):
            @seed(s)
            @settings(max_examples=25, deadline=None, database=None,
                      suppress_health_check=list(HealthCheck))
            @given(strategy)
            def draw(lines):
                texts.append(make(lines))
            draw()
    return texts


def corpus(seeds):
    items = []
    folders = [os.path.join(HERE, "tests"), os.path.join(HERE, "gluon_cf", "examples")]
    for folder in folders:
        if not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path) as f:
                    items += _functions(f.read(), path)
    nb_dir = os.path.join(HERE, "notebooks")
    for name in sorted(os.listdir(nb_dir)):
        if name.endswith(".ipynb"):
            with open(os.path.join(nb_dir, name)) as f:
                cells = json.load(f)["cells"]
            for i, cell in enumerate(cells):
                if cell["cell_type"] == "code":
                    src = "".join(cell["source"])
                    src = "\n".join(line for line in src.splitlines()
                                    if not line.lstrip().startswith(("%", "!")))
                    items += _functions(src + "\n", f"{name}#cell{i}")
    for i, text in enumerate(_program_modules(seeds)):
        items += _functions(text, f"<program {i}>")
    return items


def run_worker(root, corpus_file, out_file):
    sys.path.insert(0, root)
    import gluon_cf
    assert os.path.dirname(os.path.dirname(os.path.abspath(gluon_cf.__file__))) == \
        os.path.abspath(root), gluon_cf.__file__
    from gluon_cf.autograph.impl import conversion
    with open(corpus_file, "rb") as f:
        items = pickle.load(f)
    results, times = {}, []
    for key, filename, first, lines, owner in items:
        start = time.process_time()
        try:
            func = ast.parse(textwrap.dedent("".join(lines))).body[0]
            func.decorator_list = []
            conversion._Rewriter(filename, first - 1, lines, owner, 8).convert(func)
            factory = ast.FunctionDef(
                name="__ag_factory", args=ast.arguments(
                    posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[],
                    kwarg=None, defaults=[]),
                body=[func], decorator_list=[], returns=None)
            module = ast.Module(body=[factory], type_ignores=[])
            # (as convert_function locates it, with the functions it calls for that)
            getattr(conversion, "fix_missing_locations", ast.fix_missing_locations)(module)
            getattr(conversion, "increment_lineno", ast.increment_lineno)(module, first - 1)
            text = conversion.unparse(func)
            out = ("ok", text, hashlib.sha1(ast.dump(
                module, include_attributes=True).encode()).hexdigest())
        except Exception as err:             # a refusal (or a crash): compared as well
            out = ("error", type(err).__name__, str(err))
        times.append(time.process_time() - start)
        results[key] = out
    with open(out_file, "wb") as f:
        pickle.dump((results, times), f)


def main():
    if sys.argv[1] == "--worker":
        run_worker(*sys.argv[2:5])
        return
    base, new = sys.argv[1], sys.argv[2]
    seeds = int(sys.argv[sys.argv.index("--seeds") + 1]) if "--seeds" in sys.argv else 40
    items = corpus(seeds)
    if "--every" in sys.argv:          # a sample, for quick checks
        items = items[::int(sys.argv[sys.argv.index("--every") + 1])]
    keys = [i[0] for i in items]
    assert len(set(keys)) == len(keys), "duplicate keys"
    tmp = f"/tmp/conversion_oracle_{os.getpid()}"
    with open(tmp + ".corpus", "wb") as f:
        pickle.dump(items, f)
    outs = {}
    for label, root in (("base", base), ("new", new)):
        subprocess.run([sys.executable, __file__, "--worker", root, tmp + ".corpus",
                        tmp + "." + label], check=True)
        with open(tmp + "." + label, "rb") as f:
            outs[label] = pickle.load(f)
    (rb, tb), (rn, tn) = outs["base"], outs["new"]
    diffs = [k for k in keys if rb[k] != rn[k]]
    refused = sum(1 for k in keys if rb[k][0] == "error")
    print(f"functions compared: {len(keys)} ({refused} refused), differences: {len(diffs)}")
    print(f"median per conversion: base {statistics.median(tb) * 1e3:.2f} ms, "
          f"new {statistics.median(tn) * 1e3:.2f} ms; total base {sum(tb):.1f} s, "
          f"new {sum(tn):.1f} s")
    programs = [i for i, k in enumerate(keys) if k.startswith("<program")]
    print(f"random programs ({len(programs)}): total base {sum(tb[i] for i in programs):.1f} s, "
          f"new {sum(tn[i] for i in programs):.1f} s")
    for k in diffs[:10]:
        print("DIFF", k, "\n  base:", str(rb[k])[:600], "\n  new: ", str(rn[k])[:600])
    sys.exit(1 if diffs else 0)


if __name__ == "__main__":
    main()
