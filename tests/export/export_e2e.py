"""Observe in C++, export in Python: the end-to-end test of InputObserver's reason to exist.

    python3 export_e2e.py SCENARIO OBSERVE_SCRIPTED WORK_DIR

For one scenario: script the eager model (torch.jit.script) and save the calls' inputs; the C++
program observe_scripted observes the TorchScript module on them and writes observations.json
and dynamic_shapes.json as an application would; then, with the real torch (2.6 in CI's trixie
stage): both specs load with torch's own _load_dynamic_shapes and agree; torch.export.export on
the eager model with the file's example arguments succeeds; the exported program's range
constraints equal the file's; the program runs every observed call signature (those it can
take: a signature where value_if_missing stood in for an argument cannot be given to a program
exported with that argument) and matches the eager model; and a spec torch must reject is
rejected (the loader check is live). Prints one summary line. Exit 77 (skipped) where this
torch has no torch.export or no _load_dynamic_shapes (torch < 2.6), or lacks torchvision for
the scenario that needs it.
"""
import faulthandler
import json
import os
import subprocess
import sys
import time
from typing import Optional

# A hang prints every thread's Python stack and ends the test before ctest's --timeout does.
faulthandler.dump_traceback_later(600, exit=True)

try:
    import torch
except ImportError:  # no python3-torch: nothing to check against
    print("SKIPPED: python3-torch is not installed")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "python"))

SKIP = 77
UNBOUNDED = 2**63 - 2  # optrace's kUnboundedDim


# ---- the scenarios: the Python InputObserver gallery's three, token ids, resnet18 -------------

class AddModel(torch.nn.Module):
    def forward(self, x, y):
        return x + y


class LinearModel(torch.nn.Module):
    def __init__(self, in_features: int = 8, out_features: int = 4):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(out_features, in_features))
        self.bias = torch.nn.Parameter(torch.zeros(out_features))

    def forward(self, x, labels: Optional[torch.Tensor] = None):
        logits = x @ self.weight.T + self.bias
        if labels is not None:
            return logits, torch.nn.functional.cross_entropy(logits, labels)
        return logits, torch.zeros(())


class MaskedModel(torch.nn.Module):
    def forward(self, x, mask: Optional[torch.Tensor] = None):
        if mask is not None:
            return x * mask
        return x


class TokenModel(torch.nn.Module):
    """Token ids and an attention mask, varying in batch and sequence: embedding, masked mean, head."""

    def __init__(self, vocab: int = 100, dim: int = 16):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.head = torch.nn.Linear(dim, 3)

    def forward(self, input_ids, attention_mask):
        h = torch.relu(self.proj(self.embed(input_ids)))
        m = attention_mask.unsqueeze(-1).to(h.dtype)
        pooled = (h * m).sum(1) / m.sum(1).clamp(min=1.0)
        return self.head(pooled)


def ids(b, s):
    return torch.randint(0, 100, (b, s))


def scenarios():
    """name -> (model factory, [(args, kwargs)], value_if_missing)"""
    r = torch.randn
    return {
        "positional": (AddModel, [((r(2, 6), r(2, 6)), {}), ((r(3, 7), r(3, 7)), {}), ((r(4, 8), r(4, 8)), {})], {}),
        "keyword": (LinearModel, [((), dict(x=r(n, 8), labels=torch.randint(0, 4, (n,)))) for n in (2, 5, 7)], {}),
        "optional_mask": (MaskedModel, [((), dict(x=r(2, 10))),
                                        ((), dict(x=r(3, 10), mask=torch.ones(3, 10))),
                                        ((), dict(x=r(4, 10), mask=torch.ones(4, 10)))],
                          {"mask": torch.ones(0, 10)}),
        "tokens": (TokenModel, [((), dict(input_ids=ids(b, s), attention_mask=torch.ones(b, s, dtype=torch.int64)))
                                for b, s in ((1, 7), (2, 5), (3, 9), (4, 5), (1, 12))], {}),
        "resnet18": (resnet18, images(), {}),
    }


def torchvision_model(name):
    def make():
        import torchvision

        return getattr(torchvision.models, name)(weights=None)
    return make


resnet18 = torchvision_model("resnet18")


def images():
    return [((torch.randn(b, 3, hw, hw),), {}) for b, hw in ((1, 224), (2, 224), (4, 224), (2, 160), (4, 160))]


def scenario(name):
    """A named scenario, or `torchvision:NAME`: any torchvision classifier on resnet18's calls
    (for checks beyond the tests; the named style's outcome is then reported, not asserted)."""
    if name.startswith("torchvision:"):
        return torchvision_model(name.split(":", 1)[1]), images(), {}
    return scenarios()[name]


# ---- checks ----------------------------------------------------------------------------------

def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def same(a, b):
    if isinstance(a, torch.Tensor):
        return torch.allclose(a, b, rtol=1e-4, atol=1e-5)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def spec_tensors(node, out):
    """The per-dim leaves of each tensor in a DynamicShapesSpec's dynamic_shapes, in order."""
    if isinstance(node, dict):
        for v in node.values():
            spec_tensors(v, out)
    elif isinstance(node, list) and all(isinstance(x, (int, str)) for x in node):
        out.append(node)
    elif isinstance(node, list):
        for v in node:
            spec_tensors(v, out)
    return out


def torch_ranges(program, names):
    """{our symbol: (lower, upper)} from the exported program: for each tensor input (in order)
    and dim whose name in `names` (one list per tensor) is a bare symbol, torch's range of its
    symbol on the same placeholder dim. Fails if torch specialized a dim we call dynamic."""
    placeholders = [n for n in program.graph.nodes if n.op == "placeholder"
                    and n.name in program.graph_signature.user_inputs
                    and isinstance(n.meta.get("val"), torch.Tensor)]
    if len(placeholders) != len(names):
        fail("the program has %d tensor inputs, the file %d" % (len(placeholders), len(names)))
    out = {}
    for node, dims in zip(placeholders, names):
        for d, ours in enumerate(dims):
            if not isinstance(ours, str):
                continue
            theirs = node.meta["val"].shape[d]
            if not isinstance(theirs, torch.SymInt):
                fail("torch specialized %s dim %d (%s) to %s" % (node.name, d, ours, theirs))
            expr = theirs.node.expr
            if ours.isidentifier() and expr.is_Symbol:
                vr = program.range_constraints[expr]
                upper = UNBOUNDED if str(vr.upper) in ("int_oo", "oo") else int(vr.upper)
                out.setdefault(ours, (int(vr.lower), upper))
    return out


def check_tensor_metas(doc):
    """Every input's meta is a torch.export schema.TensorMeta that torch's own deserializer turns
    into a FakeTensor under the file's range constraints (as GraphModuleDeserializer.deserialize
    sets them up: lower bounds raised to 2, its 0/1 convention); the hints must lie inside."""
    from torch._export.serde import schema
    from torch._export.serde.serialize import GraphModuleDeserializer, _dict_to_dataclass
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental import symbolic_shapes

    d = GraphModuleDeserializer()
    d.shape_env = symbolic_shapes.ShapeEnv(assume_static_by_default=True)
    d.fake_tensor_mode = FakeTensorMode(allow_fallback_kernels=False, allow_non_fake_inputs=True, shape_env=d.shape_env)
    d.sympy_functions = {}
    d.symbol_name_to_symbol = {}
    d.symbol_name_to_range = {k: symbolic_shapes.ValueRanges(max(2, v["min_val"]) if v["max_val"] >= 2 else v["min_val"],
                                                             v["max_val"])
                              for k, v in doc["range_constraints"].items()}
    n = 0
    for entry in doc["inputs"]:
        if entry["meta"] is None:
            continue
        meta = _dict_to_dataclass(schema.TensorMeta, entry["meta"])
        try:
            fake = d.deserialize_tensor_meta(meta)
        except Exception as e:
            fail("deserialize_tensor_meta(%s): %s: %s" % (entry["name"], type(e).__name__, e))
        hints = [s["as_int"] if "as_int" in s else s["as_expr"]["hint"]["as_int"] for s in entry["meta"]["sizes"]]
        if [int(x) for x in fake.shape] != hints:
            fail("deserialize_tensor_meta(%s) gave shape %s, the file %s" % (entry["name"], tuple(fake.shape), hints))
        n += 1
    return n


def main(name, tool, work):
    if not hasattr(torch, "export"):
        print("SKIPPED: torch %s has no torch.export" % torch.__version__)
        return SKIP
    try:
        from torch._export.serde.dynamic_shapes import _load_dynamic_shapes
    except ImportError:
        print("SKIPPED: torch %s has no _load_dynamic_shapes" % torch.__version__)
        return SKIP
    import export_from_observations as efo

    torch.manual_seed(0)
    factory, calls, missing = scenario(name)
    try:
        model = factory().eval()
    except ImportError as e:
        print("SKIPPED: %s" % e)
        return SKIP
    os.makedirs(work, exist_ok=True)  # (a scenario name may hold ':'; the folder is the caller's)
    scripted = os.path.join(work, "model.pt")
    torch.jit.script(model).save(scripted)
    saved = os.path.join(work, "calls.pt")
    torch.save(([(list(a), k) for a, k in calls], missing), saved)

    started = time.time()
    run = subprocess.run([tool, scripted, saved, work], capture_output=True, text=True)
    sys.stdout.write(run.stdout)
    if run.returncode != 0:
        fail("observe_scripted: " + run.stderr.strip())
    observe_s = time.time() - started
    doc = efo.read(os.path.join(work, "observations.json"))
    spec = efo.read(os.path.join(work, "dynamic_shapes.json"))

    # torch's own loader reads the file's spec and DynamicShapes::save's (default style), the same.
    if repr(efo.dynamic_shapes(doc)) != repr(efo.dynamic_shapes(efo.read(os.path.join(work, "dynamic_shapes.json")))):
        fail("observations.json and dynamic_shapes.json give different dynamic shapes")
    metas = check_tensor_metas(doc)
    args, kwargs = efo.example_inputs(doc)
    ours = {k: (v["min_val"], v["max_val"]) for k, v in doc["range_constraints"].items()}
    results = []
    for style in ("auto", "named"):
        spec = efo.read(os.path.join(work, "dynamic_shapes.json" if style == "auto" else "dynamic_shapes.named.json"))
        results.append(check_style(name, style, model, doc, spec, args, kwargs, ours))
    print("PASS %s: torch %s, %d calls observed (%d signatures), %d TensorMetas deserialized; %s; observe %.1f s"
          % (name, torch.__version__, doc["calls"]["total"], len(doc["history"]), metas, "; ".join(results), observe_s))
    return 0


# Where the named style must fail, and how (DimStyle::named's documented behaviour): resnet18's
# pooling and strided convolutions guard on the parity of height and width.
NAMED_FAILS = {"resnet18": "Constraints violated"}


def check_style(name, style, model, doc, spec, args, kwargs, ours):
    from torch._export.serde.dynamic_shapes import _load_dynamic_shapes
    import export_from_observations as efo

    shapes = efo.dynamic_shapes(spec)
    # The loader check is live: the same spec without its symbols' definitions is refused.
    if spec["dims"]:
        try:
            _load_dynamic_shapes(dict(spec, dims={}), from_dict=True)
        except Exception:
            pass
        else:
            fail("torch's loader accepted a spec whose symbols are not in dims")

    started = time.time()
    try:
        program = torch.export.export(model, args, kwargs=kwargs, dynamic_shapes=shapes)
    except Exception as e:
        message = "%s: %s" % (type(e).__name__, str(e).splitlines()[0])
        if style == "named" and (NAMED_FAILS.get(name, "\0") in message or name.startswith("torchvision:")):
            return "named: torch.export refuses (%s)" % message
        fail("torch.export.export (%s style): %s" % (style, message))
    export_s = time.time() - started
    if style == "named" and name in NAMED_FAILS:
        fail("the named style exported %s: update NAMED_FAILS and docs/observer.md" % name)

    # Ranges. The named style: torch's are the spec's, exactly. The default style: the file's
    # symbols (its inputs' SymInt expressions) get torch's own ranges, which hold the observed
    # ones within torch's 0/1 convention (dynamic dims start at 2; sizes 0 and 1 still run).
    if style == "named":
        names = spec_tensors(spec["dynamic_shapes"], [])
        ours = {k: (v["min"], v["max"]) for k, v in spec["dims"].items()}
    else:
        names = [[s["as_expr"]["expr_str"] if "as_expr" in s else s["as_int"] for s in e["meta"]["sizes"]]
                 for e in doc["inputs"] if e["meta"] is not None]
    theirs = torch_ranges(program, names)
    if set(theirs) != set(ours):
        fail("%s style: symbols: torch %s, ours %s" % (style, sorted(theirs), sorted(ours)))
    for symbol, (lo, hi) in theirs.items():
        olo, ohi = ours[symbol]
        ok = (lo, hi) == (olo, ohi) if style == "named" else lo <= max(olo, 2) and hi >= ohi
        if not ok:
            fail("%s style: range of %s: torch %s, ours %s" % (style, symbol, (lo, hi), (olo, ohi)))

    # Every observed signature it can take runs, and agrees with the eager model.
    ran = skipped = 0
    module = program.module()
    with torch.no_grad():
        for a, k, count, reason in efo.observed_inputs(doc):
            if reason:
                skipped += 1
                continue
            if not same(module(*a, **k), model(*a, **k)):
                fail("%s style: the exported program and the eager model differ on %s"
                     % (style, [tuple(t.shape) for t in a] or {n: tuple(t.shape) for n, t in k.items()}))
            ran += 1
    if ran == 0:
        fail("no signature could be run")
    shown = ", ".join("%s=[%d, %s]" % (s, lo, "inf" if hi == UNBOUNDED else hi) for s, (lo, hi) in sorted(theirs.items()))
    return "%s: exported in %.1f s, ran %d signatures%s, torch ranges %s" % (
        style, export_s, ran, " (%d skipped: value_if_missing)" % skipped if skipped else "", shown)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
