"""Helper configuration: timeouts, spec, pool config, the bootstrap argv (design §1.6, §3.2)."""

from __future__ import annotations

import math
import sys

import pytest

from actors import HelperSpec, HelperTimeouts, PoolConfig
from actors._helpers._process._spec import BOOTSTRAP


def test_timeout_defaults_follow_the_spec():
    timeouts = HelperTimeouts()
    assert (
        timeouts.startup,
        timeouts.reply,
        timeouts.cancel_grace,
        timeouts.shutdown,
        timeouts.terminate,
        timeouts.kill,
    ) == (10.0, 10.0, 0.75, 2.0, 1.0, 1.0)
    assert timeouts.ladder == 0.75 + 1.0 + 1.0


@pytest.mark.parametrize(
    "field", ["startup", "reply", "cancel_grace", "shutdown", "terminate", "kill"]
)
@pytest.mark.parametrize("bad", [-1, math.nan, math.inf, 301, True, "1", None])
def test_every_timeout_is_validated_and_named(field, bad):
    with pytest.raises(ValueError, match=field):
        HelperTimeouts(**{field: bad})


@pytest.mark.parametrize("field", ["startup", "reply", "kill"])
def test_timeouts_that_must_be_positive_refuse_zero(field):
    with pytest.raises(ValueError, match=field):
        HelperTimeouts(**{field: 0})


@pytest.mark.parametrize("field", ["cancel_grace", "shutdown", "terminate"])
def test_steps_that_may_be_skipped_accept_zero(field):
    assert getattr(HelperTimeouts(**{field: 0}), field) == 0.0


def test_timeouts_accept_ints_as_seconds():
    assert HelperTimeouts(reply=3).reply == 3.0


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({}, "exactly one"),
        ({"entry": "a.b:main", "argv": ["x"]}, "exactly one"),
        ({"argv": []}, "argv"),
        ({"entry": "no_colon"}, "entry"),
        ({"entry": "bad-name:main"}, "entry"),
        ({"entry": "a:"}, "entry"),
        ({"entry": "a:main", "options": {"x": {1, 2}}}, "options"),
        ({"entry": "a:main", "options": {"x": math.nan}}, "options"),
        ({"entry": "a:main", "fault": "explode"}, "fault"),
        ({"entry": "a:main", "max_request": 100}, "max_request"),
        ({"entry": "a:main", "max_reply": 2**32}, "max_reply"),
        ({"entry": "a:main", "max_reply": True}, "max_reply"),
    ],
)
def test_bad_specs_are_refused(fields, match):
    with pytest.raises(ValueError, match=match):
        HelperSpec(**fields)


@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("size", 0),
        ("size", 1.5),
        ("max_restarts", -1),
        ("restart_period", 0),
        ("acquire_timeout", -0.1),
        ("eager", "yes"),
        ("timeouts", {"reply": 1}),
    ],
)
def test_pool_config_is_validated(field, bad):
    with pytest.raises((ValueError, TypeError), match=field):
        PoolConfig(**{field: bad})


def test_entry_runs_through_the_bootstrap_and_argv_runs_as_given():
    entry = HelperSpec(entry="pkg.mod:main")
    command = entry.command()
    assert command[:3] == [sys.executable, "-c", BOOTSTRAP]
    assert command[3] == "pkg.mod:main"
    assert command[4].endswith("actors")
    assert command[5].endswith("protocol")
    assert HelperSpec(argv=["/bin/helper", "--x"]).command() == ["/bin/helper", "--x"]
