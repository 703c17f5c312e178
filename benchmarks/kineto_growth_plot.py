"""Draws kineto_growth.py's figures: time and peak memory against the trace's size, for optrace's
summary and convert and Python's json.load, each a whole process (log-log axes).

Usage: /usr/bin/python3 benchmarks/kineto_growth_plot.py FIGURES.json OUT.png
Needs matplotlib (Debian: python3-matplotlib).
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(figures, out):
    with open(figures) as f:
        info = json.load(f)
    rows = info["rows"]
    sizes = [r["bytes"] / 1e6 for r in rows]
    names = list(rows[0]["commands"])
    fig, (time_ax, rss_ax) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, marker in zip(names, "osx^"):
        time_ax.plot(sizes, [r["commands"][name]["seconds"] for r in rows], marker=marker, label=name)
        rss_ax.plot(sizes, [r["commands"][name]["peak_rss_mb"] for r in rows], marker=marker, label=name)
    rss_ax.plot(sizes, sizes, color="grey", linestyle=":", label="the file's size")
    for ax, title, unit in ((time_ax, "wall time of the process", "seconds"), (rss_ax, "peak resident memory", "MB")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("trace size (MB)")
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Reading a Kineto trace ({info['source']} repeated; {info['cores']} cores, {info['date']})", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
