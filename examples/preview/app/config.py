"""PreviewConfig: the settings of the preview app, validated at construction (design §7.2).

A plain value: every part of :class:`examples.preview.app.preview_app.PreviewApp` is handed the few
settings it needs from it, never the whole config.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import attrs

from actors import HelperTimeouts, count_field, duration_field

__all__ = ["PreviewConfig", "default_cache_dir"]


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/trio-actors`` (``~/.cache`` by default): the server's default
    payload-cache folder, where the sample database lives too
    (:func:`~examples.preview.sample_db.default_sample_path`)."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "trio-actors"


def _path(value: str | os.PathLike[str]) -> str:
    return os.fspath(value)


def _optional_path(value: str | os.PathLike[str] | None) -> str | None:
    return None if value is None else os.fspath(value)


@attrs.frozen(kw_only=True)
class PreviewConfig:
    """Settings of the preview app; validated at construction (design §1.6).

    Raises:
        ValueError: a count or duration is out of range; the message names it.
    """

    db: str = attrs.field(converter=_path)
    """The QCoDeS database (opened read-only, in helper processes only)."""
    helpers: int = count_field(2, minimum=1, maximum=32)
    """Helper processes reading the database (the scheduler runs helpers + 1 jobs)."""
    cache_dir: str | None = attrs.field(default=None, converter=_optional_path)
    """Folder of the on-disk payload cache (design §4.10); None: memory only."""
    ledger: str | None = attrs.field(default=None, converter=_optional_path)
    """SQLite ledger of the event log (design §6.10); None: in memory."""
    poll_interval: float = duration_field(0.5, allow_zero=False)
    """Seconds (trio clock) between change probes, and between pages of a parked run."""
    stall_after: float = duration_field(30.0, allow_zero=False)
    """Seconds (trio clock) an unfinished run may stay unchanged before it is reported
    as ``incomplete`` (its writer is gone); it is still watched."""
    job_timeout: float = duration_field(15.0, allow_zero=False)
    """Seconds (trio clock) a helper read or a drawing may take (design §4.7)."""
    ask_timeout: float = duration_field(5.0, allow_zero=False)
    """Seconds (trio clock) an ask of the scheduler may take."""
    push_timeout: float = duration_field(10.0, allow_zero=False)
    """Seconds (trio clock) an image push waits for room in a client's queue."""
    preview_bytes: int = count_field(64 * 1024 * 1024, minimum=0)
    """Previews kept for late clients, in bytes (thumbnails are all kept)."""
    stop_grace: float = duration_field(2.0)
    """Seconds (trio clock) each actor gets to drain when the runtime closes."""
    max_inflight: int = count_field(4096, minimum=1)
    """Admission bound of the event log (design §6.5): at least the run count."""
    helper_timeouts: HelperTimeouts = attrs.field(
        factory=lambda: HelperTimeouts(
            startup=30.0, reply=15.0, cancel_grace=0.5, shutdown=0.4, terminate=0.3, kill=0.5
        )
    )
    """Helper deadlines (design §3.2); the startup imports numpy, so it is generous. The
    shutdown steps are short: a hung (e.g. stopped) helper is killed within about
    0.7 s, so the server still exits within its grace + 1 s."""
    data_buckets: int = count_field(2000, minimum=16, maximum=65_536)
    """Most buckets per trace a ``run_data`` answer may hold (design §7.7): each gives its
    min and max sample."""
    data_side: int = count_field(256, minimum=8, maximum=2048)
    """Most rows, and most columns, per map in a ``run_data`` answer (design §7.7)."""
    data_bytes: int = count_field(960 * 1024, minimum=16 * 1024, maximum=1000 * 1024)
    """Most bytes of JSON of a ``run_data`` answer's data; under the helper's 1 MiB reply
    frame (design §2.2, §7.7)."""
    max_databases: int = count_field(64, minimum=1, maximum=4096)
    """Most databases one server serves (design §7.5); more found in a folder are left
    out (each logged once)."""
    scan_interval: float = duration_field(2.0, allow_zero=False)
    """Seconds (trio clock) between looks at the watched folders for new or gone
    databases (design §7.5)."""
    open_timeout: float = duration_field(60.0, allow_zero=False)
    """Seconds (trio clock) a ``use_database`` waits for the database's helpers to start."""
    helper_faults: dict[str, Any] | None = None
    """For tests only: the helpers' ``faults`` startup option (see
    :mod:`examples.preview.child.helper`), e.g. a read that crashes its helper once."""
