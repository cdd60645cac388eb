"""The torchbench suite: an adapter for an installed TorchBench checkout (pytorch/benchmark).

TorchBench is not on PyPI. Where it is found, in order: the `torchbench_dir` argument (the
CLI's --torchbench-dir), then an importable `torchbenchmark` package. The directory may be
the checkout (holding torchbenchmark/) or the torchbenchmark package itself.
Model names come from scanning torchbenchmark/models/ (no torch import); each model is built
through TorchBench's API, `Model(test=..., device="cpu", batch_size=...)`, then
`get_module()` gives the module and its example inputs.
"""

from __future__ import annotations

import ast
import importlib.util
import logging
import os
from pathlib import Path
from typing import Optional

from core.fields import DEFAULT_SEED
from models.base import BenchmarkModel, Suite, SuiteUnavailableError

log = logging.getLogger(__name__)

PACKAGE = "torchbenchmark"
_BATCH_SIZE_NAMES = ("DEFAULT_EVAL_BSIZE", "DEFAULT_TRAIN_BSIZE")
FALLBACK_BATCH_SIZE = 1

#: TorchBench tiers as PyTorch/XLA's runner names them (--filter-by-tier, --exclude-by-tier),
#: so that its CI scripts select the same models here: 1 holds the large generative and
#: recommendation models its dashboards track first, 2 the next group of common models
#: (vision, NLP, graph), 3 a few more. Names match whole model names, ignoring case.
TIERS: dict[int, tuple[str, ...]] = {
    1: ("BERT_pytorch", "cm3leon_generate", "DALLE2_pytorch", "dlrm", "hf_GPT2",
        "hf_GPT2_large", "GPT_3", "hf_T5", "hf_T5_base", "hf_T5_generate", "hf_T5_large",
        "llama_v2_7b_16h", "stable_diffusion_xl"),
    2: ("alexnet", "attention_is_all_you_need_pytorch", "Background_Matting", "basic_gnn_gcn",
        "basic_gnn_gin", "basic_gnn_sage", "dcgan", "densenet121",
        "detectron2_fasterrcnn_r_101_c4", "detectron2_fasterrcnn_r_101_dc5",
        "detectron2_fasterrcnn_r_101_fpn", "detectron2_fasterrcnn_r_50_c4",
        "detectron2_fasterrcnn_r_50_dc5", "detectron2_fasterrcnn_r_50_fpn",
        "detectron2_fcos_r_50_fpn", "detectron2_maskrcnn", "detectron2_maskrcnn_r_101_c4",
        "detectron2_maskrcnn_r_101_fpn", "detectron2_maskrcnn_r_50_c4",
        "detectron2_maskrcnn_r_50_fpn", "fastNLP_Bert", "functorch_dp_cifar10", "hf_Albert",
        "hf_Bart", "hf_Bert", "hf_Bert_large", "llama"),
    3: ("doctr_det_predictor", "doctr_reco_predictor", "drq", "functorch_maml_omniglot"),
}

HOW_TO_GET = (
    "TorchBench is not on PyPI: git clone https://github.com/pytorch/benchmark, run "
    "`python install.py` in it (add model names to install only some), then pass its "
    "directory with --torchbench-dir"
)


def find_checkout(torchbench_dir: Optional[str] = None) -> Path:
    """The directory that holds the torchbenchmark package, or SuiteUnavailableError."""
    given = torchbench_dir or None
    if given:
        path = Path(os.path.expanduser(given)).resolve()
        if (path / PACKAGE / "models").is_dir():
            return path
        if path.name == PACKAGE and (path / "models").is_dir():
            return path.parent
        raise SuiteUnavailableError(
            f"torchbench directory {given!r} (resolved to {str(path)!r}) holds no "
            f"{PACKAGE}/models folder. {HOW_TO_GET}"
        )
    spec = importlib.util.find_spec(PACKAGE)
    if spec is not None and spec.submodule_search_locations:
        package = Path(next(iter(spec.submodule_search_locations)))
        if (package / "models").is_dir():
            return package.parent
    raise SuiteUnavailableError(f"TorchBench was not found. {HOW_TO_GET}")


def _batch_size_in_source(init_file: Path) -> Optional[int]:
    """DEFAULT_EVAL_BSIZE (else DEFAULT_TRAIN_BSIZE) of the model class, read without importing."""
    try:
        tree = ast.parse(init_file.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    found: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                if isinstance(target, ast.Name) and isinstance(node.value.value, int):
                    found.setdefault(target.id, node.value.value)
    for name in _BATCH_SIZE_NAMES:
        if isinstance(found.get(name), int) and not isinstance(found[name], bool):
            return found[name]
    return None


class TorchBenchSuite(Suite):
    """TorchBench models through their own API. Needs a checkout (see HOW_TO_GET)."""

    name = "torchbench"
    order = 50

    def checkout(self) -> Path:
        return find_checkout(self.torchbench_dir)

    def models_dir(self) -> Path:
        return self.checkout() / PACKAGE / "models"

    def model_names(self) -> list[str]:
        models_dir = self.models_dir()
        return sorted(
            entry.name
            for entry in models_dir.iterdir()
            if entry.is_dir()
            and not entry.name.startswith(("_", "."))
            and (entry / "__init__.py").is_file()
        )

    def default_batch_size(self, model_name: str) -> int:
        self.check_model(model_name)
        size = _batch_size_in_source(self.models_dir() / model_name / "__init__.py")
        return size if size is not None else FALLBACK_BATCH_SIZE

    def tiers(self) -> dict[int, tuple[str, ...]]:
        return TIERS

    def skip_reason(self, model_name: str, test: str,
                    precision: Optional[str] = None) -> Optional[str]:
        """From the model's metadata.yaml: a not_implemented entry naming only this test."""
        self.check_model(model_name)
        metadata = self.models_dir() / model_name / "metadata.yaml"
        if not metadata.is_file():
            return None
        try:
            import yaml
        except ImportError:
            log.warning("PyYAML is missing; %s is read without its skip settings", metadata)
            return None
        try:
            data = yaml.safe_load(metadata.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as error:
            log.warning("cannot read %s: %s", metadata, error)
            return None
        entries = data.get("not_implemented") if isinstance(data, dict) else None
        for entry in entries or []:
            if isinstance(entry, dict) and set(entry) == {"test"} and entry["test"] == test:
                return f"TorchBench marks {model_name} as not implemented for test={test}"
        return None

    def load(self, model_name: str, test: str, batch_size: Optional[int],
             seed: int = DEFAULT_SEED) -> BenchmarkModel:
        self.check_model(model_name)
        from models.builders import torchbench as builder

        return builder.build(self.checkout(), model_name, test, batch_size, seed=seed)


SUITE = TorchBenchSuite
