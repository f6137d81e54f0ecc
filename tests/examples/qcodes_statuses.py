"""A database written with QCoDeS' own API, one run per status QCoDeS can record.

:func:`write_status_database` runs QCoDeS in a child process (its config folder and
logging stay out of the test process) and returns the file. Only public QCoDeS API:
``Measurement`` (``register_parameter``, ``set_shapes``, ``run``), ``DataSaver``,
``new_data_set`` with ``mark_started``/``add_results``/``mark_completed``. The runs:

====  ==================  ===========================================================
run   name                what QCoDeS recorded
====  ==================  ===========================================================
1     over_declared       completed; shape declared [300], 200 points written
2     marked_partial      completed by ``mark_completed()`` after 623 of 40 x 36 points
3     raised              completed; the measurement raised after 50 of 200 points
                          (``measurement_exception`` holds the traceback)
4     no_results          completed; parameters registered, no result added
5     never_completed     not completed: started, 80 of 200 points, never marked
6     two_groups          completed; a(x) and b(x) 200 points each, c(y) 20 points
7     four_d              completed; 2 x 3 x 20 x 30, setpoints w, z, y, f (Hz)
====  ==================  ===========================================================
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["STATUS_RUNS", "write_status_database"]

#: run id -> (name, status the preview reports, points per dependent, planned per dependent)
STATUS_RUNS: dict[int, tuple[str, str, dict[str, int], dict[str, int]]] = {
    1: ("over_declared", "ok", {"signal": 200}, {"signal": 300}),
    2: ("marked_partial", "ok", {"current": 623}, {"current": 1440}),
    3: ("raised", "interrupted", {"signal": 50}, {"signal": 200}),
    4: ("no_results", "empty", {"signal": 0}, {"signal": 100}),
    5: ("never_completed", "incomplete", {"signal": 80}, {"signal": 200}),
    6: ("two_groups", "ok", {"a": 200, "b": 200, "c": 20}, {}),
    7: ("four_d", "ok", {"v": 3600}, {"v": 3600}),
}

_WRITE = r"""
import sys, warnings
warnings.simplefilter("ignore")
import numpy as np
import qcodes as qc
from qcodes.dataset import (Measurement, initialise_or_create_database_at,
                            load_or_create_experiment, new_data_set)
from qcodes.dataset.descriptions.dependencies import InterDependencies_
from qcodes.dataset.descriptions.param_spec import ParamSpecBase
from qcodes.parameters import Parameter

qc.config["core"]["db_debug"] = False
initialise_or_create_database_at(sys.argv[1])
exp = load_or_create_experiment("status_cases", sample_name="S9_statuses")

def p(name, unit="V", label=None):
    return Parameter(name, label=label or name, unit=unit, set_cmd=None, get_cmd=None)

x, y, z, w = p("x"), p("y"), p("z", "T"), p("w", "K")
signal, current = p("signal"), p("current", "A")

# 1: a shape declared larger than the sweep; the context ends normally.
meas = Measurement(exp=exp, name="over_declared")
meas.register_parameter(x)
meas.register_parameter(signal, setpoints=(x,))
meas.set_shapes({"signal": (300,)})
with meas.run() as saver:
    for v in np.linspace(0, 1, 200):
        saver.add_result((x, v), (signal, np.sin(6 * v)))

# 2: a writer that finishes its run itself with mark_completed() after a partial row.
xs = ParamSpecBase("x", "numeric", label="x", unit="V")
ys = ParamSpecBase("y", "numeric", label="y", unit="V")
cs = ParamSpecBase("current", "numeric", label="current", unit="A")
ds = new_data_set("marked_partial", exp_id=exp.exp_id)
ds.set_interdependencies(InterDependencies_(dependencies={cs: (ys, xs)}),
                         shapes={"current": (40, 36)})
ds.mark_started()
rows = [{"y": float(i // 36), "x": float(i % 36) * 1e-3, "current": 1e-9 * (i % 36)}
        for i in range(623)]
ds.add_results(rows)
ds.mark_completed()

# 3: the measurement raised inside the context: QCoDeS completes it and stores why.
meas = Measurement(exp=exp, name="raised")
meas.register_parameter(x)
meas.register_parameter(signal, setpoints=(x,))
meas.set_shapes({"signal": (200,)})
try:
    with meas.run() as saver:
        for k, v in enumerate(np.linspace(0, 1, 200)):
            if k == 50:
                raise RuntimeError("lock-in overload at point 50")
            saver.add_result((x, v), (signal, v))
except RuntimeError:
    pass

# 4: parameters registered, no result.
meas = Measurement(exp=exp, name="no_results")
meas.register_parameter(x)
meas.register_parameter(signal, setpoints=(x,))
meas.set_shapes({"signal": (100,)})
with meas.run():
    pass

# 5: started and written to, never completed (its writer is gone).
ss = ParamSpecBase("signal", "numeric", label="signal", unit="V")
ds = new_data_set("never_completed", exp_id=exp.exp_id)
ds.set_interdependencies(InterDependencies_(dependencies={ss: (xs,)}), shapes={"signal": (200,)})
ds.mark_started()
ds.add_results([{"x": float(v), "signal": float(v) ** 2} for v in np.linspace(0, 1, 80)])

# 6: two setpoint groups in one run: 200 + 200 points on x, 20 on y.
a, b, c = p("a"), p("b"), p("c")
meas = Measurement(exp=exp, name="two_groups")
meas.register_parameter(x)
meas.register_parameter(y)
meas.register_parameter(a, setpoints=(x,))
meas.register_parameter(b, setpoints=(x,))
meas.register_parameter(c, setpoints=(y,))
with meas.run() as saver:
    for v in np.linspace(0, 1, 200):
        saver.add_result((x, v), (a, np.cos(v)), (b, np.sin(v)))
    for v in np.linspace(0, 1, 20):
        saver.add_result((y, v), (c, 2 * v))

# 7: four sweep dimensions; each 2-D slice has its own offset: v = 100 w + 10 z + y f'.
v, f = p("v"), p("f", "Hz", "frequency")
meas = Measurement(exp=exp, name="four_d")
for q in (w, z, y, f):
    meas.register_parameter(q)
meas.register_parameter(v, setpoints=(w, z, y, f))
meas.set_shapes({"v": (2, 3, 20, 30)})
with meas.run() as saver:
    for wv in (1.0, 2.0):
        for zv in (0.0, 0.5, 1.0):
            for yv in np.linspace(0, 1, 20):
                xv = np.linspace(6.1e9, 6.2e9, 30)
                saver.add_result((w, wv), (z, zv), (y, yv), (f, xv),
                                 (v, 100 * wv + 10 * zv + yv * (xv - 6.1e9) / 1e8))
print("written")
"""


def write_status_database(path: Path) -> Path:
    """Write the status database at ``path`` with QCoDeS (about 3 seconds) and return it.

    Raises:
        AssertionError: QCoDeS failed (its stderr is in the message).
    """
    env = dict(os.environ, QCODES_USER_PATH=str(path.parent / "qcodes-user"))
    done = subprocess.run(
        [sys.executable, "-c", _WRITE, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=path.parent,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "written" in done.stdout, done.stdout[-3000:]
    return path
