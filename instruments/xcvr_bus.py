"""I2C access to a pluggable module's management interface.

:class:`I2CBus` is the protocol :class:`instruments.transceiver.TransceiverModule` needs;
:class:`SMBusI2C` (Linux ``/dev/i2c-N`` via smbus2) and :class:`SerialI2CBridge` (an ASCII
USB-I2C bridge) implement it, as do the simulated buses of :mod:`instruments.sim.transceivers`.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from instruments.base import Instrument
from instruments.errors import DeviceError, GarbledReplyError, InstrumentError
from instruments.transport import Transport


@runtime_checkable
class I2CBus(Protocol):
    """Byte access to a device on an I2C bus (7-bit addresses, 8-bit offsets)."""

    def read(self, address: int, offset: int, length: int) -> bytes:
        """Read ``length`` bytes starting at ``offset``."""
        ...

    def write(self, address: int, offset: int, data: bytes) -> None:
        """Write ``data`` starting at ``offset``."""
        ...

    def close(self) -> None:
        """Release the bus."""
        ...


class SMBusI2C:
    """Linux I2C adapter through smbus2 (combined write-offset/read transactions)."""

    def __init__(self, bus: int | str) -> None:
        from smbus2 import SMBus

        try:
            self._bus = SMBus(bus)
        except OSError as exc:
            raise InstrumentError(f"cannot open I2C bus {bus!r}: {exc}; load i2c-dev and check "
                                  "permissions on /dev/i2c-*") from exc

    def read(self, address: int, offset: int, length: int) -> bytes:
        """Write the offset, then read ``length`` bytes (repeated start)."""
        from smbus2 import i2c_msg

        w, r = i2c_msg.write(address, [offset]), i2c_msg.read(address, length)
        self._bus.i2c_rdwr(w, r)
        return bytes(r)

    def write(self, address: int, offset: int, data: bytes) -> None:
        """Write ``offset`` followed by ``data`` in one transaction."""
        from smbus2 import i2c_msg

        self._bus.i2c_rdwr(i2c_msg.write(address, [offset, *data]))

    def close(self) -> None:
        """Close the adapter."""
        self._bus.close()


class SerialI2CBridge(Instrument):
    """ASCII USB-I2C bridge: ``r<addr>,<off>,<n>`` -> hex bytes; ``w<addr>,<off>,<hex>`` -> ``OK``.

    Addresses and offsets are two hex digits; errors come back as ``E<code>``.
    """

    def __init__(self, transport: Transport, *, retries: int = 2, name: str = "i2c_bridge") -> None:
        super().__init__(transport, name=name, retries=retries)

    def read(self, address: int, offset: int, length: int) -> bytes:
        """Read bytes through the bridge."""

        def parse(cmd: str, reply: str) -> bytes:
            if reply.startswith("E"):
                raise DeviceError(f"{self.name}: {cmd!r} failed ({reply}); is the module seated?")
            try:
                data = bytes.fromhex(reply)
            except ValueError as exc:
                raise GarbledReplyError(f"{self.name}: {cmd!r} gave {reply!r}") from exc
            if len(data) != length:
                raise GarbledReplyError(f"{self.name}: {cmd!r} gave {len(data)} bytes, wanted {length}")
            return data

        return self.ask(f"r{address:02x},{offset:02x},{length:02x}", parse)

    def write(self, address: int, offset: int, data: bytes) -> None:
        """Write bytes through the bridge."""

        def ok(cmd: str, reply: str) -> None:
            if reply != "OK":
                raise DeviceError(f"{self.name}: {cmd!r} failed ({reply}); is the module seated?")

        self.ask(f"w{address:02x},{offset:02x},{data.hex()}", ok)
