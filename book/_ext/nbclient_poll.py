"""Bound the stall when nbclient misses a kernel reply (used by the build and the tests).

nbclient waits for a cell's ``execute_reply`` with one ``get_msg(timeout=cell timeout)``
on the shell channel, while other tasks read the IOPub channel on the same event loop.
After a cell that opens ipywidgets (``interact``), the wake-up for the reply is sometimes
lost: the kernel has answered and sits idle, yet the client sleeps until the cell timeout
(300 s here) and only then finds the reply and goes on, so the chapter "passes" five
minutes late (nbclient issue #312, open).  Measured on this project with nbclient 0.11.0,
jupyter_client 8.10.0, pyzmq 27.3.0, ipykernel 6.31.0: the ``fluid`` chapter took 311 s
instead of 13 s whenever the test session had run a doctest first.

:func:`install` makes every client poll the shell and IOPub channels in slices of at most
half a second until the original deadline: a fresh ``poll`` sees a message that is
already waiting, so a lost wake-up costs at most one slice, and timeouts keep their
meaning.  The patch changes nothing else and is applied once per process.
"""

from __future__ import annotations

import time
from queue import Empty

SLICE = 0.5  # seconds per poll


def _sliced(get_msg):
    async def get_msg_sliced(timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = SLICE if deadline is None else min(SLICE, deadline - time.monotonic())
            try:
                return await get_msg(timeout=max(left, 0.0))
            except Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    raise

    return get_msg_sliced


def install():
    """Patch :class:`nbclient.NotebookClient` (idempotent); returns True if it was patched."""
    from nbclient.client import NotebookClient

    if getattr(NotebookClient, "_sliced_polling", False):
        return False
    start = NotebookClient.async_start_new_kernel_client

    async def async_start_new_kernel_client(self):
        kc = await start(self)
        for channel in (kc.shell_channel, kc.iopub_channel):
            channel.get_msg = _sliced(channel.get_msg)
        return kc

    NotebookClient.async_start_new_kernel_client = async_start_new_kernel_client
    NotebookClient._sliced_polling = True
    return True
