"""Static analysis of the function being converted: activity (names assigned and read, scopes
and closures), definite assignment and liveness."""
