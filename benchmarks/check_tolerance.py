"""How large float32 rounding errors are, next to replay's check tolerance.

Usage: /usr/bin/python3 benchmarks/check_tolerance.py [--trials N]

For computations a traced model runs (mm, bmm, conv2d, a long sum, softmax, exp) on random
normal inputs, as replay materializes them, prints the largest |float32 result - float64 result|
over N trials, the float64 output's RMS, and their ratio. Replay's check mode lets a float32
element differ by 1e-4 * max(1, rms) + 1e-4 * |ref| (include/optrace/detail/replay/compare.hpp):
the ratio column is what must stay below 1e-4.
"""
import argparse

import torch


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=5)
    trials = parser.parse_args().trials
    conv3 = lambda x, w: torch.nn.functional.conv2d(x, w, padding=1)  # noqa: E731
    conv7 = lambda x, w: torch.nn.functional.conv2d(x, w, padding=3, stride=2)  # noqa: E731
    cases = [
        ("mm [64,64]x[64,64] (K=64)", torch.mm, [(64, 64), (64, 64)]),
        ("mm [2,3072]x[3072,768] (K=3072)", torch.mm, [(2, 3072), (3072, 768)]),
        ("bmm [8,197,64]x[8,64,197]", torch.bmm, [(8, 197, 64), (8, 64, 197)]),
        ("conv2d 64->64 3x3 on 28x28", conv3, [(2, 64, 28, 28), (64, 64, 3, 3)]),
        ("conv2d 3->64 7x7/2 on 160x160", conv7, [(2, 3, 160, 160), (64, 3, 7, 7)]),
        ("sum over 100000", lambda x: x.sum(1), [(4, 100000)]),
        ("softmax over 1000", lambda x: torch.softmax(x, 1), [(4, 1000)]),
        ("exp", torch.exp, [(4, 1000)]),
    ]
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, float32 vs float64 on the CPU, worst of {trials} trials")
    print(f"{'computation':34} {'max |err|':>10} {'rms(ref)':>10} {'max |err| / rms':>16}")
    for name, fn, shapes in cases:
        worst_err, worst_ratio, rms_at_worst = 0.0, 0.0, 0.0
        for _ in range(trials):
            xs = [torch.randn(s) for s in shapes]
            got = fn(*xs).double()
            ref = fn(*[x.double() for x in xs])
            err = (got - ref).abs().max().item()
            rms = ref.pow(2).mean().sqrt().item()
            ratio = err / max(rms, 1.0)
            if ratio >= worst_ratio:
                worst_err, worst_ratio, rms_at_worst = err, ratio, rms
        print(f"{name:34} {worst_err:10.3g} {rms_at_worst:10.3g} {worst_ratio:16.3g}")


if __name__ == "__main__":
    main()
