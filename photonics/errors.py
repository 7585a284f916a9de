"""Exception types of the photonics package; each message says what to do."""


class LumionError(Exception):
    """Base class of every error LUMION raises on purpose."""


class MeshSpecError(LumionError, ValueError):
    """A mesh description, name or file is malformed or unknown."""


class StateError(LumionError, ValueError):
    """A mesh state does not fit its mesh (wrong shape, unknown TBU, bad value)."""


class BudgetError(LumionError):
    """A link cannot close its optical power budget or would lose a polarization channel."""


class RoutingError(LumionError):
    """A routing request cannot be met: unknown or reused port, no conflict-free solution."""
