"""PyTorch's own operator-inputs logger and loader (tests/python/pytorch/operator_inp_utils.py), importable here.

That file is PyTorch v2.6.0's benchmarks/dynamo/microbenchmarks/operator_inp_utils.py, verbatim:
OperatorInputsMode wrote the logs under PyTorch's operator_inp_logs/, OperatorInputsLoader and
deserialize_args read them. The torch package does not install benchmarks/, hence the copy.
On torch 1.13 the module needs one shim: torch.utils._pytree.tree_leaves (used by the logger's
contains_tensor and skip_args) came later; tree_flatten(x)[0] is the same.
"""
import importlib.util
import os

import torch.utils._pytree as pytree

if not hasattr(pytree, "tree_leaves"):
    pytree.tree_leaves = lambda tree: pytree.tree_flatten(tree)[0]

_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pytorch", "operator_inp_utils.py")
_spec = importlib.util.spec_from_file_location("operator_inp_utils", _path)
operator_inp_utils = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(operator_inp_utils)

OperatorInputsMode = operator_inp_utils.OperatorInputsMode
OperatorInputsLoader = operator_inp_utils.OperatorInputsLoader
deserialize_args = operator_inp_utils.deserialize_args
