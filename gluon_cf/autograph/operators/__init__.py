"""What converted code calls at run time (as ``__ag__.<name>``): the control flow, boolean
operators, variables, side-effect checks, iteration checks and collected lists of
``@autograph``'s rewritten functions."""
from .call_results import checked, refusal_caught, refusal_kept, refusals_kept
from .caught_errors import catching, raised_pending
from .conditionals import if_exp, if_return, if_stmt, python_if
from .control_flow import (collected_item, for_stmt, python_loop, running, running_and,
                           unpacked_slice, while_stmt)
from .outer_lists import no_outer_lists
from .list_parts import (MatchValues, match_items, match_originals, sequence_items, unpacked,
                         unpacked_parts, unpacked_reversed)
from .item_assignment import item_assigned
from .loop_escape import (escaped, keep_return, kept_return, return_box,
                          returned_through_finally)
from .logical import (and_, asserted, compare_chain, contains, match_guard, match_subject,
                      not_, or_, positive, python_operand)
from .py_builtins import builtin, filtered, iterated, own_method, reversed_rows
from .side_effects import changing, consumed, effect, made, mutable, printing
from .tensor_access import attribute_builtin, binary, item_target, py_slice, subscript
from .variables import augmented, deleted, ld, without

__all__ = ["collected_item", "for_stmt", "if_exp", "if_return", "if_stmt", "python_if",
           "python_loop", "running", "running_and", "while_stmt", "no_outer_lists", "unpacked",
           "unpacked_parts", "unpacked_reversed", "unpacked_slice", "MatchValues", "match_items",
           "match_originals", "and_", "asserted",
           "compare_chain", "contains", "match_guard", "match_subject",
           "not_", "or_", "positive", "python_operand", "builtin", "filtered", "iterated",
           "reversed_rows",
           "changing", "consumed", "effect", "made", "mutable", "own_method",
           "printing", "binary", "item_assigned", "item_target", "py_slice", "subscript",
           "augmented", "deleted", "ld", "without", "checked", "escaped", "refusal_caught",
           "refusal_kept",
           "returned_through_finally", "keep_return", "kept_return", "return_box", "refusals_kept",
           "catching", "raised_pending", "sequence_items", "attribute_builtin"]
