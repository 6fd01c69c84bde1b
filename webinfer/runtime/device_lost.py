"""A lost native GPU device as one clear error (native.py's NativeDevice methods go through ``guard``).

wgpu-py 0.32 gives no ``device.lost`` to wait on (``_get_lost_async`` is not implemented; wgpu-native's lost
callback only logs): a destroyed device, a driver reset or an out-of-memory loss is seen as the next call failing
with a validation error that says "Parent device is lost". Natively we do not re-create the device behind the
caller's back (the page's worker does: site/recover.mjs): the caller holds the sessions, a lost device took all of
them with it, and opening one again is one call. So every call on a lost device raises the same WebinferError, and
the process forgets the device, so that the next session opened gets a new one.
"""

from __future__ import annotations

import functools
import inspect

from ..errors import WebinferError

LOST_MARKERS = ("device is lost", "device was lost", "device lost")


def lost_reason(exc: BaseException) -> str | None:
    """The line of a wgpu error that says the device is lost, else None (any other error)."""
    for line in str(exc).splitlines():
        if any(m in line.lower() for m in LOST_MARKERS):
            return line.strip()
    return None


def lost_error(reason: str) -> WebinferError:
    return WebinferError(f"the GPU device was lost ({reason}): the sessions on it are gone; open the model again "
                         "(a new device is created)")


def guard(method):
    """Turn a lost device under ``method`` into ``lost_error``, mark the device (``self.lost``) and have the process
    forget it (``self.forget()``); other errors pass unchanged. Works on plain and async methods."""

    def raise_if_lost(self, exc: Exception) -> None:
        reason = lost_reason(exc)
        if reason is not None:
            self.lost = reason
            self.forget()
            raise lost_error(reason) from None

    if inspect.iscoroutinefunction(method):
        @functools.wraps(method)
        async def wrapper_async(self, *args, **kwargs):
            if self.lost:
                raise lost_error(self.lost)
            try:
                return await method(self, *args, **kwargs)
            except WebinferError:
                raise
            except Exception as e:
                raise_if_lost(self, e)
                raise

        return wrapper_async

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        if self.lost:
            raise lost_error(self.lost)
        try:
            return method(self, *args, **kwargs)
        except WebinferError:
            raise
        except Exception as e:
            raise_if_lost(self, e)
            raise

    return wrapper
