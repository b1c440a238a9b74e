// What a state gallery view shows, read from the page's Bokeh views (docs/states.py, tests/browser/test_states_browser.py).
//
// Returns {boxes, overlaps, plots, text}:
// - boxes: every visible control or plot: Bokeh plots, Panel and Bokeh widgets, text panes (the box of their text),
//   cards' headers; {kind, name, x, y, w, h};
// - overlaps: pairs of those boxes that intersect by more than 3 px both ways, unless one holds the other in the
//   page (a widget inside a card, a plot inside a layout);
// - plots: every visible plot: {title, x_label, y_label, x, y, w, h, drawn: the number of its glyph renderers with
//   at least one finite point, ink: the pixels its canvas has drawn (0: blank), where: the app's classes around it};
// - text: the page's visible text (shadow roots included), and the titles and axis labels of the visible plots;
// - main_text: the same of the tabs only (the sidebar left out).
() => {
  const kindOf = (model) => {
    const names = [];
    for (let p = Object.getPrototypeOf(model); p && p.constructor; p = Object.getPrototypeOf(p)) {
      names.push(p.constructor.__name__ ?? p.constructor.name);
    }
    const type = model.type ?? names[0];
    if (names.includes("Plot")) return ["plot", type];
    if (names.includes("Toolbar") || names.includes("ToolButton") || names.includes("Tooltip")) return [null, type];
    if (type.endsWith(".Card")) return ["card", type];
    if (/markup\.(HTML|Markdown)$/.test(type) || names.includes("Markup")) return ["text", type];
    if (names.includes("Widget") || /\.widgets\.|DataTabulator|Player/.test(type)) return ["widget", type];
    return [null, type];
  };
  const shown = (el) => el instanceof Element && el.isConnected
    && el.checkVisibility({checkOpacity: true, checkVisibilityCSS: true});
  const box = (r) => ({x: r.left, y: r.top, w: r.width, h: r.height});
  const boxes = [];
  const plots = [];
  const finite = (v) => (typeof v === "number" && isFinite(v)) || typeof v === "string";
  const count = (col) => {
    if (col == null) return 0;
    let n = 0;
    for (const v of col) n += (v != null && typeof v === "object" && typeof v.length === "number")
      ? (Array.from(v).some(finite) ? 1 : 0) : (finite(v) ? 1 : 0);
    return n;
  };
  // the pixels a plot's canvas has drawn (every 4th one): 0 for a canvas left blank
  const ink = (view) => {
    const canvas = view.canvas_view?.primary?.canvas;
    if (!(canvas instanceof HTMLCanvasElement) || !canvas.width || !canvas.height) return 0;
    const data = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
    let n = 0;
    for (let i = 3; i < data.length; i += 16) if (data[i] > 0) n++;
    return n;
  };
  // the app's own classes (ls-...) on the element and the elements holding it, nearest first
  const where = (el) => {
    const out = [];
    for (let n = el; n; n = n.parentNode ?? n.host) {
      if (n.classList) for (const c of n.classList) if (c.startsWith("ls-") && !out.includes(c)) out.push(c);
    }
    return out;
  };
  const FIELDS = ["x", "y", "xs", "ys", "left", "right", "top", "bottom", "x0", "y0", "x1", "y1", "image",
                  "fill_color"];   // a colour mapped from a column: a heatmap of NaN cells draws nothing
  for (const view of Bokeh.index.all_views()) {
    const el = view.el;
    if (!shown(el)) continue;
    const [kind, type] = kindOf(view.model);
    if (kind == null) continue;
    const rect = el.getBoundingClientRect();
    if (rect.width < 2 || rect.height < 2) continue;
    if (kind === "plot") {
      const m = view.model;
      let drawn = 0;
      for (const r of m.renderers) {
        if (!r.visible || !r.glyph || !r.data_source || !r.data_source.data) continue;
        const d = r.data_source.data;
        const get = (k) => (d instanceof Map ? d.get(k) : d[k]);
        const cols = FIELDS.map((f) => r.glyph[f]?.field).filter((f) => f != null);
        const least = /^(Line|Step)$/.test(r.glyph.type) ? 2 : 1;        // a line of one point draws nothing
        if (cols.length && Math.min(...cols.map((f) => count(get(f)))) >= least) drawn += 1;
      }
      const label = (axes) => (axes || []).map((a) => a.axis_label).filter((t) => t).join(" / ");
      plots.push({title: m.title?.text ?? "", x_label: label(m.below.concat(m.above)),
                  y_label: label(m.left.concat(m.right)), drawn, ink: ink(view), where: where(el), ...box(rect)});
      boxes.push({kind, name: m.title?.text || type, el, ...box(rect)});
    } else if (kind === "card") {
      if (view.header_el && shown(view.header_el)) {
        boxes.push({kind: "card header", name: view.header_el.innerText.trim(), el: view.header_el,
                    ...box(view.header_el.getBoundingClientRect())});
      }
    } else if (kind === "text") {
      const root = view.shadow_el ?? el;
      const range = document.createRange();
      range.selectNodeContents(root);
      const rects = [...range.getClientRects()].filter((r) => r.width > 0 && r.height > 0);
      const text = [...root.querySelectorAll("*")].filter((n) => !["STYLE", "SCRIPT"].includes(n.tagName))
        .map((n) => [...n.childNodes].filter((c) => c.nodeType === 3).map((c) => c.textContent).join(""))
        .join(" ").replace(/\s+/g, " ").trim();
      if (!rects.length || !text) continue;
      const x0 = Math.min(...rects.map((r) => r.left)), y0 = Math.min(...rects.map((r) => r.top));
      const x1 = Math.max(...rects.map((r) => r.right)), y1 = Math.max(...rects.map((r) => r.bottom));
      boxes.push({kind, name: text.slice(0, 60), el, x: x0, y: y0, w: x1 - x0, h: y1 - y0});
    } else {
      boxes.push({kind, name: view.model.title ?? view.model.label ?? view.model.name ?? type, el, ...box(rect)});
    }
  }
  // a holds b: b's element is a's, or below it in the page (through shadow roots)
  const holds = (a, b) => {
    for (let n = b; n; n = n.parentNode ?? n.host) if (n === a) return true;
    return false;
  };
  const overlaps = [];
  for (let i = 0; i < boxes.length; i++) {
    for (let j = i + 1; j < boxes.length; j++) {
      const a = boxes[i], b = boxes[j];
      const dx = Math.min(a.x + a.w, b.x + b.w) - Math.max(a.x, b.x);
      const dy = Math.min(a.y + a.h, b.y + b.h) - Math.max(a.y, b.y);
      if (dx <= 3 || dy <= 3 || holds(a.el, b.el) || holds(b.el, a.el)) continue;
      const strip = (o) => ({kind: o.kind, name: String(o.name).slice(0, 60), where: where(o.el),
                             x: Math.round(o.x), y: Math.round(o.y), w: Math.round(o.w), h: Math.round(o.h)});
      overlaps.push([strip(a), strip(b)]);
    }
  }
  // the visible text: text nodes whose element is shown, through shadow roots
  const parts = [];
  const walk = (node) => {
    if (node.nodeType === 3) {
      const t = node.textContent.trim();
      if (t && node.parentElement && shown(node.parentElement)) parts.push(t);
      return;
    }
    if (node.nodeType === 1 && (node.tagName === "STYLE" || node.tagName === "SCRIPT")) return;
    if (node.shadowRoot) walk(node.shadowRoot);
    for (const child of node.childNodes) walk(child);
  };
  walk(document.body);
  const page = parts.splice(0);
  const tabs = [...Bokeh.index.all_views()].find((v) => /\.Tabs$/.test(v.model.type ?? "") && shown(v.el));
  if (tabs) walk(tabs.el);
  for (const p of plots) page.push(p.title, p.x_label, p.y_label);
  for (const p of plots) parts.push(p.title, p.x_label, p.y_label);
  return {boxes: boxes.map(({el, ...rest}) => rest), overlaps, plots, text: page.filter((t) => t).join("\n"),
          main_text: parts.filter((t) => t).join("\n")};
}
