"""The exceptions streampool raises.

They live in pure Python, not in the extension, because an out-of-memory
error has to be a MemoryError as well, and a class with two exception bases
is a one-liner here; the extension imports them and raises them.
"""


class Error(Exception):
    """A streampool call failed.

    ``code`` is the C API's name for the failure (``"spErrorInvalidValue"``,
    ``"spErrorInvalidResourceHandle"``, ...) and ``message`` says what was
    wrong. A failed call changed nothing.
    """

    def __init__(self, code, message):
        """code: the C API's name of the failure; message: what was wrong."""
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message

    def __reduce__(self):
        return (type(self), (self.code, self.message))


class OutOfMemoryError(Error, MemoryError):
    """An allocation found no memory (``spErrorMemoryAllocation``): the pool's
    max_size, the device's capacity or the upstream ran out."""
