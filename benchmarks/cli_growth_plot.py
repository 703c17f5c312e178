"""Draws cli_growth.py --sweep --json's figures: each case's wall time against its size (log-log),
with the slopes of linear and quadratic growth drawn through each case's smallest point.

Usage: /usr/bin/python3 benchmarks/cli_growth_plot.py FIGURES.json OUT.png
Needs matplotlib (Debian: python3-matplotlib).
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LABELS = {"plan": "plan: signatures", "rank-folder": "summary --by rank DIR: files", "steps": "summary --by rank TRACE: steps",
          "arguments": "summary OBS: arguments", "dims": "plan: dynamic dims", "drift": "drift: signatures",
          "drift-arguments": "drift: arguments"}


def main(figures, out):
    with open(figures) as f:
        rows = json.load(f)["rows"]
    cases = list(dict.fromkeys(r["case"] for r in rows))
    fig, ax = plt.subplots(figsize=(8, 5))
    for case, marker in zip(cases, "osx^dv<>"):
        pts = [(r["size"], r["seconds"]) for r in rows if r["case"] == case and r["seconds"] is not None]
        if not pts:
            continue
        xs, ys = zip(*pts)
        line, = ax.plot(xs, ys, marker=marker, label=LABELS.get(case, case))
        x0, y0 = xs[0], max(ys[0], 1e-3)
        ax.plot([x0, xs[-1]], [y0, y0 * xs[-1] / x0], color=line.get_color(), linestyle=":", linewidth=0.8)
    # One quadratic guide, from the first case's smallest point: what the old code grew like.
    first = [(r["size"], r["seconds"]) for r in rows if r["case"] == cases[0] and r["seconds"] is not None]
    if len(first) > 1:
        (x0, y0), x1 = first[0], first[-1][0]
        ax.plot([x0, x1], [y0, y0 * (x1 / x0) ** 2], color="grey", linestyle="--", linewidth=0.8, label="quadratic growth")
    ax.plot([], [], color="grey", linestyle=":", linewidth=0.8, label="linear growth (dotted, per case)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(top=100)
    ax.set_xlabel("what the user grew (signatures, files, steps, arguments, dims)")
    ax.set_ylabel("wall time of the command (s)")
    ax.set_title("optrace's commands against the size of their input")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
