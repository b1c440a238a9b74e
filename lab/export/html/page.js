// layerscope's exported page: draws the page model (the JSON element #ls-model, every number from lab.analysis)
// with the drawing kit (draw.js), the neural-collapse card (collapse.js) and a study's figures (study.js). It
// computes no measure, fetches nothing, and sets every text that comes from a run (run, layer and class names)
// with textContent.
(function (d, collapse, study) {
  "use strict";
  var el = d.el, add = d.add, replace = d.replace, finite = d.finite, fmt = d.fmt, note = d.note;

  var model = JSON.parse(document.getElementById("ls-model").textContent);
  var page = document.getElementById("ls-page");
  function splitName(s) { return (model.splits && model.splits[s]) || s; }

  function renderVerdict(run, art, axis) {
    var s = d.section(art, "Verdict", "ls-verdict");
    var v = run.verdict;
    if (!v) {
      note(s, "No complete evaluation of the unseen classes: no best layer to report.");
    } else {
      var p = add(s, el("p", {"class": "ls-verdict-line"}));
      add(p, el("b", {}, "Best layer for unseen classes: "));
      add(p, el("b", {"class": "ls-best-layer"}, v.layer));
      var g = fmt(v.g) + (finite(v.g_std) ? " ± " + fmt(v.g_std) : "");
      var seeds = v.n_seeds + " seed" + (v.n_seeds === 1 ? "" : "s");
      add(p, el("span", {"class": "ls-g"}, " (g = " + v.label + " " + g + ", " + axis + " " + v.epoch + ", " +
                seeds + (v.confidence ? "; " + v.confidence : "") + ")"));
      if (finite(v.heldout_accuracy)) {
        add(p, el("span", {}, " · seen-class held-out accuracy " + (100 * v.heldout_accuracy).toFixed(1) + " % (" +
                  axis + " " + v.accuracy_epoch + ")"));
      }
      if (v.final_layer) {
        add(p, el("span", {}, " · the best layer " + (v.is_final ? "is" : "is not") + " the final representation (" +
                  v.final_layer + ")"));
      }
    }
    var a = run.agreement;
    if (!a || !a.rows.length) return;
    add(s, el("p", {"class": "ls-caption"}, "Best layer by each measure, this evaluation" +
              (a.epoch !== null ? " (" + axis + " " + a.epoch + ")" : "")));
    var t = add(s, el("table", {"class": "ls-table ls-agreement"}));
    var head = add(t, el("tr"));
    var heads = ["measure", "best layer", "best in (bootstrap resamples)", "Spearman ρ with NMI (layer order)"];
    heads.forEach(function (h) { add(head, el("th", {}, h)); });
    a.rows.forEach(function (r) {
      var tr = add(t, el("tr", {"data-measure": r.measure}));
      add(tr, el("td", {}, r.label + (r.split === "seen" ? " (seen, epoch 0)" : "") +
                 (r.label_free ? " (no labels)" : "")));
      add(tr, el("td", {}, r.best_layer));
      add(tr, el("td", {"class": "ls-num"}, finite(r.best_share) ? Math.round(100 * r.best_share) + " %" : "—"));
      add(tr, el("td", {"class": "ls-num"}, finite(r.spearman) ? r.spearman.toFixed(2) : ""));
    });
    if (a.notes.length) {
      var ul = add(s, el("ul", {"class": "ls-notes"}));
      a.notes.forEach(function (n) { add(ul, el("li", {}, n)); });
    }
  }

  function renderCurves(run, art, axis) {
    if (!run.curves.length || !run.epochs.length) return;
    var s = d.section(art, "Each layer, at one " + axis, "ls-curves",
                      "The seed mean of each measure at every layer; the band is the 95 % bootstrap interval over " +
                      "the unseen images where the run has one, else ± one standard deviation over seeds.");
    var figs = add(s, el("div", {"class": "ls-row"}));
    var boxes = run.curves.map(function (c) { return {spec: c, fig: d.block(figs, "ls-curve")}; });
    var ticks = run.layers.map(function (name, i) { return {v: i, label: name}; });
    function band(run, c, split, e) {
      var grid = run.values[c.metric][split], iv = c.interval[split];
      if (iv) {
        var lo = run.values[iv[0]][split], hi = run.values[iv[1]][split];
        return run.layers.map(function (_, i) { return [i, lo.mean[e][i], hi.mean[e][i]]; });
      }
      return run.layers.map(function (_, i) {
        var m = grid.mean[e][i], sd = grid.std[e][i];
        return finite(sd) ? [i, m - sd, m + sd] : [i, NaN, NaN];
      });
    }
    function draw(epoch) {
      var e = run.epochs.indexOf(epoch);
      boxes.forEach(function (b) {
        var c = b.spec, lines = [], bands = [], legend = [];
        c.splits.forEach(function (split) {
          var grid = run.values[c.metric][split], col = d.SPLIT_COLORS[split] || "#333";
          lines.push({pts: run.layers.map(function (_, i) { return [i, grid.mean[e][i]]; }), color: col,
                      markers: true, name: splitName(split)});
          bands.push({pts: band(run, c, split, e), color: col});
          legend.push({name: splitName(split), color: col});
        });
        replace(b.fig, d.chart({title: c.label + " · " + axis + " " + epoch, lines: lines, bands: bands,
                                legend: legend, xticks: ticks, rotateX: true, ylabel: c.label, height: 270,
                                cls: "ls-curve-" + c.metric}));
      });
    }
    var p = d.player(d.capital(axis), run.epochs, draw, "ls-curves-player");
    s.insertBefore(p.el, figs);
    p.set(run.epochs.length - 1);
  }

  function renderHeatmap(run, art, axis) {
    var g = run.g_metric, grid = run.values[g] && run.values[g].unseen;
    if (!grid) return;
    var s = d.section(art, "Layer × " + axis, "ls-heatmap-section",
                      "The seed mean of " + run.labels[g] + " on the unseen classes at every layer (rows, input at " +
                      "the top) and " + axis + " (columns).");
    var rows = run.layers.map(function (_, i) { return run.epochs.map(function (_, e) { return grid.mean[e][i]; }); });
    var left = 12 + 6.5 * Math.max.apply(null, run.layers.map(function (l) { return l.length; }));
    add(d.block(s), d.heatmap({title: run.labels[g] + " (unseen) by layer and " + axis, rows: run.layers,
                               cols: run.epochs.map(String), values: rows, showValues: run.epochs.length <= 20,
                               cell: 34, left: Math.min(left, 220), xlabel: axis, cls: "ls-layer-epoch"}));
  }

  // ------------------------------------------------------------------ layouts of the unseen classes
  // A picture beside the pointer while it rests on a point whose image the page carries.
  function hoverPictures(fig, pictures, classes) {
    var tip = null;
    fig.addEventListener("mouseover", function (event) {
      var index = event.target.getAttribute && event.target.getAttribute("data-index");
      if (index === null || index === undefined || !pictures.images[index]) return;
      if (!tip) {
        tip = add(document.body, el("div", {"class": "ls-hover"}));
        tip.picture = add(tip, el("img", {alt: "", width: pictures.size, height: pictures.size}));
        tip.caption = add(tip, el("div"));
      }
      tip.picture.src = pictures.images[index];
      tip.caption.textContent = classes[Number(event.target.getAttribute("data-class"))] + " · image " + index;
      tip.style.left = (event.clientX + 14) + "px";
      tip.style.top = (event.clientY + 14) + "px";
      tip.style.display = "block";
    });
    fig.addEventListener("mouseout", function () { if (tip) tip.style.display = "none"; });
  }

  function renderLayouts(run, art, axis) {
    var L = run.layouts;
    if (!L) return;
    var shown = L.total > L.shown
      ? "Showing " + L.shown + " of the " + L.total + " images (a fixed random subset, the same images at every " +
        "layer and " + axis + "; at most " + L.max_points + " a layout)."
      : "All " + L.total + " images.";
    var pictures = L.thumbnails;
    var s = d.section(art, "The unseen classes, laid out", "ls-layouts",
                      "A 2-D projection of the unseen images' features at the chosen layer and " + axis + ", " +
                      "coloured by class. " + shown + (pictures ? " Rest the pointer on a point to see its image (" +
                      pictures.source + ")." : ""));
    var controls = add(s, el("div", {"class": "ls-controls"}));
    var fig = d.block(s, "ls-layout");
    if (pictures) hoverPictures(fig, pictures, L.classes);
    var state = {layer: L.layers[L.layers.length - 1], epoch: null};
    function epochsOf(layer) {
      return Object.keys(L.at[layer] || {}).map(Number).sort(function (a, b) { return a - b; });
    }
    function draw() {
      var eps = epochsOf(state.layer);
      var ep = eps.indexOf(state.epoch) >= 0 ? state.epoch : eps[eps.length - 1];
      var at = L.at[state.layer][String(ep)];
      var points = at.x.map(function (x, i) {
        return {x: x, y: at.y[i], color: d.color(at.label[i]), r: 2.6, data: {index: at.index[i], "class": at.label[i]},
                tip: pictures ? null : L.classes[at.label[i]] + " · image " + at.index[i]};
      });
      var svg = d.chart({title: at.method.toUpperCase() + " of " + state.layer + ", seed " + L.seed + ", " + axis +
                                " " + ep, points: points, xticks: [], noYTicks: true, xlabel: "first axis",
                         ylabel: "second axis", width: 560, height: 440, xmin: 0, xmax: 9999, ymin: 0, ymax: 9999,
                         legend: L.classes.map(function (c, i) { return {name: c, color: d.color(i), marker: true}; }),
                         cls: "ls-layout-chart"});
      svg.setAttribute("data-layer", state.layer);
      svg.setAttribute("data-epoch", ep);
      replace(fig, svg);
      if (eps.indexOf(state.epoch) < 0) {
        note(fig, "No layout of " + state.layer + " at " + axis + " " + state.epoch + "; showing " + axis + " " + ep +
             ".", "ls-layout-note");
      }
    }
    var layerPlayer = d.player("Layer", L.layers, function (v) {
      state.layer = v;
      if (state.epoch !== null) draw();
    }, "ls-layout-layer");
    var all = [];
    L.layers.forEach(function (l) { epochsOf(l).forEach(function (e) { if (all.indexOf(e) < 0) all.push(e); }); });
    all.sort(function (a, b) { return a - b; });
    var epochPlayer = d.player(d.capital(axis), all, function (v) { state.epoch = v; draw(); }, "ls-layout-epoch");
    add(controls, layerPlayer.el, epochPlayer.el);
    epochPlayer.set(all.length - 1);
  }

  // ------------------------------------------------------------------ training, settings
  function renderTraining(run, art, axis) {
    var t = run.training;
    if (!t) return;
    var s = d.section(art, "Training", "ls-training",
                      "The seed mean at the end of each " + axis + " (" + axis + " 0: before training).");
    var row = add(s, el("div", {"class": "ls-row"}));
    [["loss", ["train_loss", "heldout_loss"]], ["accuracy", ["train_accuracy", "heldout_accuracy"]]].forEach(
      function (pair, k) {
        var lines = pair[1].filter(function (c) { return t.series[c]; }).map(function (c, i) {
          return {pts: t.epochs.map(function (e, j) { return [e, t.series[c].mean[j]]; }), color: d.color(i + 2 * k),
                  markers: true, name: c.replace("_", " ").replace("heldout", "held-out (seen)")};
        });
        if (!lines.length) return;
        add(d.block(row, "ls-training-" + pair[0]), d.chart({
          title: pair[0], lines: lines, xlabel: axis, ylabel: pair[0],
          legend: lines.map(function (l) { return {name: l.name, color: l.color}; })}));
      });
  }

  function renderSettings(run, art) {
    var s = d.section(art, "Settings", "ls-settings");
    var t = add(s, el("table", {"class": "ls-table ls-settings-table"}));
    Object.keys(run.settings || {}).forEach(function (k) {
      var v = run.settings[k], tr = add(t, el("tr"));
      add(tr, el("th", {}, k));
      add(tr, el("td", {}, typeof v === "string" ? v : JSON.stringify(v)));
    });
    if (run.split && run.split.seen) {
      note(s, "Seen classes: " + run.split.seen.join(", ") + ". Unseen classes: " +
           (run.split.unseen || []).join(", ") + ".");
    }
  }

  function renderRun(run) {
    var art = add(page, el("article", {"class": "ls-run", "data-run": run.run_id}));
    add(art, el("h2", {"class": "ls-run-name"}, run.name));
    note(art, "run " + run.run_id + " · " + run.status + (run.device ? " · " + run.device : "") +
         (run.ended ? " · ended " + run.ended : ""), "ls-run-meta");
    var axis = run.axis || "epoch";
    renderVerdict(run, art, axis);
    renderCurves(run, art, axis);
    renderHeatmap(run, art, axis);
    collapse.render(run, art, axis, splitName);
    renderLayouts(run, art, axis);
    renderTraining(run, art, axis);
    renderSettings(run, art);
  }

  document.title = model.title;
  add(page, el("h1", {}, model.title));
  note(page, "Exported from layerscope " + model.version + " on " + model.date + ". Every number was measured by the " +
       (model.study ? "study's runs" : "run") + " and computed by lab.analysis; this file draws them offline, with " +
       "no server." + (model.runs.length ? " Move the players to step through layers and " +
       (model.runs[0].axis || "epoch") + "s." : ""), "ls-provenance");
  if (!model.runs.length && !model.study) note(page, "This file holds no run.");
  if (model.study) study.render(model.study, page, splitName);
  model.runs.forEach(renderRun);
  add(page, el("footer", {"class": "ls-footer"}, "layerscope " + model.version + " · written " + model.date));
})(lsDraw, lsCollapse, lsStudy);
