"""Export a model with torch.export from an optrace observation file (torch >= 2.3).

    python3 export_from_observations.py observations.json

The file carries, per input, its shape, dtype and strides (torch.export TensorMeta) and torch's
DynamicShapesSpec. This rebuilds example arguments (no user data was ever stored) and hands both
to torch.export.export. Replace `Model` with your own module.
"""
import json
import sys

import torch

from load_observations import load


class Model(torch.nn.Module):
    """Stands in for the C++ demo's model: token ids and an optional attention mask."""

    def __init__(self, vocab=100, dim=32):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.head = torch.nn.Linear(dim, vocab)

    def forward(self, input_ids, attention_mask=None):
        x = self.embed(input_ids)
        if attention_mask is not None:
            x = x * attention_mask.unsqueeze(-1).to(x.dtype)
        return self.head(x)


def main(path):
    from torch._export.serde.dynamic_shapes import _load_dynamic_shapes

    doc, tensors = load(path)
    args = []
    for name in doc["arg_names"]:
        t, meta = tensors[name]
        # Token ids must be valid indices: fill integer inputs with small values.
        args.append(torch.randint(0, 2, t.shape, dtype=t.dtype) if not t.is_floating_point() else torch.randn(t.shape))
    dynamic_shapes = _load_dynamic_shapes(doc["dynamic_shapes"], from_dict=True)
    if doc["keyed"]:
        kwargs = dict(zip(doc["arg_names"], args))
        program = torch.export.export(Model(), (), kwargs=kwargs, dynamic_shapes=dynamic_shapes)
    else:
        program = torch.export.export(Model(), tuple(args), dynamic_shapes=tuple(dynamic_shapes))
    print(program)


if __name__ == "__main__":
    main(sys.argv[1])
