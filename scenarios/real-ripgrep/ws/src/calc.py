"""A tiny calculator module."""


def add(a, b):
    """Return the sum of a and b."""
    return a + b


class Calculator:
    def __init__(self):
        self.total = 0

    def push(self, value):
        self.total = add(self.total, value)
        return self.total
