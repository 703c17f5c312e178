"""Serve what was observed: plan packages from the traffic, compile them, serve them, catch the drift, replace them.

    python3 serve_e2e.py OBSERVE_SCRIPTED SERVE_SET OPTRACE WORK_DIR

The demo's model (token ids and an optional mask) is scripted; observe_scripted observes the
TorchScript module on traffic with and without a mask, batch and sequence varying. Then:

1. `optrace plan` writes a plan of at least two packages (one per call structure), and
   compile_plan (examples/python/compile_package.py) compiles each with the real torch.export
   and AOTInductor;
2. serve_set serves the same kind of traffic through an optrace::aoti::PackageSet, without a
   fallback: every call answered by a package, outputs equal to the TorchScript module's;
3. traffic with longer sequences falls back for every call, the set's stats name input_ids dim 1
   with the sizes seen, and `optrace drift` names it too, with exit status 1;
4. a plan from both observation files covers it (`optrace drift` exit 0), and `optrace verify`
   of that plan finds every longer call ok on the package that covers it, against the module;
5. the set is replaced by that plan's under 4 serving threads: every call answered, and no call
   falls back afterwards;
6. a plan folder with a missing package, or a package of other arguments, is refused in one line.

Prints one summary line. Exit 77 (skipped) where torch < 2.6 or AOTInductor cannot compile here.
"""
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "python"))
sys.path.insert(0, HERE)

from aoti_e2e import SKIP, aoti_unavailable, cannot_compile, fail, torch  # noqa: E402  (skips without torch)


def traffic(shapes, masked):
    def ids(b, s):
        return torch.randint(0, 100, (b, s))

    if masked:
        return [((), dict(input_ids=ids(b, s), attention_mask=torch.ones(b, s, dtype=torch.int64))) for b, s in shapes]
    return [((), dict(input_ids=ids(b, s))) for b, s in shapes]


def save_calls(calls, path):
    torch.save(([(list(a), k) for a, k in calls], {}), path)


def run(command, expect=0, what=None):
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != expect:
        fail("%s exited %d, expected %d:\n%s%s" % (what or os.path.basename(command[0]), done.returncode, expect,
                                                   done.stdout, done.stderr))
    return done.stdout


def observe(observe_tool, scripted, calls, work, name):
    folder = os.path.join(work, name)
    os.makedirs(folder, exist_ok=True)
    calls_path = os.path.join(folder, "calls.pt")
    save_calls(calls, calls_path)
    run([observe_tool, scripted, calls_path, folder], what="observe_scripted")
    return os.path.join(folder, "observations.json"), calls_path


def main(observe_tool, serve_tool, cli, work):
    if aoti_unavailable():
        print("SKIPPED: " + aoti_unavailable())
        return SKIP
    import compile_package as cp
    import export_from_observations as efo

    torch.manual_seed(0)
    os.makedirs(work, exist_ok=True)
    model = efo.Model().eval()
    scripted = os.path.join(work, "model.pt")
    torch.jit.script(model).save(scripted)

    # The traffic observed: with a mask (batch 1-4, sequence 5-16), without (batch 2-3, sequence 5-10).
    seen = (traffic([(2, 5), (1, 7), (3, 9), (4, 16), (4, 12), (2, 12)], True) +
            traffic([(2, 6), (3, 10), (2, 5)], False))
    observed, _ = observe(observe_tool, scripted, seen, work, "observed")

    # 1. The plan, and its packages compiled.
    plan1 = os.path.join(work, "plan1")
    out = run([cli, "plan", observed, "-o", plan1, "--force"])
    plan = efo.read(os.path.join(plan1, "plan.json"))
    if len(plan["packages"]) < 2:
        fail("the plan has %d packages, expected one per call structure:\n%s" % (len(plan["packages"]), out))
    structures = sorted(p["structure"] for p in plan["packages"])
    if not any("attention_mask: None" in s for s in structures):
        fail("no package for the calls without a mask: %s" % structures)
    started = time.time()
    try:
        cp.compile_plan(model, plan1, progress=None)
    except Exception as e:  # a machine without a working C++ toolchain for AOTInductor
        if cannot_compile(e):
            print("SKIPPED: " + cannot_compile(e))
            return SKIP
        raise
    compile1_s = time.time() - started
    # compile_plan recorded what each package takes as compiled (its guard and in_spec): drift
    # judges by them, and the set refuses a package they do not describe (below).
    plan = efo.read(os.path.join(plan1, "plan.json"))
    if not all(isinstance(p.get("guard"), str) and json.loads(p["guard"])["inputs"] and isinstance(p.get("in_spec"), str)
               for p in plan["packages"]):
        fail("compile_plan did not record each package's guard and in_spec in plan.json")

    # 2. The same kind of traffic served by the set, without a fallback: no call refused, every
    #    output the TorchScript module's.
    same_kind = (traffic([(3, 8), (1, 16), (4, 5), (2, 9)], True) + traffic([(3, 7), (2, 10)], False))
    same_obs, same_calls = observe(observe_tool, scripted, same_kind, work, "same_kind")
    served = os.path.join(work, "served")
    os.makedirs(served, exist_ok=True)
    out = run([serve_tool, plan1, scripted, same_calls, served], what="serve_set (same kind of traffic)")
    stats = efo.read(os.path.join(served, "stats.json"))
    if stats["fallbacks"] or stats["refused"] or stats["calls"] != len(same_kind):
        fail("the same kind of traffic was not all served by packages: %s" % json.dumps(stats))
    if sum(1 for p in stats["packages"] if p["calls"]) < 2:
        fail("the calls with and without a mask did not go to two packages: %s" % json.dumps(stats))
    if efo.read(os.path.join(served, "served.json"))["calls"]["total"] != len(same_kind):
        fail("InputObserver<PackageSet> did not record every call")
    # Drift, by the compiled ranges, covers every call the set served.
    run([cli, "drift", plan1, same_obs], expect=0, what="optrace drift of the traffic the set served")

    # 3. Longer sequences: every call falls back; the stats and `optrace drift` name input_ids dim 1.
    longer = traffic([(2, 24), (3, 40), (1, 33)], True) + traffic([(2, 20)], False)
    longer_obs, longer_calls = observe(observe_tool, scripted, longer, work, "longer")
    drifted = os.path.join(work, "drifted")
    os.makedirs(drifted, exist_ok=True)
    out = run([serve_tool, plan1, scripted, longer_calls, drifted, "--fallback"], what="serve_set (longer sequences)")
    check_documented(out[out.index("4 calls:"):out.index("0 mismatches")], "serve_e2e compares this block with what the set")
    stats = efo.read(os.path.join(drifted, "stats.json"))
    if stats["fallbacks"] != len(longer):
        fail("expected every longer call to fall back: %s" % json.dumps(stats))
    ids_dim1 = [r for r in stats["refusals"] if r["argument"] == "input_ids" and r["dim"] == 1]
    if not ids_dim1 or max(r["seen"][1] for r in ids_dim1) != 40:
        fail("the set's refusals do not name input_ids dim 1 up to 40: %s" % json.dumps(stats["refusals"]))
    drift_json = os.path.join(work, "drift.json")
    text = run([cli, "drift", plan1, longer_obs, "--json", drift_json, "--force"], expect=1, what="optrace drift")
    check_documented(text.replace(plan1 + "/", "plan/"), "serve_e2e compares this block with what optrace drift")
    drift = efo.read(drift_json)
    rows = [r for r in drift["refusals"] if r["argument"] == "input_ids" and r["dim"] == 1]
    if drift["covered"] != 0 or not rows or rows[0]["seen"] != [24, 40] or rows[0]["planned"] != [5, 16] \
            or rows[0]["source"] != "compiled":
        fail("optrace drift: %s" % text)

    # compile_plan wrote the module the packages replace; a model TorchScript cannot script gets a
    # line saying so, and no file.
    if not os.path.isfile(os.path.join(plan1, cp.REFERENCE_FILE)):
        fail("compile_plan wrote no %s" % cp.REFERENCE_FILE)

    class Unscriptable(torch.nn.Module):
        def forward(self, x, *rest):
            return x

    lines = []
    unscripted = os.path.join(work, "unscripted.pt")
    if cp.save_reference(Unscriptable(), unscripted, progress=lines.append) is not None or os.path.exists(unscripted) \
            or not lines or not lines[0].startswith("no unscripted.pt: torch.jit.script cannot script the model ("):
        fail("save_reference of a model TorchScript refuses: %r" % lines)

    # 4. A plan from both files covers the longer traffic.
    plan2 = os.path.join(work, "plan2")
    run([cli, "plan", observed, longer_obs, "-o", plan2, "--force"])
    run([cli, "drift", plan2, longer_obs, observed], expect=0, what="optrace drift of the merged plan")
    started = time.time()
    cp.compile_plan(model, plan2, progress=None)
    compile2_s = time.time() - started

    # `optrace verify PLAN`: each package on the signatures it covers, against the module; the old
    # plan covers none of the longer traffic.
    verify_json = os.path.join(work, "verify_plan.json")
    reference = os.path.join(plan2, cp.REFERENCE_FILE)  # what compile_plan wrote: the module with the plan's weights
    out = run([cli, "verify", plan2, longer_obs, "--reference", reference, "--runs", "1", "--json", verify_json, "--force"],
              what="optrace verify of the merged plan")
    report = efo.read(verify_json)
    verified = sum(len(p["report"]["signatures"]) for p in report["packages"])
    if verified != len(longer) or report["uncovered_signatures"] or \
            any(s["status"] != "ok" for p in report["packages"] for s in p["report"]["signatures"]):
        fail("optrace verify of the merged plan: %s" % out)
    out = run([cli, "verify", plan1, longer_obs, "--runs", "0"], expect=1, what="optrace verify of the old plan")
    if "4 signatures (4 calls) no package covers" not in out:
        fail("optrace verify of the old plan: %s" % out)

    # A package compiled without its weights, verified alone: refused in one line without them,
    # served with the plan's, refused in one line naming the tensor with weights of another shape.
    p0 = os.path.join(plan1, plan["packages"][0]["file"])
    done = subprocess.run([cli, "verify", p0, observed, "--runs", "0"], capture_output=True, text=True)
    if done.returncode != 2 or not re.fullmatch(r"optrace: \S*p0\.pt2: ArgumentError: compiled without its weights "
                                                r"[^\n]*optrace verify --weights[^\n]*\n", done.stderr):
        fail("optrace verify of a package without its weights: exit %d, %r" % (done.returncode, done.stderr))
    out = run([cli, "verify", p0, observed, "--runs", "0", "--weights", os.path.join(plan1, "weights.pt")], expect=1,
              what="optrace verify --weights")
    if not re.search(r"^[1-9]\d* ok, 0 mismatch, \d+ refused, 0 error", out, re.M):
        fail("optrace verify --weights: %s" % out)

    # 5. Replaced under 4 serving threads: no call fails, none falls back afterwards.
    replaced = os.path.join(work, "replaced")
    os.makedirs(replaced, exist_ok=True)
    out = run([serve_tool, plan1, os.path.join(plan1, cp.REFERENCE_FILE), longer_calls, replaced, "--fallback", "--replace",
               plan2, "--threads", "4"],
              what="serve_set --replace")
    replace_line = next(line for line in out.splitlines() if line.startswith("replaced"))
    after = efo.read(os.path.join(replaced, "after.json"))
    if after["replacements"] != 1 or not any(p["current"] and p["calls"] for p in after["packages"]):
        fail("after the replace: %s" % json.dumps(after))
    # Each row names the plan its package came from: plan1's p0 and plan2's p0 are two rows.
    id1, id2 = plan["id"], efo.read(os.path.join(plan2, "plan.json"))["id"]
    rows = {(p["plan"], p["name"], p["current"]) for p in after["packages"]}
    if id1 == id2 or after["plan"] != id2 or (id1, "p0", False) not in rows or (id2, "p0", True) not in rows:
        fail("the stats' rows do not name their plans (%s, %s): %s" % (id1, id2, json.dumps(after["packages"])))

    # 5a. A call on the old set past kRetireWait: the replace returns without it, keeps the old set
    #     (stats' retired), and the next replace frees it, not the call's thread.
    slow = os.path.join(work, "slow")
    os.makedirs(slow, exist_ok=True)
    out = run([serve_tool, plan1, scripted, longer_calls, slow, "--replace", plan2, "--slow-fallback"],
              what="serve_set --slow-fallback")
    retire_line = next(line for line in out.splitlines() if line.startswith("retired"))

    # 5b. New weights without recompiling: a fine-tuned copy of the model (same architecture),
    #     saved by save_weights, swapped in 3 times under 4 serving threads, each package running
    #     2 calls at once; weights of another shape refused first, naming the tensor.
    tuned = efo.Model().eval()
    tuned.load_state_dict(model.state_dict())
    with torch.no_grad():
        for p in tuned.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    tuned_scripted = os.path.join(work, "model_v2.pt")
    torch.jit.script(tuned).save(tuned_scripted)
    weights_v2 = cp.save_weights(tuned, os.path.join(work, "weights_v2.pt"))
    bad_weights = cp.save_weights(tuned, os.path.join(work, "weights_bad.pt"), extra={"head.bias": torch.zeros(7)})
    swapped = os.path.join(work, "swapped")
    os.makedirs(swapped, exist_ok=True)
    out = run([serve_tool, plan1, scripted, same_calls, swapped, "--replace-weights", weights_v2, "--new-model",
               tuned_scripted, "--bad-weights", bad_weights, "--threads", "4", "--runners", "2"],
              what="serve_set --replace-weights")
    refusal = next((line for line in out.splitlines() if line.startswith("refused: ")), "")
    if not re.search(r"weights_bad\.pt.*'head\.bias' is float32\[7\]; it was compiled for float32\[100\]", refusal):
        fail("weights of another shape: %r" % refusal)
    swap_line = next(line for line in out.splitlines() if line.startswith("swapped"))

    # 6. A plan folder that is not whole: a missing package, and a package that takes other
    #    arguments, each refused in one line naming the file, before anything is served.
    errors = check_bad_plans(plan1, plan2, scripted, same_calls, serve_tool, work)

    # 7. Stats that traffic cannot grow: 10,000 refused calls, each with a keyword of its own
    #    (the keyword is in every refusal's message), keep one row per package at most.
    many = os.path.join(work, "refused_many")
    os.makedirs(many, exist_ok=True)
    run([serve_tool, plan1, scripted, same_calls, many, "--refuse-many", "10000"], what="serve_set --refuse-many")
    refused = efo.read(os.path.join(many, "refused.json"))
    if refused["refused"] != 10000 or len(refused["refusals"]) > len(plan["packages"]):
        fail("10,000 refusals of distinct keywords: %d refused, %d rows" % (refused["refused"], len(refused["refusals"])))
    errors += "; 10,000 refusals of distinct keywords kept in %d row(s)" % len(refused["refusals"])

    print("PASS serve: torch %s; plan of %d packages compiled in %.1f s, served %d calls without a fallback; "
          "%d longer calls fell back and drift named input_ids dim 1 (%s); a plan of both compiled in %.1f s "
          "covers them; %s" % (torch.__version__, len(plan["packages"]), compile1_s, len(same_kind), len(longer),
                               "seen [24, 40], planned [5, 16]", compile2_s,
                               replace_line) + "; " + retire_line + "; " + swap_line + "; " + errors)
    return 0


def check_documented(printed, marker):
    """docs/serve.md's block after the comment holding `marker` must be what the test printed."""
    doc = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "serve.md")).read()
    at = doc.find(marker)
    if at < 0:
        fail("docs/serve.md has no block marked %r" % marker)
    start = doc.index("```\n", at) + 4
    block = doc[start:doc.index("```", start)]
    if block != printed:
        fail("docs/serve.md's block (%s) is not what the test printed:\n--- docs\n%s--- printed\n%s" % (marker, block, printed))


def check_bad_plans(plan, plan2, scripted, calls, serve_tool, work):
    import shutil

    import compile_package as cp
    import export_from_observations as efo

    def refused(folder, pattern):
        out_dir = os.path.join(folder, "out")
        os.makedirs(out_dir, exist_ok=True)
        done = subprocess.run([serve_tool, folder, scripted, calls, out_dir], capture_output=True, text=True)
        lines = done.stderr.strip().splitlines()
        if done.returncode == 0 or len(lines) != 1 or not re.search(pattern, lines[0]) or "loaded" in done.stdout:
            fail("serve_set on %s: exit %d, %r does not match %r" % (folder, done.returncode, done.stderr, pattern))

    missing = os.path.join(work, "plan_missing")
    shutil.rmtree(missing, ignore_errors=True)
    shutil.copytree(plan, missing)
    os.remove(os.path.join(missing, "p1.pt2"))
    refused(missing, r"p1\.pt2: IoError: cannot open the package: No such file or directory$")

    # A package compiled for another plan (plan2's p0, the same arguments) in p0's place.
    foreign = os.path.join(work, "plan_foreign")
    shutil.rmtree(foreign, ignore_errors=True)
    shutil.copytree(plan, foreign)
    shutil.copy(os.path.join(plan2, "p0.pt2"), os.path.join(foreign, "p0.pt2"))
    refused(foreign, r"plan\.json: ArgumentError: p0 \(p0\.pt2\) was compiled for another plan than this one "
                     r"\([0-9a-f]{16}\): compile this plan's packages \(compile_plan\)$")

    # A package compiled again apart, for other ranges than plan.json records of it (drift and
    # verify PLAN would judge calls by the record).
    rerecorded = os.path.join(work, "plan_rerecorded")
    shutil.rmtree(rerecorded, ignore_errors=True)
    shutil.copytree(plan, rerecorded)
    doc = efo.read(os.path.join(rerecorded, "plan.json"))
    guard = json.loads(doc["packages"][0]["guard"])
    dim = next(d for i in guard["inputs"] if i["kind"] == "tensor" for d in i["sizes"] if isinstance(d, dict) and d.get("max"))
    dim["max"] += 1
    doc["packages"][0]["guard"] = json.dumps(guard, separators=(",", ":"))
    cp.write_json(os.path.join(rerecorded, "plan.json"), doc)
    refused(rerecorded, r"plan\.json: ArgumentError: p0 \(p0\.pt2\) takes other inputs than plan\.json records of it "
                        r"\(its 'guard' and 'in_spec'\): it was compiled again apart; compile this plan's packages \(compile_plan\)$")
    # ... or for another tree of arguments (the in_spec, compared as a tree: one positional argument more).
    doc = efo.read(os.path.join(plan, "plan.json"))
    protocol, root = json.loads(doc["packages"][0]["in_spec"])
    root["children_spec"][0]["children_spec"].append({"type": None, "context": None, "children_spec": []})
    doc["packages"][0]["in_spec"] = json.dumps([protocol, root])
    cp.write_json(os.path.join(rerecorded, "plan.json"), doc)
    refused(rerecorded, r"plan\.json: ArgumentError: p0 \(p0\.pt2\) takes other inputs than plan\.json records of it "
                        r"\(its 'guard' and 'in_spec'\): it was compiled again apart; compile this plan's packages \(compile_plan\)$")

    # A package of another model (one positional argument, compiled without optrace's metadata)
    # in p1's place.
    other = os.path.join(work, "plan_other")
    shutil.rmtree(other, ignore_errors=True)
    shutil.copytree(plan, other)

    class Double(torch.nn.Module):
        def forward(self, x):
            return x * 2

    program = torch.export.export(Double(), (torch.randn(2, 3),))
    os.remove(os.path.join(other, "p1.pt2"))
    torch._inductor.aoti_compile_and_package(program, package_path=os.path.join(other, "p1.pt2"))
    refused(other, r"plan\.json: ArgumentError: the packages disagree on the arguments: p1 \(p1\.pt2\) takes \(#0\), "
                   r"p0 \(p0\.pt2\) takes \(input_ids, attention_mask\)$")

    # A whole set of other arguments loads, but cannot replace the served one: the fallback and
    # the callers bind (input_ids, attention_mask).
    only_other = os.path.join(work, "plan_only_other")
    shutil.rmtree(only_other, ignore_errors=True)
    shutil.copytree(other, only_other)
    shutil.copy(os.path.join(other, "p1.pt2"), os.path.join(only_other, "p0.pt2"))
    doc = efo.read(os.path.join(only_other, "plan.json"))  # packages compiled apart: no record of them
    for p in doc["packages"]:
        p.pop("guard", None)
        p.pop("in_spec", None)
    cp.write_json(os.path.join(only_other, "plan.json"), doc)
    out_dir = os.path.join(only_other, "out")
    os.makedirs(out_dir, exist_ok=True)
    done = subprocess.run([serve_tool, plan, scripted, calls, out_dir, "--fallback", "--replace", only_other,
                           "--threads", "0"], capture_output=True, text=True)
    pattern = (r"^serve_set: optrace: ArgumentError: PackageSet::replace: the new set \(\S*plan_only_other/plan\.json\) "
               r"takes \(#0\); this set \(\S*plan\.json\) takes \(input_ids, attention_mask\): its fallback and its "
               r"callers bind these; serve the other as a set of its own\n$")
    if done.returncode != 1 or not re.search(pattern, done.stderr):
        fail("replace by a set of other arguments: exit %d, %r" % (done.returncode, done.stderr))
    return ("a missing package, one of another plan, one compiled apart and one of other arguments refused in one line, a set of other "
            "arguments refused by replace")


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
