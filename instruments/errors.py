"""Exception types of the instruments package; each message says what to do.

Transient errors (:class:`TransientError` and subclasses) are retried by the drivers;
everything else is raised at once.
"""

from __future__ import annotations

from photonics.errors import LumionError


class InstrumentError(LumionError):
    """Base class of instrument and bench errors."""


class TransientError(InstrumentError):
    """A communication problem a retry may cure (timeout, garbled reply, dropped link)."""


class InstrumentTimeoutError(TransientError):
    """The instrument did not answer within the timeout."""


class GarbledReplyError(TransientError):
    """The reply was not what the protocol allows (noise on the line, wrong baud rate)."""


class ConnectionLostError(TransientError):
    """The link to the instrument dropped (cable pulled, USB reset, socket closed)."""


class LimitError(InstrumentError, ValueError):
    """A requested value is outside the declared limits; nothing was sent."""


class DeviceError(InstrumentError):
    """The instrument reported an error for a command it received."""

    def __init__(self, message: str, code: int | None = None, channel: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.channel = channel


class OverCurrentError(DeviceError):
    """The heater driver refused a current above its channel's current limit."""


class OverVoltageError(DeviceError):
    """The heater driver hit its channel's voltage compliance (heater open or too resistive)."""


class HeaterFaultError(OverVoltageError):
    """A channel's heater is open: the module reached its voltage compliance on a current a
    working heater takes at a fraction of it (``channel``: the heater channel).
    """


class BadChannelError(DeviceError):
    """The heater driver has no such channel."""


class UnknownCommandError(DeviceError):
    """The instrument did not understand a command (driver and firmware disagree)."""


class WriteAbortedError(InstrumentError):
    """A multi-channel write failed midway; the previous currents were restored."""


class ChipStateUnknownError(InstrumentError):
    """A write failed and restoring the previous currents failed too."""


class ModuleResetError(ChipStateUnknownError):
    """A heater-driver module restarted (``E90``): its outputs are back at zero, unprogrammed."""


class SettingLostError(TransientError):
    """A setting was sent but the instrument reads back something else (lost or mangled)."""


class SettingsUnknownError(InstrumentError):
    """After a fault the driver could not re-apply and read back the settings it owns."""


class BenchConfigError(InstrumentError):
    """A bench configuration file is malformed or names an unknown driver or address."""
