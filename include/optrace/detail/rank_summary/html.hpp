// optrace/detail/rank_summary/html.hpp: `summary --by rank --html`: the summary as one self-contained page (no libtorch)
#pragma once
// The page is RankSummary::to_json() and a script that draws it; nothing else is read:
// - no network: everything is inline, and the page's Content-Security-Policy forbids every fetch
//   (default-src 'none'), so opening a report never asks a server for anything;
// - a trace is hostile until proven otherwise, and its names (files, ops, groups, shapes) reach the
//   page: the JSON sits in a <script type="application/json"> block with '<', '>' and '&' written
//   as \u escapes (a name holding "</script>" cannot end the block), the script puts every name in
//   the page as text (textContent, never as markup), and the policy runs only the script that
//   carries this page's random nonce (an injected <script> or onerror= attribute would not run);
// - the picture: ranks (rows) x steps (columns), each cell coloured by the wait it caused the
//   other ranks (Waits' blamed collectives), on a canvas, so that 16,384 ranks draw as fast as 8
//   (above 1,024 ranks a row holds several, coloured by their largest); a click, or the address's
//   "#rank=R&step=S", shows the cell: its times, the step's collectives, and why the rank was
//   late where explain_waits() said it. Without an address, the cell that caused the most wait.
// tests/cli/report_in_browser.sh loads it in Debian's headless chromium (the real renderer).

#include <cstdio>
#include <random>
#include <string>
#include <string_view>

namespace optrace::detail::rank_summary {

/// `json` made safe inside a <script> block: '<', '>' and '&' (which JSON holds only inside
/// strings) as their \u escapes, which JSON.parse reads back as the same characters.
inline std::string json_for_script(std::string_view json) {
  std::string out;
  out.reserve(json.size() + json.size() / 16);
  for (char c : json) {
    if (c == '<') out += "\\u003c";
    else if (c == '>') out += "\\u003e";
    else if (c == '&') out += "\\u0026";
    else out += c;
  }
  return out;
}

/// 128 random bits as hex: the nonce of one page's script.
inline std::string page_nonce() {
  std::random_device random;
  std::string out;
  for (int k = 0; k < 4; ++k) {
    char word[9];
    std::snprintf(word, sizeof word, "%08x", static_cast<unsigned>(random()));
    out += word;
  }
  return out;
}

/// The report page of a summary whose to_json() is `json` (see above).
inline std::string html_page(std::string_view json) {
  const std::string nonce = page_nonce();
  std::string out;
  out += R"page(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src 'none'; style-src 'nonce-)page" + nonce +
         R"page('; script-src 'nonce-)page" + nonce + R"page('">
<title>optrace: ranks side by side</title>
<style nonce=")page" + nonce + R"page(">
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.2em 2em; color: #1d1d1f; }
h1 { font-size: 1.3em; margin: 0 0 .3em; }
h2 { font-size: 1.1em; margin: 1.2em 0 .4em; }
table { border-collapse: collapse; margin: .3em 0; }
th, td { padding: 2px 10px 2px 0; text-align: left; vertical-align: top; }
th { font-weight: 600; border-bottom: 1px solid #ccc; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.blamed td { background: #fde2dc; }
#grid-box { display: flex; gap: 1.5em; align-items: flex-start; flex-wrap: wrap; }
#grid { cursor: crosshair; border: 1px solid #ddd; }
#side { flex: 1; min-width: 420px; max-width: 860px; }
#side h2:first-of-type { margin-top: .6em; }
.legend { font-size: 12px; color: #555; }
.muted { color: #666; }
.notes li { color: #7a4a00; }
code { font: 12px/1.3 ui-monospace, monospace; }
</style>
</head>
<body>
<h1>optrace summary --by rank</h1>
<div id="verdict"></div>
<h2>Wait each rank caused the others, per step</h2>
<div id="grid-box"><canvas id="grid"></canvas>
<div id="side"><div id="legend" class="legend"></div><h2>Longest waits caused</h2><div id="top"></div>
<h2 id="cell"></h2><div id="cell-times"></div><div id="cell-collectives"></div><div id="cell-why"></div></div></div>
<div id="clocks"></div>
<ul id="notes" class="notes"></ul>
<details id="files"><summary>Traces</summary></details>
<script type="application/json" id="optrace-data">)page";
  out += json_for_script(json);
  out += R"page(</script>
<script nonce=")page" + nonce + R"page(">
"use strict";
const data = JSON.parse(document.getElementById("optrace-data").textContent);
// Every name from a trace goes in as text: el's children are nodes or strings (Node.append makes
// strings text nodes); attributes are only ours.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  e.append(...children);
  return e;
}
const ms = us => (us / 1000).toFixed(3);
function table(head, rows) {
  const t = el("table", {}, el("tr", {}, ...head.map(h => el("th", {}, h))));
  for (const r of rows) t.append(r);
  return t;
}
function row(cells, attrs) {
  return el("tr", attrs || {}, ...cells.map(c => typeof c === "number" ? el("td", {class: "num"}, ms(c)) : el("td", {}, c)));
}
const groupLabel = g => g === "" ? "" : " of group " + g;
const seqLabel = c => c.seq === null || c.seq === undefined ? "" : " (seq " + c.seq + ")";

const steps = data.steps.map(s => s.step);
const ranks = data.ranks.map(r => r.rank);
const stepAt = new Map(steps.map((s, i) => [s, i]));
const rankAt = new Map(ranks.map((r, i) => [r, i]));
// caused[rank index][step index], waited likewise, in us.
const caused = ranks.map(() => new Float64Array(steps.length));
const waited = ranks.map(() => new Float64Array(steps.length));
let most = 0;
for (const w of data.waits.ranks) {
  const ri = rankAt.get(w.rank);
  if (ri === undefined) continue;
  for (const b of w.by_step) {
    const si = stepAt.get(b.step);
    if (si === undefined) continue;
    caused[ri][si] = b.caused_us;
    waited[ri][si] = b.waited_us;
    most = Math.max(most, b.caused_us);
  }
}

// The verdict, as the table's last lines say it.
{
  const v = document.getElementById("verdict");
  const r0 = data.ranks[0] || {};
  const world = [r0.backend, r0.world_size > 0 ? "world size " + r0.world_size : ""].filter(x => x).join(", ");
  v.append(el("p", {}, data.ranks.length + " rank trace(s)" + (world ? " (" + world + ")" : "") + ", " + steps.length + " step(s)" +
                      (steps.length ? " (" + steps[0] + ".." + steps[steps.length - 1] + ")" : "") + ", " +
                      data.waits.collectives.length + " collective(s) matched across ranks"));
  const blamed = data.waits.ranks.filter(r => r.blamed > 0).sort((a, b) => b.caused_us - a.caused_us);
  v.append(el("p", {id: "most"}, blamed.length
    ? "The rank the others waited for most: " + blamed[0].rank + " (" + ms(blamed[0].caused_us) + " ms at " + blamed[0].blamed +
      " collective(s), steps " + blamed[0].steps.join(", ") + ")"
    : "No collective had ranks arriving late: no rank to blame."));
}

// The grid: a row per rank (or per group of ranks above kRows), a column per step.
const kRows = 1024;
const perRow = Math.max(1, Math.ceil(ranks.length / kRows));
const rows = Math.ceil(ranks.length / perRow);
const cellW = Math.max(3, Math.min(36, Math.floor(900 / Math.max(1, steps.length))));
const cellH = Math.max(1, Math.min(16, Math.floor(720 / Math.max(1, rows))));
const gridLeft = 56, gridTop = 22;  // the axes' labels
const canvas = document.getElementById("grid");
canvas.width = gridLeft + cellW * steps.length + 1;
canvas.height = gridTop + cellH * rows + 1;
function colour(us) {
  if (!(us > 0)) return "#f3f4f6";
  const f = Math.sqrt(us / most);  // light orange to dark red
  return "rgb(" + Math.round(253 - 93 * f) + "," + Math.round(208 - 200 * f) + "," + Math.round(162 - 150 * f) + ")";
}
// The rank a cell shows: of its row's ranks, the one that caused the most wait at that step.
function rankOf(line, si) {
  let best = line * perRow;
  for (let ri = best; ri < Math.min(ranks.length, (line + 1) * perRow); ++ri) if (caused[ri][si] > caused[best][si]) best = ri;
  return best;
}
let selected = null;  // [rank index, step index]
function draw() {
  const g = canvas.getContext("2d");
  g.clearRect(0, 0, canvas.width, canvas.height);
  g.font = "11px sans-serif";
  g.fillStyle = "#444";
  const stepEvery = Math.ceil(30 / cellW), rowEvery = Math.ceil(14 / cellH);
  g.fillText("rank", 2, gridTop - 6);
  for (let si = 0; si < steps.length; si += stepEvery) g.fillText(String(steps[si]), gridLeft + si * cellW + 1, gridTop - 6);
  for (let line = 0; line < rows; line += rowEvery) g.fillText(String(ranks[line * perRow]), 2, gridTop + line * cellH + Math.min(cellH, 11));
  for (let line = 0; line < rows; ++line)
    for (let si = 0; si < steps.length; ++si) {
      g.fillStyle = colour(caused[rankOf(line, si)][si]);
      g.fillRect(gridLeft + si * cellW, gridTop + line * cellH, Math.max(1, cellW - 1), Math.max(1, cellH - (cellH > 3 ? 1 : 0)));
    }
  if (selected) {
    g.strokeStyle = "#0645ad";
    g.lineWidth = 2;
    g.strokeRect(gridLeft + selected[1] * cellW - 1, gridTop + Math.floor(selected[0] / perRow) * cellH - 1, cellW + 1, Math.max(3, cellH + 1));
  }
}
canvas.addEventListener("click", e => {
  const si = Math.floor((e.offsetX - gridLeft) / cellW), line = Math.floor((e.offsetY - gridTop) / cellH);
  if (si < 0 || si >= steps.length || line < 0 || line >= rows) return;
  const ri = rankOf(line, si);
  location.hash = "rank=" + ranks[ri] + "&step=" + steps[si];
});
document.getElementById("legend").append(
  "Rows: ranks" + (perRow > 1 ? " (" + perRow + " per row, coloured by the one that caused the most)" : "") +
  "; columns: steps. Colour: the wait the rank caused the others at the step's collectives it arrived last at" +
  (most > 0 ? " (darkest: " + ms(most) + " ms)" : " (none)") + ". Click a cell.");

// The cells that caused the most wait, the most first (up to 10).
const cells = [];
for (let ri = 0; ri < ranks.length; ++ri)
  for (let si = 0; si < steps.length; ++si) if (caused[ri][si] > 0) cells.push([caused[ri][si], ri, si]);
cells.sort((a, b) => b[0] - a[0] || a[1] - b[1] || a[2] - b[2]);
document.getElementById("top").append(cells.length
  ? table(["rank", "step", "others waited ms"], cells.slice(0, 10).map(([us, ri, si]) => el("tr", {class: "top-cell"},
      el("td", {}, el("a", {href: "#rank=" + ranks[ri] + "&step=" + steps[si]}, String(ranks[ri]))),
      el("td", {}, String(steps[si])), el("td", {class: "num"}, ms(us)))))
  : el("p", {class: "muted"}, "none: no rank arrived late at any collective"));

// One cell: its times, the step's collectives, why the rank was late.
function show(ri, si) {
  selected = [ri, si];
  draw();
  const rank = ranks[ri], step = steps[si];
  document.getElementById("cell").textContent = "rank " + rank + ", step " + step;
  const times = document.getElementById("cell-times"), list = document.getElementById("cell-collectives"),
        why = document.getElementById("cell-why");
  times.replaceChildren();
  list.replaceChildren();
  why.replaceChildren();
  const t = data.ranks[ri].steps.find(s => s.step === step);
  times.append(el("p", {}, t
    ? "step " + ms(t.step_us) + " ms; in collectives " + ms(t.collective_us) + " ms; outside them " + ms(t.outside_us) +
      " ms; its own waits " + ms(waited[ri][si]) + " ms; the others waited for it " + ms(caused[ri][si]) + " ms"
    : "rank " + rank + "'s trace has no step " + step));
  const here = data.waits.collectives.filter(c => c.step === step);
  if (here.length)
    list.append(table(["collective", "ranks", "last to arrive", "longest wait ms", "all waits ms", ""], here.map(c =>
      row([c.name + " #" + c.index + seqLabel(c) + groupLabel(c.group) + (c.on_device ? " (on the GPU)" : ""), String(c.ranks), String(c.last_rank), c.max_wait_us, c.total_wait_us,
           (c.blamed ? (c.late > 1 ? c.late + " ranks late, rank " + c.last_rank + " last" : "rank " + c.last_rank + " late")
                     : "no rank late (noise)") +
             (c.blamed && c.via ? "; it had waited for rank " + c.blamed_rank + " at step " + c.via.step + "'s #" + c.via.index +
                                  groupLabel(c.via.group) + ": rank " + c.blamed_rank + "'s wait" : "")],
          c.blamed && c.blamed_rank === rank ? {class: "blamed"} : {}))));
  else list.append(el("p", {class: "muted"}, "no collective matched in step " + step));
  const explained = data.waits.causes.filter(c => c.step === step && c.rank === rank);
  for (const c of explained) {
    why.append(el("h2", {}, "Why rank " + rank + " arrived late at #" + c.index + seqLabel(c) + groupLabel(c.group)));
    why.append(el("p", {}, "Its way there" + (c.on_device ? " on the GPU" : "") + " took " + ms(c.way_us) + " ms, the median rank's (rank " +
                          c.median_rank + ") " + ms(c.median_way_us) + " ms" +
                          (c.set_out_late ? "; it set out " + ms(c.set_out_later_us) +
                          " ms after the median rank" : "") + "."));
    if (c.rows.length)
      why.append(table(["rank " + rank + " spent more time", "input shapes", "more ms", "rank " + rank + " ms", "median ms"],
        c.rows.map(o => row([o.outside ? (c.on_device ? "outside any kernel (the GPU idle)" : "outside any op") : o.name, o.input_shapes, o.excess_us, o.rank_us, o.median_us],
                            {class: "why-row"}))));
    else why.append(el("p", {class: "muted"}, "No " + (c.on_device ? "kernel" : "op") + " took rank " + rank + " longer there."));
    if (c.on_device) {
      why.append(el("p", {}, "On the CPU, its way to the call took " + ms(c.cpu_way_us) + " ms, the median rank's " +
                            ms(c.median_cpu_way_us) + " ms."));
      if (c.cpu_rows.length)
        why.append(table(["rank " + rank + " spent more time on the CPU", "input shapes", "more ms", "rank " + rank + " ms", "median ms"],
          c.cpu_rows.map(o => row([o.outside ? "outside any op" : o.name, o.input_shapes, o.excess_us, o.rank_us, o.median_us],
                                  {class: "why-row"}))));
    }
  }
  if (!explained.length && caused[ri][si] > 0)
    why.append(el("p", {class: "muted"}, "Not explained: the summary explains the longest waits only (see the table's)."));
}
function fromAddress() {
  const p = new URLSearchParams(location.hash.slice(1));
  const ri = rankAt.get(Number(p.get("rank"))), si = stepAt.get(Number(p.get("step")));
  if (p.has("rank") && p.has("step") && ri !== undefined && si !== undefined) return show(ri, si);
  if (cells.length) return show(cells[0][1], cells[0][2]);
  if (ranks.length && steps.length) return show(0, 0);
  draw();
}
window.addEventListener("hashchange", fromAddress);
fromAddress();

// The clocks, the notes, the files.
if (data.waits.clocks_checked > 0)
  document.getElementById("clocks").append(el("p", {class: "muted"}, data.waits.clock_gaps.length
    ? "Clocks: " + data.waits.clock_gaps.length + " rank(s) arrived after another's call had ended, which one clock cannot " +
      "show; the widest: rank " + data.waits.clock_gaps[0].later_rank + "'s clock reads at least " +
      ms(data.waits.clock_gaps[0].at_least_us) + " ms later than rank " + data.waits.clock_gaps[0].earlier_rank + "'s."
    : "Clocks: at the " + data.waits.clocks_checked + " collective(s) checked, no rank arrived after another's call had " +
      "ended: consistent with one clock."));
if (data.waits.clock_offsets.length) {
  const far = data.waits.clock_offsets.reduce((a, b) => Math.abs(b.offset_us) > Math.abs(a.offset_us) ? b : a);
  document.getElementById("clocks").append(el("p", {class: "muted"}, "Clock offsets, estimated from the ends of NCCL's kernels " +
    "(those of a call end together): the farthest, rank " + far.rank + "'s clock, reads " + ms(Math.abs(far.offset_us)) + " ms " +
    (far.offset_us < 0 ? "earlier" : "later") + " than the others' (the median of " + far.calls + " call(s))."));
}
for (const n of data.notes) document.getElementById("notes").append(el("li", {}, n));
document.getElementById("files").append(table(["rank", "trace"], data.ranks.map(r => el("tr", {}, el("td", {}, String(r.rank)),
                                                                                   el("td", {}, el("code", {}, r.file))))));
</script>
</body>
</html>
)page";
  return out;
}

}  // namespace optrace::detail::rank_summary
