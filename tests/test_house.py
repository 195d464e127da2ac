"""The house rules that no other test sees: no source file of gluon_cf/ or export/ is over 700
lines, so that each module stays one room a reader can hold in mind (issue 27), and no line of
them is over 100 characters (STYLE.md's width, which reviews kept finding broken)."""
import pathlib

from conftest import REPO

MAX_LINES = 700
MAX_WIDTH = 100


def source_files(root):
    root = pathlib.Path(root)
    for folder in ("gluon_cf", "export"):
        for path in sorted((root / folder).rglob("*.py")):
            yield path.relative_to(root).as_posix(), path


def line_counts(root):
    for name, path in source_files(root):
        with open(path, encoding="utf-8") as f:
            yield name, sum(1 for _ in f)


def too_wide(root):
    """``file:line`` of every source line over :data:`MAX_WIDTH` characters."""
    wide = []
    for name, path in source_files(root):
        with open(path, encoding="utf-8") as f:
            wide += ["%s:%d" % (name, k) for k, line in enumerate(f, 1)
                     if len(line.rstrip("\n")) > MAX_WIDTH]
    return wide


def over_the_limit(root):
    return {path: n for path, n in line_counts(root) if n > MAX_LINES}


def test_no_source_file_is_over_700_lines():
    over = over_the_limit(REPO)
    assert not over, f"split these along their seams (at most {MAX_LINES} lines each): {over}"


def test_the_limit_can_fail(tmp_path):
    """A file of 701 lines anywhere, in either package, fails; 700 lines pass."""
    for folder in ("gluon_cf", "export"):
        (tmp_path / folder / "sub").mkdir(parents=True)
    (tmp_path / "gluon_cf" / "sub" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "export" / "ok.py").write_text("x = 1\n" * MAX_LINES)
    (tmp_path / "gluon_cf" / "recursion").mkdir()
    (tmp_path / "gluon_cf" / "recursion" / "schedule.py").write_text("x = 1\n" * (MAX_LINES + 1))
    assert over_the_limit(tmp_path) == {"gluon_cf/sub/long.py": MAX_LINES + 1,
                                        "gluon_cf/recursion/schedule.py": MAX_LINES + 1}


def test_no_source_line_is_over_100_characters():
    wide = too_wide(REPO)
    assert not wide, f"wrap these lines (at most {MAX_WIDTH} characters): {wide}"


def test_the_width_can_fail(tmp_path):
    """A line of 101 characters anywhere, in either package, is named; 100 pass."""
    for folder in ("gluon_cf", "export"):
        (tmp_path / folder).mkdir()
    (tmp_path / "gluon_cf" / "wide.py").write_text("x = 1\n" + "#" * (MAX_WIDTH + 1) + "\n")
    (tmp_path / "export" / "ok.py").write_text("#" * MAX_WIDTH + "\n")
    assert too_wide(tmp_path) == ["gluon_cf/wide.py:2"]


def test_every_package_is_installed():
    """setup.cfg lists packages one by one (export/ is installed as gluon_cf.export): a package
    missing there is missing from a wheel, though an editable install still finds it."""
    import configparser
    config = configparser.ConfigParser()
    config.read(pathlib.Path(REPO) / "setup.cfg")
    listed = set(config["options"]["packages"].split())
    found = set()
    for folder, name in (("gluon_cf", "gluon_cf"), ("export", "gluon_cf.export")):
        for init in (pathlib.Path(REPO) / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(pathlib.Path(REPO) / folder).parts
            found.add(".".join((name,) + parts))
    assert found - listed == set(), "add these to [options] packages in setup.cfg"
    assert listed - found == set(), "these packages listed in setup.cfg do not exist"
