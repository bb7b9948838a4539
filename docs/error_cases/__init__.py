"""The cases of docs/make_error_cases.py, one module per issue; inputs.py holds what they share."""
