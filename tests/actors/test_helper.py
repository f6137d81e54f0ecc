"""The helper-side library ``actors.helper`` and the child bootstrap (design §3.9).

Real subprocesses, real clock (contributing §F.3); every test checks that no child remains.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import trio
from helper_support import FAST, assert_no_children, spec

import protocol
from actors import HelperExited, HelperStartupFailed, JobFailed, open_helper_pool
from actors.helper import in_helper_child
from protocol.envelope import encode_fields

HEAVY = ("trio", "attr", "attrs", "cattrs")
PROTOCOL_DIR = Path(protocol.__file__).resolve().parent


@pytest.fixture(autouse=True)
def _no_child_left():
    yield
    assert_no_children()


async def test_child_never_imports_trio_attrs_or_cattrs():
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        helper = pool.snapshot().helpers[0]
        assert helper is not None
        modules = await pool.run_job("modules")
    assert not [name for name in modules if name.split(".")[0] in HEAVY]
    assert {"actors.helper", "protocol.envelope", "protocol.framing"} <= set(modules)
    # The package __init__s never ran: "actors" is the bootstrap's bare stub.
    assert "actors._core._config" not in modules
    assert "protocol.codec" not in modules


async def test_child_loads_the_real_protocol_errors_and_no_fault_code():
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        files = await pool.run_job("module_files")
    assert files["protocol.errors"] == str(PROTOCOL_DIR / "errors.py")
    assert files["protocol.envelope"] == str(PROTOCOL_DIR / "envelope.py")
    assert files["actors"] is None  # the bootstrap's bare package stub
    assert "actors._child._faults" not in files  # imported only when a fault is set
    assert "actors._child._call" not in files  # imported at the first run_sync call
    assert set(files) == {
        "actors",
        "actors._child",
        "actors._child._serve",
        "actors._child._stdio",
        "actors._child._subreaper",
        "actors.helper",
        "protocol",
        "protocol._blob",
        "protocol._envelope_checks",
        "protocol._field_error",
        "protocol._strict_json",
        "protocol._envelope_value",
        "protocol._envelope_wire",
        "protocol._error_data",
        "protocol.envelope",
        "protocol.errors",
        "protocol.framing",
    }


async def test_in_helper_child_tells_the_child_from_the_parent():
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        assert await pool.run_job("in_child") is True
    assert in_helper_child() is False


async def test_ready_reports_pid_handlers_and_what_on_startup_opened():
    async with open_helper_pool(spec(options={"db": "runs.db"}), timeouts=FAST) as pool:
        helper = pool.snapshot().helpers[0]
        assert helper is not None
        assert helper.ready["info"] == {"opened": "runs.db", "pid": helper.pid}
        assert helper.ready["pid"] == helper.pid
        assert helper.ready["heavy_modules"] == []
        assert "echo" in helper.ready["handlers"]
        assert helper.alive
        assert helper.state == "idle"
        assert helper.incarnation == 1


async def test_on_startup_failure_fails_the_spawn_with_its_record():
    with pytest.raises(HelperStartupFailed) as caught:
        async with open_helper_pool(spec(options={"fail_startup": True}), timeouts=FAST):
            pytest.fail("the pool must not open")  # pragma: no cover
    assert caught.value.code == "helper_startup_failed"
    assert caught.value.details["record"]["code"] == "source_unreadable"


async def test_prints_in_handlers_do_not_corrupt_the_frame_stream():
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        assert await pool.run_job("noisy", {"x": [1, 2]}) == {"x": [1, 2]}
        assert await pool.run_job("echo", "after") == "after"


async def test_classified_handler_error_keeps_code_and_category():
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        with pytest.raises(JobFailed) as caught:
            await pool.run_job(
                "fail",
                {"message": "db locked", "code": "source_not_ready", "category": "transient"},
            )
        assert (caught.value.code, caught.value.category) == ("source_not_ready", "transient")
        assert caught.value.record.message == "db locked"
        assert caught.value.retryable
        # A handler error does not retire the helper.
        assert await pool.run_job("echo", 1) == 1
        assert pool.snapshot().helpers[0].incarnation == 1  # type: ignore[union-attr]


async def test_other_handler_error_is_handler_failed_with_a_bounded_message():
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        with pytest.raises(JobFailed) as caught:
            await pool.run_job("boom", 5000)
    error = caught.value
    assert (error.code, error.category) == ("handler_failed", "permanent")
    assert error.record.message.startswith("ValueError: boom xxx")
    assert len(error.record.message.encode()) <= 1024
    assert error.__traceback__ is not None  # ours; the child's traceback never crossed
    assert error.__cause__ is None


async def test_unknown_operation_and_unencodable_result_are_errors_not_crashes():
    async with open_helper_pool(spec(), timeouts=FAST) as pool:
        with pytest.raises(JobFailed) as unknown:
            await pool.run_job("no_such_thing")
        with pytest.raises(JobFailed) as unencodable:
            await pool.run_job("unencodable")
        assert await pool.run_job("echo", 2) == 2
    assert unknown.value.code == "unknown_operation"
    assert unencodable.value.code == "reply_unencodable"


async def test_a_result_over_the_reply_limit_is_refused_by_the_child():
    async with open_helper_pool(spec(max_reply=4096), timeouts=FAST) as pool:
        with pytest.raises(JobFailed) as caught:
            await pool.run_job("big", 5000)
        assert await pool.run_job("big", 10) == "x" * 10
    assert caught.value.code == "reply_unencodable"


async def test_unknown_fault_mode_from_the_environment_exits_with_status_2():
    bad = spec(env={"ACTORS_HELPER_FAULT": "no_such_fault"})
    with pytest.raises(HelperExited) as caught:
        async with open_helper_pool(bad, timeouts=FAST):
            pytest.fail("the pool must not open")  # pragma: no cover
    assert caught.value.details == {
        "exit_code": 2,
        "signal": None,
        "stderr": "actors.helper: unknown fault mode 'no_such_fault'; exiting\n",
    }
    assert caught.value.message.endswith(
        "stderr: actors.helper: unknown fault mode 'no_such_fault'; exiting"
    )


async def test_a_helper_whose_parent_is_gone_exits_with_one_line_not_a_traceback():
    # The parent (killed, say) no longer reads: the reply meets a closed pipe (EPIPE).
    helper_spec = spec()
    process = await trio.lowlevel.open_process(
        helper_spec.command(),
        cwd=helper_spec.cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    assert process.stderr is not None
    session = protocol.new_session()
    startup = encode_fields(
        kind="startup", session=session, generation=0, operation="startup", payload={}
    )
    await process.stdin.send_all(startup)
    with trio.fail_after(10):
        ready = await process.stdout.receive_some(65536)
    assert ready  # the ready frame
    await process.stdin.send_all(
        encode_fields(kind="job", session=session, generation=1, operation="sleep", payload=0.2)
    )
    await process.stdout.aclose()  # gone before the reply
    with trio.fail_after(10):
        await process.wait()
        errors = b""
        while chunk := await process.stderr.receive_some(65536):
            errors += chunk
    await process.stdin.aclose()
    await process.stderr.aclose()
    assert process.returncode == 0
    assert errors.decode() == "actors.helper: the parent closed the reply pipe; exiting\n"
