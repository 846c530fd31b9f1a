"""PCI bus id -> GPU maps, to name the GPU of a kernel-log Xid (which gives only its PCI
bus id): from ``nvidia-smi -q`` output or from a CSV.

- ``nvidia-smi -q``: one block per GPU headed ``GPU 00000000:18:00.0`` holding
  ``GPU UUID : GPU-...``; nvidia-smi lists GPUs in its index order (PCI bus order), so a
  block's position is its ``gpu_index`` [1]_.
- CSV: ``nvidia-smi --query-gpu=index,uuid,pci.bus_id --format=csv`` (header
  ``index, uuid, pci.bus_id``), or powerlab's own columns ``host, pci_bus_id,
  gpu_index, gpu_uuid``; ``host`` optional (one host's map: pass ``host=``).

References
----------
.. [1] NVIDIA, ``nvidia-smi`` manual page (``-q``, ``--query-gpu``; "index: Zero based
   index of the GPU. Can change at each boot."), https://docs.nvidia.com/deploy/nvidia-smi/
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pandas as pd

from ..exceptions import ParseError
from ._common import read_text
from .xid import normalize_pci_bus_id

__all__ = ["parse_gpu_map", "read_gpu_map"]

_Q_GPU = re.compile(r"^GPU (?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)\s*$")
_Q_UUID = re.compile(r"^\s+GPU UUID\s*:\s*(?P<uuid>\S+)\s*$")
_CSV_NAMES = {"index": "gpu_index", "uuid": "gpu_uuid", "pci.bus_id": "pci_bus_id",
              "gpu_index": "gpu_index", "gpu_uuid": "gpu_uuid", "pci_bus_id": "pci_bus_id",
              "host": "host", "hostname": "host"}


def parse_gpu_map(src, *, host: str | None = None) -> pd.DataFrame:
    """Parse a PCI -> GPU map (``nvidia-smi -q`` text or a CSV).

    Returns
    -------
    pandas.DataFrame
        ``host`` (when known), ``pci_bus_id`` (nvidia-smi form), ``gpu_index``,
        ``gpu_uuid``: what :func:`powerlab.iotools.xid.parse_kernel_xid` takes as
        ``devices``.
    """
    text, name = read_text(src, what="GPU map")
    if "NVSMI LOG" in text or "Attached GPUs" in text:
        rows = []
        for lineno, line in enumerate(text.splitlines(), start=1):
            if (m := _Q_GPU.match(line)) is not None:
                rows.append({"pci_bus_id": normalize_pci_bus_id(m["pci"]),
                             "gpu_index": len(rows), "gpu_uuid": None})
            elif (m := _Q_UUID.match(line)) is not None and rows:
                rows[-1]["gpu_uuid"] = m["uuid"]
        if not rows:
            raise ParseError("nvidia-smi -q output without a 'GPU dddd:bb:dd.f' block",
                             path=name)
        out = pd.DataFrame(rows)
    else:
        try:
            raw = pd.read_csv(io.StringIO(text), dtype=str, skipinitialspace=True)
        except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
            raise ParseError(f"neither nvidia-smi -q output nor a CSV ({exc})",
                             path=name) from None
        cols = {c: _CSV_NAMES.get(c.strip().lower()) for c in raw.columns}
        out = raw.rename(columns=cols)[[c for c in cols.values() if c]]
        if not {"pci_bus_id", "gpu_index"} <= set(out.columns):
            raise ParseError("a GPU map CSV needs pci.bus_id (or pci_bus_id) and index (or "
                             f"gpu_index); got {list(raw.columns)}", path=name, line=1)
        try:
            out["pci_bus_id"] = [normalize_pci_bus_id(p) for p in out["pci_bus_id"]]
            out["gpu_index"] = out["gpu_index"].astype(int)
        except (ValueError, TypeError) as exc:
            raise ParseError(f"bad GPU map row ({exc})", path=name) from None
    if host is not None:
        out["host"] = host
    return out.reset_index(drop=True)


def read_gpu_map(path, **kw) -> pd.DataFrame:
    """Read a PCI -> GPU map from a file; see :func:`parse_gpu_map`."""
    return parse_gpu_map(Path(path), **kw)
