"""Which optional extras a command line needs, checked before the command does any work.

A command that needs a missing extra exits 69 at once, naming the extra to install, before
it calibrates, computes or writes anything (issue 29: ``demo`` calibrated for a minute and
created ``./lumion-demo/`` before saying matplotlib was missing; ``serve`` created its
database first). A command that finds an extra missing later still exits 69 through
:func:`lab_scripts.errors.missing_extra`.
"""

from __future__ import annotations

import argparse
import importlib.util

from lab_scripts.errors import CliError

# extra of pyproject.toml -> the top-level modules it installs that the commands import
PACKAGES: dict[str, tuple[str, ...]] = {
    "plot": ("matplotlib",),
    "instruments": ("serial", "pyvisa", "pyvisa_py", "smbus2"),
    "layout": ("gdsfactory",),
    # the control plane runs a bench (pty, SCPI over TCP, I2C bridges): its extra installs
    # the instruments extra too, so `pip install 'lumion[serve]'` is all `lumion serve` needs
    "serve": ("fastapi", "uvicorn", "serial", "pyvisa", "pyvisa_py", "smbus2"),
}

# command -> the extras it always needs (a --plot adds "plot" to any command)
COMMAND_EXTRAS: dict[str, tuple[str, ...]] = {
    "layout": ("layout",),
    "demo": ("plot",),  # its story ends in pictures
    "serve": ("serve",),
    "bench": ("instruments",),  # the simulators speak over ptys, TCP (VISA) and I2C bridges
}


def installed(module: str) -> bool:
    """Whether ``module`` (a top-level name) can be imported, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken install, or sys.modules[module] is None
        return False


def needed(args: argparse.Namespace) -> list[str]:
    """The extras the parsed command line ``args`` needs, in a fixed order."""
    extras = list(COMMAND_EXTRAS.get(args.command, ()))
    if getattr(args, "plot", None) and "plot" not in extras:
        extras.append("plot")
    return extras


def check_extras(args: argparse.Namespace) -> None:
    """Raise an ``unavailable`` error naming the first extra ``args`` needs that is not installed."""
    for extra in needed(args):
        missing = [m for m in PACKAGES[extra] if not installed(m)]
        if missing:
            raise CliError(f"this command needs the optional package {missing[0]}, not installed: "
                           f"pip install 'lumion[{extra}]'", "unavailable", "ModuleNotFoundError")
