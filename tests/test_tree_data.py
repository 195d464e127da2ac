"""Tests for gluon_cf.data.trees: s-expression I/O, array encoding, forests, synthetic treebanks.

Encodings and labels are checked against small recursive oracles written here independently.
"""
import io
import math

import numpy as np
import pytest

from gluon_cf.data import (
    SHAPES, EncodedTree, Tree, TreeFormatError, batchify_forest, binary_label, build_vocab,
    encode_tree, parse_tree, read_trees, synthetic_treebank, write_trees,
)
from gluon_cf.data.trees import INTENSIFIERS, LEXICON, NEGATORS

SST_LINE = "(3 (2 It) (4 (2 's) (3 good)))"


@pytest.fixture(scope="module")
def vocab():
    return build_vocab(synthetic_treebank(300, seed=1))


# --- oracles ---------------------------------------------------------------------------------

def oracle_postorder(tree):
    """[(node, [child indices])] in post-order, by plain recursion (small trees only)."""
    out = []

    def visit(node):
        kids = [visit(c) for c in node.children]
        out.append((node, kids))
        return len(out) - 1

    visit(tree)
    return out


def oracle_height(tree):
    return 0 if not tree.children else 1 + max(oracle_height(c) for c in tree.children)


def oracle_score(tree):
    """The hidden rule exactly as documented in synthetic_treebank."""
    if tree.word is not None:
        return LEXICON.get(tree.word, 0)
    left, right = tree.children
    if left.word in NEGATORS:
        return -oracle_score(right)
    if left.word in INTENSIFIERS:
        return 2 * oracle_score(right)
    return oracle_score(left) + oracle_score(right)


def oracle_label(score):
    return 0 if score <= -3 else 1 if score <= -1 else 2 if score == 0 else 3 if score <= 2 else 4


def left_branching_text(n):
    """A (2n-1)-node left-branching tree over w0..w{n-1}, depth n-1."""
    return "(1 " * (n - 1) + "(2 w0)" + "".join(f" (2 w{i}))" for i in range(1, n))


# --- reading and writing ---------------------------------------------------------------------

def test_parse_sst_example():
    tree = parse_tree(SST_LINE)
    assert tree.label == 3 and tree.word is None and len(tree.children) == 2
    assert tree.children[0].label == 2 and tree.children[0].word == "It"
    assert tree.leaves() == ["It", "'s", "good"]
    assert len(tree) == 5 and tree.depth() == 2
    assert tree.to_sexpr() == SST_LINE
    assert repr(tree) == f"Tree({SST_LINE!r})"


@pytest.mark.parametrize("text", [
    SST_LINE,
    r"(1 (2 -LRB-) (1 (2 1\/2) (0 (2 does) (1 n't))) (2 -RRB-))",
    r"(2 (2 back\slash) (2 ``quoted''))",
    "(2 (2 1990) (2 (2 a) (2 b) (2 c) (2 d)))",  # numeric word, n-ary node
    "(-1 x)",
])
def test_round_trip_canonical(text):
    tree = parse_tree(text)
    assert tree.to_sexpr() == text
    assert parse_tree(tree.to_sexpr()) == tree


def test_noncanonical_whitespace_normalizes():
    tree = parse_tree("  (3(2 It)\t(4 (2 's)(3   good) ) )\n")
    assert tree.to_sexpr() == SST_LINE


@pytest.mark.parametrize("text, message", [
    ("(3 (2 It) (4 (2 's) (3 good))", "<input>:1:30: expected ')' but found end of line "
                                      "(the '(' at 1:1 is not closed)"),
    ("", "<input>:1:1: expected '(' but found end of line"),
    ("good", "<input>:1:1: expected '(' to start a tree but found 'good'"),
    ("(3 (2 It) ( good))", "<input>:1:13: non-integer label 'good'"),
    ("(3 (2 It) ())", "<input>:1:12: missing label: expected an integer label after '(' "
                      "but found ')'"),
    ("(3 (x It))", "<input>:1:5: non-integer label 'x'"),
    ("(3.5 It)", "<input>:1:2: non-integer label '3.5'"),
    ("(3 (2 It) (4))", "<input>:1:13: empty node: expected a word or a child tree after label 4 "
                       "but found ')'"),
    ("(3 (2 It 's))", "<input>:1:10: leaf with two words: expected ')' after 'It' but found "
                      "''s'"),
    ("(3 (2 It) (2 x)) (2 y)", "<input>:1:18: trailing garbage after the tree: found '('"),
    ("(3 (2 It)))", "<input>:1:11: trailing garbage after the tree: found ')'"),
    ("(3 (2 It) 's)", "<input>:1:11: expected '(' or ')' but found the word ''s': a node holds "
                      "either one word or child trees"),
    ("(3 It (2 's))", "<input>:1:7: expected ')' after the word 'It' but found '(': a node holds "
                      "either one word or child trees"),
    ("(3", "<input>:1:3: empty node: expected a word or a child tree but found end of line"),
    ("(", "<input>:1:2: missing label: expected an integer label but found end of line"),
])
def test_error_messages(text, message):
    with pytest.raises(TreeFormatError) as info:
        parse_tree(text)
    assert str(info.value) == message
    assert isinstance(info.value, ValueError)


def test_error_location_uses_line_and_filename():
    with pytest.raises(TreeFormatError) as info:
        parse_tree("(3 (2 a) (2 b)", line=12, filename="trees.txt")
    err = info.value
    assert str(err) == ("trees.txt:12:15: expected ')' but found end of line "
                        "(the '(' at 12:1 is not closed)")
    assert (err.filename, err.line, err.column) == ("trees.txt", 12, 15)


def test_read_trees_reports_file_line_column(tmp_path):
    path = tmp_path / "trees.txt"
    path.write_text(SST_LINE + "\n\n   \n(2 (2 a) (2 b c))\n")
    with pytest.raises(TreeFormatError) as info:
        read_trees(path)
    assert str(info.value) == (f"{path}:4:15: leaf with two words: expected ')' after 'b' "
                               "but found 'c'")
    with pytest.raises(TreeFormatError, match=r"^<input>:4:15: "):
        read_trees(path.read_text().splitlines())


def test_read_trees_rejects_text_for_path():
    with pytest.raises(ValueError, match=r"read_trees: got tree text where a path was expected"):
        read_trees(SST_LINE)


def test_write_read_round_trip(tmp_path):
    trees = synthetic_treebank(200, seed=3) + [parse_tree("(2 (2 a) (2 b) (2 c))")]
    path = tmp_path / "synthetic.txt"
    write_trees(trees, path)
    lines = path.read_text().splitlines()
    assert lines[0] == trees[0].to_sexpr() and len(lines) == len(trees)
    assert read_trees(path) == trees
    assert read_trees(str(path)) == trees
    with open(path) as f:
        assert read_trees(f) == trees
    buffer = io.StringIO()
    write_trees(trees, buffer)
    assert read_trees(io.StringIO("\n" + buffer.getvalue())) == trees


# --- deep and adversarial input --------------------------------------------------------------

def test_100k_unclosed_parens_raise_cleanly():
    text = "(1 " * 100_000
    with pytest.raises(TreeFormatError) as info:
        parse_tree(text)
    assert str(info.value) == (f"<input>:1:{len(text) + 1}: empty node: expected a word or a "
                               "child tree but found end of line")
    with pytest.raises(TreeFormatError, match=r"^<input>:1:301: tree nested deeper than "
                                              r"max_depth=100$"):
        parse_tree(text, max_depth=100)


def test_100k_deep_tree_works_in_every_method(vocab):
    n = 100_000
    text = left_branching_text(n)
    tree = parse_tree(text)
    assert tree.depth() == n - 1 and len(tree) == 2 * n - 1
    assert tree.leaves() == [f"w{i}" for i in range(n)]
    assert tree.to_sexpr() == text
    assert tree == parse_tree(text) and tree != parse_tree(text.replace("w7)", "w8)"))
    assert tree.binarize() == tree
    enc = encode_tree(tree, vocab)
    assert enc.num_nodes == 2 * n - 1 and len(enc.levels()) == n
    # A 100k-deep unary chain collapses to one leaf that keeps the top label.
    chain = parse_tree("(4 " * n + "(0 x)" + ")" * n)
    assert chain.depth() == n and chain.binarize() == Tree(4, "x")


def test_linear_5000_node_tree_encodes(vocab):
    tree = synthetic_treebank(1, "linear", seed=0, length=2501)[0]
    enc = encode_tree(tree, vocab)
    assert enc.num_nodes == 5001 and enc.root == 5000
    # Post-order of (((w0 w1) w2) ...): w0, w1, node 2, w2, node 4, ...; node 2k joins 2k-2, 2k-1.
    internal = np.arange(2, 5001, 2)
    np.testing.assert_array_equal(enc.left[internal], internal - 2)
    np.testing.assert_array_equal(enc.right[internal], internal - 1)
    leaves = np.r_[0, np.arange(1, 5001, 2)]
    assert (enc.left[leaves] == -1).all() and (enc.right[leaves] == -1).all()
    np.testing.assert_array_equal(enc.heights()[internal], internal // 2)
    levels = enc.levels()
    assert len(levels) == 2501
    np.testing.assert_array_equal(levels[0], leaves)
    assert all(level.tolist() == [2 * h] for h, level in enumerate(levels) if h)


# --- Tree methods ----------------------------------------------------------------------------

def test_tree_constructor_validates():
    with pytest.raises(ValueError, match=r"^Tree: a node needs either a word \(leaf\) or "
                                         r"children \(internal node\), not both or neither; "
                                         r"got word='a' and 1 children$"):
        Tree(2, "a", [Tree(2, "b")])
    with pytest.raises(ValueError, match=r"got word=None and 0 children"):
        Tree(2)
    with pytest.raises(TypeError, match=r"^Tree: label must be an int, got '2'$"):
        Tree("2", "a")
    with pytest.raises(ValueError, match=r"^Tree: a word must be a non-empty str"):
        Tree(2, "two words")


def test_binarize_right_factors_and_collapses_unary():
    tree = parse_tree("(4 (1 a) (2 b) (3 (0 (2 c))) (2 d))")
    expected = "(4 (1 a) (4 (2 b) (4 (3 c) (2 d))))"
    assert tree.binarize().to_sexpr() == expected
    assert tree.to_sexpr() == "(4 (1 a) (2 b) (3 (0 (2 c))) (2 d))"  # unchanged
    assert parse_tree("(3 (1 (2 a) (2 b)))").binarize().to_sexpr() == "(3 (2 a) (2 b))"


def test_binarize_preserves_leaves_and_gives_binary_trees():
    rng = np.random.default_rng(0)
    for _ in range(50):  # random n-ary trees with unary nodes
        n = int(rng.integers(1, 12))
        nodes = [Tree(int(rng.integers(5)), f"w{i}") for i in range(n)]
        while len(nodes) > 1 or rng.random() < 0.3:
            i = int(rng.integers(len(nodes)))
            k = int(rng.integers(1, min(4, len(nodes) - i) + 1))
            nodes[i:i + k] = [Tree(int(rng.integers(5)), children=nodes[i:i + k])]
        tree = nodes[0]
        binary = tree.binarize()
        assert binary.leaves() == tree.leaves() and binary.label == tree.label
        assert all(len(node.children) in (0, 2) for node in binary.postorder())


# --- encoding --------------------------------------------------------------------------------

def test_encode_small_tree_exactly(vocab):
    enc = encode_tree(parse_tree("(3 (2 It) (4 (2 's) (3 good)))"), vocab)
    pad, unk = vocab[vocab.padding_token], vocab[vocab.unknown_token]
    assert isinstance(enc, EncodedTree)
    assert enc.tokens.tolist() == [unk, vocab["'s"], vocab["good"], pad, pad]
    assert enc.left.tolist() == [-1, -1, -1, 1, 0] and enc.right.tolist() == [-1, -1, -1, 2, 3]
    assert enc.labels.tolist() == [2, 2, 3, 4, 3]
    assert enc.child_ptr.tolist() == [0, 0, 0, 0, 2, 4]
    assert enc.child_idx.tolist() == [1, 2, 0, 3]
    assert enc.root == 4 and enc.num_nodes == 5
    assert [level.tolist() for level in enc.levels()] == [[0, 1, 2], [3], [4]]
    assert all(a.dtype == np.int32 for a in (enc.tokens, enc.left, enc.right, enc.labels,
                                             enc.child_ptr, enc.child_idx))


@pytest.mark.parametrize("shape", ["balanced", "sst", "linear"])
def test_encoding_matches_recursive_oracle(shape, vocab):
    trees = synthetic_treebank(40, shape, seed=5) + [
        parse_tree("(1 (2 a) (3 (2 b) (2 c)) (2 d))").binarize()]
    for tree in trees:
        enc = encode_tree(tree, vocab)
        nodes = oracle_postorder(tree)
        n = len(nodes)
        assert enc.num_nodes == n and enc.root == n - 1
        for i, (node, kids) in enumerate(nodes):
            want = vocab[node.word] if node.word else vocab[vocab.padding_token]
            assert enc.tokens[i] == want and enc.labels[i] == node.label
            got = enc.child_idx[enc.child_ptr[i]:enc.child_ptr[i + 1]].tolist()
            assert got == kids and all(k < i for k in kids)  # children before parents
            assert (enc.left[i], enc.right[i]) == ((kids[0], kids[1]) if kids else (-1, -1))
        heights = [oracle_height(node) for node, _ in nodes]
        for h, level in enumerate(enc.levels()):
            assert level.tolist() == [i for i in range(n) if heights[i] == h]


def test_encode_nary(vocab):
    tree = parse_tree("(1 (2 a) (3 (2 b)) (2 c))")
    with pytest.raises(ValueError, match=r"^encode_tree: node 2 \(post-order index\) has 1 "
                                         r"children, but binary=True needs 0 or 2: "
                                         r"\(3 \(2 b\)\)\. Call tree\.binarize\(\) first"):
        encode_tree(tree, vocab)
    enc = encode_tree(tree, vocab, binary=False)
    assert enc.child_ptr.tolist() == [0, 0, 0, 1, 1, 4]
    assert enc.child_idx.tolist() == [1, 0, 2, 3]
    assert enc.left.tolist() == [-1, -1, 1, -1, 0] and enc.right.tolist() == [-1, -1, 1, -1, 3]
    assert encode_tree(tree.binarize(), vocab).num_nodes == 5


def test_build_vocab():
    trees = [parse_tree("(2 (2 a) (2 (2 a) (2 b)))")]
    vocab = build_vocab(trees)
    assert vocab.padding_token == "<pad>" and vocab["a"] != vocab["b"]
    assert vocab["zzz"] == vocab[vocab.unknown_token]
    assert "b" not in build_vocab(trees, min_freq=2).token_to_idx
    vocab.padding_token = None
    with pytest.raises(ValueError, match=r"^encode_tree: vocab has no padding_token"):
        encode_tree(trees[0], vocab)


# --- forests ---------------------------------------------------------------------------------

def test_forest_offsets_levels_and_round_trip(vocab):
    trees = synthetic_treebank(30, seed=8) + [parse_tree("(3 good)")]
    encoded = [encode_tree(t, vocab) for t in trees]
    forest = batchify_forest(encoded)
    sizes = [e.num_nodes for e in encoded]
    assert forest.num_trees == 31 and forest.num_nodes == sum(sizes)
    assert forest.offsets.tolist() == np.cumsum([0] + sizes).tolist()
    assert forest.roots.tolist() == (np.cumsum(sizes) - 1).tolist()
    assert forest.root_labels.tolist() == [t.label for t in trees]
    assert len(forest.child_idx) == forest.num_nodes - forest.num_trees == forest.child_ptr[-1]
    for b, e in enumerate(encoded):
        lo, hi = forest.offsets[b], forest.offsets[b + 1]
        for name in ("left", "right"):
            part = getattr(forest, name)[lo:hi]
            np.testing.assert_array_equal(part, np.where(getattr(e, name) >= 0,
                                                         getattr(e, name) + lo, -1))
        kids = forest.child_idx[forest.child_ptr[lo]:forest.child_ptr[hi]]
        assert ((kids >= lo) & (kids < hi)).all()
    heights = np.concatenate([e.heights() for e in encoded])
    for h, level in enumerate(forest.levels()):
        np.testing.assert_array_equal(level, np.flatnonzero(heights == h))
    for original, back in zip(encoded, forest.split()):
        for name in ("tokens", "left", "right", "labels", "child_ptr", "child_idx"):
            np.testing.assert_array_equal(getattr(original, name), getattr(back, name))
            assert getattr(back, name).dtype == np.int32
        assert back.root == original.root
    with pytest.raises(ValueError, match=r"^batchify_forest: got no trees"):
        batchify_forest([])


# --- synthetic treebanks ---------------------------------------------------------------------

def test_synthetic_statistics():
    trees = synthetic_treebank(2000, seed=0)
    lengths = np.array([len(t.leaves()) for t in trees])
    assert 15 <= lengths.mean() <= 23 and lengths.max() <= 55 and lengths.min() == 1
    assert all(len(t.children) in (0, 2) for tree in trees for t in tree.postorder())
    counts = np.bincount([t.label for t in trees], minlength=5)
    assert (counts > 0.1 * len(trees)).all(), counts  # every root class is common


@pytest.mark.parametrize("shape", SHAPES)
def test_shapes_have_expected_depth(shape):
    trees = synthetic_treebank(300, shape, seed=2)
    for tree in trees:
        n = len(tree.leaves())
        if shape == "linear":
            assert tree.depth() == n - 1
            assert all(node.children[1].word is not None for node in tree.postorder()
                       if node.children)
        elif shape == "balanced":
            assert tree.depth() == math.ceil(math.log2(n))
        else:
            assert math.ceil(math.log2(n)) <= tree.depth() <= n - 1
    if shape in ("sst", "moderate"):  # strictly between the extremes on average
        depths = np.mean([t.depth() for t in trees])
        lengths = np.mean([len(t.leaves()) for t in trees])
        assert np.mean([math.ceil(math.log2(len(t.leaves()))) for t in trees]) + 2 < depths
        assert depths < lengths - 3


def test_synthetic_deterministic_and_shape_independent_words():
    a = synthetic_treebank(50, seed=4)
    assert a == synthetic_treebank(50, seed=4)
    assert a != synthetic_treebank(50, seed=5)
    assert synthetic_treebank(50, "moderate", seed=4) == a  # alias
    for shape in ("balanced", "linear"):
        other = synthetic_treebank(50, shape, seed=4)
        assert [t.leaves() for t in other] == [t.leaves() for t in a]


def test_synthetic_labels_follow_documented_rule():
    for shape in ("balanced", "sst", "linear"):
        for tree in synthetic_treebank(100, shape, seed=6):
            for node in tree.postorder():
                assert node.label == oracle_label(oracle_score(node))


def test_labels_depend_on_structure():
    """Same words, different bracketing: root labels differ exactly where a negator or
    intensifier is present, never for plain sums (which are order-free)."""
    balanced = synthetic_treebank(500, "balanced", seed=7)
    parse_like = synthetic_treebank(500, "sst", seed=7)
    differ = 0
    for b, l in zip(balanced, parse_like):
        modifiers = set(b.leaves()) & set(NEGATORS + INTENSIFIERS)
        if not modifiers:
            assert b.label == l.label
        differ += b.label != l.label
    assert differ > 50
    # A concrete case: the negator scopes over its right sibling only.
    assert oracle_label(oracle_score(parse_tree("(0 (0 not) (0 (0 good) (0 bad)))"))) == 2
    assert oracle_label(oracle_score(parse_tree("(0 (0 (0 not) (0 good)) (0 bad))"))) == 1


def test_synthetic_validation():
    with pytest.raises(ValueError, match=r"^synthetic_treebank: unknown shape 'deep'; valid "
                                         r"shapes are 'balanced', 'moderate', 'sst', 'linear'$"):
        synthetic_treebank(3, "deep")
    with pytest.raises(ValueError, match=r"^synthetic_treebank: num_trees must be an int >= 0"):
        synthetic_treebank(-1)
    assert synthetic_treebank(0) == []
    assert all(len(t.leaves()) == 7 for t in synthetic_treebank(20, length=7))
    # (how fast: python -m gluon_cf.bench.treebank; tests assert no timings)
    assert len(synthetic_treebank(10_000, seed=1)) == 10_000


def test_treebank_benchmark_reports_every_shape(capsys):
    from gluon_cf.bench import treebank
    treebank.main(["--trees", "50", "--repeats", "1"])
    printed = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0].strip() for line in printed] == list(treebank.SHAPES)
    assert all(line.endswith(" trees/s") for line in printed)


def test_binary_label():
    assert [binary_label(i) for i in range(5)] == [0, 0, None, 1, 1]
    with pytest.raises(ValueError, match=r"^binary_label: expected an SST label in 0\.\.4, got 5$"):
        binary_label(5)
