"""The preview server's Observer page in a real headless Chromium (design §7.8).

The preview server runs in this process with a token and one helper, its pool allowing
no replacement (``max_restarts=0``) and its tree restarting a failed actor after 50 ms:
the test kills the helper with SIGKILL, so the pool exceeds its restart intensity
(its escalation, ``intensity_exceeded``) and fails, and the ``services`` supervisor
restarts it. Within a second of that restart the page shows it in the tree (the pool's
incarnation 2, one restart) and both decisions on the timeline. Skipped when no
chromium is installed. Real clock.
"""

from __future__ import annotations

import base64
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio
from frontdoor_support import TIMEOUT, assert_no_children
from preview_support import preview_server, server_config
from test_dashboard import CHROMIUM, chromium, open_page, wait_for
from test_metrics_route import TOKEN

from actors import Backoff
from examples.preview.app.preview_app import PreviewApp

if TYPE_CHECKING:
    from actors import RuntimeConfig

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="needs a headless Chromium (apt install chromium)"),
]

#: The pool's entry in the tree, once the ``services`` supervisor has restarted it.
POOL = 'document.querySelector(\'li[data-supervisor="services"] li[data-child="pool"]\')'
RESTARTED = f"{POOL} && {POOL}.dataset.incarnation === '2' && {POOL}.dataset.restarts === '1'"
#: The tree nested as it runs: ``runtime`` the only root, ``services`` inside the entry of
#: ``runtime``'s child that runs it, its children (the pool among them) inside it.
NESTED = " && ".join([
    "document.querySelectorAll('#tree > ul > li').length === 1",
    "document.querySelector('#tree > ul > li').dataset.supervisor === 'runtime'",
    *(f"!!document.querySelector('#tree li[data-supervisor=\"runtime\"] > ul > "
      f"li[data-child=\"services\"] > ul > li[data-supervisor=\"services\"] > ul > "
      f"li[data-child=\"{child}\"]')" for child in ("pool", "renderer", "scheduler")),
    "!!document.querySelector('#tree li[data-supervisor=\"runtime\"] > ul > "
    "li[data-child=\"event_log\"]')",
])  # fmt: skip
#: The fresh pool's slot: its first incarnation, no exit of the old pool's helper.
SLOT = "document.querySelector('#helpers tr[data-slot=\"0\"]')"
FRESH_SLOT = f"{SLOT} && {SLOT}.dataset.incarnation === '1' && {SLOT}.dataset.pid !== ''"
#: Both decisions on the timeline: the pool's escalation and the supervisor's restart.
ON_TIMELINE = " && ".join(
    f"!!document.querySelector('#timeline tr[data-kind=\"{kind}\"]')"
    for kind in ("intensity_exceeded", "child_restarting")
)


@pytest.fixture(autouse=True)
def _no_child_left():
    yield
    assert_no_children()


@pytest.fixture(autouse=True)
def _fragile_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the preview app's pool fail at its first crash, and its restart quick."""
    made = PreviewApp.runtime_config

    def runtime_config(app: PreviewApp) -> RuntimeConfig:
        config = made(app)
        return attrs.evolve(
            config,
            pool=attrs.evolve(config.pool, max_restarts=0),
            restart=Backoff(base=0.05, cap=0.1, reset_after=60.0),
        )

    monkeypatch.setattr(PreviewApp, "runtime_config", runtime_config)


async def test_a_supervisor_restart_shows_within_a_second(real_db: Path, tmp_path: Path) -> None:
    config = server_config(real_db, tmp_path, helpers=1)
    async with (
        preview_server(config, token=TOKEN) as (front, app),
        chromium(tmp_path / "profile") as devtools,
    ):
        url = f"http://127.0.0.1:{front.port}/observer?token={TOKEN}"
        session = await open_page(devtools, url)
        await wait_for(devtools, session, f"{POOL} && {POOL}.dataset.state === 'running'")
        await wait_for(devtools, session, NESTED)
        runtime = app.runtime
        assert runtime.metrics is not None
        lifecycle = runtime.metrics.lifecycle
        with runtime.pool_events.subscribe(kinds={"intensity_exceeded"}) as stream:
            helper = (await runtime.pool.snapshot()).helpers[0]
            assert helper is not None
            assert helper.pid is not None
            os.kill(helper.pid, signal.SIGKILL)
            with trio.fail_after(TIMEOUT):
                assert (await stream.receive()).kind == "intensity_exceeded"
        with trio.fail_after(TIMEOUT):
            seen = lifecycle.changes
            while not _restarted(lifecycle.view(pool=None, mailboxes={})):
                seen = await lifecycle.wait_changed(seen)
        with trio.fail_after(1.0):  # the page shows it within a second
            await wait_for(devtools, session, f"({RESTARTED}) && {ON_TIMELINE}")
        await wait_for(devtools, session, NESTED)
        await wait_for(devtools, session, FRESH_SLOT)
        assert await devtools.evaluate(session, f"{SLOT}.dataset.lastExit") == ""
        shot = await devtools.call("Page.captureScreenshot", session, format="png")
        keep = os.environ.get("OBSERVER_SCREENSHOT")
        if keep:  # beside the job server's Observer screenshot
            Path(keep).with_name("preview-observer.png").write_bytes(base64.b64decode(shot["data"]))


def _restarted(view: dict[str, Any]) -> bool:
    """The ``services`` supervisor has started the pool's second incarnation."""
    return any(
        child["child"] == "pool" and child["incarnation"] == 2 and child["state"] == "running"
        for supervisor in view["tree"]
        if supervisor["name"] == "services"
        for child in supervisor["children"]
    )
