// A small SVG line chart: one polyline per series over a fixed time window.
// No library: the console draws at most a few listeners x 300 points once a second,
// which plain DOM updates handle easily. Colours are SVG attributes, not inline
// styles, so the page's style-src 'self' policy holds.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
// Colours by listener name, the same on every page load and in every chart (the
// Okabe-Ito palette, told apart with colour vision deficiencies, plus darker tones);
// a name not listed here gets one from its hash.
const LISTENER_COLOURS = {
  nats: "#0072B2", nats_ws: "#56B4E9", nats_monitor: "#7a8fa6",
  iggy_tcp: "#D55E00", iggy_quic: "#E69F00", iggy_ws: "#b8860b",
  http: "#009E73", pravega: "#CC79A7", pravega_controller: "#8e4f7a", kafka: "#000000",
};
const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2",
                 "#7f7f7f", "#bcbd22"];
function colourOf(name) {
  if (name in LISTENER_COLOURS) return LISTENER_COLOURS[name];
  let h = 0;
  for (const c of name) h = (h * 31 + c.codePointAt(0)) >>> 0;
  return PALETTE[h % PALETTE.length];
}
const W = 600, H = 160, PAD_L = 4, PAD_T = 20, PAD_B = 20;

function svgEl(tag, attrs) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  return e;
}

function shortNumber(v) {
  const a = Math.abs(v);
  if (a >= 1e9) return (v / 1e9).toFixed(1) + "G";
  if (a >= 1e6) return (v / 1e6).toFixed(1) + "M";
  if (a >= 1e3) return (v / 1e3).toFixed(1) + "k";
  return Number.isInteger(v) ? String(v) : v.toFixed(1);
}

class LineChart {
  // container: an element to draw into; windowS: seconds shown (the x axis ends at "now").
  constructor(container, windowS) {
    this.container = container;
    this.windowS = windowS;
    this.series = {};  // name -> [[t seconds, value], ...]; read by tests and the legend
    this.svg = svgEl("svg", {viewBox: `0 0 ${W} ${H}`, class: "linechart", role: "img"});
    this.legend = document.createElement("div");
    this.legend.className = "legend";
    container.replaceChildren(this.svg, this.legend);
  }

  colour(name) { return colourOf(name); }

  // series: name -> points; now: the time at the right edge. The x axis always spans
  // windowS, the window the caption names: a page open for less time draws its points
  // at the right, where they belong in that window.
  update(series, now) {
    this.series = series;
    const span = this.windowS;
    const from = now - span;
    let max = 0;
    for (const pts of Object.values(series)) for (const [t, v] of pts) if (t >= from && v > max) max = v;
    const top = max > 0 ? max * 1.1 : 1;
    const x = (t) => PAD_L + (W - PAD_L) * (t - from) / span;
    const y = (v) => PAD_T + (H - PAD_T - PAD_B) * (1 - v / top);
    const nodes = [
      svgEl("line", {x1: PAD_L, y1: y(0), x2: W, y2: y(0), class: "axis"}),
      svgEl("line", {x1: PAD_L, y1: y(max), x2: W, y2: y(max), class: "grid"}),
    ];
    const maxLabel = svgEl("text", {x: PAD_L + 2, y: 15, class: "label"});
    maxLabel.textContent = "max " + shortNumber(max);
    const ago = svgEl("text", {x: PAD_L + 2, y: H - 4, class: "label"});
    ago.textContent = span >= 120 ? Math.round(span / 60) + " min ago" : Math.round(span) + " s ago";
    const nowLabel = svgEl("text", {x: W - 2, y: H - 4, class: "label", "text-anchor": "end"});
    nowLabel.textContent = "now";
    nodes.push(maxLabel, ago, nowLabel);
    const legend = [];
    for (const name of Object.keys(series).sort()) {
      const pts = series[name].filter(([t]) => t >= from);
      const line = svgEl("polyline", {fill: "none", stroke: this.colour(name), "stroke-width": 1.5,
                                      "data-series": name, "data-points": pts.length,
                                      points: pts.map(([t, v]) => x(t).toFixed(1) + "," + y(v).toFixed(1)).join(" ")});
      nodes.push(line);
      const item = document.createElement("span");
      const swatch = svgEl("svg", {width: 10, height: 10, class: "swatch"});
      swatch.appendChild(svgEl("rect", {width: 10, height: 10, fill: this.colour(name)}));
      const last = pts.length ? pts[pts.length - 1][1] : 0;
      item.append(swatch, " " + name + " " + shortNumber(last));
      legend.push(item);
    }
    this.svg.replaceChildren(...nodes);
    this.legend.replaceChildren(...legend);
  }
}

window.FerryChart = {LineChart, shortNumber, colourOf};
