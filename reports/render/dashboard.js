/* The experiment-runner dashboard: tables and SVG charts drawn from the embedded data.
   Plain JavaScript, no libraries, no network. Text from the results is only ever set
   through textContent, never parsed as HTML. */
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("dashboard-data").textContent);
  const SVG_NS = "http://www.w3.org/2000/svg";
  const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
    "#7f7f7f", "#bcbd22", "#17becf"];
  const MAX_TABLE_ROWS = 500;
  const state = {
    /* suite and model, and per configuration column of D.filters its chosen value (null: all) */
    suite: "", model: "", columns: {},
    pivotSort: { key: "model", dir: 1 }, tableSort: { key: "model", dir: 1 }, allRuns: false,
  };

  /* ---------- DOM helpers ---------- */
  function el(tag, attrs, children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "style") node.setAttribute("style", value);
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of [].concat(children === undefined ? [] : children)) {
      if (child === null || child === undefined) continue;
      node.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
    }
    return node;
  }
  function svg(tag, attrs, text) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
    if (text !== undefined) node.textContent = String(text);
    return node;
  }
  function tooltip(node, text) {
    node.appendChild(svg("title", {}, text));
    return node;
  }
  function clear(id) {
    const node = document.getElementById(id);
    while (node.firstChild) node.removeChild(node.firstChild);
    return node;
  }

  /* ---------- formatting ---------- */
  const isNum = (v) => typeof v === "number" && isFinite(v);
  function fmtTime(s) {
    if (!isNum(s)) return "-";
    return s < 1 ? (s * 1e3).toPrecision(3) + " ms" : s.toPrecision(3) + " s";
  }
  const fmtX = (v) => (isNum(v) ? v.toFixed(2) + "x" : "-");
  const fmtPct = (v) => (isNum(v) ? (100 * v).toFixed(0) + "%" : "-");
  const fmtSigned = (v) => (isNum(v) ? (v >= 0 ? "+" : "") + (100 * v).toFixed(1) + "%" : "-");
  function fmtBytes(b) {
    if (!isNum(b)) return "-";
    return (b / 1048576).toFixed(1) + " MiB";
  }
  /* How a figure's value prints (core.measures.PRINTS, as the Python tables print it). */
  const PRINTS = {
    time: fmtTime, bytes: fmtBytes, ratio: fmtX, percent: fmtPct,
    significant: (v) => (isNum(v) ? v.toPrecision(3) : "-"),
    giga: (v) => (isNum(v) ? (v / 1e9).toPrecision(4) + " G" : "-"),
    number: (v) => (isNum(v) ? String(+v.toPrecision(4)) : "-"),
    text: (v) => String(v), flag: (v) => (v ? "yes" : ""),
  };
  /* The measured figures the rows hold (D.figures, from core.measures): each one's key. */
  const FIGURE = {};
  const BY_KEY = {};
  for (const f of D.figures) { FIGURE[f.name] = f.key; BY_KEY[f.key] = f; }
  const figure = (r, name) => r[FIGURE[name]];
  function fmtFigure(f, v, r) {
    if (v === null || v === undefined || v === "") return "-";
    let text = PRINTS[f.prints](v);
    if (f.note) {
      const note = r[f.note];
      if (note !== null && note !== undefined && note !== "") text += " (" + PRINTS[BY_KEY[f.note].prints](note) + ")";
      else if (f.noteMissing) text += " (" + f.noteMissing + ")";
    }
    return text;
  }
  function geomean(values) {
    const good = values.filter((v) => isNum(v) && v > 0);
    if (!good.length) return null;
    return Math.exp(good.reduce((a, v) => a + Math.log(v), 0) / good.length);
  }

  /* Diverging log colour around 1x: red below, green above, white at 1x; saturates at 4x. */
  function speedupColour(v) {
    if (!isNum(v) || v <= 0) return "";
    const t = Math.max(-1, Math.min(1, Math.log2(v) / 2));
    const target = t < 0 ? [215, 48, 39] : [26, 152, 80];
    const a = Math.abs(t);
    const mix = (c) => Math.round(255 + (c - 255) * a);
    return "rgb(" + mix(target[0]) + "," + mix(target[1]) + "," + mix(target[2]) + ")";
  }

  /* ---------- filters ---------- */
  const configs = D.configs;
  const rows = D.rows;
  const history = D.history;
  function configVisible(ci) {
    const c = configs[ci];
    return D.filters.every((name) => state.columns[name] === undefined || state.columns[name] === null ||
      c[name] === state.columns[name]);
  }
  function modelVisible(label, suite) {
    if (state.suite && suite !== state.suite) return false;
    return !state.model || label.toLowerCase().indexOf(state.model.toLowerCase()) >= 0;
  }
  const rowVisible = (r) => configVisible(r.c) && modelVisible(r.m, r.s);
  function visibleConfigs() {
    return configs.map((c, i) => i).filter(configVisible);
  }
  function uniqueSorted(values) {
    return Array.from(new Set(values.filter((v) => v !== undefined && v !== null))).sort();
  }
  function buildFilters() {
    const bar = clear("filters");
    const suites = uniqueSorted(rows.map((r) => r.s).concat(history ? history.points.map((p) => p[2]) : []));
    /* The suite, then every configuration column the data names (D.filters, from the field table). */
    const choices = [["suite", suites]].concat(D.filters.map((name) => [name, uniqueSorted(configs.map((c) => c[name]))]));
    for (const [name, values] of choices) {
      const choose = (e) => {
        const value = e.target.selectedIndex > 0 ? values[e.target.selectedIndex - 1] : null;
        if (name === "suite") state.suite = value === null ? "" : value;
        else state.columns[name] = value;
        renderAll();
      };
      const select = el("select", { id: "filter-" + name, "aria-label": name, onchange: choose },
        [el("option", { value: "" }, "all " + name + (name.endsWith("s") ? "" : "s"))].concat(
          values.map((v) => el("option", { value: v }, v === "" ? "(none)" : v))));
      bar.appendChild(el("label", {}, [name + " ", select]));
    }
    const input = el("input", { id: "filter-model", type: "search", placeholder: "model contains...",
      oninput: (e) => { state.model = e.target.value; renderAll(); } });
    bar.appendChild(el("label", {}, ["model ", input]));
    bar.appendChild(el("span", { id: "filter-status", class: "muted" }));
  }

  /* ---------- the HUD's four metrics per configuration ---------- */
  function summarise(ci, members) {
    const counted = members.filter((r) => r.st !== "skipped");
    const verified = members.filter((r) => r.ver).length;
    const judged = verified ? verified + members.filter((r) => r.st === "failed").length : 0;
    const accurate = members.filter((r) => r.acc).length;
    const speedups = members.filter((r) => r.spc).map((r) => r.sp);
    const compiles = members.filter((r) => r.ran && isNum(figure(r, "compile_time"))).map((r) => figure(r, "compile_time"));
    const ratios = members.filter((r) => r.passed && isNum(r.cr)).map((r) => r.cr);
    const kinds = new Set(members.filter((r) => r.ran && figure(r, "memory_kind")).map((r) => figure(r, "memory_kind")));
    return {
      counted: counted.length, skipped: members.length - counted.length, judged, accurate,
      unverified: counted.length - judged, geomean: geomean(speedups), speedups: speedups.length,
      compile: compiles.length ? compiles.reduce((a, v) => a + v, 0) / compiles.length : null,
      compiles: compiles.length, ratio: geomean(ratios), ratios: ratios.length, kinds,
    };
  }
  function renderSummary(visible) {
    const host = clear("summary");
    const header = ["configuration", "pass rate (verified)", "unverified", "geomean speedup",
      "mean compile", "memory compression", "skipped"];
    const body = [];
    for (const ci of visibleConfigs()) {
      const members = visible.filter((r) => r.c === ci);
      if (!members.length) continue;
      const s = summarise(ci, members);
      const c = configs[ci];
      const pass = s.judged
        ? el("td", { class: s.accurate < s.judged ? "bad" : "good" },
          fmtPct(s.accurate / s.judged) + " (" + s.accurate + "/" + s.judged + ")")
        : el("td", { class: "muted" }, "not verified");
      const unverified = el("td", { class: s.unverified ? "muted" : "" },
        s.unverified ? s.unverified + " not verified" : "0");
      let memory;
      if (isNum(s.ratio)) {
        memory = el("td", {}, fmtX(s.ratio) + " (" + s.ratios + "/" + s.counted + ")");
      } else if (s.kinds.has("host") && !s.kinds.has("device")) {
        memory = el("td", { class: "muted" }, "n/a: CPU peak is the whole process's RSS, not comparable");
      } else {
        memory = el("td", { class: "muted" }, "-");
      }
      body.push(el("tr", { "data-config": c.label }, [
        el("td", {}, [c.label, c.baseline ? el("span", { class: "tag" }, "baseline") : null]),
        pass, unverified,
        el("td", { style: "background:" + speedupColour(s.geomean) },
          isNum(s.geomean) ? fmtX(s.geomean) + " (" + s.speedups + "/" + s.counted + ")" : "-"),
        el("td", {}, isNum(s.compile) ? fmtTime(s.compile) + " (" + s.compiles + "/" + s.counted + ")" : "-"),
        memory,
        el("td", {}, String(s.skipped)),
      ]));
    }
    host.appendChild(table("summary-table", header, body));
  }
  function table(id, header, body, onSort, sort) {
    const head = el("tr", {}, header.map((h, i) => {
      const key = typeof h === "object" ? h.key : null;
      const label = typeof h === "object" ? h.label : h;
      const arrow = key && sort && sort.key === key ? (sort.dir > 0 ? " \u25b2" : " \u25bc") : "";
      return el("th", key && onSort ? { class: "sortable", onclick: () => onSort(key), title: "sort" } : {},
        label + arrow);
    }));
    return el("table", { id }, [el("thead", {}, head), el("tbody", {}, body.length ? body
      : [el("tr", {}, el("td", { colspan: header.length, class: "muted" }, "(nothing matches the filters)"))])]);
  }

  /* ---------- model x configuration pivot ---------- */
  function pivotLabel(r) {
    return r.bs !== null && r.bs !== undefined && pivotNeedsBatch.has(r.m) ? r.m + " (bs " + r.bs + ")" : r.m;
  }
  const pivotNeedsBatch = (function () {
    const seen = new Map();
    const need = new Set();
    for (const r of rows) {
      const k = r.m + "\u0000" + r.c;
      if (seen.has(k) && seen.get(k) !== r.bs) need.add(r.m);
      seen.set(k, r.bs);
    }
    return need;
  })();
  function renderPivot(visible) {
    const host = clear("pivot");
    const columns = visibleConfigs().filter((ci) => !configs[ci].baseline &&
      visible.some((r) => r.c === ci));
    const byModel = new Map();
    for (const r of visible) {
      const label = pivotLabel(r);
      if (!byModel.has(label)) byModel.set(label, new Map());
      byModel.get(label).set(r.c, r);
    }
    let models = Array.from(byModel.keys());
    const sort = state.pivotSort;
    models.sort((a, b) => {
      if (sort.key === "model") return sort.dir * a.localeCompare(b);
      const va = (byModel.get(a).get(sort.key) || {}).sp;
      const vb = (byModel.get(b).get(sort.key) || {}).sp;
      if (!isNum(va) && !isNum(vb)) return a.localeCompare(b);
      if (!isNum(va)) return 1;
      if (!isNum(vb)) return -1;
      return sort.dir * (va - vb);
    });
    const header = [{ key: "model", label: "model" }].concat(
      columns.map((ci) => ({ key: ci, label: configs[ci].label })));
    const body = models.map((m) => el("tr", { "data-model": m }, [el("td", { class: "model" }, m)].concat(
      columns.map((ci) => {
        const r = byModel.get(m).get(ci);
        if (!r) return el("td", { class: "muted" }, "");
        if (isNum(r.sp)) {
          const text = fmtX(r.sp) + (r.spc ? "" : "*");
          return el("td", { class: "num", style: "background:" + speedupColour(r.sp),
            title: configs[ci].label + ": " + text + " (" + r.st + ", " + r.v + ")" }, text);
        }
        const status = r.st === "failed" ? "fail" : r.st === "skipped" ? "skip" : "-";
        return el("td", { class: r.st === "failed" ? "bad num" : "muted num", title: r.err || r.st }, status);
      }))));
    const onSort = (key) => {
      state.pivotSort = { key, dir: state.pivotSort.key === key ? -state.pivotSort.dir : (key === "model" ? 1 : -1) };
      renderPivot(rows.filter(rowVisible));
    };
    host.appendChild(table("pivot-table", header, body, onSort, sort));
    host.appendChild(legend());
  }
  function legend() {
    const box = el("div", { class: "legend" }, "speedup colour: ");
    for (const v of [0.25, 0.5, 0.8, 1, 1.25, 2, 4]) {
      box.appendChild(el("span", { class: "swatch", style: "background:" + speedupColour(v) }, v + "x"));
    }
    box.appendChild(el("span", { class: "muted" },
      " (log scale; * = not in the geometric mean: failed verification on one side)"));
    return box;
  }

  /* ---------- charts ---------- */
  function logTicks(lo, hi) {
    const ticks = [];
    const decades = Math.log10(hi / lo);
    const mantissas = decades > 4 ? [1] : decades > 1.5 ? [1, 3] : [1, 2, 5];
    for (let e = Math.floor(Math.log10(lo)) - 1; e <= Math.ceil(Math.log10(hi)) + 1; e++) {
      for (const m of mantissas) {
        const v = m * Math.pow(10, e);
        if (v >= lo * 0.999 && v <= hi * 1.001) ticks.push(v);
      }
    }
    return ticks;
  }
  function linearTicks(lo, hi) {
    const span = hi - lo || 1;
    const step = Math.pow(10, Math.floor(Math.log10(span / 4)));
    const nice = [1, 2, 5, 10].map((m) => m * step).find((s) => span / s <= 6) || step * 10;
    const ticks = [];
    for (let v = Math.ceil(lo / nice) * nice; v <= hi + 1e-12; v += nice) ticks.push(+v.toPrecision(12));
    return ticks;
  }
  function fmtTick(v, unit) {
    if (!isNum(v)) return "-";
    if (unit === "x") return (v >= 10 ? v.toFixed(0) : v < 1 ? String(+v.toPrecision(2)) : String(+v.toPrecision(2))) + "x";
    if (unit === "%") return (100 * v).toFixed(0) + "%";
    if (unit === "s") return fmtTime(v);
    if (unit === "B") return fmtBytes(v);
    return String(v);
  }
  /* A chart frame: series of [x, y, tooltip, break, [low, high]] points (a series with
     dots: false draws its line only); log or linear y; reference line at `ref`; vertical
     lines at `vlines` ({x, text, side}); `axisMarks` ({x, colour, text, kind}): x's without
     a y, marked on the x axis. */
  function chart(opts) {
    const W = opts.width || 900, H = opts.height || 260, L = 70, R = 16, T = 28, B = 40;
    const node = svg("svg", { viewBox: "0 0 " + W + " " + H, class: "chart", role: "img",
      "aria-label": opts.title, "data-chart": opts.id || "" });
    node.appendChild(svg("text", { x: L, y: 16, class: "chart-title" }, opts.title));
    const values = [];
    for (const s of opts.series) {
      for (const p of s.points) {
        for (const v of [p[1]].concat(p[4] || [])) if (isNum(v) && (!opts.log || v > 0)) values.push(v);
      }
    }
    if (opts.ref !== undefined) values.push(opts.ref);
    if (!opts.series.some((s) => s.points.some((p) => isNum(p[1])))) {
      node.appendChild(svg("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "muted-text" },
        opts.empty || "nothing to show"));
      return node;
    }
    let lo = Math.min.apply(null, values), hi = Math.max.apply(null, values);
    if (opts.log) {
      if (lo === hi) { lo /= 1.5; hi *= 1.5; }
      lo /= 1.1; hi *= 1.1;
    } else {
      if (opts.zero) lo = Math.min(0, lo);
      if (lo === hi) { hi = lo + 1; }
      const pad = (hi - lo) * 0.05; hi += pad; if (!opts.zero) lo -= pad;
    }
    const xs = [];
    for (const s of opts.series) for (const p of s.points) xs.push(p[0]);
    const xlo = opts.xmin !== undefined ? opts.xmin : Math.min.apply(null, xs);
    const xhi = opts.xmax !== undefined ? opts.xmax : Math.max.apply(null, xs);
    const sx = (x) => L + (xhi === xlo ? 0.5 : (x - xlo) / (xhi - xlo)) * (W - L - R);
    const fy = opts.log ? (v) => Math.log(v) : (v) => v;
    const sy = (v) => T + (1 - (fy(v) - fy(lo)) / (fy(hi) - fy(lo))) * (H - T - B);
    let ticks = opts.log ? logTicks(lo, hi) : linearTicks(lo, hi);
    if (opts.log && ticks.length < 3) ticks = linearTicks(lo, hi).filter((v) => v > 0);
    for (const v of ticks) {
      node.appendChild(svg("line", { x1: L, x2: W - R, y1: sy(v), y2: sy(v), class: "grid" }));
      node.appendChild(svg("text", { x: L - 6, y: sy(v) + 4, "text-anchor": "end", class: "tick" }, fmtTick(v, opts.unit)));
    }
    if (opts.ref !== undefined) {
      node.appendChild(svg("line", { x1: L, x2: W - R, y1: sy(opts.ref), y2: sy(opts.ref), class: "ref" }));
    }
    for (const v of opts.vlines || []) {
      node.appendChild(svg("line", { x1: sx(v.x), x2: sx(v.x), y1: T, y2: H - B, class: "ref" }));
      node.appendChild(svg("text", { x: sx(v.x) + (v.side === "left" ? -4 : 4), y: T + 10, class: "tick",
        "text-anchor": v.side === "left" ? "end" : "start" }, v.text));
    }
    for (const m of opts.axisMarks || []) {
      node.appendChild(tooltip(svg("circle", { cx: sx(m.x).toFixed(1), cy: H - B, r: 3.5, fill: m.colour,
        class: "axis-mark", "data-kind": m.kind }), m.text));
    }
    node.appendChild(svg("text", { x: L, y: H - 6, class: "tick" }, opts.xlabel || ""));
    if (opts.xticks) {
      for (const [x, label] of opts.xticks) {
        node.appendChild(svg("text", { x: sx(x), y: H - B + 16, "text-anchor": "middle", class: "tick" }, label));
      }
    }
    opts.series.forEach((s) => {
      const pts = s.points.filter((p) => isNum(p[1]) && (!opts.log || p[1] > 0));
      /* A point marked as a break (p[3]) starts a new line: it is not a step of the one before. */
      const segments = [];
      for (const p of pts) {
        if (!segments.length || p[3]) segments.push([]);
        segments[segments.length - 1].push(p);
      }
      for (const seg of segments) {
        if (seg.length < 2) continue;
        node.appendChild(svg("polyline", { points: seg.map((p) => sx(p[0]).toFixed(1) + "," + sy(p[1]).toFixed(1)).join(" "),
          fill: "none", stroke: s.colour, "stroke-width": 1.8, class: "series", "data-series": s.name }));
      }
      for (const p of s.dots === false ? [] : pts) {
        const interval = (p[4] || []).filter((v) => isNum(v) && (!opts.log || v > 0));
        if (interval.length === 2) {
          node.appendChild(svg("line", { x1: sx(p[0]), x2: sx(p[0]), y1: sy(interval[0]), y2: sy(interval[1]),
            stroke: s.colour, "stroke-width": 1.5, class: "interval" }));
        }
        const dot = svg("circle", { cx: sx(p[0]).toFixed(1), cy: sy(p[1]).toFixed(1), r: pts.length > 60 ? 1.6 : 3,
          fill: s.colour, class: "point", "data-series": s.name });
        node.appendChild(tooltip(dot, s.name + ": " + (p[2] || fmtTick(p[1], opts.unit))));
      }
      for (const m of s.marks || []) {
        if (!isNum(m.y) || (opts.log && m.y <= 0)) continue;
        const x = sx(m.x), y = sy(m.y) + (m.kind === "regressed" ? 12 : -12);
        const tri = m.kind === "regressed"
          ? [[x - 6, y - 5], [x + 6, y - 5], [x, y + 5]] : [[x - 6, y + 5], [x + 6, y + 5], [x, y - 5]];
        const mark = svg("polygon", { points: tri.map((q) => q.join(",")).join(" "),
          class: "mark " + m.kind, "data-mark": m.kind });
        node.appendChild(tooltip(mark, m.text));
      }
    });
    return node;
  }
  function chartLegend(series) {
    return el("div", { class: "legend" }, series.map((s) =>
      el("span", { class: "key" }, [el("span", { class: "dot", style: "background:" + s.colour }), s.name])));
  }
  function colourOf(ci) {
    return PALETTE[ci % PALETTE.length];
  }

  function renderSpeedupChart(visible) {
    const host = clear("speedup-chart");
    const series = [];
    for (const ci of visibleConfigs()) {
      if (configs[ci].baseline) continue;
      const members = visible.filter((r) => r.c === ci && r.spc && isNum(r.sp) && r.sp > 0)
        .sort((a, b) => a.sp - b.sp);
      if (!members.length) continue;
      series.push({ name: configs[ci].label, colour: colourOf(ci),
        points: members.map((r, i) => [members.length === 1 ? 50 : 100 * i / (members.length - 1), r.sp,
          r.m + ": " + fmtX(r.sp)]) });
    }
    host.appendChild(chart({ id: "speedup", title: "Speedup against " + D.baseline +
      " per model, sorted (log scale; higher is better)", series, log: true, ref: 1, unit: "x",
    xmin: 0, xmax: 100, xlabel: "models, sorted by speedup (percentile)", empty: "no speedups to show" }));
    host.appendChild(chartLegend(series));
  }

  /* Achieved TFLOP/s as a share of the device's peak, per model, sorted; lines without a
     peak for their device are counted in a note. */
  function renderPeakChart(visible) {
    const host = clear("peak-chart");
    const series = [];
    let noPeak = 0;
    for (const ci of visibleConfigs()) {
      const tflops = (r) => figure(r, "tflops"), peak = (r) => figure(r, "peak_fraction");
      const counted = visible.filter((r) => r.c === ci && isNum(tflops(r)));
      noPeak += counted.filter((r) => !isNum(peak(r))).length;
      const members = counted.filter((r) => isNum(peak(r))).sort((a, b) => peak(a) - peak(b));
      if (!members.length) continue;
      series.push({ name: configs[ci].label, colour: colourOf(ci),
        points: members.map((r, i) => [members.length === 1 ? 50 : 100 * i / (members.length - 1),
          100 * peak(r), r.m + ": " + tflops(r).toPrecision(3) + " TFLOP/s, " + fmtPct(peak(r)) + " of peak"]) });
    }
    host.appendChild(chart({ id: "peak", title: "Percent of the device's peak per model, sorted",
      series, log: false, zero: true, unit: "%", xmin: 0, xmax: 100,
      xlabel: "models, sorted by percent of peak (percentile)",
      empty: "no line with a FLOP count and a known peak" }));
    host.appendChild(chartLegend(series));
    if (noPeak) {
      host.appendChild(el("p", { class: "muted" }, noPeak + " experiment(s) with a FLOP count ran " +
        "on a device without a peak in the table: no percent of peak"));
    }
  }

  /* ---------- history ---------- */
  function historyByRunConfig() {
    const points = new Map();
    const steps = new Map();
    if (!history) return { points, steps };
    for (const p of history.points) {
      const [run, ci, suite] = p;
      if (!configVisible(ci) || (state.suite && suite !== state.suite)) continue;
      const key = run + ":" + ci;
      const acc = points.get(key) || { run, ci, counted: 0, skipped: 0, verified: 0, accurate: 0, failed: 0,
        nsp: 0, logsp: 0, ncomp: 0, comp: 0, ncr: 0, logcr: 0 };
      acc.counted += p[3]; acc.skipped += p[4]; acc.verified += p[5]; acc.accurate += p[6]; acc.failed += p[7];
      acc.nsp += p[8]; acc.logsp += p[9]; acc.ncomp += p[10]; acc.comp += p[11]; acc.ncr += p[12]; acc.logcr += p[13];
      points.set(key, acc);
    }
    for (const t of history.transitions) {
      const [run, ci, suite] = t;
      if (!configVisible(ci) || (state.suite && suite !== state.suite)) continue;
      const key = run + ":" + ci;
      const acc = steps.get(key) || { run, ci, common: 0, log: 0, regressed: 0, improved: 0, noise: 0,
        failing: 0, fixed: 0 };
      acc.common += t[3]; acc.log += t[4]; acc.regressed += t[5]; acc.improved += t[6]; acc.noise += t[7];
      acc.failing += t[8]; acc.fixed += t[9];
      steps.set(key, acc);
    }
    for (const s of steps.values()) {
      s.change = s.common ? Math.exp(s.log / s.common) : null;
      const g = history.geomeanThreshold;
      const overallWorse = isNum(s.change) && s.change > 1 + g;
      const overallBetter = isNum(s.change) && s.change < 1 - g;
      s.slower = overallWorse || s.regressed > 0;  /* performance: marked on the speedup chart */
      s.faster = overallBetter || s.improved > 0;
      s.worse = s.slower || s.failing > 0;
      s.better = s.faster || s.fixed > 0;
      s.kind = s.worse && s.better ? "mixed" : s.worse ? "regressed" : s.better ? "improved" : "";
      const parts = [];
      if (overallWorse) parts.push("overall slower");
      if (overallBetter) parts.push("overall faster");
      if (s.regressed) parts.push(s.regressed + " regressed");
      if (s.failing) parts.push(s.failing + " newly failing");
      if (s.improved) parts.push(s.improved + " improved");
      if (s.fixed) parts.push(s.fixed + " fixed");
      s.verdict = parts.join(", ");
      s.text = "time " + fmtSigned(isNum(s.change) ? s.change - 1 : null) + " over " + s.common +
        " models (overall rule " + (100 * g).toFixed(0) + "%); " + s.regressed + " regressed, " + s.improved +
        " improved beyond " + (100 * history.threshold).toFixed(0) + "% (p<=" + history.alpha + "), " +
        s.noise + " within noise, " + s.failing + " newly failing, " + s.fixed + " fixed";
    }
    return { points, steps };
  }
  const oneDay = D.runs.length > 0 && D.runs.every((r) => r.first && r.first.slice(0, 10) === D.runs[0].first.slice(0, 10));
  function runLabel(i) {
    const run = D.runs[i];
    if (!run) return String(i);
    if (!run.first) return run.id;
    return oneDay ? run.first.slice(11, 16) : run.first.slice(0, 10);
  }
  function renderHistory() {
    const host = clear("history");
    if (!history || !D.runs.length) {
      host.appendChild(el("p", { class: "muted" }, "One run only: no history yet."));
      return;
    }
    const { points, steps } = historyByRunConfig();
    /* A run sharing no experiment with the configuration's previous run starts a new line. */
    const breaks = new Set((history.breaks || []).map((b) => b[0] + ":" + b[1]));
    const cis = visibleConfigs().filter((ci) => Array.from(points.values()).some((p) => p.ci === ci));
    const nRuns = D.runs.length;
    const xticks = [];
    const every = Math.max(1, Math.ceil(nRuns / 8));
    for (let i = 0; i < nRuns; i += every) xticks.push([i, runLabel(i)]);
    if ((nRuns - 1) % every) xticks.push([nRuns - 1, runLabel(nRuns - 1)]);
    const metrics = [
      { id: "pass-rate", title: "Pass rate (verified experiments)", unit: "%", zero: true,
        value: (p) => (p.verified ? p.accurate / (p.verified + p.failed) : null) },
      { id: "geomean-speedup", title: "Geometric mean speedup against " + D.baseline + " (log scale)", unit: "x",
        log: true, ref: 1, value: (p) => (p.nsp ? Math.exp(p.logsp / p.nsp) : null), marks: true, noBaseline: true },
      { id: "compile-time", title: "Mean compile time (log scale)", unit: "s", log: true,
        value: (p) => (p.ncomp && p.comp > 0 ? p.comp / p.ncomp : null) },
      { id: "memory-compression", title: "Peak device memory compression (log scale)", unit: "x", log: true, ref: 1,
        noBaseline: true,
        value: (p) => (p.ncr ? Math.exp(p.logcr / p.ncr) : null),
        empty: "no device memory measured (on CPU the peak is the process's RSS: no ratio)" },
    ];
    const grid = el("div", { class: "history-grid" });
    let legendSeries = [];
    for (const m of metrics) {
      const series = cis.filter((ci) => !(m.noBaseline && configs[ci].baseline)).map((ci) => {
        const pts = [];
        const marks = [];
        for (let run = 0; run < nRuns; run++) {
          const p = points.get(run + ":" + ci);
          if (!p) continue;
          const y = m.value(p);
          pts.push([run, y, runLabel(run) + " " + (D.runs[run] ? D.runs[run].id : "") + ": " + fmtTick(y, m.unit),
            breaks.has(run + ":" + ci)]);
          const s = steps.get(run + ":" + ci);
          const text = s ? runLabel(run) + " " + configs[ci].label + ": " + s.text : "";
          if (m.marks && s && s.slower) marks.push({ x: run, y, kind: "regressed", text });
          if (m.marks && s && s.faster) marks.push({ x: run, y, kind: "improved", text });
        }
        return { name: configs[ci].label, colour: colourOf(ci), points: pts, marks };
      });
      if (series.length > legendSeries.length) legendSeries = series;
      grid.appendChild(chart({ id: m.id, title: m.title, series, log: m.log, ref: m.ref, unit: m.unit,
        zero: m.zero, xmin: 0, xmax: Math.max(1, nRuns - 1), xticks, width: 640, height: 250, empty: m.empty }));
    }
    host.appendChild(grid);
    host.appendChild(chartLegend(legendSeries));
    host.appendChild(el("p", { class: "muted" }, "\u25bc slower, \u25b2 faster, against each model's previous run: " +
      "the geometric mean of median times beyond " + (100 * history.geomeanThreshold).toFixed(0) +
      "%, or any model beyond " + (100 * history.threshold).toFixed(0) + "% with p <= " + history.alpha +
      " (one-sided rank-sum test on the repeats). The table also flags models newly failing or fixed."));
    const recent = Array.from(steps.values()).filter((s) => s.kind).sort((a, b) => b.run - a.run || a.ci - b.ci)
      .slice(0, 30);
    const body = recent.map((s) => el("tr", { class: s.kind === "regressed" ? "row-bad" : s.kind === "improved" ? "row-good" : "row-mixed" }, [
      el("td", {}, D.runs[s.run] ? D.runs[s.run].label : String(s.run)),
      el("td", {}, configs[s.ci].label),
      el("td", { class: "num" }, fmtSigned(isNum(s.change) ? s.change - 1 : null)),
      el("td", { class: "num" }, String(s.regressed)), el("td", { class: "num" }, String(s.improved)),
      el("td", { class: "num" }, String(s.noise)), el("td", { class: "num" }, String(s.failing)),
      el("td", { class: "num" }, String(s.fixed)), el("td", {}, s.kind + ": " + s.verdict),
    ]));
    host.appendChild(el("h3", {}, "Flagged runs (latest first)"));
    host.appendChild(table("transitions-table", ["run", "configuration", "time change (geomean)", "regressed",
      "improved", "within noise", "newly failing", "fixed", "verdict"], body));
  }

  /* ---------- models that changed most ---------- */
  function renderChanges() {
    const host = clear("changes");
    const changes = D.changes;
    if (!changes) {
      host.appendChild(el("p", { class: "muted" }, "Needs two runs with experiments in common."));
      return;
    }
    host.appendChild(el("p", {}, "Run " + changes.newRun + " against run " + changes.baseRun +
      " (threshold " + (100 * changes.threshold).toFixed(0) + "%, p <= " + changes.alpha + ")."));
    const items = changes.items.filter((c) => configVisible(c.c) && modelVisible(c.m, c.s));
    const body = items.map((c) => el("tr", { class: /regressed|failing/.test(c.verdict) ? "row-bad"
      : /improved|fixed/.test(c.verdict) ? "row-good" : "" }, [
      el("td", { class: "model" }, c.m), el("td", {}, configs[c.c].label),
      el("td", { class: "num" }, fmtTime(c.base)), el("td", { class: "num" }, fmtTime(c.new)),
      el("td", { class: "num" }, fmtSigned(isNum(c.ratio) ? c.ratio - 1 : null)),
      el("td", { class: "num" }, isNum(c.p) ? c.p.toFixed(3) : "-"),
      el("td", {}, c.verdict), el("td", {}, c.note || ""),
    ]));
    host.appendChild(table("changes-table", ["model", "configuration", "previous median", "latest median",
      "time change", "p", "verdict", "note"], body));
  }

  /* ---------- experiments ---------- */
  const EXPERIMENT_COLUMNS = [
    { key: "model", label: "model", get: (r) => r.m },
    { key: "config", label: "configuration", get: (r) => configs[r.c].label },
    { key: "bs", label: "batch", get: (r) => r.bs },
    { key: "status", label: "status", get: (r) => r.st },
    { key: "code", label: "verification", get: (r) => r.v },
    { key: "med", label: "median/iter", get: (r) => r.med, fmt: fmtTime },
    { key: "interval", label: "interval", get: (r) => r.lo,
      fmt: (v, r) => (isNum(r.lo) ? fmtTime(r.lo) + " .. " + fmtTime(r.hi) + " (" + fmtPct(r.cov) + ")" : "-") },
    { key: "n", label: "repeats", get: (r) => r.n },
    { key: "sp", label: "speedup", get: (r) => r.sp, fmt: (v, r) => fmtX(v) + (r.sm === "paired" ? " (paired)" : "") },
    { key: "cr", label: "mem ratio", get: (r) => r.cr, fmt: fmtX },
  ].concat(D.figures.filter((f) => f.header).map((f) => (
    { key: f.key, label: f.header, get: (r) => r[f.key], fmt: (v, r) => fmtFigure(f, v, r) }))).concat([
    { key: "w", label: "warnings", get: (r) => r.w.join("; ") },
  ]);
  function renderExperiments(visible) {
    const host = clear("experiments");
    const sort = state.tableSort;
    const column = EXPERIMENT_COLUMNS.find((c) => c.key === sort.key) || EXPERIMENT_COLUMNS[0];
    const sorted = visible.slice().sort((a, b) => {
      const va = column.get(a), vb = column.get(b);
      if (va === vb) return 0;
      if (va === null || va === undefined || va === "") return 1;
      if (vb === null || vb === undefined || vb === "") return -1;
      return sort.dir * (typeof va === "number" && typeof vb === "number" ? va - vb : String(va).localeCompare(String(vb)));
    });
    const shown = sorted.slice(0, MAX_TABLE_ROWS);
    const body = shown.map((r) => el("tr", { class: r.w.length ? "row-warn" : "" },
      EXPERIMENT_COLUMNS.map((c) => {
        const v = c.get(r);
        const text = c.fmt ? c.fmt(v, r) : (v === null || v === undefined ? "-" : String(v));
        return el("td", { class: c.key === "model" ? "model" : "" }, text);
      })));
    const onSort = (key) => {
      state.tableSort = { key, dir: state.tableSort.key === key ? -state.tableSort.dir : 1 };
      renderExperiments(rows.filter(rowVisible));
    };
    host.appendChild(table("experiments-table", EXPERIMENT_COLUMNS.map((c) => ({ key: c.key, label: c.label })),
      body, onSort, sort));
    if (sorted.length > shown.length) {
      host.appendChild(el("p", { class: "muted" }, "showing " + shown.length + " of " + sorted.length +
        " experiments; filter to see the others"));
    }
  }

  /* ---------- provenance ---------- */
  function renderProvenance() {
    const host = clear("provenance");
    const top = clear("provenance-summary");
    const runs = D.runs.slice().reverse();
    const latest = runs[0];
    if (latest) {
      const versions = Object.entries(latest.versions).map(([k, v]) => k + " " + v).join(", ");
      top.appendChild(el("p", { id: "provenance-latest" }, [
        el("b", {}, D.runs.length + " run" + (D.runs.length === 1 ? "" : "s")),
        D.runs.length > 1 ? " from " + (D.runs[0].first || "?") + " to " + (latest.last || "?") : "",
        "; latest " + latest.label + " on " + (latest.devices.join(", ") || "?") +
        (latest.host ? " (host " + latest.host + ")" : "") + (versions ? "; " + versions : ""),
      ]));
    }
    const shown = state.allRuns ? runs : runs.slice(0, 12);
    const body = shown.map((run) => el("tr", {}, [
      el("td", {}, run.id || "(no run id)"), el("td", {}, run.first), el("td", {}, run.last),
      el("td", { class: "num" }, String(run.lines)),
      el("td", {}, run.devices.join(", ")),
      el("td", {}, Object.entries(run.versions).map(([k, v]) => k + " " + v).join(", ")),
      el("td", {}, [run.host, run.platform ? el("div", { class: "muted" }, run.platform) : null]),
      el("td", {}, Object.entries(run.settings).map(([k, v]) => k + "=" + v).join(", ")),
      el("td", {}, run.commands.map((c) => el("code", {}, c))),
      el("td", {}, run.files.join(", ")),
    ]));
    host.appendChild(table("runs-table", ["run", "started", "last line", "lines", "devices", "versions", "host",
      "torch settings", "command", "files"], body));
    if (runs.length > 12) {
      host.appendChild(el("button", { id: "toggle-runs", onclick: () => { state.allRuns = !state.allRuns; renderProvenance(); } },
        state.allRuns ? "show the latest 12 runs" : "show all " + runs.length + " runs"));
    }
  }

  /* ---------- bisections: the figure over the range, each point coloured by its verdict ---------- */
  const VERDICT_COLOURS = { good: "#2ca02c", bad: "#d62728", inconclusive: "#9467bd", skipped: "#ff7f0e",
    "not measured": "#bbb" };
  function renderBisections() {
    const host = document.getElementById("bisect");
    if (!host) return;
    D.bisections.forEach((b, bi) => {
      const n = b.points.length;
      const at = (label) => b.points.findIndex((p) => p.label === label);
      const named = (label) => label + (b.points[at(label)].title ? " (" + b.points[at(label)].title + ")" : "");
      const fmt = (v) => fmtTick(v, b.unit);
      const worse = b.metric === "speedup" ? "lower" : "higher";
      host.appendChild(el("h3", {}, "Bisection over " + n + " " + b.kind + " (" + b.metric + ")"));
      host.appendChild(el("p", { class: "bisect-answer" }, b.firstBad
        ? ["first bad ", el("b", {}, named(b.firstBad)), ", last good ", el("b", {}, named(b.lastGood)),
          b.skippedBetween.length ? "; skipped between them: " + b.skippedBetween.join(", ") : ""]
        : b.problem || "no answer yet: the bisection stopped before its end (run the same command again)"));
      host.appendChild(el("p", { class: "muted" }, "A point is bad when its " + b.metric + " is " + worse +
        " than at the good end by more than " + (isNum(b.threshold) ? fmtPct(b.threshold) : "the threshold") +
        " (significantly, as compare judges), when the verifier's verdict changes from PASS, or when the " +
        "experiment starts to fail; inconclusive after measuring again: skipped."));
      const every = Math.max(1, Math.ceil(n / 10));
      const xticks = b.points.map((p, i) => [i, p.label]).filter((t) => t[0] % every === 0);
      const vlines = [];
      if (b.lastGood) vlines.push({ x: at(b.lastGood), text: "last good", side: "left" });
      if (b.firstBad) vlines.push({ x: at(b.firstBad), text: "first bad", side: "right" });
      const tip = (p, f) => p.label + (p.title ? " " + p.title : "") + ": " + p.verdict +
        (f ? ", " + fmt(f.value) + (isNum(f.low) ? " (" + fmt(f.low) + " .. " + fmt(f.high) + ")" : "") : "") +
        (p.reason ? "; " + p.reason : "");
      b.experiments.forEach((name, ei) => {
        const series = Object.keys(VERDICT_COLOURS).map((verdict) => ({ name: verdict, colour: VERDICT_COLOURS[verdict],
          points: b.points.map((p, i) => [i, p.figures[ei] ? p.figures[ei].value : null, tip(p, p.figures[ei]), true,
            p.figures[ei] ? [p.figures[ei].low, p.figures[ei].high] : null])
            .filter((q, i) => b.points[i].verdict === verdict && isNum(q[1])) }));
        const line = { name: "path", colour: "#ccc", dots: false, points: b.points.map((p, i) =>
          [i, p.figures[ei] ? p.figures[ei].value : null]).filter((q) => isNum(q[1])) };
        const axisMarks = b.points.map((p, i) => ({ x: i, colour: VERDICT_COLOURS[p.verdict] || "#bbb",
          text: tip(p, null), kind: p.verdict })).filter((m, i) => !isNum((b.points[i].figures[ei] || {}).value));
        host.appendChild(chart({ id: "bisect-" + bi + "-" + ei, title: name, series: [line].concat(series),
          unit: b.unit, xmin: 0, xmax: n - 1, xticks, vlines, axisMarks, height: 280,
          xlabel: b.kind + " in the range's order, the good end first (dots on the axis: no figure)" }));
      });
      host.appendChild(chartLegend(Object.keys(VERDICT_COLOURS).map((v) => ({ name: v, colour: VERDICT_COLOURS[v] }))));
      const body = b.points.map((p, i) => [p, i]).filter(([p]) => p.verdict !== "not measured").map(([p, i]) =>
        el("tr", { class: p.verdict === "bad" ? "row-bad" : p.verdict === "good" ? "row-good" : "row-mixed" }, [
          el("td", { class: "num" }, String(i)), el("td", {}, p.label), el("td", {}, p.title), el("td", {}, p.verdict),
          el("td", {}, b.experiments.map((name, ei) => p.figures[ei]
            ? el("div", {}, fmt(p.figures[ei].value) + (isNum(p.figures[ei].low)
              ? " (" + fmt(p.figures[ei].low) + " .. " + fmt(p.figures[ei].high) + ")" : "") +
              (b.experiments.length > 1 ? " " + name : "")) : null)),
          el("td", {}, p.reason),
        ]));
      host.appendChild(table("bisect-table-" + bi, ["#", "point", "title", "verdict", b.metric + " (interval)", "why"],
        body));
    });
  }

  function renderAll() {
    const visible = rows.filter(rowVisible);
    document.getElementById("filter-status").textContent = visible.length + " of " + rows.length + " experiments shown";
    renderSummary(visible);
    renderHistory();
    renderChanges();
    renderPivot(visible);
    renderSpeedupChart(visible);
    renderPeakChart(visible);
    renderExperiments(visible);
  }

  function renderNotes() {
    const host = clear("notes");
    host.appendChild(el("ul", {}, D.notes.map((n) => el("li", {}, n))));
  }

  document.getElementById("generated").textContent = "generated " + D.generated + "; baseline " + D.baseline;
  buildFilters();
  renderProvenance();
  renderBisections();
  renderNotes();
  renderAll();
  document.body.setAttribute("data-rendered", "true");
})();
