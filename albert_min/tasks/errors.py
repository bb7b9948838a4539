"""The one error of reading data: a file that cannot be read as asked, naming its file and line.

Every task family and the shared readers raise it; it has a module of its own so that
nothing has to import a reader to catch it.
"""

from ..common.errors import AlbertMinError


class DataError(AlbertMinError):
    """A data file that cannot be read as asked, with the file and line number."""
