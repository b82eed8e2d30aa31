"""Every helper the tests share (imported as ``from helpers.X import ...``; see
tests/README.md for what each module holds)."""
