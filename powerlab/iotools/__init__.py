"""Readers of formats that other tools already record (pvlib ``iotools`` style).

``read_*`` takes a path, ``parse_*`` takes text or a buffer.  Every reader maps source
names to canonical names through one explicit table, turns sentinels into NaN, converts
units at the boundary and returns tz-aware UTC timestamps.
"""
