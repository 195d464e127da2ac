"""The public API of ``@autograph`` and the conversion driver."""
