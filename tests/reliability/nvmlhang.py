"""Make every call into the fake NVML of a process hang, without changing the fake library.

The fake libnvidia-ml.so.1 re-reads its JSON config when the file changes, with a blocking
``open()`` under its global lock.  Putting a FIFO at the config path makes that ``open()`` block
until a writer appears — exactly a driver call that never returns, and every later NVML call
of the process queues behind the lock.  :meth:`NvmlHang.release` puts the good file back and
opens the FIFO for writing, which lets the blocked call return (the library rejects the FIFO
as "not a regular file" and keeps its last good config; the next call loads the good file).
"""

from __future__ import annotations

import errno
import os
import pathlib

from vgpu.sim.nvml.fakenvml import FakeNvml


class NvmlHang:
    def __init__(self, nvml: FakeNvml) -> None:
        self.nvml = nvml
        self.fifo = nvml.config_path.with_name("hang.fifo")

    def start(self) -> NvmlHang:
        if self.fifo.exists():
            self.fifo.unlink()
        os.mkfifo(self.fifo)
        alias = self.fifo.with_name("hang.fifo.link")
        if alias.exists():
            alias.unlink()
        os.link(self.fifo, alias)
        os.replace(alias, self.nvml.config_path)  # the config path is now the FIFO (same inode)
        return self

    def release(self) -> bool:
        """Good config back; True if a blocked NVML call was let go."""
        self.nvml.write()
        try:
            fd = os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # nobody blocked on it
                return False
            raise
        os.close(fd)
        return True

    def close(self) -> None:
        self.release()
        pathlib.Path(self.fifo).unlink(missing_ok=True)
