"""Δ0 chosen privately (``auto``) against the best fixed Δ0 of a grid: items released.

    nice -n 10 python -m pipelines.evaluation.max_items --output /tmp/delta0_bench \\
        --data-dir data --rho 0.1 --delta 1e-5

The selections run in memory on numpy arrays with the library's own
calibration, release step and per-user rules: the same distribution of released
sets as ``SelectItems`` (docs/explanation/reading.md#the-0-benchmark). Every
figure is a raw statistic of the data, for evaluation only (not private).
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import itertools
import os
import random
import time
from collections import defaultdict
from types import SimpleNamespace
from typing import Callable, Hashable, Iterable, Sequence

from pipelines.flags import flags, JobArgumentParser, parse_job_args
from pipelines.flag_groups import add_overwrite_argument
from pipelines.evaluation.lists import comma_list
from pipelines.errors import flag_errors, UsageError
from pipelines.output_folder import staging_of
from pipelines.progress import progress
from pipelines.job_runner import run_job
from pipelines.interrupts import end_program

import numpy as np  # noqa: E402

from beam_dpsu.core import max_items_choice, policies  # noqa: E402
from beam_dpsu.core.budgets import ZCDPBudget  # noqa: E402
from beam_dpsu.core.checks import canonical_name  # noqa: E402
from beam_dpsu.core.calibration import release_mask  # noqa: E402
from beam_dpsu.core.mechanisms import SIPS, PolicyGaussian, WeightedGaussian  # noqa: E402
from beam_dpsu.core.tokenizer import Tokenizer  # noqa: E402
from pipelines.io.decompression import corruption_checked, open_input  # noqa: E402
from pipelines.io.parsers import parse_csv  # noqa: E402

PROG = "python -m pipelines.evaluation.max_items"
_MECHANISMS = {"weighted-gaussian": WeightedGaussian, "policy-gaussian": PolicyGaussian,
               "sips": SIPS}


@dataclasses.dataclass(frozen=True)
class UserItemArrays:
    """Users' distinct items as item ids, in one flat array (CSR layout).

    Attributes:
      offsets: user u holds ``items[offsets[u]:offsets[u + 1]]``; len = users + 1.
      items: the item ids (0 … num_items − 1), distinct within each user.
      num_items: the number of distinct items over all users.
    """

    offsets: np.ndarray
    items: np.ndarray
    num_items: int

    @property
    def sizes(self) -> np.ndarray:
        """Each user's number of distinct items."""
        return np.diff(self.offsets)

    @property
    def num_users(self) -> int:
        return len(self.offsets) - 1

    def users_of_entries(self) -> np.ndarray:
        """The user index of each entry of ``items``."""
        return np.repeat(np.arange(self.num_users), self.sizes)

    def user_arrays(self) -> list:
        """One array of item ids per user."""
        return np.split(self.items, self.offsets[1:-1])

    @classmethod
    def from_sizes(cls, sizes: np.ndarray, items: np.ndarray, num_items: int):
        return cls(np.concatenate(([0], np.cumsum(sizes, dtype=np.int64))), items, num_items)

    @classmethod
    def from_item_lists(cls, users_items: Iterable[Iterable[Hashable]]):
        """From each user's items (repeats allowed; users with none are left out)."""
        ids = policies.ItemIds()
        chunks = [c for c in (ids.ids(dict.fromkeys(items)) for items in users_items) if c]
        sizes = np.array([len(c) for c in chunks], dtype=np.int64)
        flat = np.fromiter(itertools.chain.from_iterable(chunks), np.int64, int(sizes.sum()))
        return cls.from_sizes(sizes, flat, len(ids))


def read_user_items(path: str, user_field: str, text_field: str,
                    tokenizer: Callable | None) -> dict:
    """A headed CSV file as {user: [items]}: the text tokenised (no ``tokenizer``: one
    item), a user's rows merged (as ``SelectItems`` does)."""
    users: defaultdict = defaultdict(list)
    with open_input(path) as stream:
        records = parse_csv(path, stream, user_field, text_field)
        for user, text in corruption_checked(stream, records):
            users[user].extend(tokenizer(text) if tokenizer is not None else (text,))
    return users


def synthetic(num_users: int, size_shape: float, item_exponent: float, seed: int,
              size_scale: float = 10.0, max_size: int = 10_000) -> UserItemArrays:
    """Users whose set sizes follow a Pareto law and whose items a zeta law (dp-sips §5.1):
    docs/explanation/reading.md#the-0-benchmark. Seeded."""
    rng = np.random.default_rng(seed)
    sizes = np.minimum(np.ceil(size_scale * (1.0 + rng.pareto(size_shape, num_users))),
                       max_size).astype(np.int64)
    values, items = np.unique(rng.zipf(item_exponent, int(sizes.sum())), return_inverse=True)
    users = np.repeat(np.arange(num_users, dtype=np.int64), sizes)
    pairs = np.unique(users * len(values) + items.ravel())  # distinct (user, item), sorted
    distinct_sizes = np.bincount(pairs // len(values), minlength=num_users)
    return UserItemArrays.from_sizes(distinct_sizes, pairs % len(values), len(values))


def _data_sets(args) -> dict:
    """The benchmark's data sets: name → loader."""
    imdb = args.imdb or os.path.join(args.data_dir, "imdb_50k_reviews.csv.gz")
    askreddit = args.askreddit or os.path.join(args.data_dir, "askreddit_bigrams_1pct.csv.gz")
    tokenizer = Tokenizer()  # the jobs' default tokenizer
    sets = {"imdb": lambda: UserItemArrays.from_item_lists(
                read_user_items(imdb, "@row", "review", tokenizer).values()),
            "askreddit": lambda: UserItemArrays.from_item_lists(
                read_user_items(askreddit, "author", "ngram", None).values())}
    for i, (name, shape, exponent) in enumerate((("zipf-a", 1.16, 1.1), ("zipf-b", 2.0, 1.5))):
        sets[name] = functools.partial(synthetic, args.synthetic_users, shape, exponent,
                                       args.seed + i)
    return sets


def sample(data: UserItemArrays, max_items: int, rng: np.random.Generator) -> UserItemArrays:
    """A uniform sample of ≤ ``max_items`` distinct items per user, without replacement,
    as ``bounding.sample_items`` (docs/explanation/reading.md#the-0-benchmark)."""
    sizes = data.sizes
    over = sizes > max_items
    if not over.any():
        return data
    users = data.users_of_entries()
    entries = np.flatnonzero(over[users])
    ranked = entries[np.argsort(users[entries] + rng.random(len(entries)), kind="stable")]
    # Rank within the user: position minus the user's first position among `ranked`.
    starts = np.zeros(data.num_users, dtype=np.int64)
    starts[over] = np.cumsum(np.concatenate(([0], sizes[over][:-1])))
    rank = np.arange(len(ranked)) - starts[users[ranked]]
    keep = np.ones(len(data.items), dtype=bool)
    keep[ranked[rank >= max_items]] = False
    return UserItemArrays.from_sizes(np.minimum(sizes, max_items), data.items[keep], data.num_items)


def _released(histogram: np.ndarray, sampled: UserItemArrays, calibration, rng) -> np.ndarray:
    """Ids of the held items (the histogram's keys) that weight + noise puts above ρ."""
    keys = np.flatnonzero(np.bincount(sampled.items, minlength=sampled.num_items))
    return keys[release_mask(histogram[keys], calibration, rng)]


def _weighted_gaussian(data: UserItemArrays, max_items: int, calibration, rng) -> np.ndarray:
    """Each user adds 1/√|W| to its ≤ Δ0 sampled items."""
    sampled = sample(data, max_items, rng)
    sizes = sampled.sizes
    weight = np.array([policies.weighted_gaussian_weight(int(n)) if n else 0.0
                       for n in range(int(sizes.max(initial=0)) + 1)])
    histogram = np.bincount(sampled.items, weights=np.repeat(weight[sizes], sizes),
                            minlength=data.num_items)
    return _released(histogram, sampled, calibration, rng)


def _policy_gaussian(data: UserItemArrays, max_items: int, calibration, rng) -> np.ndarray:
    """ℓ2-descent toward the cutoff Γ, users in a uniformly random order (as in ``SelectItems``)."""
    sampled = sample(data, max_items, rng)
    users = sampled.user_arrays()
    histogram = policies.policy_weights((users[u] for u in rng.permutation(len(users))),
                                        data.num_items, policies.l2_descent, calibration.cutoff)
    return _released(histogram, sampled, calibration, rng)


def _sips(data: UserItemArrays, max_items: int, calibration, rng) -> np.ndarray:
    """A Weighted Gaussian per round over the items not yet released (``beam_dpsu.beam.sips``)."""
    released = np.zeros(data.num_items, dtype=bool)
    remaining = data
    for round_calibration in calibration.rounds:
        keep = ~released[remaining.items]
        kept_sizes = np.bincount(remaining.users_of_entries(), weights=keep,
                                 minlength=remaining.num_users).astype(np.int64)
        remaining = UserItemArrays.from_sizes(kept_sizes[kept_sizes > 0],
                                              remaining.items[keep], data.num_items)
        released[_weighted_gaussian(remaining, max_items, round_calibration, rng)] = True
    return np.flatnonzero(released)


def released_count(data: UserItemArrays, mechanism, budget, rng: np.random.Generator) -> int:
    """Items a selection with ``mechanism`` (its Δ0) releases at ``budget``, in memory."""
    release = {WeightedGaussian: _weighted_gaussian, PolicyGaussian: _policy_gaussian,
               SIPS: _sips}[type(mechanism)]
    return len(release(data, mechanism.max_items_per_user, mechanism.calibrate(budget), rng))


def _auto_released_count(data: UserItemArrays, mechanism, budget, share: float | None,
                         rng: np.random.Generator) -> tuple[int, int]:
    """(Δ0 chosen, items released) with ``max_items_per_user="auto"``, as in ``SelectItems``."""
    auto = max_items_choice.AutoMaxItems(share=share)
    plan = max_items_choice.plan_auto(max_items_choice.with_max_items(mechanism, auto), budget)
    counts = max_items_choice.size_counts(data.sizes.tolist(), np.asarray(plan.edges))
    chosen = plan.choose(max_items_choice.noisy_size_histogram(
        counts, plan.size_budget, random.Random(int(rng.integers(2 ** 63)))))
    return chosen, released_count(data, max_items_choice.with_max_items(mechanism, chosen),
                                  plan.selection_budget, rng)


def build_parser() -> JobArgumentParser:
    parser = JobArgumentParser(
        prog=PROG,
        description="Items released with max_items_per_user='auto' against each fixed Δ0 of "
                    "a grid, at the same budget, for Weighted Gaussian, Policy Gaussian and "
                    "SIPS on IMDb, AskReddit bigrams and synthetic Pareto/zeta data; in "
                    "memory, with the library's calibration and release step.",
        examples=[f"{PROG} --output /tmp/delta0_bench --data-dir data",
                  f"{PROG} --output /tmp/d0 --datasets imdb --imdb examples/imdb_2k.csv.gz "
                  "--grid 10,100 --auto-trials 0"], beam_options=False)
    g = parser.add_argument_group("benchmark")
    g.add_argument(*flags("output"), required=True, metavar="FOLDER",
                   help="folder for results.csv and results.md")
    add_overwrite_argument(g)
    g.add_argument(*flags("datasets"), default="imdb,askreddit,zipf-a,zipf-b",
                   metavar="NAMES", help="data sets: imdb, askreddit, zipf-a, zipf-b")
    g.add_argument(*flags("mechanisms"), default=",".join(_MECHANISMS), metavar="NAMES",
                   help=f"mechanisms: {', '.join(_MECHANISMS)}")
    g.add_argument(*flags("data-dir"), default="data", metavar="FOLDER",
                   help="folder of imdb_50k_reviews.csv.gz and askreddit_bigrams_1pct.csv.gz")
    g.add_argument(*flags("imdb"), metavar="FILE",
                   help="another IMDb-like CSV (one user per row, column review)")
    g.add_argument(*flags("askreddit"), metavar="FILE",
                   help="another AskReddit bigrams CSV (columns author, ngram)")
    g.add_argument(*flags("synthetic-users"), type=int, default=50_000, metavar="N",
                   help="users of each synthetic data set")
    g.add_argument(*flags("rho"), type=float, default=0.1, metavar="R",
                   help="ρ of the ZCDPBudget every selection gets in total")
    g.add_argument(*flags("delta"), type=float, default=1e-5, metavar="D",
                   help="δ of the budget")
    g.add_argument(*flags("grid"), default="1,2,5,10,20,50,100,200,500,1000", metavar="D0[,D0…]",
                   help="the fixed Δ0 values")
    for name, default, text in (("grid-trials", 2, "runs per fixed Δ0"),
                                ("auto-trials", 5, "runs of auto (0: grid only)")):
        g.add_argument(*flags(name), type=int, default=default, metavar="N", help=text)
    g.add_argument(*flags("auto-share"), type=float, default=None, metavar="S",
                   help="share of the budget auto spends on the size histogram (default: "
                        "the mechanism's, 0.05 but SIPS 0.015)")
    g.add_argument(*flags("seed"), type=int, default=0, metavar="N",
                   help="seed of the synthetic data and of every run (reproducible)")
    return parser


def _names(text: str, known, flag: str) -> list:
    names = comma_list(text, flag, canonical_name, "names")  # as mechanism names are
    if unknown := [n for n in names if n not in known]:
        raise UsageError(f"{flag}: unknown or no names {unknown}; choose from {sorted(known)}")
    return names


def prepare(argv):
    args, _ = parse_job_args(build_parser(), argv)
    with flag_errors():
        budget = ZCDPBudget(args.rho, args.delta)
    grid = comma_list(args.grid, "--grid", int, "integers")
    for flag, value in (("--grid-trials", args.grid_trials), ("--auto-trials", args.auto_trials),
                        ("--synthetic-users", args.synthetic_users - 1)):
        if value < 0:
            raise UsageError(f"{flag} is too small, got {value}")
    if args.auto_share is not None and not 0.0 < args.auto_share < 1.0:
        raise UsageError(f"--auto-share must be in (0, 1), got {args.auto_share}")
    sets = _data_sets(args)
    chosen_sets = [(n, sets[n]) for n in _names(args.datasets, sets, "--datasets")]
    mechanisms = _names(args.mechanisms, _MECHANISMS, "--mechanisms")
    with flag_errors(max_items_per_user="--grid"):
        for name, d0 in itertools.product(mechanisms, grid):
            _MECHANISMS[name](max_items_per_user=d0).calibrate(budget)
    return SimpleNamespace(args=args, budget=budget, grid=grid, data_sets=chosen_sets,
                           mechanisms=mechanisms, output=args.output,
                           overwrite=args.overwrite, inputs=())


def _summary(rows: Sequence[dict], grid: Sequence[int]) -> str:
    """Per (data set, mechanism) the grid's best Δ0, auto's, their items; then the curves."""
    runs = defaultdict(list)
    for row in rows:
        runs[(row["dataset"], row["mechanism"], row["arm"])].append(row)
    lines = ["| data set | mechanism | best grid Δ0 | its items (mean) | auto Δ0 (trials) "
             "| auto items (mean) | auto / best |",
             "|---|---|---:|---:|---|---:|---:|"]
    curves = ["| data set | mechanism | " + " | ".join(f"Δ0={d}" for d in grid) + " |",
              "|---|---|" + "---:|" * len(grid)]
    for dataset, mechanism in dict.fromkeys((r["dataset"], r["mechanism"]) for r in rows):
        by_d0 = defaultdict(list)
        for row in runs[(dataset, mechanism, "grid")]:
            by_d0[int(row["max_items_per_user"])].append(int(row["released"]))
        means = {d0: float(np.mean(v)) for d0, v in by_d0.items()}
        auto = runs[(dataset, mechanism, "auto")]
        best = max(means, key=lambda d0: means[d0]) if means else None
        best_text = f"{best} | {means[best]:,.1f}" if best is not None else "– | –"
        auto_text = "– | – | –"
        if auto:
            auto_mean = float(np.mean([int(r["released"]) for r in auto]))
            chosen = ", ".join(str(r["max_items_per_user"]) for r in auto)
            ratio = (f"{100.0 * auto_mean / means[best]:.1f} %"
                     if best is not None and means[best] > 0 else "–")
            auto_text = f"{chosen} | {auto_mean:,.1f} | {ratio}"
        lines.append(f"| {dataset} | {mechanism} | {best_text} | {auto_text} |")
        curves.append(f"| {dataset} | {mechanism} | " + " | ".join(
            f"{means[d]:,.0f}" if d in means else "–" for d in grid) + " |")
    return ("\n".join(lines) + "\n\nGrid: mean items released per fixed Δ0\n\n"
            + "\n".join(curves) + "\n")


def run_prepared(job) -> str:
    args = job.args
    staging = staging_of(job)
    os.makedirs(staging, exist_ok=True)
    rows = []
    with open(os.path.join(staging, "results.csv"), "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=("dataset", "mechanism", "arm", "trial",
                                               "max_items_per_user", "released", "seconds"))
        writer.writeheader()
        for set_index, (set_name, load) in enumerate(job.data_sets):
            start = time.perf_counter()
            data = load()
            progress(f"{set_name}: {data.num_users} users, {data.num_items} items, "
                     f"{len(data.items)} (user, item) pairs; loaded in "
                     f"{time.perf_counter() - start:.1f} s")
            for mech_index, name in enumerate(job.mechanisms):
                runs = [("grid", d0, t) for d0 in job.grid for t in range(args.grid_trials)]
                runs += [("auto", None, t) for t in range(args.auto_trials)]
                for arm, d0, trial in runs:
                    rng = np.random.default_rng(
                        [args.seed, set_index, mech_index, arm == "auto", d0 or 0, trial])
                    start = time.perf_counter()
                    if arm == "grid":
                        count = released_count(data, _MECHANISMS[name](max_items_per_user=d0),
                                               job.budget, rng)
                    else:
                        d0, count = _auto_released_count(data, _MECHANISMS[name](), job.budget,
                                                         args.auto_share, rng)
                    row = {"dataset": set_name, "mechanism": name, "arm": arm,
                           "trial": trial, "max_items_per_user": d0, "released": count,
                           "seconds": round(time.perf_counter() - start, 3)}
                    rows.append(row)
                    writer.writerow(row)
                    f.flush()
                    progress(f"{set_name} {name} {arm} Δ0={d0} trial {trial}: "
                             f"{count} released in {row['seconds']:.2f} s")
    share = "the default" if args.auto_share is None else f"{args.auto_share:g}"
    header = (f"Items released, budget ZCDPBudget(ρ={job.budget.rho:g}, δ={job.budget.delta:g})"
              f" in total; grid: {args.grid_trials} trials per Δ0; auto: {args.auto_trials} "
              f"trials at share {share}. Raw statistics, not private.\n\n")
    with open(os.path.join(staging, "results.md"), "w", encoding="utf-8") as f:
        f.write(header + _summary(rows, job.grid))
    return f"{len(rows)} runs; results.csv and results.md in {job.output}"


def main(argv=None) -> int:
    return run_job("delta0_benchmark", argv, prepare, run_prepared)


if __name__ == "__main__":
    end_program(main())
