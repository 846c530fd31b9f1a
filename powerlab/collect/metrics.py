"""The collector's ``/metrics`` endpoint: the latest samples under dcgm-exporter's names.

The exposition is the Prometheus text format 0.0.4 as dcgm-exporter writes it: gauges,
the energy counter ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` [mJ] declared ``counter``
under its own name (``prometheus_client`` would rename a counter to ``..._total``, which
dashboards written for dcgm-exporter do not query, so the few lines are written here
with ``prometheus_client``'s own number formatting), and dcgm-exporter's labels ``gpu``,
``UUID``, ``pci_bus_id``, ``device``, ``modelName``, ``Hostname`` and
``DCGM_FI_DRIVER_VERSION``.

The server is one asyncio thread, whatever the number of connections: idle connections
cost a socket, not a thread; they are closed after ``idle_timeout_s``, and a connection
beyond ``max_connections`` closes the oldest idle one (so idle connections can never lock
a scraper out) or, when none is idle, is closed at once.  It binds ``127.0.0.1`` unless told
otherwise (host names and GPU UUIDs are not for the whole network by default).

References
----------
.. [1] NVIDIA, dcgm-exporter, ``etc/default-counters.csv`` and its exposition.
   https://github.com/NVIDIA/dcgm-exporter
.. [2] Prometheus, "Exposition formats", text-based format 0.0.4.
   https://prometheus.io/docs/instrumenting/exposition_formats/
"""

from __future__ import annotations

import asyncio
import gzip
import math
import socket
import threading
from collections.abc import Callable

from ..exceptions import PowerlabError

__all__ = ["DCGM_FIELDS", "MetricsServer", "exposition", "serve_metrics"]

# DCGM field names used by dcgm-exporter, the column they come from, a scale, the help
# text and the metric type.
DCGM_FIELDS = (
    ("DCGM_FI_DEV_POWER_USAGE", "power_avg_w", 1.0, "Power draw (in W).", "gauge"),
    ("DCGM_FI_DEV_POWER_USAGE_INSTANT", "power_w", 1.0, "Current power draw (in W).",
     "gauge"),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "energy_j", 1000.0,
     "Total energy consumption since boot (in mJ).", "counter"),
    ("DCGM_FI_DEV_SM_CLOCK", "clock_sm_mhz", 1.0, "SM clock frequency (in MHz).", "gauge"),
    ("DCGM_FI_DEV_MEM_CLOCK", "clock_mem_mhz", 1.0, "Memory clock frequency (in MHz).",
     "gauge"),
    ("DCGM_FI_DEV_GPU_TEMP", "temp_gpu_c", 1.0, "GPU temperature (in C).", "gauge"),
    ("DCGM_FI_DEV_MEMORY_TEMP", "temp_mem_c", 1.0, "Memory temperature (in C).", "gauge"),
    ("DCGM_FI_DEV_GPU_UTIL", "util_gpu_pct", 1.0, "GPU utilization (in %).", "gauge"),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "util_mem_pct", 1.0, "Memory utilization (in %).",
     "gauge"),
    ("DCGM_FI_DEV_POWER_MGMT_LIMIT", "power_limit_w", 1.0,
     "Power management limit (in W).", "gauge"),
    ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "throttle_reasons", 1.0,
     "Current clock event (throttle) reasons bitmask.", "gauge"),
    ("DCGM_FI_DEV_FB_USED", "fb_used_mib", 1.0, "Framebuffer memory used (in MiB).",
     "gauge"),
    ("DCGM_FI_DEV_FB_FREE", "fb_free_mib", 1.0, "Framebuffer memory free (in MiB).",
     "gauge"),
    ("DCGM_FI_DEV_XID_ERRORS", "xid_last", 1.0,
     "Value of the last XID error encountered.", "gauge"),
)

LABELS = ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname",
          "DCGM_FI_DRIVER_VERSION")
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _escape(value: str) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def exposition(gpus, host: str) -> bytes:
    """The text exposition of the latest samples.

    Parameters
    ----------
    gpus : sequence of (labels, values)
        Per GPU that is up: ``labels`` maps ``gpu``, ``UUID``, ``pci_bus_id``, ``device``,
        ``modelName`` and ``DCGM_FI_DRIVER_VERSION`` to strings; ``values`` maps
        canonical column names to their latest reading.
    host : str
        Value of the ``Hostname`` label.
    """
    from prometheus_client.utils import floatToGoString

    lines = []
    label_text = []
    for labels, _values in gpus:
        full = {**labels, "Hostname": host}
        label_text.append(",".join(f'{k}="{_escape(full.get(k, ""))}"' for k in LABELS))
    for name, col, scale, doc, kind in DCGM_FIELDS:
        lines.append(f"# HELP {name} {doc}")
        lines.append(f"# TYPE {name} {kind}")
        for (_labels, values), lt in zip(gpus, label_text):
            v = values.get(col)
            if v is None or (isinstance(v, float) and math.isnan(v)):
                continue
            lines.append(f"{name}{{{lt}}} {floatToGoString(float(v) * scale)}")
    return ("\n".join(lines) + "\n").encode()


class MetricsServer:
    """A minimal HTTP/1.1 server for ``GET /metrics`` on one asyncio thread.

    Parameters
    ----------
    render : callable
        Returns the exposition bytes; called once per scrape.
    port : int
        TCP port (0: any free port).
    addr : str, default "127.0.0.1"
        Address to bind ("0.0.0.0" or "::" for every interface).
    max_connections : int, default 64
        Most connections open at once; a new one beyond it evicts the oldest idle one.
    idle_timeout_s : float, default 30.0
        A connection that sends no complete request for this long is closed [s].
    """

    def __init__(self, render: Callable[[], bytes], port: int, addr: str = "127.0.0.1",
                 max_connections: int = 64, idle_timeout_s: float = 30.0):
        self._render = render
        self.max_connections = int(max_connections)
        self.idle_timeout_s = float(idle_timeout_s)
        self._open = 0
        self._idle: dict = {}  # writer -> None, oldest first: waiting for a request
        try:
            infos = socket.getaddrinfo(addr, int(port), type=socket.SOCK_STREAM,
                                       flags=socket.AI_PASSIVE)
            family = infos[0][0]
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(infos[0][4])
            sock.listen(128)
            sock.setblocking(False)
        except (OSError, UnicodeError) as exc:
            raise PowerlabError(f"cannot serve /metrics on {addr}:{port}: "
                                f"{getattr(exc, 'strerror', None) or exc}") from exc
        self._sock = sock
        self.server_address = sock.getsockname()
        self.server_port = self.server_address[1]
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="powerlab-metrics",
                                        daemon=True)
        self._thread.start()
        self._ready.wait(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def main():
            self._server = await asyncio.start_server(self._handle, sock=self._sock,
                                                      limit=16384)
            self._ready.set()

        self._loop.run_until_complete(main())
        self._loop.run_forever()
        self._server.close()
        tasks = asyncio.all_tasks(self._loop)
        for t in tasks:
            t.cancel()
        self._loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        self._loop.close()

    async def _handle(self, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        if self._open >= self.max_connections:
            if not self._idle:
                writer.close()
                return
            oldest = next(iter(self._idle))
            del self._idle[oldest]
            oldest.close()  # its handler sees the end of the stream and returns
        self._open += 1
        try:
            while True:
                self._idle[writer] = None
                try:
                    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"),
                                                  self.idle_timeout_s)
                except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                        ConnectionError):
                    return
                finally:
                    self._idle.pop(writer, None)
                lines = head.decode("latin-1").split("\r\n")
                parts = lines[0].split(" ")
                if len(parts) != 3:
                    await self._respond(writer, 400, b"bad request\n", close=True)
                    return
                method, target, version = parts
                headers = {}
                for ln in lines[1:]:
                    k, sep, v = ln.partition(":")
                    if sep:
                        headers[k.strip().lower()] = v.strip()
                close = (version != "HTTP/1.1"
                         or headers.get("connection", "").lower() == "close")
                if "content-length" in headers or "transfer-encoding" in headers:
                    close = True  # no request bodies here
                path = target.split("?", 1)[0]
                if method not in ("GET", "HEAD"):
                    await self._respond(writer, 405, b"only GET\n", close=True)
                    return
                if path not in ("/metrics", "/"):
                    await self._respond(writer, 404, b"not found; try /metrics\n", close)
                else:
                    body = self._render()
                    gz = "gzip" in headers.get("accept-encoding", "")
                    await self._respond(writer, 200, gzip.compress(body) if gz else body,
                                        close, CONTENT_TYPE, gz, head_only=method == "HEAD")
                if close:
                    return
        finally:
            self._open -= 1
            writer.close()

    @staticmethod
    async def _respond(writer, status: int, body: bytes, close: bool,
                       ctype: str = "text/plain; charset=utf-8", gz: bool = False,
                       head_only: bool = False) -> None:
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found",
                  405: "Method Not Allowed"}[status]
        hdr = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\n"
               f"Content-Length: {len(body)}\r\n"
               + ("Content-Encoding: gzip\r\n" if gz else "")
               + ("Connection: close\r\n" if close else "") + "\r\n")
        writer.write(hdr.encode() + (b"" if head_only else body))
        try:
            await writer.drain()
        except ConnectionError:
            pass

    def shutdown(self) -> None:
        """Stop serving (idempotent)."""
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def server_close(self) -> None:
        """Release the socket (after :meth:`shutdown`)."""
        try:
            self._sock.close()
        except OSError:
            pass


def serve_metrics(latest, host: str, port: int, addr: str = "127.0.0.1",
                  **kwargs) -> MetricsServer:
    """Serve the latest samples at ``/metrics`` under dcgm-exporter's names.

    Parameters
    ----------
    latest : callable
        Called at every scrape; returns ``(labels, values)`` per GPU that is up (see
        :func:`exposition`).
    host : str
        Value of the ``Hostname`` label.
    port : int
        TCP port (0: any free port).
    addr : str, default "127.0.0.1"
        Address to bind.
    **kwargs
        ``max_connections`` and ``idle_timeout_s`` of :class:`MetricsServer`.

    Returns
    -------
    MetricsServer
        The running server (``shutdown()`` and ``server_close()`` stop it).
    """
    try:
        import prometheus_client  # noqa: F401  (number formatting)
    except ImportError as exc:  # pragma: no cover
        raise PowerlabError("--prometheus-port needs prometheus-client "
                            "(pip install 'powerlab[nvml]')") from exc
    return MetricsServer(lambda: exposition(latest(), host), port, addr, **kwargs)
