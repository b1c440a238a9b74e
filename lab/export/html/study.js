// layerscope's exported page, a study: its figures with seeds as replicates (each condition's mean over its seeds,
// the 95 % Student-t interval of that mean and n), as the Studies tab shows them. Every number is the page
// model's (lab.study.figures, lab.analysis); nothing is computed here.
var lsStudy = (function (d) {
  "use strict";
  var el = d.el, add = d.add, finite = d.finite, fmt = d.fmt;

  function interval(lo, hi) { return finite(lo) && finite(hi) ? fmt(lo) + "–" + fmt(hi) : "—"; }

  // One line per condition against relative depth, the band its seeds' interval (else the bootstrap's).
  function curves(s, byCondition, conditions, title, ylabel, cls) {
    var lines = [], bands = [], legend = [];
    conditions.forEach(function (c, i) {
      var rows = byCondition[c] || [];
      if (!rows.length) return;
      lines.push({pts: rows.map(function (r) { return [r.depth, r.mean]; }), color: d.color(i), markers: true,
                  name: c, cls: "ls-study-line"});
      var seeds = rows.some(function (r) { return finite(r.seed_low); });
      bands.push({pts: rows.map(function (r) {
        return seeds ? [r.depth, r.seed_low, r.seed_high] : [r.depth, r.low, r.high];
      }), color: d.color(i)});
      var n = Math.max.apply(null, rows.map(function (r) { return r.n || 0; }));
      legend.push({name: c + " (n = " + n + ")", color: d.color(i)});
    });
    if (!lines.length) return;
    add(d.block(s, cls), d.chart({title: title, lines: lines, bands: bands, legend: legend, xlabel:
                                  "relative depth (0 = input, 1 = output)", ylabel: ylabel, width: 560,
                                  height: 320, cls: cls + "-chart"}));
  }

  function table(s, heads, rows, cls) {
    var t = add(s, el("table", {"class": "ls-table " + cls}));
    var head = add(t, el("tr"));
    heads.forEach(function (h) { add(head, el("th", {}, h)); });
    rows.forEach(function (cells) {
      var tr = add(t, el("tr"));
      cells.forEach(function (c, i) { add(tr, el("td", {"class": i ? "ls-num" : null}, c)); });
    });
    return t;
  }

  function render(study, page, splitName) {
    var art = add(page, el("article", {"class": "ls-study"}));
    add(art, el("h2", {"class": "ls-study-name"}, "Study: " + study.name));
    if (study.description) d.note(art, study.description);
    if (study.summary) d.note(art, study.summary);
    d.note(art, "Conditions: " + (study.axes.length ? study.axes.join(" × ") : "one") + "; the seeds of a " +
           "condition are its replicates: each mean below comes with the " + Math.round(100 * study.level) +
           " % Student-t interval of that mean over its seeds and n, the number of seeds.");
    var s = d.section(art, "Which layer separates the unseen classes", "ls-study-layers",
                      "The unseen classes' NMI at each layer, each run at " + study.read_at + ", mean over each " +
                      "condition's seeds (Dyballa et al. 2024).");
    var row = add(s, el("div", {"class": "ls-row"}));
    curves(row, study.layers, study.conditions, "unseen NMI per layer", "NMI", "ls-study-g");
    curves(row, study.nc1, study.conditions, "NC1 per layer, held-out seen images", "NC1", "ls-study-nc1");
    if (study.generalization.length) {
      add(s, el("p", {"class": "ls-caption"}, "g per condition: the best layer's NMI, each run at " + study.read_at));
      table(s, ["condition", "g", Math.round(100 * study.level) + " % interval (seeds)", "n", "best layer",
                "bootstrap interval (images)", "best in (resamples)", "seen accuracy (held-out)"],
            study.generalization.map(function (r) {
              return [r.group, fmt(r.g), interval(r.seed_low, r.seed_high), String(r.n_seeds), r.layer || "—",
                      interval(r.g_low, r.g_high), finite(r.best_share) ? Math.round(100 * r.best_share) + " %" : "—",
                      finite(r.heldout_accuracy) ? (100 * r.heldout_accuracy).toFixed(1) + " %" : "—"];
            }), "ls-study-generalization");
    }
    if (study.law.length) {
      var law = d.section(art, "The law of equi-separation per condition", "ls-study-law",
                          "He & Su 2023: NC1's factor per layer (10^slope) and Pearson r, each run at " +
                          study.read_at + ", mean ± std over the condition's seeds.");
      table(law, ["condition", "split", "epoch", "ratio per layer", "r", "layers", "seeds", "why not"],
            study.law.map(function (r) {
              return [r.group, splitName(r.split), String(r.epoch),
                      fmt(r.ratio) + (finite(r.ratio_std) ? " ± " + fmt(r.ratio_std) : ""),
                      d.signed(r.r) + (finite(r.r_std) ? " ± " + fmt(r.r_std) : ""), String(r.n_layers),
                      String(r.n_seeds), r.reason || ""];
            }), "ls-study-law-table");
    }
    if (study.agreement.length) {
      var ag = d.section(art, "Do the measures agree?", "ls-study-agreement",
                         "Over the study's runs, how often each measure's best layer is NMI's, and its median " +
                         "Spearman ρ with NMI across layers.");
      table(ag, ["measure", "runs", "same best layer as NMI", "median Spearman ρ"], study.agreement.map(function (r) {
        var same = finite(r.share_same) ? Math.round(100 * r.share_same) + " %" : "—";
        return [r.label || r.measure, String(r.n_runs), same,
                finite(r.median_spearman) ? r.median_spearman.toFixed(2) : "—"];
      }), "ls-study-agreement-table");
    }
    var spec = d.section(art, "The spec", "ls-settings");
    add(spec, el("pre", {"class": "ls-spec"}, JSON.stringify(study.spec, null, 2)));
  }

  return {render: render};
})(lsDraw);
