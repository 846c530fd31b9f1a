"""A local fake Prometheus for the tests: an HTTP server on 127.0.0.1 (a free port) whose
``behave(handler)`` answers each GET; ``url`` is its address, ``close()`` stops it.

Used by tests/iotools/test_prometheus_hostile.py (answers a test sets), tests/system/test_readme_api.py
(``query_range`` for one host's GPUs) and tests/support/fuzz_harness.py (a fuzzed body)."""

from __future__ import annotations

import http.server
import threading


class FakeProm:
    """``behave(handler)`` answers each GET (``handler`` is the request's
    :class:`http.server.BaseHTTPRequestHandler`)."""

    def __init__(self, behave):
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.behave(self)

            def log_message(self, *a):
                pass

        self.behave = behave
        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.srv.daemon_threads = True
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.srv.server_port}"

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()
