// layerscope's exported page, the neural-collapse card: the six panels against epoch (Papyan, Han & Donoho 2020),
// the simplex of the class means with its layer and epoch players, and the law of equi-separation (He & Su 2023)
// following the epoch player. Every number is the page model's (lab.analysis); nothing is fitted here.
var lsCollapse = (function (d) {
  "use strict";
  var el = d.el, add = d.add, replace = d.replace, finite = d.finite, fmt = d.fmt;

  // The six panels at the layers ticked (the app's default four to start), redrawn when a box changes.
  function panels(run, s, axis, splitName) {
    var c = run.collapse;
    var options = c.options || c.layers, chosen = c.layers.slice();
    var terminal = Object.keys(c.terminal).map(function (k) { return c.terminal[k]; }).filter(finite);
    var boxes = add(s, el("div", {"class": "ls-controls ls-nc-layers"}));
    add(boxes, el("span", {"class": "ls-player-label"}, "Layers drawn"));
    var row = add(s, el("div", {"class": "ls-row"}));
    function colorOf(layer) { return d.color(options.indexOf(layer)); }
    function draw() {
      replace(row, null);
      var shown = options.filter(function (l) { return chosen.indexOf(l) >= 0; });
      var key = shown.map(function (l) { return {name: l, color: colorOf(l)}; }).concat(
        c.splits.map(function (sp) { return {name: splitName(sp), color: "#555", dash: d.SPLIT_DASH[sp]}; }));
      c.panels.forEach(function (panel) {
        var fig = d.block(row, "ls-nc-panel");
        if (!panel.metrics.length) {
          add(fig, el("p", {"class": "ls-reason"}, panel.title.split("\n")[0] + ": not measured (" +
                      panel.missing.join(", ") + " not among this run's metrics)"));
          return;
        }
        var lines = [];
        panel.metrics.forEach(function (m) {
          var black = c.classifier.indexOf(m) >= 0;          // the classifier rows, at the head input
          c.splits.forEach(function (split) {
            var grid = run.values[m] && run.values[m][split];
            if (!grid) return;
            shown.forEach(function (layer) {
              var i = run.layers.indexOf(layer);
              if (i < 0) return;
              var pts = run.epochs.map(function (ep, e) { return [ep, grid.mean[e][i]]; });
              if (!pts.some(function (p) { return finite(p[1]); })) return;
              lines.push({pts: pts, color: black ? "#000" : colorOf(layer), dash: d.SPLIT_DASH[split] || "",
                          name: run.labels[m] + " · " + layer + " · " + splitName(split), cls: "ls-nc-" + m});
            });
          });
        });
        add(fig, d.chart({title: panel.title, lines: lines, ylog: panel.log, xlabel: axis, height: 270,
                          legend: panel.key === "nc1" ? key : [], cls: "ls-nc-" + panel.key,
                          vlines: terminal.map(function (t) {
                            return {x: t, color: "#888", dash: "4 3", cls: "ls-terminal"};
                          })}));
      });
    }
    options.forEach(function (layer) {
      var label = add(boxes, el("label", {"class": "ls-nc-layer"}));
      var box = add(label, el("input", {type: "checkbox", value: layer}));
      box.checked = chosen.indexOf(layer) >= 0;
      add(label, document.createTextNode(" " + layer));
      box.addEventListener("change", function () {
        chosen = box.checked ? chosen.concat([layer]) : chosen.filter(function (l) { return l !== layer; });
        draw();
      });
    });
    draw();
  }

  function nameWidth(names) { return 16 + 6.5 * Math.max.apply(null, names.map(function (c) { return c.length; })); }

  // The simplex at (layer, split, epoch) into its three figures and the line under them.
  function drawSimplex(sx, state, figs, axis, splitName) {
    if (!sx) {
      replace(figs.cos, el("p", {"class": "ls-reason"}, "This run recorded no class means: no simplex to show."));
      return;
    }
    var at = ((sx.at[state.layer] || {})[state.split] || {})[String(state.epoch)];
    if (!at) {
      replace(figs.cos, el("p", {"class": "ls-reason"}, "No class means at " + state.layer + ", " +
                           splitName(state.split) + ", " + axis + " " + state.epoch + "."));
      replace(figs.ideal, null);
      replace(figs.plane, null);
      figs.line.textContent = "";
      return;
    }
    var K = at.classes.length, small = K <= 12;
    var cells = {rows: at.classes, cols: at.classes, vmin: -1, vmax: 1, diverging: true, showValues: small,
                 cell: small ? 34 : 16, cellh: small ? 22 : 14, left: nameWidth(at.classes)};
    var ideal = at.classes.map(function (_, i) {
      return at.classes.map(function (_, j) { return i === j ? 1 : at.ideal; });
    });
    replace(figs.cos, d.heatmap(Object.assign({}, cells, {
      title: "cosines of the centred means · " + axis + " " + state.epoch, values: at.cosines, cls: "ls-cosines"})));
    replace(figs.ideal, d.heatmap(Object.assign({}, cells, {
      title: "simplex ETF (K = " + K + "): −1/(K−1) = " + at.ideal.toFixed(3), values: ideal, cls: "ls-ideal"})));
    if (K === 3) {          // three centred means span a plane: drawn exactly
      replace(figs.plane, d.chart({
        title: "the three class means in their plane", xpad: 0.2, width: 300, height: 260, cls: "ls-plane",
        points: at.coords.map(function (xy, i) {
          return {x: xy[0], y: xy[1], color: d.color(i), r: 6, tip: at.classes[i], cls: "ls-mean"};
        }),
        lines: [{pts: at.coords.concat([at.coords[0]]), color: "#bbb", width: 1}],
        labels: at.coords.map(function (xy, i) { return {x: xy[0], y: xy[1], text: at.classes[i]}; })}));
    } else {
      replace(figs.plane, null);
    }
    figs.line.textContent = "Mean |cos − (−1/(K−1))| over pairs of classes, " + state.layer + ", " +
      splitName(state.split) + ", " + axis + " " + state.epoch + ": " + fmt(at.deviation) + " (0 at a simplex ETF).";
  }

  // The law at the player's epoch: log10 NC1 against depth with its fitted line, r against epoch, one note a split.
  function drawLaw(law, epoch, box, axis, splitName) {
    var fits = law.fits[String(epoch)] || {}, pts = law.points[String(epoch)] || {};
    var lines = [], points = [], legend = [], layerNames = {};
    law.splits.forEach(function (split) {
      var col = d.SPLIT_COLORS[split] || "#333";
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
        legend.push({name: splitName(split) + ": ×" + fit.ratio.toFixed(3) + " per layer, r = " + d.signed(fit.r),
                     color: col});
      } else if (fit) {
        legend.push({name: splitName(split) + ": no law", color: col});
      }
    });
    var ticks = Object.keys(layerNames).map(function (k) { return {v: Number(k), label: layerNames[k]}; });
    replace(box.depth, d.chart({title: "log10 NC1 against depth · " + axis + " " + epoch, lines: lines,
                                points: points, legend: legend, xticks: ticks, rotateX: true, ylabel: "log10 NC1",
                                height: 280, width: 420, cls: "ls-law-depth-chart"}));
    var rLines = law.splits.filter(function (sp) { return law.r[sp]; }).map(function (sp) {
      return {pts: law.r[sp], color: d.SPLIT_COLORS[sp] || "#333", markers: true, name: splitName(sp),
              cls: "ls-law-r-line"};
    });
    replace(box.r, d.chart({title: "r against " + axis, lines: rLines, xlabel: axis, ylabel: "Pearson r",
                            height: 280,
                            vlines: [{x: epoch, color: "#999", cls: "ls-law-epoch"}], cls: "ls-law-r-chart",
                            legend: rLines.map(function (l) { return {name: l.name, color: l.color}; })}));
    replace(box.notes, null);
    law.splits.forEach(function (split) {
      var fit = fits[split];
      if (!fit) return;
      var where = splitName(split) + ", " + axis + " " + epoch + ": ";
      var text = finite(fit.ratio)
        ? where + "NC1 multiplied by " + fit.ratio.toFixed(3) + " per layer over " + fit.n_layers + " layers, r = " +
          d.signed(fit.r) + (fit.reason ? "; " + fit.reason : "") + "."
        : where + (fit.reason || "no law") + ".";
      add(box.notes, el("div", {"class": "ls-law-note", "data-split": split}, text));
    });
  }

  function simplexAndLaw(run, s, axis, splitName) {
    var sx = run.simplex, law = run.law;
    add(s, el("h4", {}, "The simplex, seen"));
    add(s, el("p", {"class": "ls-intro"}, "At the chosen layer and " + axis + ", the cosines of the centred class " +
              "means beside the simplex equiangular tight frame's (1 on the diagonal, −1/(K−1) off it); for three " +
              "classes, the means in their own plane. The " + axis + " player also moves the law of " +
              "equi-separation below." + (sx && sx.n_seeds > 1 ? " Seed " + sx.seed + "'s class means (of " +
              sx.n_seeds + " seeds); a simplex is one seed's geometry, never a mean over seeds." : "")));
    var controls = add(s, el("div", {"class": "ls-controls"}));
    var row = add(s, el("div", {"class": "ls-row"}));
    var figs = {cos: d.block(row, "ls-simplex-cos"), ideal: d.block(row, "ls-simplex-ideal"),
                plane: d.block(row, "ls-simplex-plane"), line: add(s, el("p", {"class": "ls-deviation"}))};
    var epochs = law ? law.epochs.slice() : [];
    Object.keys((sx && sx.at) || {}).forEach(function (layer) {
      Object.keys(sx.at[layer]).forEach(function (split) {
        Object.keys(sx.at[layer][split]).map(Number).forEach(function (ep) {
          if (epochs.indexOf(ep) < 0) epochs.push(ep);
        });
      });
    });
    epochs.sort(function (a, b) { return a - b; });
    var box = null;
    if (law) {
      add(s, el("h4", {}, "The law of equi-separation, across layers"));
      add(s, el("p", {"class": "ls-intro"}, "He & Su 2023. Left: log10 NC1 at each layer at the " + axis + " of the " +
                "player above, with the least-squares line through it (identical taps counted once); the legend " +
                "gives NC1's factor per layer (10^slope: below 1, each deeper layer separates the classes " +
                "better) and Pearson r. Right: r at every " + axis + "; the grey line is the " + axis + " shown." +
                (law.n_seeds > 1 ? " Seed " + law.seed + " of " + law.n_seeds + " on the left; r is the mean over " +
                 "seeds." : "")));
      var lawRow = add(s, el("div", {"class": "ls-row"}));
      box = {depth: d.block(lawRow, "ls-law-depth"), r: d.block(lawRow, "ls-law-r"),
             notes: add(s, el("div", {"class": "ls-law-notes"}))};
    }
    var state = {layer: null, split: null, epoch: null};
    function simplexNow() { drawSimplex(sx, state, figs, axis, splitName); }
    if (sx && sx.layers.length) {
      state.layer = sx.layers[sx.layers.length - 1];
      state.split = sx.splits[0];
      var layerPlayer = d.player("Layer", sx.layers, function (v) {
        state.layer = v;
        if (state.epoch !== null) simplexNow();
      }, "ls-simplex-layer");
      add(controls, layerPlayer.el);
      var choice = add(controls, el("select", {"class": "ls-simplex-split", "aria-label": "split"}));
      sx.splits.forEach(function (sp) { add(choice, el("option", {value: sp}, splitName(sp))); });
      choice.addEventListener("change", function () { state.split = choice.value; simplexNow(); });
    }
    var epochPlayer = d.player(d.capital(axis), epochs, function (v) {
      state.epoch = v;
      simplexNow();
      if (law) drawLaw(law, v, box, axis, splitName);
    }, "ls-nc-epoch");
    add(controls, epochPlayer.el);
    if (epochs.length) epochPlayer.set(epochs.length - 1);
  }

  function render(run, art, axis, splitName) {
    if (!run.collapse && !run.simplex && !run.law) return;
    var s = d.section(art, "Neural collapse: training sample, held-out and unseen", "ls-collapse",
                      "Papyan, Han & Donoho's measures against " + axis + " at the layers drawn (colour), the " +
                      "splits told apart by dash (training sample solid, held-out seen images dashed, unseen classes " +
                      "dotted); the grey line marks the first " + axis + " of 100 % training-sample accuracy (the " +
                      "terminal phase).");
    if (run.collapse) panels(run, s, axis, splitName);
    if (run.simplex || run.law) simplexAndLaw(run, s, axis, splitName);
  }

  return {render: render};
})(lsDraw);
