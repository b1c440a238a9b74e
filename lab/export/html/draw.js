// layerscope's exported page, the drawing kit: elements, inline SVG charts (lines, interval bands, points, marks,
// legends), heatmaps of cells and the players (range inputs). No library, nothing fetched; every text is set with
// textContent, never as markup. page.js draws the page model with it.
var lsDraw = (function () {
  "use strict";

  // The SVG namespace, split so that the file holds no URL (the file must refer to nothing outside it).
  var SVG_NS = "http:" + "/" + "/www.w3.org/2000/svg";
  var PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                 "#bcbd22", "#17becf"];
  var W = 380, H = 250, M = {l: 54, r: 12, t: 34, b: 46};

  // ------------------------------------------------------------------ elements
  function setAll(node, attrs) {
    for (var k in attrs || {}) {
      if (attrs[k] !== undefined && attrs[k] !== null) node.setAttribute(k, attrs[k]);
    }
    return node;
  }
  function el(tag, attrs, text) {
    var node = setAll(document.createElement(tag), attrs);
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function svg(tag, attrs, text) {
    var node = setAll(document.createElementNS(SVG_NS, tag), attrs);
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  // add(parent, child): the child; add(parent, a, b, ...): the parent
  function add(parent) {
    for (var i = 1; i < arguments.length; i++) {
      if (arguments[i]) parent.appendChild(arguments[i]);
    }
    return arguments.length === 2 ? arguments[1] : parent;
  }
  function replace(node, child) {
    while (node.firstChild) node.removeChild(node.firstChild);
    if (child) node.appendChild(child);
  }

  // ------------------------------------------------------------------ numbers
  function finite(v) { return typeof v === "number" && isFinite(v); }
  function fmt(v, digits) {
    if (!finite(v)) return "–";
    if (v !== 0 && (Math.abs(v) < 1e-3 || Math.abs(v) >= 1e5)) return v.toExponential(2);
    return v.toFixed(digits === undefined ? 3 : digits);
  }
  function signed(v) { return finite(v) ? (v >= 0 ? "+" : "−") + Math.abs(v).toFixed(3) : "–"; }
  function color(i) { return PALETTE[i % PALETTE.length]; }
  function niceTicks(lo, hi, n) {
    if (!(hi > lo)) return [lo];
    var step = Math.pow(10, Math.floor(Math.log10((hi - lo) / n)));
    var err = (hi - lo) / n / step;
    if (err >= 7.5) step *= 10; else if (err >= 3.5) step *= 5; else if (err >= 1.5) step *= 2;
    var out = [];
    for (var t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) {
      out.push(Math.abs(t) < step * 1e-9 ? 0 : t);
    }
    return out;
  }
  function tickLabel(t) {
    var a = Math.abs(t);
    if (a !== 0 && (a < 1e-3 || a >= 1e5)) return t.toExponential(0);
    return String(Math.round(t * 1e6) / 1e6);
  }
  function extent(values, fallback) {
    var v = values.filter(finite);
    return v.length ? [Math.min.apply(null, v), Math.max.apply(null, v)] : fallback;
  }

  // ------------------------------------------------------------------ a chart
  // spec: {title ("\n" starts a subtitle), xlabel, ylabel, ylog, xticks: [{v, label}], rotateX, noYTicks,
  //        lines: [{pts: [[x, y]], color, dash, width, markers, name, cls}], bands: [{pts: [[x, lo, hi]], color}],
  //        points: [{x, y, color, stroke, r, tip, cls, data: {name: value}}], labels: [{x, y, text}],
  //        vlines: [{x, color, dash, cls}], legend: [{name, color, dash, marker}], xmin, xmax, ymin, ymax, xpad,
  //        width, height, cls}
  function chart(spec) {
    var w = spec.width || W, h = spec.height || H;
    var legendH = spec.legend && spec.legend.length ? spec.legend.length * 13 + 10 : 0;   // below the axes
    var root = svg("svg", {width: w, height: h + legendH, viewBox: "0 0 " + w + " " + (h + legendH), role: "img",
                           "class": "ls-chart " + (spec.cls || "")});
    add(root, svg("title", {}, (spec.title || "").replace(/\n/g, " · ")));
    var ty = spec.ylog ? function (v) { return v > 0 ? Math.log10(v) : NaN; } : function (v) { return v; };
    var xs = [], ys = [];
    (spec.lines || []).forEach(function (l) {
      l.pts.forEach(function (p) { xs.push(p[0]); ys.push(ty(p[1])); });
    });
    (spec.bands || []).forEach(function (b) {
      b.pts.forEach(function (p) { xs.push(p[0]); ys.push(ty(p[1])); ys.push(ty(p[2])); });
    });
    (spec.points || []).forEach(function (p) { xs.push(p.x); ys.push(ty(p.y)); });
    (spec.vlines || []).forEach(function (v) { xs.push(v.x); });
    (spec.xticks || []).forEach(function (t) { xs.push(t.v); });
    var xr = extent(xs, [0, 1]), yr = extent(ys, [0, 1]);
    var x0 = spec.xmin !== undefined ? spec.xmin : xr[0], x1 = spec.xmax !== undefined ? spec.xmax : xr[1];
    var y0 = spec.ymin !== undefined ? spec.ymin : yr[0], y1 = spec.ymax !== undefined ? spec.ymax : yr[1];
    if (x1 === x0) { x0 -= 0.5; x1 += 0.5; }
    if (y1 === y0) { var pad0 = Math.abs(y0) * 0.1 || 0.5; y0 -= pad0; y1 += pad0; }
    var dx = (x1 - x0) * (spec.xpad === undefined ? 0.04 : spec.xpad), dy = (y1 - y0) * 0.06;
    x0 -= dx; x1 += dx; y0 -= dy; y1 += dy;
    var titleLines = (spec.title || "").split("\n");
    var pl = M.l, pr = w - M.r, pt = M.t + (titleLines.length > 1 ? 10 : 0), pb = h - M.b;
    function sx(v) { return pl + (v - x0) / (x1 - x0) * (pr - pl); }
    function sy(v) { return pb - (ty(v) - y0) / (y1 - y0) * (pb - pt); }
    titleLines.forEach(function (line, i) {
      add(root, svg("text", {x: w / 2, y: 13 + i * 13, "text-anchor": "middle",
                             "class": i ? "ls-subtitle" : "ls-title"}, line));
    });

    var axes = add(root, svg("g", {"class": "ls-axes"}));
    add(axes, svg("rect", {x: pl, y: pt, width: pr - pl, height: pb - pt, "class": "ls-frame"}));
    var xt = spec.xticks || niceTicks(x0 + dx, x1 - dx, 5).map(function (v) { return {v: v, label: tickLabel(v)}; });
    xt.forEach(function (t) {
      var X = sx(t.v);
      add(axes, svg("line", {x1: X, x2: X, y1: pb, y2: pb + 4, "class": "ls-tick"}));
      add(axes, svg("text", spec.rotateX
        ? {x: X, y: pb + 9, "text-anchor": "end", "class": "ls-ticklabel",
           transform: "rotate(-30 " + X + " " + (pb + 9) + ")"}
        : {x: X, y: pb + 15, "text-anchor": "middle", "class": "ls-ticklabel"}, t.label));
    });
    yTicks(spec, y0 + dy, y1 - dy).forEach(function (t) {
      var Y = sy(t.v);
      add(axes, svg("line", {x1: pl - 4, x2: pr, y1: Y, y2: Y, "class": "ls-grid"}));
      add(axes, svg("text", {x: pl - 6, y: Y + 4, "text-anchor": "end", "class": "ls-ticklabel"}, t.label));
    });
    if (spec.xlabel) {
      add(axes, svg("text", {x: (pl + pr) / 2, y: h - 4, "text-anchor": "middle", "class": "ls-axislabel"},
                    spec.xlabel));
    }
    if (spec.ylabel) {
      add(axes, svg("text", {x: 12, y: (pt + pb) / 2, "text-anchor": "middle", "class": "ls-axislabel",
                             transform: "rotate(-90 12 " + (pt + pb) / 2 + ")"},
                    spec.ylabel + (spec.ylog ? " (log)" : "")));
    }

    var plot = add(root, svg("g", {"class": "ls-plot"}));
    function xy(x, y) { return sx(x).toFixed(1) + "," + sy(y).toFixed(1); }
    (spec.bands || []).forEach(function (b) {
      var pts = b.pts.filter(function (p) { return finite(p[0]) && finite(ty(p[1])) && finite(ty(p[2])); });
      if (!pts.length) return;
      var d = pts.map(function (p, i) { return (i ? "L" : "M") + xy(p[0], p[2]); }).join("") +
              pts.slice().reverse().map(function (p) { return "L" + xy(p[0], p[1]); }).join("") + "Z";
      add(plot, svg("path", {d: d, fill: b.color, "fill-opacity": 0.18, stroke: "none",
                             "class": "ls-band " + (b.cls || "")}));
    });
    (spec.vlines || []).forEach(function (v) {
      if (!finite(v.x)) return;
      add(plot, svg("line", {x1: sx(v.x), x2: sx(v.x), y1: pt, y2: pb, stroke: v.color || "#999",
                             "stroke-dasharray": v.dash || "", "class": "ls-vline " + (v.cls || "")}));
    });
    (spec.lines || []).forEach(function (l) {
      var d = "", pen = false;
      l.pts.forEach(function (p) {
        if (!finite(p[0]) || !finite(ty(p[1]))) { pen = false; return; }
        d += (pen ? "L" : "M") + xy(p[0], p[1]);
        pen = true;
      });
      if (!d) return;
      var path = add(plot, svg("path", {d: d, fill: "none", stroke: l.color, "stroke-width": l.width || 1.8,
                                        "stroke-dasharray": l.dash || "", "class": "ls-line " + (l.cls || "")}));
      if (l.name) add(path, svg("title", {}, l.name));
      if (!l.markers) return;
      l.pts.forEach(function (p) {
        if (!finite(p[0]) || !finite(ty(p[1]))) return;
        add(plot, svg("circle", {cx: sx(p[0]), cy: sy(p[1]), r: 2.2, fill: l.color}));
      });
    });
    var pointsG = add(plot, svg("g", {"class": "ls-points"}));
    (spec.points || []).forEach(function (p) {
      if (!finite(p.x) || !finite(ty(p.y))) return;
      var c = add(pointsG, svg("circle", {cx: sx(p.x).toFixed(1), cy: sy(p.y).toFixed(1), r: p.r || 3, fill: p.color,
                                          stroke: p.stroke || "none", "class": p.cls || null}));
      for (var k in p.data || {}) c.setAttribute("data-" + k, p.data[k]);
      if (p.tip) add(c, svg("title", {}, p.tip));
    });
    (spec.labels || []).forEach(function (t) {
      add(plot, svg("text", {x: sx(t.x) + 6, y: sy(t.y) - 6, "class": "ls-pointlabel"}, t.text));
    });
    if (legendH) legend(root, spec.legend, pl, h + 4);
    return root;
  }

  function yTicks(spec, lo, hi) {
    if (spec.noYTicks) return [];
    if (spec.ylog && hi - lo < 1.5) {       // less than a decade and a half: round values on the log axis
      return niceTicks(Math.pow(10, lo), Math.pow(10, hi), 4).filter(function (v) { return v > 0; })
        .map(function (v) { return {v: v, label: tickLabel(v)}; });
    }
    if (spec.ylog) {
      return niceTicks(lo, hi, 4).filter(function (v) { return Math.abs(v - Math.round(v)) < 1e-9; })
        .map(function (v) { return {v: Math.pow(10, v), label: "1e" + Math.round(v)}; });
    }
    return niceTicks(lo, hi, 5).map(function (v) { return {v: v, label: tickLabel(v)}; });
  }

  function legend(root, items, x, y) {
    var g = add(root, svg("g", {"class": "ls-legend"}));
    var widest = Math.max.apply(null, items.map(function (it) { return String(it.name).length; }));
    add(g, svg("rect", {x: x - 3, y: y - 3, width: Math.min(widest * 6.2 + 32, 300), height: items.length * 13 + 4,
                        "class": "ls-legend-box"}));
    items.forEach(function (it, i) {
      var Y = y + 6 + i * 13;
      if (it.marker) {
        add(g, svg("circle", {cx: x + 9, cy: Y, r: 3.5, fill: it.color}));
      } else {
        add(g, svg("line", {x1: x, x2: x + 18, y1: Y, y2: Y, stroke: it.color, "stroke-width": 2,
                            "stroke-dasharray": it.dash || ""}));
      }
      add(g, svg("text", {x: x + 23, y: Y + 4, "class": "ls-legend-text"}, it.name));
    });
  }

  // ------------------------------------------------------------------ a heatmap of cells
  // spec: {title, rows: [names], cols: [names], values: [row][col], vmin, vmax, diverging, showValues, cell, cellh,
  //        left, xlabel, cls}
  function heatmap(spec) {
    var cw = spec.cell || 26, ch = spec.cellh || 18;
    var longest = Math.max.apply(null, spec.cols.map(function (c) { return String(c).length; }).concat([1]));
    var rotateX = longest * 6 > cw;         // column names wider than a cell: slanted, with room below
    var left = spec.left || 90, top = 34, bottom = rotateX ? 24 + longest * 4.6 : 46;
    var w = Math.max(left + spec.cols.length * cw + 16, 220, (spec.title || "").length * 6.6 + 12);
    var h = top + spec.rows.length * ch + bottom;
    var root = svg("svg", {width: w, height: h, viewBox: "0 0 " + w + " " + h, role: "img",
                           "class": "ls-heatmap " + (spec.cls || "")});
    add(root, svg("title", {}, spec.title || ""));
    add(root, svg("text", {x: w / 2, y: 14, "text-anchor": "middle", "class": "ls-title"}, spec.title || ""));
    var all = [];
    spec.values.forEach(function (r) { all = all.concat(r); });
    var range = extent(all, [0, 1]);
    var lo = spec.vmin !== undefined ? spec.vmin : range[0], hi = spec.vmax !== undefined ? spec.vmax : range[1];
    function unit(v) { return (v - lo) / ((hi - lo) || 1); }
    var g = add(root, svg("g", {"class": "ls-cells"}));
    spec.rows.forEach(function (rname, i) {
      add(root, svg("text", {x: left - 4, y: top + i * ch + ch / 2 + 4, "text-anchor": "end", "class": "ls-ticklabel"},
                    rname));
      spec.cols.forEach(function (cname, j) {
        var v = spec.values[i][j];
        var fill = !finite(v) ? "#eee" : spec.diverging ? diverging(unit(v)) : viridis(unit(v));
        var rect = add(g, svg("rect", {x: left + j * cw, y: top + i * ch, width: cw - 1, height: ch - 1, fill: fill,
                                       "data-value": finite(v) ? v : "", "class": "ls-cell"}));
        add(rect, svg("title", {}, rname + " · " + cname + ": " + fmt(v)));
        if (spec.showValues && finite(v)) {
          var dark = spec.diverging ? Math.abs(unit(v) - 0.5) > 0.35 : unit(v) < 0.45;
          add(g, svg("text", {x: left + j * cw + cw / 2, y: top + i * ch + ch / 2 + 4, "text-anchor": "middle",
                              "class": "ls-cellvalue", fill: dark ? "#fff" : "#111"}, v.toFixed(2)));
        }
      });
    });
    spec.cols.forEach(function (cname, j) {
      var X = left + j * cw + cw / 2, Y = top + spec.rows.length * ch + 10;
      add(root, svg("text", {x: X, y: Y, "text-anchor": rotateX ? "end" : "middle", "class": "ls-ticklabel",
                             transform: rotateX ? "rotate(-40 " + X + " " + Y + ")" : null}, cname));
    });
    if (spec.xlabel) {
      add(root, svg("text", {x: left + spec.cols.length * cw / 2, y: h - 4, "text-anchor": "middle",
                             "class": "ls-axislabel"}, spec.xlabel));
    }
    add(root, svg("text", {x: w - 4, y: 28, "text-anchor": "end", "class": "ls-subtitle"},
                  "colour: " + fmt(lo, 2) + " … " + fmt(hi, 2)));
    return root;
  }
  function mix(stops, t) {
    t = Math.max(0, Math.min(1, t));
    var x = t * (stops.length - 1), i = Math.min(Math.floor(x), stops.length - 2), f = x - i;
    var c = stops[i].map(function (a, k) { return Math.round(a + (stops[i + 1][k] - a) * f); });
    return "rgb(" + c.join(",") + ")";
  }
  function viridis(t) { return mix([[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]], t); }
  function diverging(t) { return mix([[59, 76, 192], [247, 247, 247], [180, 4, 38]], t); }

  // ------------------------------------------------------------------ players
  // A range input over `values` shown as "<label> <value>", and a play button that steps from the first to the
  // last; onChange(value) redraws. `set(i)` moves it.
  function player(label, values, onChange, cls) {
    var box = el("div", {"class": "ls-player " + (cls || "")});
    var last = Math.max(values.length - 1, 0);
    var input = el("input", {type: "range", min: 0, max: last, step: 1, value: last, "aria-label": label});
    var shown = el("output", {"class": "ls-player-value"});
    var play = el("button", {type: "button", "class": "ls-play", title: "play from the first"}, "▶");
    var timer = null;
    function show(i) { input.value = i; shown.textContent = label.toLowerCase() + " " + values[i]; }
    function set(i) { show(i); onChange(values[i]); }
    function stop() { clearInterval(timer); timer = null; play.textContent = "▶"; }
    input.addEventListener("input", function () { set(Number(input.value)); });
    play.addEventListener("click", function () {
      if (timer) { stop(); return; }
      var i = 0;
      set(0);
      play.textContent = "■";
      timer = setInterval(function () {
        i += 1;
        if (i >= values.length) { stop(); return; }
        set(i);
      }, 700);
    });
    if (values.length < 2) { input.disabled = true; play.disabled = true; }
    add(box, el("span", {"class": "ls-player-label"}, label), input, shown, play);
    if (values.length) show(last);
    return {el: box, input: input, set: set, show: show, values: values};
  }

  // ------------------------------------------------------------------ the page's blocks
  function section(parent, title, cls, intro) {
    var s = add(parent, el("section", {"class": "ls-section " + (cls || "")}));
    add(s, el("h3", {}, title));
    if (intro) add(s, el("p", {"class": "ls-intro"}, intro));
    return s;
  }
  // one figure: printed whole on its page
  function block(parent, cls) { return add(parent, el("figure", {"class": "ls-block " + (cls || "")})); }
  function note(parent, text, cls) { return add(parent, el("p", {"class": "ls-note " + (cls || "")}, text)); }
  function capital(word) { return word.charAt(0).toUpperCase() + word.slice(1); }

  return {el: el, svg: svg, add: add, replace: replace, finite: finite, fmt: fmt, signed: signed, color: color,
          chart: chart, heatmap: heatmap, player: player, section: section, block: block, note: note, capital: capital,
          SPLIT_COLORS: {train: "#2ca02c", seen: "#1f77b4", unseen: "#d62728"},
          SPLIT_DASH: {train: "", seen: "6 3", unseen: "2 3"}};
})();
