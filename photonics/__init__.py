"""Physics and routing of programmable MZI meshes: topology, circuit solve, routes, fabric.

``__version__`` is the installed distribution's version (every top-level package of
``lumion`` re-exports this one).
"""


def __getattr__(name: str) -> str:
    """``__version__``, read from the installed metadata on first use (PEP 562).

    Lazy because ``importlib.metadata`` alone costs ~50 ms, which ``lumion --help`` and every
    import of this package would pay without asking for the version.
    """
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        value = version("lumion")
    except PackageNotFoundError:  # a source tree that was never installed
        value = "0+unknown"
    globals()["__version__"] = value
    return value


__all__ = ["__version__"]
