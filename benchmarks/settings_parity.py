"""Do PyTorch's harness and ours time a case under the same settings? Compare the two snapshots.

    python -m benchmarks.settings_parity --case "SUITE MODEL BATCH PRECISION MODE TEST"
        [--case ...] [--cases FILE] [--device cuda|cpu] [--backend inductor]
        [--reference DIR] [--differences FILE] [--json OUT] [--keep DIR]

A case is a line of benchmarks/fidelity.sh's cases file (suite huggingface|timm, our model
name, batch size, precision fp32|fp16|bf16|amp, mode default|cudagraphs, test eval|train);
--cases reads every case of such a file. For each case both tools run it in a process of
their own, with the flags benchmarks/fidelity_cases.py maps the case to:

- the harness (DIR/huggingface.py or DIR/timm_models.py, unchanged) through
  benchmarks/harness_settings.py, which takes the snapshot at its first timed call (the eager
  run of its first repeat) and ends it there;
- our runner (experiment_runner.py, at its defaults but one timed run of one process), whose
  results line records the same snapshot as its first timed run starts
  (`environment.torch_settings`; child/settings.py is the one function both use).

Then every setting whose value differs is printed, as "setting: harness vs ours". A difference
listed in the file of explained differences (--differences, benchmarks/settings_differences.json:
each entry a setting's name or a prefix of it, optionally the devices it applies to, and its
reason) is printed as explained, with the reason; the exit status is 1 when a case has an
unexplained difference or a tool could not run it. Where the lines were run matters not
(`cpu_affinity` is left out). On the CPU it shows what the CPU can (the numerics switches,
autocast, grad mode, dynamo and inductor settings, threads); CUDA graphs and the CUDA-only
switches' effect need --device cuda. --backend eager (dynamo's) leaves inductor's compile out,
for a quick look on the CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[1]

from benchmarks.fidelity_cases import tool_flags
from benchmarks.workload_parity import DEFAULT_REFERENCE, listed_models
from api import setting_differences

DEFAULT_DIFFERENCES = ROOT / "benchmarks" / "settings_differences.json"
SCRIPTS = {"huggingface": "huggingface.py", "timm": "timm_models.py"}
#: Seconds each tool may take for one case (a compile on a slow CPU included).
TIMEOUT = 1800


@dataclass(frozen=True)
class Case:
    suite: str
    model: str
    batch: str
    precision: str
    mode: str
    test: str

    @classmethod
    def parse(cls, text: str) -> "Case":
        parts = text.split()
        if len(parts) == 5:
            parts.append("eval")
        if len(parts) != 6 or parts[0] not in SCRIPTS:
            raise ValueError(f"not a case: {text!r} (suite model batch precision mode [test], "
                             f"suite one of {', '.join(SCRIPTS)})")
        tool_flags("ours", *parts[3:5], parts[5], parts[2])  # raises on a bad field
        return cls(*parts)

    def __str__(self) -> str:
        return " ".join((self.suite, self.model, self.batch, self.precision, self.mode, self.test))


@dataclass
class Row:
    case: Case
    differences: list[str] = field(default_factory=list)
    explained: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        if self.errors:
            return "FAILED"
        return "DIFFERENT" if self.differences else "explained" if self.explained else "same"


def harness_name(reference: Path, case: Case) -> str:
    """The harness's name of the model (timm models may carry a pretrained tag there)."""
    for model in listed_models(reference):
        if model.suite == case.suite and case.model in (model.our_name, model.harness_name):
            return model.harness_name
    return case.model


def harness_settings(reference: Path, case: Case, device: str, backend: str, folder: Path
                     ) -> dict[str, Any]:
    """The harness's snapshot at its first timed call (benchmarks/harness_settings.py)."""
    out = folder / "harness-settings.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "harness_settings.py"), str(out),
               "--stop", str(reference / SCRIPTS[case.suite]), "--performance",
               *tool_flags("harness", case.precision, case.mode, case.test, case.batch),
               "--backend", backend, "--device", device, "--only", harness_name(reference, case),
               "--repeat", "1", "--output", str(folder / "harness.csv")]
    done = subprocess.run(command, cwd=reference, capture_output=True, text=True,
                          timeout=TIMEOUT, env=tool_environment())
    (folder / "harness.log").write_text(done.stdout + done.stderr)
    if not out.exists():
        raise RuntimeError(f"the harness stopped before its first timed call (exit "
                           f"{done.returncode}): {last_line(done.stdout + done.stderr)}")
    return json.loads(out.read_text())["settings"]


def our_settings(case: Case, device: str, backend: str, folder: Path) -> dict[str, Any]:
    """Our line's snapshot (`environment.torch_settings`), from one timed run."""
    out = folder / "ours"
    command = [sys.executable, str(ROOT / "experiment_runner.py"), f"--suite-name={case.suite}",
               "-k", f"^{case.model}$", f"--accelerator={device}", "--xla=None",
               f"--dynamo={backend}",
               *tool_flags("ours", case.precision, case.mode, case.test, case.batch),
               "--repeat=1", "--warmup=1", "--processes=1", "--no-progress",
               f"--output-dirname={out}"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT,
                          env=tool_environment())
    (folder / "ours.log").write_text(done.stdout + done.stderr)
    results = out / "results.jsonl"
    lines = [json.loads(text) for text in results.read_text().splitlines()] \
        if results.exists() else []
    timed = [line for line in lines if line.get("status") == "ok"]
    if not timed:
        reason = (lines[-1].get("error") or lines[-1].get("skip_reason")) if lines else None
        raise RuntimeError(f"our runner gave no timed line (exit {done.returncode}): "
                           f"{last_line(str(reason or done.stdout + done.stderr))}")
    return timed[-1]["environment"]["torch_settings"]


def tool_environment() -> dict[str, str]:
    """Both tools offline, with this process's other variables."""
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def load_explanations(path: Path) -> list[dict[str, Any]]:
    """Entries {setting, devices (optional), reason}."""
    if not path.exists():
        return []
    return json.loads(path.read_text())["differences"]


def explanation(entries: list[dict[str, Any]], setting: str, device: str) -> Optional[str]:
    """The reason an entry gives for this setting's difference on this device, if any."""
    for entry in entries:
        devices = entry.get("devices")
        if setting.startswith(entry["setting"]) and (not devices or device in devices):
            return entry["reason"]
    return None


def compare(theirs: dict[str, Any], ours: dict[str, Any], entries: list[dict[str, Any]],
            device: str, row: Row) -> None:
    """Fill `row` with each setting that differs, explained or not."""
    for setting, their_value, our_value in setting_differences(theirs, ours):
        text = f"{setting}: {json.dumps(their_value)} vs {json.dumps(our_value)}"
        reason = explanation(entries, setting, device)
        if reason is None:
            row.differences.append(text)
        else:
            row.explained.append(f"{text} ({reason})")


def parity_row(case: Case, reference: Path, device: str, backend: str,
               entries: list[dict[str, Any]], folder: Path) -> Row:
    row = Row(case)
    folder.mkdir(parents=True, exist_ok=True)
    found = {}
    for tool, take in (("harness", lambda: harness_settings(reference, case, device, backend,
                                                             folder)),
                       ("ours", lambda: our_settings(case, device, backend, folder))):
        try:
            found[tool] = take()
        except (RuntimeError, subprocess.TimeoutExpired, OSError) as error:
            row.errors.append(f"{tool}: {error}")
    if len(found) == 2:
        compare(found["harness"], found["ours"], entries, device, row)
    return row


def print_row(row: Row) -> None:
    print(f"{str(row.case):<64} {row.status}", flush=True)
    for text in row.errors:
        print(f"    could not run: {text}", flush=True)
    for text in row.differences:
        print(f"    differs: {text}", flush=True)
    for text in row.explained:
        print(f"    explained: {text}", flush=True)


def read_cases(options: argparse.Namespace) -> list[Case]:
    texts = list(options.case)
    if options.cases:
        texts += [line for line in options.cases.read_text().splitlines()
                  if line.strip() and not line.lstrip().startswith("#")]
    return [Case.parse(text) for text in texts]


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", action="append", default=[],
                        help='a case, "suite model batch precision mode test" (repeatable)')
    parser.add_argument("--cases", type=Path, help="a cases file of benchmarks/fidelity.sh")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--backend", default="inductor",
                        help="dynamo's backend in both tools (default %(default)s)")
    parser.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE,
                        help="the harness's folder (default: %(default)s)")
    parser.add_argument("--differences", type=Path, default=DEFAULT_DIFFERENCES,
                        help="the explained differences (default: %(default)s)")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    parser.add_argument("--keep", type=Path, help="keep each tool's logs and files here")
    options = parser.parse_args(argv)
    try:
        cases = read_cases(options)
    except (ValueError, OSError) as error:
        print(error, file=sys.stderr)
        return 2
    if not cases:
        print("no case given (--case or --cases)", file=sys.stderr)
        return 2
    reference = options.reference.resolve()
    if not (reference / "common.py").exists():
        print(f"--reference {options.reference}: no harness (common.py) there", file=sys.stderr)
        return 2
    entries = load_explanations(options.differences)
    rows = []
    with tempfile.TemporaryDirectory(prefix="settings-parity-") as scratch:
        base = options.keep or Path(scratch)
        for index, case in enumerate(cases):
            row = parity_row(case, reference, options.device, options.backend, entries,
                             base / f"case-{index}")
            print_row(row)
            rows.append(row)
    unexplained = sum(1 for row in rows if row.differences or row.errors)
    print(f"\n{len(rows)} cases on {options.device} ({options.backend}): "
          f"{sum(row.status == 'same' for row in rows)} same, "
          f"{sum(row.status == 'explained' for row in rows)} with explained differences only, "
          f"{unexplained} with unexplained differences or failures")
    if options.json:
        options.json.write_text(json.dumps([{
            "case": str(row.case), "status": row.status, "differences": row.differences,
            "explained": row.explained, "errors": row.errors} for row in rows], indent=1))
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
