// The HTML report's style sheet and script, inlined into every page (no network, no CDN).
// The script reads the JSON block #report-data and draws three SVG pictures: the timeline
// (phases shaded, reserved and allocated areas from per-bucket maxima, the envelope's
// minimum as a line, the limit, the peak, the first OOM), the categories at the peak as one
// stacked bar, and the segment map at the peak. One tooltip names what is under the mouse.
// It sets #script-status to "ok" when everything is drawn, or to the error it met.
#include "advisor/html_report.h"

namespace oomcast::advisor {

const char* html_report_style() {
  return R"CSS(
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 auto; padding: 16px 24px;
       max-width: 1180px; color: #1d2430; background: #fff; }
header .tool { color: #6b7280; font-size: 12px; text-transform: uppercase; letter-spacing: .08em; }
h1 { font-size: 20px; margin: 2px 0 6px; word-break: break-all; }
h2 { font-size: 15px; margin: 22px 0 8px; color: #374151; }
.verdict { font-size: 15px; font-weight: 600; padding: 6px 10px; border-radius: 4px; margin: 6px 0; }
.verdict.fits { background: #e7f6ec; color: #14532d; }
.verdict.oom { background: #fde8e8; color: #7f1d1d; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; margin: 8px 0; font-size: 13px; }
dl.facts dt { color: #6b7280; } dl.facts dd { margin: 0; }
.cards { display: flex; gap: 12px; flex-wrap: wrap; margin-top: 10px; }
.card { border: 1px solid #e5e7eb; border-radius: 6px; padding: 8px 14px; min-width: 180px; }
.card .label { color: #6b7280; font-size: 12px; }
.card .value { font-size: 22px; font-weight: 650; }
.card .exact { color: #6b7280; font-size: 11px; max-width: 420px; }
.chart svg { display: block; }
.chart text { font-size: 11px; paint-order: stroke; stroke: #fff; stroke-width: 3px; stroke-linejoin: round; }
.chart text:not([fill]) { fill: #374151; }
.chart text.on-bar { stroke: none; }
.note { color: #6b7280; font-size: 12px; margin: 4px 0; }
table.data { border-collapse: collapse; font-size: 13px; }
table.data th, table.data td { border-bottom: 1px solid #e5e7eb; padding: 4px 10px; text-align: left; }
table.data th { background: #f9fafb; }
.num { text-align: right !important; font-variant-numeric: tabular-nums; white-space: nowrap; }
pre.oom-text { white-space: pre-wrap; background: #fef2f2; padding: 10px; border-radius: 4px; font-size: 12px; }
#tooltip { position: fixed; pointer-events: none; background: rgba(17,24,39,.92); color: #fff; font-size: 12px;
           padding: 6px 8px; border-radius: 4px; max-width: 460px; z-index: 10; white-space: pre-line; }
#script-status { display: none; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 16px; font-size: 12px; margin-top: 6px; }
.legend span.swatch { display: inline-block; width: 11px; height: 11px; margin-right: 5px; vertical-align: -1px;
                      border-radius: 2px; }
)CSS";
}

const char* html_report_script() {
  return R"JS(
"use strict";
(function () {
  var status = document.getElementById("script-status");
  var NS = "http://www.w3.org/2000/svg";
  var tip = document.getElementById("tooltip");

  function bytes(b) {
    var units = ["bytes", "KiB", "MiB", "GiB", "TiB"], i = 0, v = b;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return i === 0 ? Math.round(v) + " bytes" : v.toFixed(2) + " " + units[i];
  }
  function el(name, attrs, parent) {
    var node = document.createElementNS(NS, name);
    for (var k in attrs) node.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(node);
    return node;
  }
  function text(parent, x, y, content, attrs) {
    var t = el("text", Object.assign({x: x, y: y}, attrs || {}), parent);
    t.textContent = content;
    return t;
  }
  function showTip(evt, content) {
    tip.textContent = content;
    tip.hidden = false;
    var x = evt.clientX + 14, y = evt.clientY + 14;
    if (x + 470 > window.innerWidth) x = Math.max(0, evt.clientX - 470);
    tip.style.left = x + "px";
    tip.style.top = y + "px";
  }
  function hideTip() { tip.hidden = true; }
  function label(data, index) { return index >= 0 && index < data.labels.length ? data.labels[index] : ""; }
  function swatch(legend, color, content) {
    var item = document.createElement("span");
    var box = document.createElement("span");
    box.className = "swatch";
    box.style.background = color;
    item.appendChild(box);
    item.appendChild(document.createTextNode(content));
    legend.appendChild(item);
  }

  var COLORS = {reserved: "#a5c8f0", allocated: "#1f5fa8", limit: "#d62728", peak: "#111827", oom: "#d62728"};

  function drawTimeline(data) {
    var host = document.getElementById("timeline");
    var W = 1120, H = 340, L = 78, R = 16, T = 26, B = 34, w = W - L - R, h = H - T - B;
    var svg = el("svg", {width: W, height: H, viewBox: "0 0 " + W + " " + H, role: "img"}, host);
    var buckets = data.buckets;
    if (!buckets.length) { text(svg, L, T + 20, "no events"); return; }
    var events = Math.max(1, data.events);
    var top = 0;
    buckets.forEach(function (b) { top = Math.max(top, b[5], b[3]); });
    // Scale to the limit when the step uses a fair share of it; else to the data, and say where the limit is.
    var limitOnScale = data.usable > 0 && data.usable <= 5 * Math.max(top, 1);
    if (limitOnScale) top = Math.max(top, data.usable, data.total > 0 && data.total <= 1.15 * data.usable ? data.total : 0);
    top = Math.max(top * 1.06, 1);
    var x = function (e) { return L + (e / events) * w; };
    var y = function (v) { return T + h - (v / top) * h; };

    // Phases, shaded alternately, labelled where there is room.
    var phases = data.phases;
    for (var p = 0; p < phases.length; p++) {
      var start = phases[p][1], end = p + 1 < phases.length ? phases[p + 1][1] : events;
      var x0 = x(start), x1 = x(end);
      var band = el("rect", {x: x0, y: T, width: Math.max(0, x1 - x0), height: h,
                             fill: p % 2 ? "#f3f4f6" : "#fafafa"}, svg);
      band.dataset.phase = phases[p][0];
      if (x1 - x0 > 7 * phases[p][0].length) text(svg, x0 + 3, T - 6, phases[p][0], {"font-size": 10});
    }
    // Step areas through the bucket maxima: reserved behind, allocated in front.
    function area(index) {
      var d = "M" + x(buckets[0][0]) + "," + y(0);
      buckets.forEach(function (b) { d += "L" + x(b[0]) + "," + y(b[index]) + "L" + x(b[1] + 1) + "," + y(b[index]); });
      return d + "L" + x(buckets[buckets.length - 1][1] + 1) + "," + y(0) + "Z";
    }
    function line(index) {
      var d = "";
      buckets.forEach(function (b, i) { d += (i ? "L" : "M") + x(b[0]) + "," + y(b[index]) + "L" + x(b[1] + 1) + "," + y(b[index]); });
      return d;
    }
    el("path", {d: area(5), fill: COLORS.reserved, stroke: "#6b9fd8", "stroke-width": 1}, svg);
    el("path", {d: area(3), fill: COLORS.allocated, "fill-opacity": 0.85}, svg);
    el("path", {d: line(2), fill: "none", stroke: "#0b2f57", "stroke-width": 0.8, "stroke-opacity": 0.7}, svg);

    // Axes.
    for (var i = 0; i <= 5; i++) {
      var v = top / 1.06 * i / 5, yy = y(v);
      el("line", {x1: L, x2: L + w, y1: yy, y2: yy, stroke: "#e5e7eb"}, svg);
      text(svg, L - 6, yy + 4, bytes(v), {"text-anchor": "end"});
    }
    for (var j = 0; j <= 8; j++) {
      var e = Math.round(events * j / 8);
      text(svg, x(e), T + h + 16, "event " + e, {"text-anchor": j === 0 ? "start" : j === 8 ? "end" : "middle"});
    }
    el("line", {x1: L, x2: L, y1: T, y2: T + h, stroke: "#9ca3af"}, svg);
    el("line", {x1: L, x2: L + w, y1: T + h, y2: T + h, stroke: "#9ca3af"}, svg);

    // The limit and the device.
    if (data.usable > 0 && limitOnScale) {
      el("line", {x1: L, x2: L + w, y1: y(data.usable), y2: y(data.usable), stroke: COLORS.limit,
                  "stroke-width": 1.5, "stroke-dasharray": "6,4"}, svg);
      text(svg, L + w - 4, y(data.usable) - 5, "usable " + bytes(data.usable), {"text-anchor": "end", fill: COLORS.limit});
      if (data.total > data.usable && data.total <= top) {
        el("line", {x1: L, x2: L + w, y1: y(data.total), y2: y(data.total), stroke: "#6b7280", "stroke-dasharray": "2,3"}, svg);
        text(svg, L + 4, y(data.total) - 4, "device total " + bytes(data.total), {fill: "#6b7280"});
      }
    } else if (data.usable > 0) {
      text(svg, L + w - 4, T + 12, "usable " + bytes(data.usable) + " (above this scale)", {"text-anchor": "end", fill: COLORS.limit});
    }
    // The first OOM and the peak.
    if (data.oom_event !== null) {
      var xo = x(data.oom_event);
      el("line", {x1: xo, x2: xo, y1: T, y2: T + h, stroke: COLORS.oom, "stroke-width": 1.5}, svg);
      text(svg, xo + 4, T + 24, "first OOM (event " + data.oom_event + ")", {fill: COLORS.oom, "font-weight": 600});
    }
    var xp = x(data.peak_event + 0.5), yp = y(data.peak_allocated);
    el("line", {x1: xp, x2: xp, y1: yp, y2: T + h, stroke: COLORS.peak, "stroke-dasharray": "3,3"}, svg);
    el("circle", {cx: xp, cy: yp, r: 4.5, fill: "#fff", stroke: COLORS.peak, "stroke-width": 2}, svg);
    var peakText = "peak " + bytes(data.peak_allocated) + (data.peak_label ? " at " + data.peak_label : "");
    // On the side with more room, cut to what fits there (the full text is in the card above).
    var roomRight = L + w - xp - 10, roomLeft = xp - L - 10, right = roomLeft > roomRight;
    var fits = Math.floor(Math.max(roomLeft, roomRight) / 6.4);
    if (peakText.length > fits) peakText = peakText.slice(0, Math.max(0, fits - 1)) + "…";
    var pt = text(svg, right ? xp - 8 : xp + 8, Math.max(T + 12, yp - 8), peakText,
                  {"text-anchor": right ? "end" : "start", "font-weight": 600});
    pt.id = "peak-marker";

    // Hover: the bucket under the mouse.
    var guide = el("line", {x1: 0, x2: 0, y1: T, y2: T + h, stroke: "#111827", "stroke-opacity": 0.35, visibility: "hidden"}, svg);
    var overlay = el("rect", {x: L, y: T, width: w, height: h, fill: "transparent"}, svg);
    function phaseAt(event) {
      var name = "";
      for (var q = 0; q < phases.length && phases[q][1] <= event; q++) name = phases[q][0];
      return name;
    }
    overlay.addEventListener("mousemove", function (evt) {
      var box = svg.getBoundingClientRect();
      var event = (evt.clientX - box.left - L) / w * events;
      var lo = 0, hi = buckets.length - 1;
      while (lo < hi) { var mid = (lo + hi + 1) >> 1; if (buckets[mid][0] <= event) lo = mid; else hi = mid - 1; }
      var b = buckets[lo];
      guide.setAttribute("x1", x(b[6] + 0.5)); guide.setAttribute("x2", x(b[6] + 0.5));
      guide.setAttribute("visibility", "visible");
      var span = b[0] === b[1] ? "event " + b[0] : "events " + b[0] + "–" + b[1];
      var what = label(data, b[7]);
      showTip(evt, span + (phaseAt(b[6]) ? "  ·  " + phaseAt(b[6]) : "") +
              "\nallocated " + (b[2] === b[3] ? bytes(b[3]) : bytes(b[2]) + " – " + bytes(b[3])) +
              "\nreserved " + (b[4] === b[5] ? bytes(b[5]) : bytes(b[4]) + " – " + bytes(b[5])) +
              (what ? "\nhighest after event " + b[6] + ": " + what : ""));
    });
    overlay.addEventListener("mouseleave", function () { guide.setAttribute("visibility", "hidden"); hideTip(); });

    var legend = document.createElement("div");
    legend.className = "legend";
    swatch(legend, COLORS.allocated, "allocated (highest in each bucket; the dark line is the lowest)");
    swatch(legend, COLORS.reserved, "reserved (held from CUDA)");
    if (data.usable > 0) swatch(legend, COLORS.limit, "usable limit");
    host.appendChild(legend);
    document.getElementById("timeline-note").textContent =
        data.events + " events drawn as " + buckets.length + " buckets (minimum and maximum of each, so the peak is exact)" +
        (phases.length ? "; " + phases.length + " phases shaded" : "") + ".";
  }

  var CATEGORY_COLORS = ["#1f5fa8", "#ff7f0e", "#2ca02c", "#9467bd", "#d62728", "#8c564b", "#e377c2", "#17becf",
                         "#bcbd22", "#7f7f7f", "#aec7e8", "#ffbb78"];
  function categoryColor(name, i) {
    if (name.indexOf("cached") === 0) return "#a5c8f0";
    if (name.indexOf("outside") === 0) return "#4b5563";
    if (name.indexOf("free on") === 0) return "#f3f4f6";
    return CATEGORY_COLORS[i % CATEGORY_COLORS.length];
  }

  function drawCategories(data) {
    var host = document.getElementById("categories");
    var rows = data.categories.filter(function (c) { return c[1] > 0; });
    if (!rows.length) { host.textContent = "no categories recorded"; return; }
    var W = 1120, H = 64, L = 8, w = W - 16;
    var sum = 0;
    rows.forEach(function (c) { sum += c[1]; });
    var scale = Math.max(sum, data.total || 0, 1);
    var svg = el("svg", {width: W, height: H, viewBox: "0 0 " + W + " " + H}, host);
    var at = 0;
    rows.forEach(function (c, i) {
      var x0 = L + at / scale * w, width = c[1] / scale * w;
      var r = el("rect", {x: x0, y: 8, width: Math.max(width, 0.5), height: 34, fill: categoryColor(c[0], i),
                          stroke: "#fff", "stroke-width": 0.5}, svg);
      r.addEventListener("mousemove", function (evt) { showTip(evt, c[0] + ": " + bytes(c[1]) + " (" + (100 * c[1] / scale).toFixed(1) + "% of the bar)"); });
      r.addEventListener("mouseleave", hideTip);
      if (width > 9 * c[0].length) text(svg, x0 + 4, 29, c[0], {fill: c[0].indexOf("free on") === 0 ? "#374151" : "#fff",
                                                            "class": "on-bar"});
      at += c[1];
    });
    if (data.total > 0) {
      var xt = L + data.total / scale * w;
      el("line", {x1: xt, x2: xt, y1: 2, y2: 48, stroke: "#111827", "stroke-width": 1.5}, svg);
      text(svg, Math.min(xt, L + w) - 2, 60, "device total " + bytes(data.total), {"text-anchor": "end"});
    }
    var legend = document.createElement("div");
    legend.className = "legend";
    rows.forEach(function (c, i) { swatch(legend, categoryColor(c[0], i), c[0] + " " + bytes(c[1])); });
    host.appendChild(legend);
  }

  var PIECE = [["allocated", "#1f5fa8"], ["cached free (whole free segment)", "#a5c8f0"],
               ["fragment (free piece of a split segment)", "#f59e0b"], ["several small blocks", "#7c93b5"]];

  function drawSegments(data) {
    var host = document.getElementById("segments");
    var segments = data.segments;
    if (!segments.length) {
      host.textContent = data.total > 0 ? "no segments at the peak"
                                        : "no caching allocator here (cpu: every block is its request), so no segments";
      return;
    }
    var total = 0, blocks = 0, byState = [0, 0, 0, 0];
    segments.forEach(function (s) { total += s[1]; s[3].forEach(function (p) { blocks += p[2]; byState[p[1]] += p[0]; }); });
    var rows = 10, rowH = 26, gap = 6, W = 1120, L = 8, w = W - 16;
    // Whole bytes per row: with a fractional row length, floor(at / perRow) can name the row that
    // ends exactly at `at`, and a placement that takes 0 bytes from it never advances.
    var perRow = Math.max(1, Math.ceil(total / rows));
    var svg = el("svg", {width: W, height: rows * (rowH + gap)}, host);
    var pos = 0;
    // The row holding byte `at`, corrected where the floating-point quotient rounds across a row end.
    function rowOf(at) {
      var row = Math.floor(at / perRow);
      if (row * perRow > at) row--;
      else if ((row + 1) * perRow <= at) row++;
      return Math.min(rows - 1, Math.max(0, row));
    }
    // Lays [start, start+size) of the address-ordered strip onto rows, splitting at row ends.
    // Every pass takes at least one byte (or the rest), so the loop ends whatever the numbers.
    function place(start, size, attrs, info) {
      var left = Math.round(size), at = Math.round(start);
      while (left > 0) {
        var row = rowOf(at);
        var take = row === rows - 1 ? left : Math.min(left, (row + 1) * perRow - at);
        if (!(take > 0)) take = left;
        var r = el("rect", Object.assign({x: L + (at - row * perRow) / perRow * w, y: row * (rowH + gap),
                                          width: Math.max(take / perRow * w, 0.4), height: rowH}, attrs), svg);
        if (info) r.dataset.info = info;
        at += take; left -= take;
      }
    }
    // Large pool first, then small, each in address order; a thin gap starts a segment where it is wide enough to see.
    segments = segments.map(function (s, i) { return [s, i]; }).sort(function (a, b) {
      return a[0][2] !== b[0][2] ? (a[0][2] ? 1 : -1) : a[1] - b[1];
    }).map(function (pair) { return pair[0]; });
    segments.forEach(function (s, si) {
      var at = pos;
      s[3].forEach(function (p) {
        var what = p[1] === 3 ? p[2] + " blocks, " + bytes(p[3]) + " of them allocated" : label(data, p[4]);
        place(at, p[0], {fill: PIECE[p[1]][1]},
              PIECE[p[1]][0].split(" (")[0] + " " + bytes(p[0]) + (what ? ": " + what : "") +
              "\nsegment " + si + " at 0x" + s[0].toString(16) + ", " + bytes(s[1]) + (s[2] ? ", small pool" : ", large pool"));
        at += p[0];
      });
      if (s[1] / perRow * w >= 4) place(pos, Math.max(total / w * 0.8 / rows, 1), {fill: "#fff"}, null);
      pos += s[1];
    });
    svg.addEventListener("mousemove", function (evt) {
      var info = evt.target && evt.target.dataset ? evt.target.dataset.info : null;
      if (info) showTip(evt, info); else hideTip();
    });
    svg.addEventListener("mouseleave", hideTip);
    var legend = document.createElement("div");
    legend.className = "legend";
    PIECE.forEach(function (p, i) { if (byState[i] > 0) swatch(legend, p[1], p[0] + " " + bytes(byState[i])); });
    host.appendChild(legend);
    document.getElementById("segments-note").textContent =
        segments.length + " segments, " + blocks + " blocks, " + bytes(total) +
        " reserved, laid out in address order (large pool, then small) over " + rows + " rows of " + bytes(perRow) +
        "; a white gap starts a segment.";
  }

  try {
    var data = JSON.parse(document.getElementById("report-data").textContent);
    drawTimeline(data);
    drawCategories(data);
    drawSegments(data);
    status.dataset.status = "ok";
  } catch (err) {
    status.dataset.status = "error: " + err;
    status.style.display = "block";
    status.textContent = "drawing failed: " + err;
    throw err;
  }
})();
)JS";
}

}  // namespace oomcast::advisor
