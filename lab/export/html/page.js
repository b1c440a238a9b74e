// layerscope's exported page: draws the page model (the JSON element #ls-model, every number from lab.analysis)
// as inline SVG, with range inputs as the layer and epoch players. It computes no measure, fetches nothing and
// sets every text that comes from a run (run, layer and class names) with textContent, never as markup.
(function () {
  "use strict";

  // The SVG namespace, split so that the file holds no URL (the file must refer to nothing outside it).
  var SVG_NS = "http:" + "/" + "/www.w3.org/2000/svg";
  var PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                 "#bcbd22", "#17becf"];
  var SPLIT_COLORS = {train: "#2ca02c", seen: "#1f77b4", unseen: "#d62728"};
  var SPLIT_DASH = {train: "", seen: "6 3", unseen: "2 3"};
  var W = 380, H = 250, M = {l: 54, r: 12, t: 34, b: 46};

  var model = JSON.parse(document.getElementById("ls-model").textContent);
  var page = document.getElementById("ls-page");

  // ------------------------------------------------------------------ small helpers
  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    for (var k in attrs || {}) { if (attrs[k] !== undefined && attrs[k] !== null) node.setAttribute(k, attrs[k]); }
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function svg(tag, attrs, text) {
    var node = document.createElementNS(SVG_NS, tag);
    for (var k in attrs || {}) { if (attrs[k] !== undefined && attrs[k] !== null) node.setAttribute(k, attrs[k]); }
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  // add(parent, child): the child; add(parent, a, b, ...): the parent
  function add(parent) {
    for (var i = 1; i < arguments.length; i++) { if (arguments[i]) parent.appendChild(arguments[i]); }
    return arguments.length === 2 ? arguments[1] : parent;
  }
  function finite(v) { return typeof v === "number" && isFinite(v); }
  function fmt(v, digits) {
    if (!finite(v)) return "–";
    var d = digits === undefined ? 3 : digits;
    if (v !== 0 && (Math.abs(v) < 1e-3 || Math.abs(v) >= 1e5)) return v.toExponential(2);
    return v.toFixed(d);
  }
  function signed(v) { return finite(v) ? (v >= 0 ? "+" : "−") + Math.abs(v).toFixed(3) : "–"; }
  function splitName(s) { return (model.splits && model.splits[s]) || s; }
  function color(i) { return PALETTE[i % PALETTE.length]; }

  function niceTicks(lo, hi, n) {
    if (!(hi > lo)) { return [lo]; }
    var step = Math.pow(10, Math.floor(Math.log10((hi - lo) / n)));
    var err = (hi - lo) / n / step;
    if (err >= 7.5) step *= 10; else if (err >= 3.5) step *= 5; else if (err >= 1.5) step *= 2;
    var out = [];
    for (var t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) out.push(Math.abs(t) < step * 1e-9 ? 0 : t);
    return out;
  }
  function tickLabel(t) {
    var a = Math.abs(t);
    if (a !== 0 && (a < 1e-3 || a >= 1e5)) return t.toExponential(0);
    return String(Math.round(t * 1e6) / 1e6);
  }

  // ------------------------------------------------------------------ a chart: lines, bands, points, marks
  // spec: {title, xlabel, ylabel, ylog, xticks: [{v, label}], lines: [{pts, color, dash, cls, width}],
  //        bands: [{pts: [[x, lo, hi]], color}], points: [{x, y, color, r, cls, tip}], vlines: [{x, color, dash}],
  //        legend: [{name, color, dash, marker}], width, height, cls}
  function chart(spec) {
    var w = spec.width || W, h = spec.height || H;
    // the legend goes below the axes, never over the data
    var legendH = spec.legend && spec.legend.length ? spec.legend.length * 13 + 10 : 0;
    var root = svg("svg", {width: w, height: h + legendH, viewBox: "0 0 " + w + " " + (h + legendH), "class": "ls-chart " + (spec.cls || ""),
                           role: "img"});
    add(root, svg("title", {}, (spec.title || "").replace(/\n/g, " · ")));
    var ty = spec.ylog ? function (v) { return v > 0 ? Math.log10(v) : NaN; } : function (v) { return v; };
    var xs = [], ys = [];
    (spec.lines || []).forEach(function (l) { l.pts.forEach(function (p) { xs.push(p[0]); ys.push(ty(p[1])); }); });
    (spec.bands || []).forEach(function (b) { b.pts.forEach(function (p) { xs.push(p[0]); ys.push(ty(p[1])); ys.push(ty(p[2])); }); });
    (spec.points || []).forEach(function (p) { xs.push(p.x); ys.push(ty(p.y)); });
    (spec.vlines || []).forEach(function (v) { xs.push(v.x); });
    (spec.xticks || []).forEach(function (t) { xs.push(t.v); });
    xs = xs.filter(finite); ys = ys.filter(finite);
    var x0 = spec.xmin !== undefined ? spec.xmin : Math.min.apply(null, xs.length ? xs : [0]);
    var x1 = spec.xmax !== undefined ? spec.xmax : Math.max.apply(null, xs.length ? xs : [1]);
    var y0 = spec.ymin !== undefined ? spec.ymin : Math.min.apply(null, ys.length ? ys : [0]);
    var y1 = spec.ymax !== undefined ? spec.ymax : Math.max.apply(null, ys.length ? ys : [1]);
    if (x1 === x0) { x0 -= 0.5; x1 += 0.5; }
    if (y1 === y0) { var pad0 = Math.abs(y0) * 0.1 || 0.5; y0 -= pad0; y1 += pad0; }
    var padx = spec.xpad === undefined ? 0.04 : spec.xpad, pady = 0.06;
    var dx = (x1 - x0) * padx, dy = (y1 - y0) * pady;
    x0 -= dx; x1 += dx; y0 -= dy; y1 += dy;
    var pl = M.l, pr = w - M.r, pt = M.t + (spec.title && spec.title.indexOf("\n") >= 0 ? 10 : 0), pb = h - M.b;
    function sx(v) { return pl + (v - x0) / (x1 - x0) * (pr - pl); }
    function sy(v) { return pb - (ty(v) - y0) / (y1 - y0) * (pb - pt); }
    var titleLines = (spec.title || "").split("\n");
    titleLines.forEach(function (line, i) {
      add(root, svg("text", {x: w / 2, y: 13 + i * 13, "text-anchor": "middle", "class": i ? "ls-subtitle" : "ls-title"}, line));
    });
    var axes = add(root, svg("g", {"class": "ls-axes"}));
    add(axes, svg("rect", {x: pl, y: pt, width: pr - pl, height: pb - pt, "class": "ls-frame"}));
    var xt = spec.xticks || niceTicks(x0 + dx, x1 - dx, 5).map(function (v) { return {v: v, label: tickLabel(v)}; });
    var rotate = spec.rotateX;
    xt.forEach(function (t) {
      var X = sx(t.v);
      add(axes, svg("line", {x1: X, x2: X, y1: pb, y2: pb + 4, "class": "ls-tick"}));
      var attrs = {x: X, y: pb + 15, "text-anchor": "middle", "class": "ls-ticklabel"};
      if (rotate) { attrs = {x: X, y: pb + 9, "text-anchor": "end", "class": "ls-ticklabel", transform: "rotate(-30 " + X + " " + (pb + 9) + ")"}; }
      add(axes, svg("text", attrs, t.label));
    });
    var yt;
    if (spec.ylog) {
      yt = niceTicks(y0 + dy, y1 - dy, 4).filter(function (v) { return Math.abs(v - Math.round(v)) < 1e-9 || (y1 - y0) < 1.5; })
        .map(function (v) { return {v: Math.pow(10, v), label: (y1 - y0) < 1.5 ? fmt(Math.pow(10, v), 3) : "1e" + Math.round(v)}; });
    } else {
      yt = niceTicks(y0 + dy, y1 - dy, 5).map(function (v) { return {v: v, label: tickLabel(v)}; });
    }
    if (spec.noYTicks) yt = [];
    yt.forEach(function (t) {
      var Y = sy(t.v);
      add(axes, svg("line", {x1: pl - 4, x2: pr, y1: Y, y2: Y, "class": "ls-grid"}));
      add(axes, svg("text", {x: pl - 6, y: Y + 4, "text-anchor": "end", "class": "ls-ticklabel"}, t.label));
    });
    if (spec.xlabel) add(axes, svg("text", {x: (pl + pr) / 2, y: h - 4, "text-anchor": "middle", "class": "ls-axislabel"}, spec.xlabel));
    if (spec.ylabel) {
      add(axes, svg("text", {x: 12, y: (pt + pb) / 2, "text-anchor": "middle", "class": "ls-axislabel",
                             transform: "rotate(-90 12 " + (pt + pb) / 2 + ")"}, spec.ylabel + (spec.ylog ? " (log)" : "")));
    }
    var plot = add(root, svg("g", {"class": "ls-plot"}));
    (spec.bands || []).forEach(function (b) {
      var pts = b.pts.filter(function (p) { return finite(ty(p[1])) && finite(ty(p[2])) && finite(p[0]); });
      if (!pts.length) return;
      var d = pts.map(function (p, i) { return (i ? "L" : "M") + sx(p[0]).toFixed(1) + "," + sy(p[2]).toFixed(1); }).join("");
      d += pts.slice().reverse().map(function (p) { return "L" + sx(p[0]).toFixed(1) + "," + sy(p[1]).toFixed(1); }).join("") + "Z";
      add(plot, svg("path", {d: d, fill: b.color, "fill-opacity": 0.18, stroke: "none", "class": "ls-band " + (b.cls || "")}));
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
        d += (pen ? "L" : "M") + sx(p[0]).toFixed(1) + "," + sy(p[1]).toFixed(1);
        pen = true;
      });
      if (!d) return;
      var path = add(plot, svg("path", {d: d, fill: "none", stroke: l.color, "stroke-width": l.width || 1.8,
                                        "stroke-dasharray": l.dash || "", "class": "ls-line " + (l.cls || "")}));
      if (l.name) add(path, svg("title", {}, l.name));
      if (l.markers) {
        l.pts.forEach(function (p) {
          if (finite(p[0]) && finite(ty(p[1]))) add(plot, svg("circle", {cx: sx(p[0]), cy: sy(p[1]), r: 2.2, fill: l.color}));
        });
      }
    });
    var pointsG = add(plot, svg("g", {"class": "ls-points"}));
    (spec.points || []).forEach(function (p) {
      if (!finite(p.x) || !finite(ty(p.y))) return;
      var c = add(pointsG, svg("circle", {cx: sx(p.x).toFixed(1), cy: sy(p.y).toFixed(1), r: p.r || 3, fill: p.color,
                                          stroke: p.stroke || "none", "class": p.cls || null}));
      if (p.tip) add(c, svg("title", {}, p.tip));
    });
    (spec.labels || []).forEach(function (t) {
      add(plot, svg("text", {x: sx(t.x) + 6, y: sy(t.y) - 6, "class": "ls-pointlabel"}, t.text));
    });
    if (legendH) legend(root, spec.legend, pl, h + 4);
    return root;
  }

  function legend(root, items, x, y) {
    var g = add(root, svg("g", {"class": "ls-legend"}));
    var widest = 0;
    items.forEach(function (it) { widest = Math.max(widest, String(it.name).length); });
    add(g, svg("rect", {x: x - 3, y: y - 3, width: Math.min(widest * 6.2 + 32, 300), height: items.length * 13 + 4,
                        "class": "ls-legend-box"}));
    items.forEach(function (it, i) {
      var Y = y + 6 + i * 13;
      if (it.marker) add(g, svg("circle", {cx: x + 9, cy: Y, r: 3.5, fill: it.color}));
      else add(g, svg("line", {x1: x, x2: x + 18, y1: Y, y2: Y, stroke: it.color, "stroke-width": 2, "stroke-dasharray": it.dash || ""}));
      add(g, svg("text", {x: x + 23, y: Y + 4, "class": "ls-legend-text"}, it.name));
    });
  }

  // ------------------------------------------------------------------ a heatmap of cells
  // spec: {title, rows: [names], cols: [names], values: [row][col], vmin, vmax, diverging, showValues, cls, xlabel, ylabel}
  function heatmap(spec) {
    var cw = spec.cell || 26, ch = spec.cellh || 18;
    var left = spec.left || 90, top = 34, bottom = 46;
    var w = Math.max(left + spec.cols.length * cw + 16, 220, (spec.title || "").length * 6.6 + 12);
    var h = top + spec.rows.length * ch + bottom;
    var root = svg("svg", {width: w, height: h, viewBox: "0 0 " + w + " " + h, "class": "ls-heatmap " + (spec.cls || ""), role: "img"});
    add(root, svg("title", {}, spec.title || ""));
    add(root, svg("text", {x: w / 2, y: 14, "text-anchor": "middle", "class": "ls-title"}, spec.title || ""));
    var vals = [];
    spec.values.forEach(function (r) { r.forEach(function (v) { if (finite(v)) vals.push(v); }); });
    var lo = spec.vmin !== undefined ? spec.vmin : Math.min.apply(null, vals.length ? vals : [0]);
    var hi = spec.vmax !== undefined ? spec.vmax : Math.max.apply(null, vals.length ? vals : [1]);
    var g = add(root, svg("g", {"class": "ls-cells"}));
    spec.rows.forEach(function (rname, i) {
      add(root, svg("text", {x: left - 4, y: top + i * ch + ch / 2 + 4, "text-anchor": "end", "class": "ls-ticklabel"}, rname));
      spec.cols.forEach(function (cname, j) {
        var v = spec.values[i][j];
        var fill = finite(v) ? (spec.diverging ? diverging((v - lo) / ((hi - lo) || 1)) : viridis((v - lo) / ((hi - lo) || 1))) : "#eee";
        var rect = add(g, svg("rect", {x: left + j * cw, y: top + i * ch, width: cw - 1, height: ch - 1, fill: fill,
                                       "data-value": finite(v) ? v : "", "class": "ls-cell"}));
        add(rect, svg("title", {}, rname + " · " + cname + ": " + fmt(v)));
        if (spec.showValues && finite(v)) {
          add(g, svg("text", {x: left + j * cw + cw / 2, y: top + i * ch + ch / 2 + 4, "text-anchor": "middle",
                              "class": "ls-cellvalue"}, v.toFixed(2)));
        }
      });
    });
    spec.cols.forEach(function (cname, j) {
      var X = left + j * cw + cw / 2, Y = top + spec.rows.length * ch + 10;
      add(root, svg("text", {x: X, y: Y, "text-anchor": spec.rotateX ? "end" : "middle", "class": "ls-ticklabel",
                             transform: spec.rotateX ? "rotate(-40 " + X + " " + Y + ")" : null}, cname));
    });
    if (spec.xlabel) add(root, svg("text", {x: left + spec.cols.length * cw / 2, y: h - 4, "text-anchor": "middle", "class": "ls-axislabel"}, spec.xlabel));
    add(root, svg("text", {x: w - 4, y: 28, "text-anchor": "end", "class": "ls-subtitle"},
                  "colour: " + fmt(lo, 2) + " … " + fmt(hi, 2)));
    return root;
  }
  function viridis(t) {
    t = Math.max(0, Math.min(1, t));
    var stops = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
    var x = t * (stops.length - 1), i = Math.min(Math.floor(x), stops.length - 2), f = x - i;
    var c = stops[i].map(function (a, k) { return Math.round(a + (stops[i + 1][k] - a) * f); });
    return "rgb(" + c.join(",") + ")";
  }
  function diverging(t) {
    t = Math.max(0, Math.min(1, t));
    var a = t < 0.5 ? [59, 76, 192] : [180, 4, 38], f = t < 0.5 ? 1 - t * 2 : (t - 0.5) * 2;
    var c = a.map(function (v) { return Math.round(247 + (v - 247) * f); });
    return "rgb(" + c.join(",") + ")";
  }

  // ------------------------------------------------------------------ players
  // A range input over `values` (shown as "<label> <value>"), a play button stepping to the end; onChange(value).
  function player(label, values, onChange, cls) {
    var box = el("div", {"class": "ls-player " + (cls || "")});
    var name = el("span", {"class": "ls-player-label"}, label);
    var input = el("input", {type: "range", min: 0, max: Math.max(values.length - 1, 0), step: 1,
                             value: Math.max(values.length - 1, 0), "aria-label": label});
    var shown = el("output", {"class": "ls-player-value"});
    var play = el("button", {type: "button", "class": "ls-play", title: "play from the first"}, "▶");
    var timer = null;
    function set(i) {
      input.value = i;
      shown.textContent = label.toLowerCase() + " " + values[i];
      onChange(values[i]);
    }
    input.addEventListener("input", function () { set(Number(input.value)); });
    play.addEventListener("click", function () {
      if (timer) { clearInterval(timer); timer = null; play.textContent = "▶"; return; }
      var i = 0; set(0); play.textContent = "■";
      timer = setInterval(function () {
        i += 1;
        if (i >= values.length) { clearInterval(timer); timer = null; play.textContent = "▶"; return; }
        set(i);
      }, 700);
    });
    if (values.length < 2) { input.disabled = true; play.disabled = true; }
    add(box, name, input, shown, play);
    return {el: box, input: input, set: set, values: values};
  }

  function section(parent, title, cls, intro) {
    var s = add(parent, el("section", {"class": "ls-section " + (cls || "")}));
    add(s, el("h3", {}, title));
    if (intro) add(s, el("p", {"class": "ls-intro"}, intro));
    return s;
  }
  function block(parent, cls) { return add(parent, el("figure", {"class": "ls-block " + (cls || "")})); }
  function replace(node, child) { while (node.firstChild) node.removeChild(node.firstChild); if (child) node.appendChild(child); }
  function note(parent, text, cls) { return add(parent, el("p", {"class": "ls-note " + (cls || "")}, text)); }

  // ------------------------------------------------------------------ one run
  function renderRun(run, parent) {
    var art = add(parent, el("article", {"class": "ls-run", "data-run": run.run_id}));
    add(art, el("h2", {"class": "ls-run-name"}, run.name));
    note(art, "run " + run.run_id + " · " + run.status + (run.device ? " · " + run.device : "") +
         (run.ended ? " · ended " + run.ended : ""), "ls-run-meta");
    var axis = run.axis || "epoch";
    renderVerdict(run, art, axis);
    renderCurves(run, art, axis);
    renderHeatmap(run, art, axis);
    renderCollapse(run, art, axis);
    renderLayouts(run, art, axis);
    renderTraining(run, art, axis);
    renderSettings(run, art);
  }

  function renderVerdict(run, art, axis) {
    var s = section(art, "Verdict", "ls-verdict");
    var v = run.verdict;
    if (!v) { note(s, "No complete evaluation of the unseen classes: no best layer to report."); }
    else {
      var p = add(s, el("p", {"class": "ls-verdict-line"}));
      add(p, el("b", {}, "Best layer for unseen classes: "));
      add(p, el("b", {"class": "ls-best-layer"}, v.layer));
      var g = fmt(v.g) + (finite(v.g_std) ? " ± " + fmt(v.g_std) : "");
      var seeds = v.n_seeds + " seed" + (v.n_seeds === 1 ? "" : "s");
      add(p, el("span", {"class": "ls-g"}, " (g = " + v.label + " " + g + ", " + axis + " " + v.epoch + ", " + seeds +
                (v.confidence ? "; " + v.confidence : "") + ")"));
      if (finite(v.heldout_accuracy)) {
        add(p, el("span", {}, " · seen-class held-out accuracy " + (100 * v.heldout_accuracy).toFixed(1) + " % (" + axis +
                  " " + v.accuracy_epoch + ")"));
      }
      if (v.final_layer) {
        add(p, el("span", {}, " · the best layer " + (v.is_final ? "is" : "is not") + " the final representation (" +
                  v.final_layer + ")"));
      }
    }
    var a = run.agreement;
    if (a && a.rows.length) {
      add(s, el("p", {"class": "ls-caption"}, "Best layer by each measure, this evaluation" +
                (a.epoch !== null ? " (" + axis + " " + a.epoch + ")" : "")));
      var t = add(s, el("table", {"class": "ls-table ls-agreement"}));
      var head = add(t, el("tr"));
      ["measure", "best layer", "best in (bootstrap resamples)", "Spearman ρ with NMI (layer order)"].forEach(function (h) {
        add(head, el("th", {}, h));
      });
      a.rows.forEach(function (r) {
        var tr = add(t, el("tr", {"data-measure": r.measure}));
        add(tr, el("td", {}, r.label + (r.split === "seen" ? " (seen, epoch 0)" : "") + (r.label_free ? " (no labels)" : "")));
        add(tr, el("td", {}, r.best_layer));
        add(tr, el("td", {"class": "ls-num"}, finite(r.best_share) ? Math.round(100 * r.best_share) + " %" : "—"));
        add(tr, el("td", {"class": "ls-num"}, finite(r.spearman) ? r.spearman.toFixed(2) : ""));
      });
      if (a.notes.length) {
        var ul = add(s, el("ul", {"class": "ls-notes"}));
        a.notes.forEach(function (n) { add(ul, el("li", {}, n)); });
      }
    }
  }

  function layerTicks(layers) { return layers.map(function (name, i) { return {v: i, label: name}; }); }

  function renderCurves(run, art, axis) {
    if (!run.curves.length || !run.epochs.length) return;
    var s = section(art, "Each layer, at one " + axis, "ls-curves",
                    "The seed mean of each measure at every layer; the band is the 95 % bootstrap interval over the " +
                    "unseen images where the run has one, else ± one standard deviation over seeds.");
    var figs = add(s, el("div", {"class": "ls-row"}));
    var boxes = run.curves.map(function (c) { return {spec: c, fig: block(figs, "ls-curve")}; });
    function draw(epoch) {
      var e = run.epochs.indexOf(epoch);
      boxes.forEach(function (b) {
        var c = b.spec, lines = [], bands = [], legendItems = [];
        c.splits.forEach(function (split) {
          var grid = run.values[c.metric][split];
          var col = SPLIT_COLORS[split] || "#333";
          lines.push({pts: run.layers.map(function (_, i) { return [i, grid.mean[e][i]]; }), color: col, markers: true,
                      name: splitName(split)});
          var iv = c.interval[split];
          if (iv) {
            var lo = run.values[iv[0]][split], hi = run.values[iv[1]][split];
            bands.push({pts: run.layers.map(function (_, i) { return [i, lo.mean[e][i], hi.mean[e][i]]; }), color: col});
          } else {
            bands.push({pts: run.layers.map(function (_, i) {
              var m = grid.mean[e][i], sd = grid.std[e][i];
              return finite(sd) ? [i, m - sd, m + sd] : [i, NaN, NaN];
            }), color: col});
          }
          legendItems.push({name: splitName(split), color: col});
        });
        replace(b.fig, chart({title: c.label + " · " + axis + " " + epoch, lines: lines, bands: bands, legend: legendItems,
                              xticks: layerTicks(run.layers), rotateX: true, ylabel: c.label, height: 270,
                              cls: "ls-curve-" + c.metric}));
      });
    }
    var p = player(axis.charAt(0).toUpperCase() + axis.slice(1), run.epochs, draw, "ls-curves-player");
    s.insertBefore(p.el, figs);
    p.set(run.epochs.length - 1);
  }

  function renderHeatmap(run, art, axis) {
    var g = run.g_metric, grid = run.values[g] && run.values[g].unseen;
    if (!grid) return;
    var s = section(art, "Layer × " + axis, "ls-heatmap-section",
                    "The seed mean of " + run.labels[g] + " on the unseen classes at every layer (rows, input at the " +
                    "top) and " + axis + " (columns).");
    var rows = run.layers.map(function (_, i) { return run.epochs.map(function (_, e) { return grid.mean[e][i]; }); });
    var left = 12 + 6.5 * Math.max.apply(null, run.layers.map(function (l) { return l.length; }));
    add(block(s), heatmap({title: run.labels[g] + " (unseen) by layer and " + axis, rows: run.layers,
                           cols: run.epochs.map(String), values: rows, showValues: run.epochs.length <= 20,
                           cell: 34, left: Math.min(left, 220), xlabel: axis, cls: "ls-layer-epoch"}));
  }

  // ------------------------------------------------------------------ neural collapse
  function renderCollapse(run, art, axis) {
    var c = run.collapse;
    if (!c && !run.simplex && !run.law) return;
    var s = section(art, "Neural collapse: training sample, held-out and unseen", "ls-collapse",
                    "Papyan, Han & Donoho's measures against " + axis + " at the layers drawn (colour), the splits told " +
                    "apart by dash (training sample solid, held-out seen images dashed, unseen classes dotted); the grey " +
                    "line marks the first " + axis + " of 100 % training-sample accuracy (the terminal phase).");
    if (c) {
      var terminal = Object.keys(c.terminal).map(function (k) { return c.terminal[k]; }).filter(finite);
      var keyItems = c.layers.map(function (l, i) { return {name: l, color: color(i)}; });
      var row = add(s, el("div", {"class": "ls-row"}));
      c.panels.forEach(function (panel) {
        var fig = block(row, "ls-nc-panel");
        if (!panel.metrics.length) {
          add(fig, el("p", {"class": "ls-reason"}, panel.title.split("\n")[0] + ": not measured (" +
                      panel.missing.join(", ") + " not among this run's metrics)"));
          return;
        }
        var lines = [];
        panel.metrics.forEach(function (m) {
          var black = c.classifier.indexOf(m) >= 0;
          c.splits.forEach(function (split) {
            var grid = run.values[m] && run.values[m][split];
            if (!grid) return;
            c.layers.forEach(function (layer, li) {
              var i = run.layers.indexOf(layer);
              if (i < 0) return;
              var pts = run.epochs.map(function (ep, e) { return [ep, grid.mean[e][i]]; });
              if (!pts.some(function (p) { return finite(p[1]); })) return;
              lines.push({pts: pts, color: black ? "#000" : color(li), dash: SPLIT_DASH[split] || "",
                          name: run.labels[m] + " · " + layer + " · " + splitName(split),
                          cls: "ls-nc-" + m});
            });
          });
        });
        var legendItems = (panel.key === "nc1" ? keyItems.concat(c.splits.map(function (sp) {
          return {name: splitName(sp), color: "#555", dash: SPLIT_DASH[sp]};
        })) : []);
        add(fig, chart({title: panel.title, lines: lines, ylog: panel.log, xlabel: axis, legend: legendItems,
                        vlines: terminal.map(function (t) { return {x: t, color: "#888", dash: "4 3", cls: "ls-terminal"}; }),
                        cls: "ls-nc-" + panel.key, height: 270}));
      });
    }
    renderSimplexAndLaw(run, s, axis);
  }

  function renderSimplexAndLaw(run, s, axis) {
    var sx = run.simplex, law = run.law;
    if (!sx && !law) return;
    add(s, el("h4", {}, "The simplex, seen"));
    add(s, el("p", {"class": "ls-intro"}, "At the chosen layer and " + axis + ", the cosines of the centred class means " +
              "beside the simplex equiangular tight frame's (1 on the diagonal, −1/(K−1) off it); for three classes, " +
              "the means in their own plane. The " + axis + " player also moves the law of equi-separation below."));
    var controls = add(s, el("div", {"class": "ls-controls"}));
    var state = {layer: null, split: null, epoch: null};
    var figs = add(s, el("div", {"class": "ls-row"}));
    var devLine = add(s, el("p", {"class": "ls-deviation"}));
    var cosFig = block(figs, "ls-simplex-cos"), idealFig = block(figs, "ls-simplex-ideal"), planeFig = block(figs, "ls-simplex-plane");
    var epochs = law ? law.epochs.slice() : [];
    if (sx) {
      Object.keys(sx.at).forEach(function (layer) {
        Object.keys(sx.at[layer]).forEach(function (split) {
          Object.keys(sx.at[layer][split]).forEach(function (ep) { if (epochs.indexOf(Number(ep)) < 0) epochs.push(Number(ep)); });
        });
      });
    }
    epochs.sort(function (a, b) { return a - b; });
    var lawBox = null;
    if (law) {
      add(s, el("h4", {}, "The law of equi-separation, across layers"));
      add(s, el("p", {"class": "ls-intro"}, "He & Su 2023. Left: log10 NC1 at each layer at the " + axis + " of the player " +
                "above, with the least-squares line through it (identical taps counted once); the legend gives NC1's " +
                "factor per layer (10^slope: below 1, each deeper layer separates the classes better) and Pearson r. " +
                "Right: r at every " + axis + "; the grey line is the " + axis + " shown." +
                (law.n_seeds > 1 ? " Seed " + law.seed + " of " + law.n_seeds + " on the left; r is the mean over seeds." : "")));
      lawBox = add(s, el("div", {"class": "ls-row"}));
      var lawNotes = add(s, el("div", {"class": "ls-law-notes"}));
      lawBox.depth = block(lawBox, "ls-law-depth");
      lawBox.r = block(lawBox, "ls-law-r");
      lawBox.notes = lawNotes;
    }

    function drawSimplex() {
      if (!sx) { replace(cosFig, el("p", {"class": "ls-reason"}, "This run recorded no class means: no simplex to show.")); return; }
      var at = sx.at[state.layer] && sx.at[state.layer][state.split] && sx.at[state.layer][state.split][String(state.epoch)];
      if (!at) {
        replace(cosFig, el("p", {"class": "ls-reason"}, "No class means at " + state.layer + ", " + splitName(state.split) +
                           ", " + axis + " " + state.epoch + "."));
        replace(idealFig, null); replace(planeFig, null); devLine.textContent = "";
        return;
      }
      var K = at.classes.length;
      var ideal = at.classes.map(function (_, i) { return at.classes.map(function (_, j) { return i === j ? 1 : at.ideal; }); });
      replace(cosFig, heatmap({title: "cosines of the centred means · " + axis + " " + state.epoch, rows: at.classes,
                               cols: at.classes, values: at.cosines, vmin: -1, vmax: 1, diverging: true,
                               showValues: K <= 12, cell: K <= 12 ? 34 : 16, cellh: K <= 12 ? 22 : 14, cls: "ls-cosines",
                               left: 16 + 6.5 * Math.max.apply(null, at.classes.map(function (c) { return c.length; }))}));
      replace(idealFig, heatmap({title: "simplex ETF (K = " + K + "): −1/(K−1) = " + at.ideal.toFixed(3), rows: at.classes,
                                 cols: at.classes, values: ideal, vmin: -1, vmax: 1, diverging: true, showValues: K <= 12,
                                 cell: K <= 12 ? 34 : 16, cellh: K <= 12 ? 22 : 14, cls: "ls-ideal",
                                 left: 16 + 6.5 * Math.max.apply(null, at.classes.map(function (c) { return c.length; }))}));
      if (K === 3) {
        var pts = at.coords.map(function (xy, i) { return {x: xy[0], y: xy[1], color: color(i), r: 6, tip: at.classes[i], cls: "ls-mean"}; });
        var tri = at.coords.concat([at.coords[0]]).map(function (xy) { return [xy[0], xy[1]]; });
        replace(planeFig, chart({title: "the three class means in their plane", points: pts, xpad: 0.2,
                                 lines: [{pts: tri, color: "#bbb", width: 1}], width: 300, height: 260,
                                 labels: at.coords.map(function (xy, i) { return {x: xy[0], y: xy[1], text: at.classes[i]}; }),
                                 cls: "ls-plane"}));
      } else { replace(planeFig, null); }
      devLine.textContent = "Mean |cos − (−1/(K−1))| over pairs of classes, " + state.layer + ", " + splitName(state.split) +
        ", " + axis + " " + state.epoch + ": " + fmt(at.deviation) + " (0 at a simplex ETF).";
    }

    function drawLaw() {
      if (!law) return;
      var ep = String(state.epoch), fits = law.fits[ep] || {}, pts = law.points[ep] || {};
      var lines = [], points = [], legendItems = [], layerNames = {};
      law.splits.forEach(function (split) {
        var col = SPLIT_COLORS[split] || "#333";
        (pts[split] || []).forEach(function (p) {
          layerNames[p.index] = p.layer;
          points.push({x: p.index, y: p.log10_nc1, color: p.in_fit ? col : "#fff", stroke: col, r: 3.5,
                       tip: p.layer + ": log10 NC1 = " + fmt(p.log10_nc1), cls: "ls-law-point"});
        });
        var fit = fits[split];
        var inFit = (pts[split] || []).filter(function (p) { return p.in_fit && finite(p.fitted); });
        if (fit && finite(fit.ratio) && inFit.length) {
          lines.push({pts: inFit.map(function (p) { return [p.index, p.fitted]; }), color: col, cls: "ls-law-fit",
                      name: splitName(split) + " fitted line"});
          legendItems.push({name: splitName(split) + ": ×" + fit.ratio.toFixed(3) + " per layer, r = " + signed(fit.r),
                            color: col});
        } else if (fit) {
          legendItems.push({name: splitName(split) + ": no law", color: col});
        }
      });
      var ticks = Object.keys(layerNames).map(function (k) { return {v: Number(k), label: layerNames[k]}; });
      replace(lawBox.depth, chart({title: "log10 NC1 against depth · " + axis + " " + state.epoch, lines: lines,
                                   points: points, legend: legendItems, xticks: ticks, rotateX: true,
                                   ylabel: "log10 NC1", height: 280, width: 420, cls: "ls-law-depth-chart"}));
      var rlines = law.splits.filter(function (sp) { return law.r[sp]; }).map(function (sp) {
        return {pts: law.r[sp], color: SPLIT_COLORS[sp] || "#333", markers: true, name: splitName(sp), cls: "ls-law-r-line"};
      });
      replace(lawBox.r, chart({title: "r against " + axis, lines: rlines, xlabel: axis, ylabel: "Pearson r",
                               vlines: [{x: state.epoch, color: "#999", cls: "ls-law-epoch"}],
                               legend: rlines.map(function (l) { return {name: l.name, color: l.color}; }),
                               height: 280, cls: "ls-law-r-chart"}));
      replace(lawBox.notes, null);
      law.splits.forEach(function (split) {
        var fit = fits[split];
        if (!fit) return;
        var text = finite(fit.ratio)
          ? splitName(split) + ", " + axis + " " + state.epoch + ": NC1 multiplied by " + fit.ratio.toFixed(3) + " per layer over " +
            fit.n_layers + " layers, r = " + signed(fit.r) + (fit.reason ? "; " + fit.reason : "") + "."
          : splitName(split) + ", " + axis + " " + state.epoch + ": " + (fit.reason || "no law") + ".";
        add(lawBox.notes, el("div", {"class": "ls-law-note", "data-split": split}, text));
      });
    }

    function draw() { drawSimplex(); drawLaw(); }
    if (sx && sx.layers.length) {
      state.layer = sx.layers[sx.layers.length - 1];
      state.split = sx.splits[0];
      var layerPlayer = player("Layer", sx.layers, function (v) { state.layer = v; if (state.epoch !== null) drawSimplex(); },
                               "ls-simplex-layer");
      add(controls, layerPlayer.el);
      var sel = add(controls, el("select", {"class": "ls-simplex-split", "aria-label": "split"}));
      sx.splits.forEach(function (sp) { add(sel, el("option", {value: sp}, splitName(sp))); });
      sel.addEventListener("change", function () { state.split = sel.value; drawSimplex(); });
      layerPlayer.input.value = sx.layers.length - 1;
      layerPlayer.el.querySelector("output").textContent = "layer " + state.layer;
    }
    var epochPlayer = player(axis.charAt(0).toUpperCase() + axis.slice(1), epochs,
                             function (v) { state.epoch = v; draw(); }, "ls-nc-epoch");
    add(controls, epochPlayer.el);
    if (epochs.length) epochPlayer.set(epochs.length - 1);
  }

  // ------------------------------------------------------------------ layouts of the unseen classes
  function renderLayouts(run, art, axis) {
    var L = run.layouts;
    if (!L) return;
    var s = section(art, "The unseen classes, laid out", "ls-layouts",
                    "A 2-D projection of the unseen images' features at the chosen layer and " + axis + ", coloured by " +
                    "class. " + (L.total > L.shown ? "Showing " + L.shown + " of the " + L.total + " images (a fixed random " +
                    "subset, the same images at every layer and " + axis + "; at most " + L.max_points + " a layout)."
                    : "All " + L.total + " images."));
    var controls = add(s, el("div", {"class": "ls-controls"}));
    var fig = block(s, "ls-layout");
    var state = {layer: L.layers[L.layers.length - 1], epoch: null};
    function epochsOf(layer) { return Object.keys(L.at[layer] || {}).map(Number).sort(function (a, b) { return a - b; }); }
    function draw() {
      var eps = epochsOf(state.layer);
      var ep = eps.indexOf(state.epoch) >= 0 ? state.epoch : eps[eps.length - 1];
      var at = L.at[state.layer][String(ep)];
      var pts = at.x.map(function (x, i) {
        return {x: x, y: at.y[i], color: color(at.label[i]), r: 2.6, tip: L.classes[at.label[i]] + " · image " + at.index[i]};
      });
      var fig2 = chart({title: at.method.toUpperCase() + " of " + state.layer + ", seed " + L.seed + ", " + axis + " " + ep,
                        points: pts, legend: L.classes.map(function (c, i) { return {name: c, color: color(i), marker: true}; }),
                        xticks: [], noYTicks: true, xlabel: "first axis", ylabel: "second axis", width: 560,
                        height: 440, xmin: 0, xmax: 9999, ymin: 0, ymax: 9999, cls: "ls-layout-chart"});
      fig2.setAttribute("data-layer", state.layer);
      fig2.setAttribute("data-epoch", ep);
      replace(fig, fig2);
      if (eps.indexOf(state.epoch) < 0) note(fig, "No layout of " + state.layer + " at " + axis + " " + state.epoch +
                                              "; showing " + axis + " " + ep + ".", "ls-layout-note");
    }
    var layerPlayer = player("Layer", L.layers, function (v) { state.layer = v; if (state.epoch !== null) draw(); }, "ls-layout-layer");
    var all = [];
    L.layers.forEach(function (l) { epochsOf(l).forEach(function (e) { if (all.indexOf(e) < 0) all.push(e); }); });
    all.sort(function (a, b) { return a - b; });
    var epochPlayer = player(axis.charAt(0).toUpperCase() + axis.slice(1), all, function (v) { state.epoch = v; draw(); },
                             "ls-layout-epoch");
    add(controls, layerPlayer.el, epochPlayer.el);
    layerPlayer.el.querySelector("output").textContent = "layer " + state.layer;
    epochPlayer.set(all.length - 1);
  }

  // ------------------------------------------------------------------ training, settings
  function renderTraining(run, art, axis) {
    var t = run.training;
    if (!t) return;
    var s = section(art, "Training", "ls-training", "The seed mean at the end of each " + axis + " (epoch 0: before training).");
    var row = add(s, el("div", {"class": "ls-row"}));
    [["loss", ["train_loss", "heldout_loss"]], ["accuracy", ["train_accuracy", "heldout_accuracy"]]].forEach(function (pair, k) {
      var lines = pair[1].filter(function (c) { return t.series[c]; }).map(function (c, i) {
        return {pts: t.epochs.map(function (e, j) { return [e, t.series[c].mean[j]]; }), color: color(i + 2 * k), markers: true,
                name: c.replace("_", " ").replace("heldout", "held-out (seen)")};
      });
      if (!lines.length) return;
      add(block(row, "ls-training-" + pair[0]), chart({title: pair[0], lines: lines, xlabel: axis, ylabel: pair[0],
                                                        legend: lines.map(function (l) { return {name: l.name, color: l.color}; })}));
    });
  }

  function renderSettings(run, art) {
    var s = section(art, "Settings", "ls-settings");
    var t = add(s, el("table", {"class": "ls-table ls-settings-table"}));
    Object.keys(run.settings || {}).forEach(function (k) {
      var v = run.settings[k];
      var tr = add(t, el("tr"));
      add(tr, el("th", {}, k));
      add(tr, el("td", {}, typeof v === "string" ? v : JSON.stringify(v)));
    });
    if (run.split && run.split.seen) {
      note(s, "Seen classes: " + run.split.seen.join(", ") + ". Unseen classes: " + (run.split.unseen || []).join(", ") + ".");
    }
  }

  // ------------------------------------------------------------------ the page
  document.title = model.title;
  add(page, el("h1", {}, model.title));
  note(page, "Exported from layerscope " + model.version + " on " + model.date + ". Every number was measured by the run " +
       "and computed by lab.analysis; this file draws them offline, with no server. Move the players to step through " +
       "layers and " + (model.runs[0] ? model.runs[0].axis || "epoch" : "epoch") + "s.", "ls-provenance");
  model.runs.forEach(function (run) { renderRun(run, page); });
  add(page, el("footer", {"class": "ls-footer"}, "layerscope " + model.version + " · written " + model.date));
})();
