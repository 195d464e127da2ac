"""Python code tools for the converters: the syntax they build (``templates``) and the static
analysis of the function being converted (``static_analysis``)."""
