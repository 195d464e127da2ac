"""The source-to-source converters of ``@autograph``, one per construct: jumps (``break``,
``continue``, ``return``), conditionals, loops, lists, iteration, calls, assignments and
logical expressions; :mod:`.base` holds what they share."""
