// Explore the selected run: zoom, hover values, line cuts of maps (design §7.7).
// Loaded by dashboard.html after uPlot; the page calls `explore.show(summary, send)` for
// the selected run and gives it every message first (`explore.handle(m)` is true for
// the answers to its own requests, ids "x1", "x2", ...). Drag a box to zoom,
// double-click to see the whole run again; the readout says what is under the cursor;
// a click on a map draws its horizontal and vertical cut through that cell. Traces of
// other runs can be overlaid (`explore.overlay(runId, name)`, one colour each, a legend
// naming run id and name), and what is shown is exported as CSV or NumPy .npz.
"use strict";
(function () {
  const VIRIDIS = [[68, 1, 84], [72, 40, 120], [62, 74, 137], [49, 104, 142], [38, 130, 142],
    [31, 158, 137], [53, 183, 121], [109, 205, 89], [180, 222, 44], [253, 231, 37]];
  const WIDTH = 640, HEIGHT = 320, CUT_WIDTH = 316, CUT_HEIGHT = 200, LOST_AFTER_MS = 30000;

  function colour(t) {
    const p = Math.min(Math.max(t, 0), 1) * (VIRIDIS.length - 1);
    const k = Math.min(Math.floor(p), VIRIDIS.length - 2), f = p - k;
    return VIRIDIS[k].map((c, n) => Math.round(c + f * (VIRIDIS[k + 1][n] - c)));
  }
  // A measured value in SI units is often tiny (a current of 2e-9 A) or huge: below 1e-3
  // and from 1e6 on it is written with an exponent, never rounded away to "0".
  function decimal(v, digits) {
    const a = Math.abs(v), short = +v.toPrecision(digits);
    return a !== 0 && (a < 1e-3 || a >= 1e6) ? short.toExponential() : String(short);
  }
  function number(v) { return v === null || v === undefined ? "no value" : decimal(v, 7); }
  // Axis tick labels (uPlot's own show at most three decimals); a null split is unlabelled.
  function ticks(u, splits) { return splits.map((v) => v === null ? "" : decimal(v, 6)); }
  // SI prefixes as in the PNGs (design §5.2): the power of ten of an axis's largest value
  // folds into its unit (6.1e9 Hz is 6.1 GHz); a unit without prefixes gets "×10ⁿ".
  const PREFIXES = {"-15": "f", "-12": "p", "-9": "n", "-6": "µ", "-3": "m", "0": "", "3": "k",
    "6": "M", "9": "G", "12": "T"};
  const PREFIXABLE = new Set(["V", "A", "Hz", "s", "W", "Ω", "F", "H", "T", "K", "S", "m", "g",
    "J", "eV", "Pa", "N", "C", "Ohm", "ohm"]);
  const SUPERSCRIPT = {"-": "⁻", "0": "⁰", "1": "¹", "2": "²", "3": "³", "4": "⁴", "5": "⁵",
    "6": "⁶", "7": "⁷", "8": "⁸", "9": "⁹"};
  function siScale([lo, hi], unit) {
    const big = Math.max(Math.abs(lo), Math.abs(hi));
    let exponent = 0;
    if (big > 0 && isFinite(big)) {
      const e = Math.floor(Math.log10(big));
      exponent = e === -1 || Math.abs(e) > 300 ? 0 : 3 * Math.floor(e / 3);
    }
    if (PREFIXABLE.has(unit) && String(exponent) in PREFIXES) {
      return {factor: 10 ** -exponent, unit: PREFIXES[String(exponent)] + unit};
    }
    if (exponent && (big >= 1e4 || big < 1e-2)) {
      const power = `×10${[...String(exponent)].map((c) => SUPERSCRIPT[c]).join("")}`;
      return {factor: 10 ** -exponent, unit: `${power} ${unit}`.trim()};
    }
    return {factor: 1, unit};
  }
  // Tick labels in an axis's prefixed unit, with as many decimals as the step needs.
  function siTicks(scale) {
    return (u, splits) => {
      const shown = splits.filter((v) => v !== null).map((v) => v * scale.factor);
      let step = Infinity;
      for (let k = 1; k < shown.length; k++) step = Math.min(step, Math.abs(shown[k] - shown[k - 1]));
      let digits = 0;
      if (isFinite(step) && step > 0) {
        digits = Math.max(0, Math.ceil(-Math.log10(step) - 1e-9));
        while (digits < 12 && Math.abs(step * 10 ** digits - Math.round(step * 10 ** digits)) > 1e-6 * step * 10 ** digits) digits++;
      }
      return splits.map((v) => v === null ? "" : (v * scale.factor).toFixed(digits).replace(/^-(0\.?0*)$/, "$1"));
    };
  }
  function siAxis(thing, range, extra) {
    const scale = siScale(range, thing.unit || "");
    const text = (named(thing) + (scale.unit ? ` (${scale.unit})` : "")).trim();
    return {label: text, values: thing.levels && thing.levels.length ? ticks : siTicks(scale), si: scale, ...extra};
  }
  function named(thing) { return thing.label || thing.name; }
  function unit(thing) { return thing.unit ? ` ${thing.unit}` : ""; }
  function title(thing) { return `${named(thing)}${thing.unit ? ` (${thing.unit})` : ""}`; }
  function valueText(thing, v) {
    const level = thing.levels && thing.levels.length && v !== null ? thing.levels[v] : undefined;
    return level !== undefined ? level : `${number(v)}${unit(thing)}`;
  }
  function nearest(values, v) {  // index of the value closest to v (values ascending)
    let best = 0;
    for (let k = 1; k < values.length; k++) {
      if (values[k] !== null && Math.abs(values[k] - v) < Math.abs(values[best] - v)) best = k;
    }
    return best;
  }
  function extent(values) {
    let lo = Infinity, hi = -Infinity;
    for (const v of values) if (v !== null) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
    return lo <= hi ? [lo, hi === lo ? lo + 1 : hi] : [0, 1];
  }
  function span(u, lo, hi) {  // a scale's range: never empty, never null (a flat or blank series)
    if (lo === null || hi === null || !isFinite(lo) || !isFinite(hi)) return [0, 1];
    return lo === hi ? [lo - Math.abs(lo || 1) / 2, hi + Math.abs(hi || 1) / 2] : [lo, hi];
  }
  function whole(values) {  // the range uPlot shows all of `values` in: `span` of min, max
    let lo = null, hi = null;
    for (const v of values) {
      if (v !== null) { lo = lo === null ? v : Math.min(lo, v); hi = hi === null ? v : Math.max(hi, v); }
    }
    return span(null, lo, hi);
  }
  function edges(centres) {  // the outer edges of evenly drawn cells around the centres
    const [lo, hi] = extent(centres), n = centres.length;
    const half = n > 1 ? (hi - lo) / (n - 1) / 2 : 0.5;
    return [lo - half, hi + half];
  }

  const COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
    "#17becf"];

  // ---- export: CSV text and a NumPy .npz (a zip of .npy files, stored) -----------------
  function npy(array) {  // {dtype: "<f8" | "<U<n>", shape, values}: one .npy file's bytes
    const header = `{'descr': '${array.dtype}', 'fortran_order': False, 'shape': (${array.shape.join(", ")}${array.shape.length === 1 ? "," : ""}), }`;
    const pad = 64 - ((10 + header.length + 1) % 64);
    const head = new TextEncoder().encode(`${header}${" ".repeat(pad % 64)}\n`);
    let body;
    if (array.dtype === "<f8") {
      body = new Uint8Array(new Float64Array(array.values.map((v) => v === null ? NaN : v)).buffer);
    } else {  // fixed-width UTF-32 strings
      const width = Number(array.dtype.slice(2)), codes = new Uint32Array(array.values.length * width);
      array.values.forEach((text, k) => [...text].slice(0, width).forEach((c, n) => { codes[k * width + n] = c.codePointAt(0); }));
      body = new Uint8Array(codes.buffer);
    }
    const out = new Uint8Array(10 + head.length + body.length);
    out.set([0x93, 78, 85, 77, 80, 89, 1, 0, head.length & 255, head.length >> 8]);
    out.set(head, 10);
    out.set(body, 10 + head.length);
    return out;
  }
  const CRC = Array.from({length: 256}, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  function crc32(bytes) {
    let c = 0xffffffff;
    for (const b of bytes) c = CRC[(c ^ b) & 255] ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  }
  function zip(files) {  // [[name, bytes]]: a zip archive, no compression
    const parts = [], central = [];
    let offset = 0;
    for (const [name, data] of files) {
      const title = new TextEncoder().encode(name), crc = crc32(data);
      const local = new DataView(new ArrayBuffer(30));
      [[0, 0x04034b50, 4], [4, 20, 2], [14, crc, 4], [18, data.length, 4], [22, data.length, 4],
       [26, title.length, 2]].forEach(([at, v, n]) => n === 4 ? local.setUint32(at, v, true) : local.setUint16(at, v, true));
      const entry = new DataView(new ArrayBuffer(46));
      [[0, 0x02014b50, 4], [4, 20, 2], [6, 20, 2], [16, crc, 4], [20, data.length, 4], [24, data.length, 4],
       [28, title.length, 2], [42, offset, 4]].forEach(([at, v, n]) => n === 4 ? entry.setUint32(at, v, true) : entry.setUint16(at, v, true));
      parts.push(new Uint8Array(local.buffer), title, data);
      central.push(new Uint8Array(entry.buffer), title);
      offset += 30 + title.length + data.length;
    }
    const size = central.reduce((a, b) => a + b.length, 0);
    const end = new DataView(new ArrayBuffer(22));
    [[0, 0x06054b50, 4], [8, files.length, 2], [10, files.length, 2], [12, size, 4], [16, offset, 4]]
      .forEach(([at, v, n]) => n === 4 ? end.setUint32(at, v, true) : end.setUint16(at, v, true));
    return new Blob([...parts, ...central, new Uint8Array(end.buffer)], {type: "application/zip"});
  }
  function strings(values) {
    const width = Math.max(1, ...values.map((v) => [...v].length));
    return {dtype: `<U${width}`, shape: [values.length], values};
  }
  function download(blob, name) {
    const a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = name;
    document.body.appendChild(a);
    a.click();
    setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 10000);
  }
  function csvCell(v) {
    const text = v === null || v === undefined ? "" : String(v);
    return /[",\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
  }

  const explore = {
    runId: null, key: "", data: null, index: 0, plot: null, cuts: null, hover: null, full: null,
    plotKey: "", readFrom: "",
    send: null, nextId: 1, pending: new Set(), wanted: "", asked: 0,
    overlays: new Map(),    // run id -> {name, data: run_data_reply | null} of overlaid runs
    overlayAsks: new Map(), // request id -> run id

    // Called by the page whenever it shows the selected run; `slice`: the 2-D slice
    // picked for a run with more than two sweep dimensions (null: the newest one).
    show(summary, send, slice = null) {
      this.send = send;
      const box = document.getElementById("detail");
      if (!document.getElementById("explore")) {
        const div = document.createElement("div");
        div.id = "explore";
        div.innerHTML = `<h3>Explore <span id="xinfo" class="note"></span></h3>
          <div id="xtools"><select id="xseries" hidden></select>
            <button id="xcsv" title="what the plot shows, as CSV">export CSV</button>
            <button id="xnpz" title="what the plot shows, as NumPy .npz">export .npz</button>
            <span id="xoverlays" class="note"></span></div><div id="xplot"></div>
          <div id="xreadout" class="note">&nbsp;</div>
          <div id="xcuts" style="display:flex;gap:8px"><div id="xcuth"></div><div id="xcutv"></div></div>`;
        box.insertBefore(div, document.getElementById("facts"));  // below the preview
        div.querySelector("#xseries").onchange = (e) => { this.index = Number(e.target.value); this.draw(); };
        div.querySelector("#xcsv").onclick = () => this.exportCsv();
        div.querySelector("#xnpz").onclick = () => this.exportNpz();
      }
      const key = `${summary.run_id}:${summary.rows}:${summary.completed}:${slice ?? "-"}`;
      this.slice = slice;
      if (summary.run_id !== this.runId) {
        this.runId = summary.run_id; this.data = null; this.index = 0; this.clear();
      }
      this.wanted = key;
      // An answer lost with its connection is asked again after a while.
      if (this.pending.size && Date.now() - this.asked > LOST_AFTER_MS) this.pending.clear();
      if (key !== this.key && this.pending.size === 0) this.ask(key);
    },

    ask(key) {
      const id = `x${this.nextId++}`;
      this.key = key;
      this.asked = Date.now();
      this.pending.add(id);
      const fields = {type: "run_data", request_id: id, run_id: this.runId};
      if (this.slice !== null && this.slice !== undefined) fields.slice = this.slice;
      this.send(fields);
      document.getElementById("xinfo").textContent = "loading…";
    },

    // Every message of the page passes here first; true: it was ours.
    handle(m) {
      if (m.request_id && this.overlayAsks.has(m.request_id)) {
        const runId = this.overlayAsks.get(m.request_id);
        this.overlayAsks.delete(m.request_id);
        const entry = this.overlays.get(runId);
        if (entry && m.type === "run_data_reply") { entry.data = m; this.draw(true); }
        else if (entry) { entry.error = `${m.code}: ${m.message}`; this.legend(); }
        return true;
      }
      if (!m.request_id || !this.pending.has(m.request_id)) return false;
      this.pending.delete(m.request_id);
      if (m.type === "error") {
        document.getElementById("xinfo").textContent = `${m.code}: ${m.message}`;
        document.body.dataset.exploreError = m.code;
      } else if (m.type === "run_data_reply" && m.run_id === this.runId) {
        const first = this.data === null;
        this.data = m;
        if (this.index >= m.series.length) this.index = 0;
        this.fillChoices();
        this.draw(!first);
      }
      if (this.wanted !== this.key && this.runId !== null) this.ask(this.wanted);
      return true;
    },

    fillChoices() {
      const box = document.getElementById("xseries");
      box.innerHTML = this.data.series.map((s, k) =>
        `<option value="${k}">${title(s).replace(/[<&]/g, "")}${s.component ? ` ${s.component}` : ""}</option>`).join("");
      box.value = String(this.index);
      box.hidden = this.data.series.length < 2;
    },

    clear() {
      if (this.plot) this.plot.destroy();
      if (this.cuts) { this.cuts.h.plot.destroy(); this.cuts.v.plot.destroy(); }
      this.plot = null; this.cuts = null; this.hover = null; this.full = null;
      for (const id of ["xplot", "xcuth", "xcutv"]) {
        const el = document.getElementById(id);
        if (el) el.innerHTML = "";
      }
    },

    // Draw the chosen series; `keep`: a newer answer for the same run keeps the person's
    // zoom, if any (a run being written that was shown whole is shown whole again).
    draw(keep = false) {
      const zoom = keep && this.zoomedIn() ? {x: {...this.plot.scales.x}, y: {...this.plot.scales.y}} : null;
      this.clear();
      const s = this.data && this.data.series[this.index];
      const info = document.getElementById("xinfo");
      if (!s || !s.values.length) {
        info.textContent = "no data";
        document.body.dataset.explore = `${this.runId}:empty`;
        return;
      }
      const reduced = s.shape.join(" × ") !== s.source_shape.join(" × ");
      info.textContent = `${s.source_shape.join(" × ")} points` + (reduced ? ` shown as ${s.shape.join(" × ")}` +
        (s.shape.length === 2 ? " blocks (colour: block mean)" : " (min and max per bucket)") : "") +
        (s.nonfinite ? ` · ${s.nonfinite} missing or non-finite` : "") +
        (s.shape.length === 2 ? ` · colour ${title(s)} ${extent(s.values).map(number).join(" … ")}` : "") +
        (s.slice_label ? ` · ${s.slice_label}` : "");
      this.plot = s.shape.length === 2 ? this.map(s) : this.trace(s);
      if (zoom && zoom.x.min !== null) {
        this.plot.batch(() => {
          this.plot.setScale("x", {min: zoom.x.min, max: zoom.x.max});
          this.plot.setScale("y", {min: zoom.y.min, max: zoom.y.max});
        });
      }
      document.body.dataset.explore = `${this.runId}:${this.index}:${this.data.bytes}`;
      document.body.dataset.exploreSlice = s.slice === null || s.slice === undefined ? "-" : String(s.slice);
      // A readout of another run, series or slice says nothing of this plot: blanked.
      this.plotKey = `${this.runId}:${this.index}:${document.body.dataset.exploreSlice}`;
      if (this.readFrom !== this.plotKey) document.getElementById("xreadout").textContent = "\u00a0";
    },

    // Whether the plot shows less than the whole of what it was drawn from (`full`).
    zoomedIn() {
      if (!this.plot || !this.full) return false;
      const inside = (scale, [lo, hi]) => {
        const tiny = (hi - lo) * 1e-9;
        return scale.min > lo + tiny || scale.max < hi - tiny;
      };
      return inside(this.plot.scales.x, this.full.x) || inside(this.plot.scales.y, this.full.y);
    },

    options(s, xAxis, yAxis, extra) {
      return {
        width: WIDTH, height: HEIGHT, legend: {show: false},
        scales: {x: {time: false, range: span}, y: {range: span}},
        axes: [siAxis(xAxis, this.full.x), siAxis(yAxis, this.full.y, {size: 70})],
        cursor: {drag: {x: true, y: true, uni: 30}, points: {show: false}},
        ...extra,
      };
    },

    // ---- overlays: traces of other runs of the same parameters, one colour each ----------
    // Toggle run `runId` (named `name`) in the overlay; true if it is overlaid now.
    overlay(runId, name) {
      if (this.overlays.has(runId)) {
        this.overlays.delete(runId);
        this.draw(true);
        return false;
      }
      this.overlays.set(runId, {name, data: null, error: ""});
      const id = `xo${this.nextId++}`;
      this.overlayAsks.set(id, runId);
      this.send({type: "run_data", request_id: id, run_id: runId});
      this.legend();
      return true;
    },

    // The shown series of each overlaid run: the one of the same name and component.
    overlaid(s) {
      const found = [];
      for (const [runId, entry] of this.overlays) {
        if (runId === this.runId || !entry.data) continue;
        const other = entry.data.series.find((o) => o.name === s.name && o.component === s.component);
        found.push({runId, name: entry.name, series: other && other.shape.length === 1 ? other : null});
      }
      return found;
    },

    legend() {
      const box = document.getElementById("xoverlays");
      if (!box) return;
      const s = this.data && this.data.series[this.index];
      const words = [...this.overlays].filter(([runId]) => runId !== this.runId).map(([runId, entry]) => {
        if (entry.error) return `#${runId}: ${entry.error}`;
        if (!entry.data) return `#${runId} loading…`;
        const other = s && this.overlaid(s).find((o) => o.runId === runId);
        return other && other.series ? "" : `#${runId} ${entry.name} has no trace of ${s ? named(s) : "this"}`;
      }).filter(Boolean);
      box.textContent = words.join(" · ");
      document.body.dataset.overlays = [...this.overlays.keys()].join(",");
    },

    trace(s) {
      const axis = s.axes[0];
      const sorted = (series) => {
        const ax = series.axes[0];
        const order = [...series.values.keys()].filter((k) => ax.values[k] !== null);
        const ascending = order.every((k, n) => n === 0 || ax.values[order[n - 1]] <= ax.values[k]);
        if (!ascending) order.sort((a, b) => ax.values[a] - ax.values[b]);
        return [order.map((k) => ax.values[k]), order.map((k) => series.values[k])];
      };
      const own = sorted(s);
      const others = this.overlaid(s).filter((o) => o.series);
      const data = others.length ? uPlot.join([own, ...others.map((o) => sorted(o.series))]) : own;
      this.full = {x: whole(data[0]), y: whole([].concat(...data.slice(1)))};
      this.shown = {runs: [this.runId, ...others.map((o) => o.runId)], axis, series: s, data};
      const label = (runId, name) => `#${runId} ${name}`;
      const lines = [{label: label(this.runId, this.data.name), stroke: COLOURS[0], width: 1,
                      points: {show: own[0].length < 60}, spanGaps: others.length > 0}];
      others.forEach((o, k) => lines.push({label: label(o.runId, o.name), stroke: COLOURS[(k + 1) % COLOURS.length],
                                           width: 1, points: {show: false}, spanGaps: true}));
      const opts = this.options(s, axis, s, {
        legend: {show: others.length > 0, live: false},
        series: [{label: named(axis)}, ...lines],
        hooks: {setCursor: [(u) => this.readTrace(u, s, axis)]},
      });
      const plot = new uPlot(opts, data, document.getElementById("xplot"));
      this.legend();
      this.resetOnDoubleClick(plot, extent(data[0]), null);
      return plot;
    },

    readTrace(u, s, axis) {
      const k = u.cursor.idx;
      if (k === null || k === undefined) return;
      const x = u.data[0][k], y = u.data[1][k];
      this.hover = {x, y};
      this.readFrom = this.plotKey;
      document.getElementById("xreadout").textContent =
        `${named(axis)} = ${valueText(axis, x)} · ${named(s)} = ${valueText(s, y)}`;
    },

    map(s) {
      const [rows, cols] = s.shape, [outer, inner] = s.axes;
      const xr = edges(inner.values), yr = edges(outer.values);
      this.full = {x: xr, y: yr};
      const [lo, hi] = extent(s.values);
      const image = document.createElement("canvas");
      image.width = cols; image.height = rows;
      const ctx = image.getContext("2d"), pixels = ctx.createImageData(cols, rows);
      for (let i = 0; i < rows; i++) {
        for (let j = 0; j < cols; j++) {
          const v = s.values[i * cols + j], at = ((rows - 1 - i) * cols + j) * 4;  // row 0 at the bottom
          if (v === null) continue;  // a gap stays transparent
          const [r, g, b] = colour((v - lo) / (hi - lo));
          pixels.data.set([r, g, b, 255], at);
        }
      }
      ctx.putImageData(pixels, 0, 0);
      const draw = (u) => {
        const c = u.ctx, left = u.valToPos(xr[0], "x", true), right = u.valToPos(xr[1], "x", true);
        const top = u.valToPos(yr[1], "y", true), bottom = u.valToPos(yr[0], "y", true);
        c.save();
        c.beginPath(); c.rect(u.bbox.left, u.bbox.top, u.bbox.width, u.bbox.height); c.clip();
        c.imageSmoothingEnabled = false;
        c.drawImage(image, left, top, right - left, bottom - top);
        c.restore();
      };
      const opts = this.options(s, inner, outer, {
        series: [{}, {stroke: "transparent", points: {show: false}}],
        hooks: {draw: [draw], setCursor: [(u) => this.readMap(u, s)]},
      });
      const plot = new uPlot(opts, [xr, yr], document.getElementById("xplot"));
      this.shown = {runs: [this.runId], map: s};
      this.legend();
      this.resetOnDoubleClick(plot, xr, yr);
      let down = null;
      plot.over.addEventListener("mousedown", (e) => { down = [e.clientX, e.clientY]; });
      plot.over.addEventListener("click", (e) => {
        if (down && Math.hypot(e.clientX - down[0], e.clientY - down[1]) > 3) return;  // a zoom
        this.cut(s, plot);
      });
      return plot;
    },

    // ---- export of what the plot shows ----------------------------------------------
    fileName(ext) {
      const s = this.data.series[this.index];
      const part = `${s.name}${s.component ? "-" + s.component : ""}`.replace(/[^\w.-]+/g, "_");
      return `run${this.runId}-${part}${this.overlays.size ? "-overlay" : ""}.${ext}`;
    },

    // Columns: a trace gives run, its setpoint and its values (one row per point shown,
    // overlays after it); a map gives its outer and inner setpoints and the value of
    // each cell (block means when reduced). Headers name each column with its unit.
    table() {
      const shown = this.shown, s = this.data.series[this.index];
      const head = (thing) => `${thing.name}${thing.unit ? ` (${thing.unit})` : ""}`;
      if (shown.map) {
        const [rows, cols] = s.shape, [outer, inner] = s.axes, body = [];
        for (let i = 0; i < rows; i++) {
          for (let j = 0; j < cols; j++) body.push([this.runId, outer.values[i], inner.values[j], s.values[i * cols + j]]);
        }
        return {head: ["run", head(outer), head(inner), head(s)], body};
      }
      const body = [];
      shown.runs.forEach((runId, k) => {
        shown.data[0].forEach((x, n) => {
          const y = shown.data[k + 1][n];
          if (y !== null && y !== undefined) body.push([runId, x, y]);
        });
      });
      return {head: ["run", head(shown.axis), head(s)], body};
    },

    exportCsv() {
      if (!this.shown) return;
      const {head, body} = this.table();
      const text = [head, ...body].map((row) => row.map(csvCell).join(",")).join("\n") + "\n";
      download(new Blob([text], {type: "text/csv"}), this.fileName("csv"));
      document.body.dataset.exported = this.fileName("csv");
    },

    // Arrays: `run`, `x` (the setpoint) and `y` (the values) of a trace, every point
    // shown; a map's `y` (outer setpoint, rows), `x` (inner, columns) and `z` (rows x
    // columns); `names` and `units` of x, y (and z), `labels` as on the axes.
    exportNpz() {
      if (!this.shown) return;
      const s = this.data.series[this.index], f8 = (values, shape) => ({dtype: "<f8", shape: shape || [values.length], values});
      let arrays, axes;
      if (this.shown.map) {
        const [outer, inner] = s.axes;
        arrays = [["x", f8(inner.values)], ["y", f8(outer.values)], ["z", f8(s.values, s.shape)]];
        axes = [inner, outer, s];
      } else {
        const {body} = this.table();
        arrays = [["run", f8(body.map((r) => r[0]))], ["x", f8(body.map((r) => r[1]))], ["y", f8(body.map((r) => r[2]))]];
        axes = [this.shown.axis, s];
      }
      arrays.push(["names", strings(axes.map((a) => a.name))], ["units", strings(axes.map((a) => a.unit || ""))],
                  ["labels", strings(axes.map((a) => a.label || a.name))]);
      download(zip(arrays.map(([name, a]) => [`${name}.npy`, npy(a)])), this.fileName("npz"));
      document.body.dataset.exported = this.fileName("npz");
    },

    cellAt(u, s) {
      const {left, top} = u.cursor;
      if (left === undefined || left < 0 || top < 0) return null;
      const x = u.posToVal(left, "x"), y = u.posToVal(top, "y");
      return [nearest(s.axes[0].values, y), nearest(s.axes[1].values, x)];
    },

    readMap(u, s) {
      const cell = this.cellAt(u, s);
      if (!cell) return;
      const [i, j] = cell, [outer, inner] = s.axes, at = i * s.shape[1] + j;
      const z = s.values[at];
      this.hover = {x: inner.values[j], y: outer.values[i], z, row: i, column: j};
      this.readFrom = this.plotKey;
      const range = s.low.length && z !== null ? ` (block ${number(s.low[at])}..${number(s.high[at])})` : "";
      document.getElementById("xreadout").textContent =
        `${named(inner)} = ${valueText(inner, inner.values[j])} · ` +
        `${named(outer)} = ${valueText(outer, outer.values[i])} · ${named(s)} = ${valueText(s, z)}${range}`;
    },

    cut(s, u) {
      const cell = this.cellAt(u, s);
      if (!cell) return;
      const [i, j] = cell, [rows, cols] = s.shape, [outer, inner] = s.axes;
      if (this.cuts) { this.cuts.h.plot.destroy(); this.cuts.v.plot.destroy(); }
      const line = (el, axis, xs, ys, what) => {
        const opts = {
          width: CUT_WIDTH, height: CUT_HEIGHT, legend: {show: false}, title: what,
          scales: {x: {time: false}},
          axes: [siAxis(axis, whole(xs)), siAxis({...s, label: "", name: ""}, whole(ys), {size: 60})],
          series: [{}, {stroke: "#d62728", width: 1, points: {show: xs.length < 60}}],
          cursor: {drag: {x: true, y: false}},
        };
        return {x: xs, y: ys, plot: new uPlot(opts, [xs, ys], document.getElementById(el))};
      };
      document.getElementById("xcuth").innerHTML = "";
      document.getElementById("xcutv").innerHTML = "";
      const row = s.values.slice(i * cols, (i + 1) * cols);
      const column = Array.from({length: rows}, (_, k) => s.values[k * cols + j]);
      this.cuts = {
        row: i, column: j,
        h: line("xcuth", inner, inner.values, row, `${named(outer)} = ${valueText(outer, outer.values[i])}`),
        v: line("xcutv", outer, outer.values, column, `${named(inner)} = ${valueText(inner, inner.values[j])}`),
      };
      document.body.dataset.cut = `${i}:${j}`;
    },

    resetOnDoubleClick(plot, xr, yr) {
      plot.over.addEventListener("dblclick", () => {
        plot.batch(() => {
          plot.setScale("x", {min: xr[0], max: xr[1]});
          if (yr) plot.setScale("y", {min: yr[0], max: yr[1]});
        });
      });
    },
  };
  window.explore = explore;
})();
