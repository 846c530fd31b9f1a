"""The collector's ``/metrics`` endpoint: the latest samples under dcgm-exporter's names.

The exposition is the Prometheus text format 0.0.4 as dcgm-exporter writes it: gauges,
the energy counter ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` [mJ] declared ``counter``
under its own name (``prometheus_client`` would rename a counter to ``..._total``, which
dashboards written for dcgm-exporter do not query, so the few lines are written here
with ``prometheus_client``'s own number formatting), and dcgm-exporter's labels ``gpu``,
``UUID``, ``pci_bus_id``, ``device``, ``modelName``, ``Hostname`` and
``DCGM_FI_DRIVER_VERSION``.

The server is one asyncio thread, whatever the number of connections: idle connections
cost a socket, not a thread; they are closed after ``idle_timeout_s``; a reply the client
does not read within ``write_timeout_s`` drops the connection; a connection beyond
``max_connections`` closes the oldest idle one of the client holding the most
connections, else its one stuck longest in a write; and no client (one address) holds
more than ``MetricsServer.max_per_client`` connections: beyond, its own oldest goes (so a
flood from one address can neither fill the server nor push a scraper out, issue 38).
The accept backlog is :data:`ACCEPT_BACKLOG` (the kernel caps it at ``somaxconn``), so a
burst of connections waits in the queue instead of being refused.  Scrapes are served from an
immutable snapshot rebuilt once per collection interval, never rendered per request;
``/health`` is 503 before the first collection and when none is fresh within three
intervals.  It binds ``127.0.0.1`` unless told
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
import collections
import gzip
import math
import socket
import threading
import time
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


#: Connections the kernel queues before they are accepted (capped at ``somaxconn``).
ACCEPT_BACKLOG = 4096


def _peer(writer) -> str:
    """The client's address (the port left out: one client, one address)."""
    info = writer.get_extra_info("peername")
    return str(info[0]) if isinstance(info, tuple) and info else str(info)


class MetricsServer:
    """A minimal HTTP/1.1 server for ``GET /metrics`` and ``GET /health`` on one asyncio
    thread.

    Scrapes are served from an immutable snapshot (the exposition and its gzip form),
    rebuilt once per ``refresh_s`` by the server's own loop or handed over with
    :meth:`publish`; a scrape never renders, so no number of clients costs more than
    copying bytes.  Every write is bounded by ``write_timeout_s`` (a client that does not
    read its replies is cut off), and a connection beyond ``max_connections`` evicts the
    oldest idle one, else the one stuck longest in a write, so neither idle nor stuck
    clients can lock a scraper out (issue 24: 70 pipelining clients that never read took
    the endpoint down).

    ``/health`` answers 200 while a collection is fresh, 503 before the first one and when
    none came within ``stale_s`` (as dcgm-exporter's health endpoint does).

    Parameters
    ----------
    render : callable
        Returns the exposition bytes; called once per ``refresh_s`` in the server's loop.
    port : int
        TCP port (0: any free port).
    addr : str, default "127.0.0.1"
        Address to bind ("0.0.0.0" or "::" for every interface).
    max_connections : int, default 64
        Most connections open at once.
    idle_timeout_s : float, default 30.0
        A connection that sends no complete request for this long is closed [s].
    write_timeout_s : float, default 5.0
        Longest a reply may wait for the client to read it [s].
    refresh_s : float, default 1.0
        Interval of the snapshot [s].
    last_collection : callable, optional
        Returns the ``time.monotonic()`` of the latest collection, or None before the
        first; without it, the latest snapshot counts as the collection.
    stale_s : float, optional
        ``/health`` fails when the latest collection is older [s]; default 3 x refresh_s.

    Attributes
    ----------
    max_per_client : int
        Most connections one client address holds at once (default 16).
    """

    max_per_client = 16

    def __init__(self, render: Callable[[], bytes], port: int, addr: str = "127.0.0.1",
                 max_connections: int = 64, idle_timeout_s: float = 30.0,
                 write_timeout_s: float = 5.0, refresh_s: float = 1.0,
                 last_collection: Callable[[], float | None] | None = None,
                 stale_s: float | None = None):
        self._render = render
        self.max_connections = int(max_connections)
        self.idle_timeout_s = float(idle_timeout_s)
        self.write_timeout_s = float(write_timeout_s)
        self.refresh_s = float(refresh_s)
        self.stale_s = float(stale_s) if stale_s is not None else 3.0 * self.refresh_s
        self._last_collection = last_collection
        self._snapshot: tuple[bytes, bytes, float] | None = None  # body, gzip, monotonic
        self.render_errors = 0
        self.evicted = 0
        self._open = 0
        self._idle: dict = {}     # writer -> None, oldest first: waiting for a request
        self._writing: dict = {}  # writer -> monotonic start of its pending write
        self._peer_of: dict = {}  # writer -> client address
        self._by_peer: collections.Counter = collections.Counter()
        try:
            infos = socket.getaddrinfo(addr, int(port), type=socket.SOCK_STREAM,
                                       flags=socket.AI_PASSIVE)
            family = infos[0][0]
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(infos[0][4])
            sock.listen(ACCEPT_BACKLOG)
            sock.setblocking(False)
        except (OSError, UnicodeError, OverflowError) as exc:
            raise PowerlabError(f"cannot serve /metrics on {addr}:{port}: "
                                f"{getattr(exc, 'strerror', None) or exc}") from exc
        self._sock = sock
        self.server_address = sock.getsockname()
        self.server_port = self.server_address[1]
        self._loop = asyncio.new_event_loop()
        self._loop.set_exception_handler(lambda loop, ctx: None)  # a dropped client
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="powerlab-metrics",
                                        daemon=True)
        self._thread.start()
        self._ready.wait(10)

    # ------------------------------------------------------------------ snapshot
    def publish(self, body: bytes) -> None:
        """Serve ``body`` from now on (thread-safe: one tuple is swapped in)."""
        body = bytes(body)
        self._snapshot = (body, gzip.compress(body, compresslevel=1), time.monotonic())

    def _refresh(self) -> None:
        try:
            self.publish(self._render())
        except Exception:  # noqa: BLE001  (any render failure: keep the last snapshot; counted)
            self.render_errors += 1

    def health(self) -> tuple[int, bytes]:
        """``(status, text)`` of ``/health``."""
        now = time.monotonic()
        if self._last_collection is not None:
            last = self._last_collection()
        else:
            last = None if self._snapshot is None else self._snapshot[2]
        if last is None:
            return 503, b"no collection yet\n"
        age = now - last
        if age > self.stale_s:
            return 503, f"stale: last collection {age:.1f} s ago\n".encode()
        return 200, f"ok: last collection {age:.2f} s ago\n".encode()

    # ------------------------------------------------------------------ serving
    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def refresher():
            while True:
                self._refresh()
                await asyncio.sleep(self.refresh_s)

        async def main():
            self._server = await asyncio.start_server(self._handle, sock=self._sock,
                                                      limit=16384)
            self._refresher = asyncio.ensure_future(refresher())
            self._ready.set()

        self._loop.run_until_complete(main())
        self._loop.run_forever()
        self._server.close()
        tasks = asyncio.all_tasks(self._loop)
        for t in tasks:
            t.cancel()
        self._loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        self._loop.close()

    def _make_room(self, peer: str | None = None) -> bool:
        """Close a connection of ``peer`` (default: the client holding the most): its
        oldest idle one, else its one stuck longest in a write.  False when every such
        connection is busy answering."""
        if peer is None:
            peer = max(self._by_peer, key=self._by_peer.get, default=None)
        idle = [w for w in self._idle if self._peer_of.get(w) == peer]
        writing = [w for w in self._writing if self._peer_of.get(w) == peer]
        if idle:
            victim = idle[0]
            del self._idle[victim]
        elif writing:
            victim = min(writing, key=self._writing.get)
            del self._writing[victim]
        else:
            return False
        self.evicted += 1
        self._release(victim)     # counted out now, not when its handler gets to run
        victim.transport.abort()  # its handler sees the end of the stream and returns
        return True

    def _release(self, writer) -> None:
        """Count a connection out (once: at its eviction or at its handler's end)."""
        peer = self._peer_of.pop(writer, None)
        if peer is None:
            return
        self._open -= 1
        self._by_peer[peer] -= 1
        if not self._by_peer[peer]:
            del self._by_peer[peer]

    async def _handle(self, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        peer = _peer(writer)
        if (self._by_peer[peer] >= self.max_per_client and not self._make_room(peer)) or \
                (self._open >= self.max_connections and not self._make_room()):
            writer.transport.abort()
            return
        self._open += 1
        self._by_peer[peer] += 1
        self._peer_of[writer] = peer
        try:
            writer.transport.set_write_buffer_limits(high=64 * 1024)
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
                head_only = method == "HEAD"
                if method not in ("GET", "HEAD"):
                    await self._respond(writer, 405, b"only GET\n", close=True)
                    return
                if path == "/health":
                    status, text = self.health()
                    ok = await self._respond(writer, status, text, close,
                                             head_only=head_only)
                elif path not in ("/metrics", "/"):
                    ok = await self._respond(writer, 404, b"not found; try /metrics or "
                                             b"/health\n", close, head_only=head_only)
                elif (snap := self._snapshot) is None:
                    ok = await self._respond(writer, 503, b"no collection yet\n", close,
                                             head_only=head_only)
                else:
                    gz = "gzip" in headers.get("accept-encoding", "")
                    ok = await self._respond(writer, 200, snap[1] if gz else snap[0], close,
                                             CONTENT_TYPE, gz, head_only=head_only)
                if close or not ok:
                    return
        finally:
            self._release(writer)
            self._idle.pop(writer, None)
            self._writing.pop(writer, None)
            if writer.transport.get_write_buffer_size():
                writer.transport.abort()   # unread replies: no graceful close
            else:
                writer.close()

    async def _respond(self, writer, status: int, body: bytes, close: bool,
                       ctype: str = "text/plain; charset=utf-8", gz: bool = False,
                       head_only: bool = False) -> bool:
        """Write a reply; False when the client did not take it within write_timeout_s
        (or is gone): the connection is then dropped."""
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found",
                  405: "Method Not Allowed", 503: "Service Unavailable"}[status]
        hdr = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\n"
               f"Content-Length: {len(body)}\r\n"
               + ("Content-Encoding: gzip\r\n" if gz else "")
               + ("Connection: close\r\n" if close else "") + "\r\n")
        if writer.transport.is_closing():
            return False
        writer.write(hdr.encode() + (b"" if head_only else body))
        self._writing[writer] = time.monotonic()
        try:
            await asyncio.wait_for(writer.drain(), self.write_timeout_s)
        except (TimeoutError, ConnectionError):
            writer.transport.abort()
            return False
        finally:
            self._writing.pop(writer, None)
        return True

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
        ``max_connections``, ``idle_timeout_s``, ``write_timeout_s``, ``refresh_s``,
        ``last_collection`` and ``stale_s`` of :class:`MetricsServer`.

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
