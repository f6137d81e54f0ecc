#!/usr/bin/env python3
"""Create ``qcodes_plots.db``: runs that test how honestly a preview is drawn.

Written with the real QCoDeS, through its public API only
(``initialise_or_create_database_at``, ``load_or_create_experiment``,
``Measurement`` with ``register_parameter``/``set_shapes``/``register_parent``,
``DummyInstrument``, ``Parameter``, ``Station``, ``datasaver.add_result``,
``DataSet.add_metadata``), like ``qcodes_sample.db`` (see README.md).

Usage (QCoDeS is not a dependency of the project; use a scratch virtualenv)::

    python3 -m venv /tmp/qcvenv && /tmp/qcvenv/bin/pip install qcodes
    /tmp/qcvenv/bin/python tests/data/make_plot_samples.py [OUTPUT_DB]

Runs written (run_id in order); the README describes each one:

 1  psd_log_sweep          log-spaced frequency sweep, 1 Hz..100 kHz; PSD 1e-16..1e-13
 2  leakage_current        linear gate sweep; current over four decades (log y only)
 3  thermoelectric_symlog  linear bias sweep; voltage crosses zero, 1e-9..1e-3 V
 4  magnet_gate_bias_3d    3-D: magnet_field (6) x gate (20) x bias (15); child of run 2
 5  temp_field_gate_bias   4-D: temperature (3) x magnet_field (4) x gate (10) x bias (12)
 6  (a Unicode name)       Greek parameter name, long Unicode labels, kΩ, µeV, Φ₀, emoji
 7  dead_lockin            two dependents: one finite, one all NaN; and an all-NaN map
 8  crashed_partial_sweep  writer killed after 40 of 100 points (is_completed = 0)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DEFAULT_DB = HERE / "qcodes_plots.db"

EXP_NOISE = ("noise_spectroscopy", "S3_resonator_C")
EXP_MAGNET = ("magnet_transport", "S4_nanowire_D")
EXP_FRIDGE = ("dilution_fridge_thermometry", "MXC_RuO₂_sensor")
UNICODE_RUN = "🧊 mixing-chamber R(ε) Δ-sweep"


def _setup(db_path: Path) -> None:
    import qcodes as qc
    from qcodes.dataset import initialise_or_create_database_at

    qc.config["core"]["db_debug"] = False
    initialise_or_create_database_at(str(db_path))


def _p(name: str, label: str, unit: str):
    from qcodes.parameters import Parameter

    return Parameter(name, label=label, unit=unit, get_cmd=None, set_cmd=None)


def build(db_path: Path) -> None:
    from qcodes.dataset import Measurement, load_or_create_experiment
    from qcodes.instrument import Instrument
    from qcodes.instrument_drivers.mock_instruments import DummyInstrument
    from qcodes.station import Station

    _setup(db_path)
    Instrument.close_all()
    dac = DummyInstrument("dac", gates=["gate", "bias"])
    magnet = DummyInstrument("magnet", gates=["ramp_rate"])
    field = _p("magnet_field", "Magnet field", "T")
    station = Station(dac, magnet)
    exp_noise = load_or_create_experiment(*EXP_NOISE)
    exp_magnet = load_or_create_experiment(*EXP_MAGNET)
    exp_fridge = load_or_create_experiment(*EXP_FRIDGE)

    # -- run 1: a log-spaced do1d over five decades of frequency ---------------------
    rng = np.random.default_rng(101)
    freq = _p("frequency", "Frequency", "Hz")
    psd = _p("psd", "Current noise PSD", "A²/Hz")
    meas = Measurement(exp=exp_noise, station=station, name="psd_log_sweep")
    meas.register_parameter(freq)
    meas.register_parameter(psd, setpoints=(freq,))
    meas.set_shapes({psd.full_name: (121,)})
    with meas.run() as ds:
        for f in np.geomspace(1.0, 1e5, 121):
            s = (1e-13 * f**-0.8 + 5e-17) * np.exp(0.1 * rng.standard_normal())
            s += 3e-15 * np.exp(-(np.log10(f / 50.0) ** 2) / 0.002)  # mains pick-up
            ds.add_result((freq, f), (psd, s))
        ds.dataset.add_metadata("operator", "Ada")
        ds.dataset.add_metadata("amplifier", "femto DLPCA-200, 10⁸ V/A")
    parent = ds.dataset

    # -- run 2: linear sweep, data over four decades ---------------------------------
    rng = np.random.default_rng(102)
    leak = _p("leakage", "Gate leakage current", "A")
    meas = Measurement(exp=exp_noise, station=station, name="leakage_current")
    meas.register_parameter(dac.gate)
    meas.register_parameter(leak, setpoints=(dac.gate,))
    meas.set_shapes({leak.full_name: (101,)})
    with meas.run() as ds:
        for v in np.linspace(0.0, 2.0, 101):
            i = 1e-12 * 10 ** (2.0 * v) * np.exp(0.05 * rng.standard_normal())
            ds.add_result((dac.gate, v), (leak, i))
        ds.dataset.add_metadata("operator", "Grace")
    leakage_run = ds.dataset

    # -- run 3: data that cross zero over six decades (symmetric log) ----------------
    rng = np.random.default_rng(103)
    thermo = _p("thermo_voltage", "Thermoelectric voltage", "V")
    meas = Measurement(exp=exp_noise, station=station, name="thermoelectric_symlog")
    meas.register_parameter(dac.bias)
    meas.register_parameter(thermo, setpoints=(dac.bias,))
    meas.set_shapes({thermo.full_name: (161,)})
    with meas.run() as ds:
        for x in np.linspace(-1.0, 1.0, 161):
            y = np.sign(x) * 10 ** (-9.0 + 6.0 * abs(x)) * (1 + 0.02 * rng.standard_normal())
            ds.add_result((dac.bias, x), (thermo, y))
    del parent

    # -- run 4: a 3-D run (magnet field x gate x bias), a child of run 2 -------------
    rng = np.random.default_rng(104)
    cond = _p("conductance", "Differential conductance", "S")
    bias = _p("bias_mv", "Bias", "mV")
    fields = np.linspace(0.0, 1.0, 6)
    gates = np.linspace(-0.5, 0.5, 20)
    biases = np.linspace(-2.0, 2.0, 15)
    meas = Measurement(exp=exp_magnet, station=station, name="magnet_gate_bias_3d")
    meas.register_parent(leakage_run, link_type="calibration", description="gate leakage check")
    meas.register_parameter(field)
    meas.register_parameter(dac.gate)
    meas.register_parameter(bias)
    meas.register_parameter(cond, setpoints=(field, dac.gate, bias))
    meas.set_shapes({cond.full_name: (6, 20, 15)})
    with meas.run() as ds:
        for b_field in fields:
            for g in gates:
                gap = 0.3 + 1.2 * b_field  # the peak moves out with field
                g_s = 2e-6 * (
                    np.exp(-((np.abs(biases) - gap) ** 2) / 0.05) * (1 + g)
                    + 0.05 * rng.standard_normal(biases.size)
                )
                ds.add_result(
                    (field, np.full(biases.size, b_field)),
                    (dac.gate, np.full(biases.size, g)),
                    (bias, biases),
                    (cond, g_s),
                )

    # -- run 5: a 4-D run -----------------------------------------------------------
    rng = np.random.default_rng(105)
    temp = _p("temperature", "Mixing-chamber temperature", "K")
    meas = Measurement(exp=exp_magnet, station=station, name="temp_field_gate_bias")
    meas.register_parameter(temp)
    meas.register_parameter(field)
    meas.register_parameter(dac.gate)
    meas.register_parameter(bias)
    meas.register_parameter(cond, setpoints=(temp, field, dac.gate, bias))
    meas.set_shapes({cond.full_name: (3, 4, 10, 12)})
    b12 = np.linspace(-2.0, 2.0, 12)
    with meas.run() as ds:
        for t in (0.02, 0.1, 0.5):
            for b_field in (0.0, 0.5, 1.0, 1.5):
                for g in np.linspace(-0.5, 0.5, 10):
                    width = 0.05 + t
                    g_s = 1e-6 * (
                        np.exp(-((b12 - b_field + g) ** 2) / width)
                        + 0.03 * rng.standard_normal(b12.size)
                    )
                    ds.add_result(
                        (temp, np.full(b12.size, t)),
                        (field, np.full(b12.size, b_field)),
                        (dac.gate, np.full(b12.size, g)),
                        (bias, b12),
                        (cond, g_s),
                    )

    # -- run 6: Unicode names, long labels, units that must never be cut -----------
    rng = np.random.default_rng(106)
    eps = _p("ε_detuning", "ε detuning (Zeeman-split, Δ-corrected)", "µeV")
    r_mxc = _p(
        "r_mxc",
        "R_{MXC} (Δ-compensated RuO₂ mixing-chamber thermometer, four-wire, 10 nA excitation)",
        "kΩ",
    )
    flux = _p("flux", "Φ 🧲 flux through the SQUID loop", "Φ₀")
    meas = Measurement(exp=exp_fridge, station=station, name=UNICODE_RUN)
    meas.register_parameter(eps)
    meas.register_parameter(r_mxc, setpoints=(eps,))
    meas.register_parameter(flux, setpoints=(eps,))
    meas.set_shapes({r_mxc.full_name: (90,), flux.full_name: (90,)})
    with meas.run() as ds:
        for e in np.linspace(-40.0, 40.0, 90):
            r = 10.0 + 5.0 * np.tanh(e / 15.0) + 0.1 * rng.standard_normal()
            phi = 0.5 * np.sin(e / 8.0) + 0.01 * rng.standard_normal()
            ds.add_result((eps, e), (r_mxc, r), (flux, phi))
        ds.dataset.add_metadata("operator", "Łukasz Ωmega ✓")

    # -- run 7: a dead lock-in (all NaN), beside a working meter; an all-NaN map ----
    rng = np.random.default_rng(107)
    current = _p("dmm_current", "Drain current", "A")
    dead = _p("lockin_dead", "Lock-in X (cable unplugged)", "V")
    dead_map = _p("lockin_dead_map", "Lock-in R map", "V")
    meas = Measurement(exp=exp_magnet, station=station, name="dead_lockin")
    meas.register_parameter(field)
    meas.register_parameter(dac.gate)
    meas.register_parameter(current, setpoints=(dac.gate,))
    meas.register_parameter(dead, setpoints=(dac.gate,))
    meas.register_parameter(dead_map, setpoints=(field, dac.gate))
    with meas.run() as ds:
        for k, g in enumerate(np.linspace(-1.0, 1.0, 60)):
            i = 1e-9 * (1 + np.tanh(4 * g)) + 1e-11 * rng.standard_normal()
            ds.add_result((dac.gate, g), (current, i), (dead, np.nan))
            ds.add_result(
                (field, 0.1 * (k // 10)), (dac.gate, -1.0 + 0.2 * (k % 10)), (dead_map, np.nan)
            )

    station.close_all_registered_instruments()
    # -- run 8: a sweep whose writer died: the planned range is known, the data not --
    subprocess.run([sys.executable, __file__, "--crash-child", str(db_path)], check=False)


def crash_child(db_path: Path) -> None:
    """Write 40 of 100 points of a sweep and die (no cleanup, no completion)."""
    from qcodes.dataset import Measurement, load_or_create_experiment
    from qcodes.instrument_drivers.mock_instruments import DummyInstrument

    _setup(db_path)
    dac = DummyInstrument("dac", gates=["gate"])
    exp = load_or_create_experiment(*EXP_NOISE)
    rng = np.random.default_rng(108)
    volt = _p("dmm_voltage", "Drain voltage", "V")
    meas = Measurement(exp=exp, name="crashed_partial_sweep")
    meas.register_parameter(dac.gate)
    meas.register_parameter(volt, setpoints=(dac.gate,))
    meas.set_shapes({volt.full_name: (100,)})
    meas.write_period = 0.001
    with meas.run() as ds:
        for i, x in enumerate(np.linspace(-1.0, 1.0, 100)):
            ds.add_result((dac.gate, x), (volt, 0.2 * x + 0.01 * rng.standard_normal()))
            if i == 39:
                ds.flush_data_to_database(block=True)
                os._exit(3)  # a killed kernel: the run stays unfinished


def _ensure_hashseed() -> None:
    """Re-exec with PYTHONHASHSEED=0: QCoDeS orders the rows of one add_result with
    several dependents by set iteration, which follows string hashing."""
    if os.environ.get("PYTHONHASHSEED") != "0":
        env = dict(os.environ, PYTHONHASHSEED="0")
        os.execve(sys.executable, [sys.executable, os.path.abspath(__file__), *sys.argv[1:]], env)


def _checkpoint(db: Path) -> None:
    """Fold QCoDeS's WAL file back into the .db so the file stands alone."""
    import gc
    import sqlite3

    gc.collect()
    con = sqlite3.connect(str(db))
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()


def main() -> None:
    _ensure_hashseed()
    if len(sys.argv) >= 3 and sys.argv[1] == "--crash-child":
        crash_child(Path(sys.argv[2]))
        return
    db = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_DB
    db.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm", "-journal"):
        path = Path(str(db) + suffix)
        if path.exists():
            path.unlink()
    build(db)
    _checkpoint(db)
    print(f"wrote {db} ({db.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
