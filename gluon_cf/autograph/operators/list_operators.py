"""The operators a Python list has not, for the stand-ins of a collected list
(``StepList``, ``ReversedItems``): Python's own TypeError, naming the type Python's would
(NOTE [a collected list's type]), not the stand-in's class (``1 - items``: unsupported
operand type(s) for -: 'int' and 'list', where it named ``StepList``)."""
import mxnet as mx

# (symbol in Python's message, the dunder's name without underscores)
_BINARY = (("-", "sub"), ("/", "truediv"), ("//", "floordiv"), ("%", "mod"),
           ("** or pow()", "pow"), ("@", "matmul"), ("<<", "lshift"), (">>", "rshift"),
           ("&", "and"), ("|", "or"), ("^", "xor"), ("divmod()", "divmod"))
_UNARY = (("unary -", "neg"), ("unary +", "pos"), ("unary ~", "invert"), ("abs()", "abs"))


def _name(value):
    python = getattr(type(value), "python_type", None)
    return (python or type(value)).__name__


def _binary(symbol, name):
    def left(self, other, *modulo):
        if modulo:      # (pow(items, 2, 3))
            raise TypeError(f"unsupported operand type(s) for ** or pow(): '{_name(self)}', "
                            f"'{_name(other)}', '{_name(modulo[0])}'")
        if isinstance(other, mx.sym.Symbol) and hasattr(type(other), f"__r{name}__"):
            # (the array's own reflected operator's TypeError for a list)
            getattr(type(other), f"__r{name}__")(other, [])
        raise TypeError(f"unsupported operand type(s) for {symbol}: '{_name(self)}' and "
                        f"'{_name(other)}'")

    def right(self, other):
        raise TypeError(f"unsupported operand type(s) for {symbol}: '{_name(other)}' and "
                        f"'{_name(self)}'")
    return left, right


def _unary(symbol):
    def refused(self):
        raise TypeError(f"bad operand type for {symbol}: '{_name(self)}'")
    return refused


def add_refused_operators(cls):
    """Give ``cls`` Python's TypeError for each operator a list has not (a class decorator)."""
    for symbol, name in _BINARY:
        left, right = _binary(symbol, name)
        setattr(cls, f"__{name}__", left)
        setattr(cls, f"__r{name}__", right)
    for symbol, name in _UNARY:
        setattr(cls, f"__{name}__", _unary(symbol))
    return cls
