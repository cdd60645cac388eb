"""History across runs: the HUD's four metrics per run and configuration, and what changed.

Computed by the engine over every line of every run (a year of nightly runs is about a
million lines), per run x configuration x suite, so the dashboard can combine suites as it
filters:

- points: experiments counted, skipped, verified, accurate and failed (the pass rate:
  accurate over verified plus failed, where anything was verified), the sum of log speedups and their count (the geometric mean), the sum of compile
  times and their count (the mean), the sum of log compression ratios (device memory only);
- transitions: each experiment against its previous run (the latest line of each run; the
  compare rules): the sum of log(new / old median) over experiments passing in both (the
  1% overall rule), and per experiment the 7% threshold with the one-sided rank-sum test
  on the repeats (the engine counts the U statistic; `stats.rank_sum_p_from_u` turns it
  into the same p-value `compare` computes), newly failing and fixed experiments.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional, Sequence

from core.columns import config_columns
from core.schema import VERIFICATION_FAILED, VerificationCode
from reports.analyse.compare import DEFAULT_ALPHA, DEFAULT_THRESHOLD
from reports.read.columnar import Engine
from reports.read.load import RunInfo
from reports.read.record import VERDICT_CODES, ConfigKey
from reports.stats import rank_sum_p_from_u

def _config() -> str:
    """The configuration's columns of the lines (core.columns), in ConfigKey's order."""
    return ", ".join(column.name for column in config_columns())


def _codes(codes) -> str:
    return ", ".join("'" + c + "'" for c in sorted(codes))


@dataclass
class Point:
    """One run x configuration x suite."""

    run: int  # index into History.runs
    config: ConfigKey
    suite: str
    counted: int
    skipped: int
    verified: int
    accurate: int
    failed: int
    speedups: int
    log_speedup: float
    compiles: int
    compile_sum: float
    ratios: int
    log_ratio: float


@dataclass
class Transition:
    """One run x configuration x suite against each experiment's previous run."""

    run: int
    config: ConfigKey
    suite: str
    common: int
    log_change: float  # sum of log(new median / old median) over `common`
    regressed: int = 0
    improved: int = 0
    noise: int = 0
    newly_failing: int = 0
    fixed: int = 0


@dataclass
class History:
    runs: list[RunInfo]
    points: list[Point] = field(default_factory=list)
    transitions: list[Transition] = field(default_factory=list)
    threshold: float = DEFAULT_THRESHOLD
    alpha: float = DEFAULT_ALPHA
    #: (run, configuration) -> how many experiments of that configuration it shares with the
    #: configuration's previous run (runs where it has none are not there): a trend joins only
    #: runs that share experiments (a timm run and a Hugging Face run are not one series).
    shared: dict[tuple[int, ConfigKey], int] = field(default_factory=dict)

    def joins_previous(self, run: int, config: ConfigKey) -> bool:
        """Whether the configuration's figure of `run` continues its previous run's (they
        share experiments; True for its first run: nothing to break)."""
        return self.shared.get((run, config), 1) > 0

    def configs(self) -> list[ConfigKey]:
        return sorted({p.config for p in self.points})


def compute_history(
    engine: Engine,
    files: Sequence[int],
    runs: list[RunInfo],
    baseline: str,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
) -> History:
    """The metrics of every run in `files` (runs in the order of `runs`)."""
    history = History(runs=runs, threshold=threshold, alpha=alpha)
    if not runs:
        return history
    con = engine.con
    scope = f"fi IN ({', '.join(str(int(f)) for f in files)})"
    con.execute("CREATE OR REPLACE TEMP TABLE run_index(run VARCHAR, idx INTEGER)")
    con.executemany("INSERT INTO run_index VALUES (?, ?)", [(r.run_id, i) for i, r in enumerate(runs)])
    failed_codes = _codes(VERIFICATION_FAILED)
    verdict_codes = _codes(VERDICT_CODES)
    # Configurations x suites, models and the baseline's groups as small integers, so that
    # the tables over every line below carry no strings. `cid` is ordered as the strings,
    # which DuckDB and Python compare alike (by code point): as (ConfigKey, suite) sort.
    config = _config()
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE hist_dims AS
        SELECT *, dense_rank() OVER (ORDER BY {config}, suite) AS cid,
               dense_rank() OVER (ORDER BY {config}) AS gid,
               dense_rank() OVER (ORDER BY model) AS mid
        FROM (SELECT DISTINCT {config}, suite, model FROM lines WHERE {scope})
    """)
    configs = {cid: (ConfigKey(*values), suite) for cid, *values, suite in con.execute(
        f"SELECT DISTINCT cid, {config}, suite FROM hist_dims").fetchall()}
    # Each configuration's baseline group: its baseline's key (ConfigKey.baseline_key, as the
    # tables match a baseline) and suite; a baseline configuration is its own.
    groups: dict[tuple[ConfigKey, str], int] = {}
    con.execute("CREATE OR REPLACE TEMP TABLE hist_base(cid BIGINT, bgid INTEGER, "
                "baseline_stack BOOLEAN, is_base BOOLEAN)")
    con.executemany("INSERT INTO hist_base VALUES (?, ?, ?, ?)", [
        (cid, groups.setdefault((key.baseline_key(baseline), suite), len(groups)),
         key.stack == baseline, key.is_baseline(baseline))
        for cid, (key, suite) in configs.items()])
    # The latest line of each experiment in each run (a retry within a run wins); where no
    # experiment has two lines in a run (the usual case), that is every line.
    retried = con.execute(f"SELECT count(*) FROM (SELECT 1 FROM lines WHERE {scope} "
                          f"GROUP BY run, key HAVING count(*) > 1)").fetchone()[0]
    picked = (f"id IN (SELECT max_by(id, (ts, fin, fi, ord)) FROM lines WHERE {scope} "
              f"GROUP BY run, key)" if retried else scope)
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE hist AS
        SELECT id, idx, key, cid, gid, bgid, mid, baseline_stack, is_base, COALESCE(bs, -1) AS bsk,
               status = 'skipped' AS skipped, status = 'failed' AS failed,
               status = 'ok' AND code IN ({verdict_codes}) AS verified,
               status = 'ok' AND code = '{VerificationCode.PASS.value}' AS accurate,
               med, compile_time AS compile, ran, peak_dev, eager_peak_device_memory AS eager_peak_dev,
               paired_speedup AS paired,
               ran AND code NOT IN ({failed_codes}) AS passed
        FROM lines JOIN run_index USING (run) JOIN hist_dims USING ({config}, suite, model)
             JOIN hist_base USING (cid)
        WHERE {picked}
    """)
    for idx, cid, *figures in con.execute("""
        WITH base AS (
            SELECT idx, bgid, mid, bsk, max(med) FILTER (WHERE passed) AS bmed, max(peak_dev) AS bpeak
            FROM hist WHERE is_base GROUP BY ALL),
        scored AS (
            SELECT idx, cid, skipped, failed, verified, accurate, ran, compile,
                   CASE WHEN passed AND paired IS NOT NULL AND NOT baseline_stack THEN paired
                        WHEN passed AND base.bmed IS NOT NULL THEN base.bmed / med END AS speedup,
                   CASE WHEN NOT skipped AND peak_dev IS NOT NULL AND passed
                        THEN COALESCE(eager_peak_dev, base.bpeak) / peak_dev END AS ratio
            FROM hist LEFT JOIN base USING (idx, bgid, mid, bsk))
        SELECT idx, cid,
               count(*) FILTER (WHERE NOT skipped),
               count(*) FILTER (WHERE skipped),
               count(*) FILTER (WHERE verified),
               count(*) FILTER (WHERE accurate),
               count(*) FILTER (WHERE failed),
               count(*) FILTER (WHERE speedup > 0), COALESCE(sum(ln(speedup)) FILTER (WHERE speedup > 0), 0),
               count(*) FILTER (WHERE ran AND compile IS NOT NULL), COALESCE(sum(compile) FILTER (WHERE ran), 0),
               count(*) FILTER (WHERE ratio > 0), COALESCE(sum(ln(ratio)) FILTER (WHERE ratio > 0), 0)
        FROM scored GROUP BY idx, cid ORDER BY idx, cid
    """).fetchall():
        config, suite = configs[cid]
        history.points.append(Point(idx, config, suite, *figures))
    _transitions(engine, history, configs, threshold, alpha)
    _shared(engine, history, configs)
    return history


def _shared(engine: Engine, history: History, configs: dict[int, tuple[ConfigKey, str]]) -> None:
    """`History.shared`: per run and configuration (all suites), the experiments it shares
    with the configuration's previous run."""
    keys = {}
    for cid, (config, _) in configs.items():
        keys[cid] = config
    by_group = dict(engine.con.execute("SELECT DISTINCT gid, cid FROM hist_dims").fetchall())
    for idx, gid, shared in engine.con.execute("""
        WITH present AS (SELECT DISTINCT idx, gid, key FROM hist),
             ordered AS (SELECT idx, gid, lag(idx) OVER (PARTITION BY gid ORDER BY idx) AS prev
                         FROM (SELECT DISTINCT idx, gid FROM present))
        SELECT o.idx, o.gid, count(b.key)
        FROM ordered o JOIN present a ON a.idx = o.idx AND a.gid = o.gid
             LEFT JOIN present b ON b.idx = o.prev AND b.gid = o.gid AND b.key = a.key
        WHERE o.prev IS NOT NULL GROUP BY o.idx, o.gid
    """).fetchall():
        history.shared[(idx, keys[by_group[gid]])] = int(shared)


def _transitions(engine: Engine, history: History, configs: dict[int, tuple[ConfigKey, str]],
                 threshold: float, alpha: float) -> None:
    con = engine.con
    con.execute("""
        CREATE OR REPLACE TEMP TABLE steps AS
        SELECT id, idx, cid, passed, med,
               lag(passed) OVER w AS was_passed, lag(med) OVER w AS was_med, lag(id) OVER w AS was_id
        FROM hist WINDOW w AS (PARTITION BY key ORDER BY idx)
    """)
    found: dict[tuple[int, int], Transition] = {}
    for row in con.execute("""
        SELECT idx, cid,
               count(*) FILTER (WHERE passed AND was_passed),
               COALESCE(sum(ln(med / was_med)) FILTER (WHERE passed AND was_passed), 0),
               count(*) FILTER (WHERE was_passed AND NOT passed),
               count(*) FILTER (WHERE was_passed = false AND passed)
        FROM steps WHERE was_passed IS NOT NULL GROUP BY idx, cid ORDER BY idx, cid
    """).fetchall():
        idx, cid, common, log_change, failing, fixed = row
        config, suite = configs[cid]
        found[(idx, cid)] = Transition(idx, config, suite, common, log_change, newly_failing=failing, fixed=fixed)
    # Experiments beyond the threshold: the rank-sum statistic in the engine, its p here.
    # Their repeats are fetched in one pass over the lines (usually few experiments).
    con.execute("""
        CREATE OR REPLACE TEMP TABLE candidates AS
        SELECT id, was_id, idx, cid, med / was_med AS ratio
        FROM steps WHERE passed AND was_passed AND abs(med / was_med - 1) > ?
    """, [threshold])
    engine.ensure_details(i for pair in con.execute("SELECT id, was_id FROM candidates").fetchall() for i in pair)
    con.execute("""
        CREATE OR REPLACE TEMP TABLE candidate_times AS
        SELECT id, times FROM details
        WHERE id IN (SELECT id FROM candidates UNION ALL SELECT was_id FROM candidates)
    """)
    for row in con.execute("""
        SELECT c.idx, c.cid, c.ratio, len(old.times), len(new.times),
               list_sum(list_transform(new.times, lambda y: list_sum(list_transform(old.times,
                   lambda x: CASE WHEN y > x THEN 1.0 WHEN y = x THEN 0.5 ELSE 0.0 END::DOUBLE)))) AS u
        FROM candidates c JOIN candidate_times new ON new.id = c.id
                          JOIN candidate_times old ON old.id = c.was_id
    """).fetchall():
        idx, cid, ratio, n_base, n_new, u = row
        item = found.get((idx, cid))
        if item is None:
            continue
        p_value = rank_sum_p_from_u(u or 0.0, n_base or 0, n_new or 0)
        if p_value is not None and p_value > alpha:
            item.noise += 1
        elif ratio > 1.0:
            item.regressed += 1
        else:
            item.improved += 1
    history.transitions = list(found.values())  # by run, then configuration and suite (cid's order)


def geomean_change(transitions: Sequence[Transition]) -> Optional[float]:
    """new/old geometric mean of median times over the given transitions' experiments."""
    common = sum(t.common for t in transitions)
    if not common:
        return None
    return math.exp(sum(t.log_change for t in transitions) / common)
