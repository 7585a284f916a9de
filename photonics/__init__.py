"""Physics and routing of programmable MZI meshes: topology, circuit solve, routes, fabric.

``__version__`` is the installed distribution's version (every top-level package of
``lumion`` re-exports this one).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("lumion")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
