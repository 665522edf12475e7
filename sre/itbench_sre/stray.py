"""A stray client: an outside caller whose clock is off, refused by the instance it calls.

A red herring drawn like a decoy change: the instance answers it 401 and logs the refusal
(``request date outside the allowed window``), as a skewed instance does to its callers, but no
caller of the shop sees an error, the instance's own clock and upstream calls are fine and no
alert fires (401 is no server error).
"""

from __future__ import annotations

import contextlib
import ssl
import threading
import time
import urllib.error
import urllib.request

#: The header a service reads a request's date from (``app/runtime.py``; the harness does not
#: import the shop's code, which registers its metrics on import).
DATE_HEADER = "X-Request-Date"

#: A route of each service (the request is refused before it is routed).
PATHS = {
    "frontend": "/",
    "catalog": "/products",
    "recommendation": "/recommendations",
    "cart": "/cart/partner-sync",
    "checkout": "/checkout",
    "payment": "/charge",
    "shipping": "/quote?items=1",
    "currency": "/convert?amount=100&to=EUR",
    "notification": "/status",
}


class StrayClient:
    """Calls one instance about once a second with a request dated ``offset_s`` off.

    Args:
        service: The service called (its route in :data:`PATHS`).
        port: The instance's listen port on 127.0.0.1.
        offset_s: How far the client's clock is off, seconds.
        tls: Whether the instance serves TLS.
        interval_s: Seconds between calls.
    """

    def __init__(
        self, service: str, port: int, offset_s: float, tls: bool = False, interval_s: float = 1.0
    ) -> None:
        scheme = "https" if tls else "http"
        self.url = f"{scheme}://127.0.0.1:{port}{PATHS.get(service, '/')}"
        # An outside client of a TLS service that does not check the certificate: the refusal it
        # gets is the instance's, never a handshake's.
        self._tls = ssl._create_unverified_context() if tls else None
        self.offset_s = offset_s
        self.interval_s = interval_s
        self.calls = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"stray-{service}", daemon=True)

    def start(self) -> None:
        """Start calling (until :meth:`stop`)."""
        self._thread.start()

    def stop(self) -> None:
        """Stop calling and wait for the last call (idempotent)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            req = urllib.request.Request(self.url)
            req.add_header(DATE_HEADER, f"{time.time() + self.offset_s:.3f}")
            # Refused (401), or the instance is down or restarting: a stray client does not care.
            with contextlib.suppress(urllib.error.URLError, OSError, ValueError):
                urllib.request.urlopen(req, timeout=2, context=self._tls).close()
            self.calls += 1
            self._stop.wait(self.interval_s)
