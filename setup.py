"""beam_dpsu: differentially private set union on Apache Beam."""

from setuptools import find_packages, setup

setup(
    name="beam_dpsu",
    version="0.1.0",
    description="Differentially private set union (vocabulary, n-gram and partition "
                "selection) as Apache Beam transforms",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["beam_dpsu", "beam_dpsu.*", "pipelines", "pipelines.*"]),
    # py.typed: beam_dpsu's annotations are part of its API (PEP 561).
    package_data={"beam_dpsu": ["py.typed"]},
    # beam-dpsu vocabulary|ngrams|evaluate …: the jobs of pipelines/ as one command.
    entry_points={"console_scripts": ["beam-dpsu = pipelines.command:main"]},
    install_requires=[
        "apache-beam>=2.60",
        # google-apitools: Beam's BigQuery client module looks for it at import and
        # logs "apitools not found" on the root logger without it (apache-beam[gcp]
        # brings it too; both pins admit 0.5.31).
        "google-apitools>=0.5.31",
        # dp-accounting: the privacy-loss-distribution accountant of beam_dpsu.core.composition
        # (wheels only; no numpy or Beam downgrade: checked with pip install
        # --dry-run; it pins attrs<24, which Beam accepts).
        "dp-accounting>=0.4,<0.7",
        "numpy>=1.24",
        "scipy>=1.10",
    ],
    extras_require={
        # pipeline-dp: the PipelineDP example's test (installs from wheels, no
        # numpy or Beam downgrade; checked with pip install --dry-run).
        # pandas: reads a Parquet release back in tests/beam/test_output_parquet.py
        # (wheels only, no numpy or pyarrow downgrade: checked likewise).
        "test": ["pytest>=7", "pytest-xdist>=3.6", "hypothesis>=6.80", "matplotlib>=3.7",
                 "pipeline-dp>=0.3", "pandas>=2"],
        "bench": ["pipeline-dp>=0.3"],
        "plot": ["matplotlib>=3.7"],
        # docs: the API reference and prose pages (mkdocs.yml), built strictly by
        # tests/test_docs_build.py. Pinned: a new griffe or mkdocstrings may add
        # warnings, which fail the strict build. Wheels only, no numpy or Beam
        # downgrade (checked with pip install --dry-run).
        # ruff: mkdocstrings formats the separate signatures with it (without it the
        # build logs "Formatting signatures requires either Black or Ruff").
        "docs": ["mkdocs==1.6.1", "mkdocs-autorefs==1.4.5", "mkdocstrings[python]==1.0.8",
                 "mkdocstrings-python==2.0.11", "griffe==2.4.1", "ruff==0.17.5"],
        # The quality gates of .ci/run, pinned: a new release's new rules must
        # not fail CI unannounced (wheels only).
        "lint": ["ruff==0.17.5", "mypy==2.4.1", "build==1.6.1"],
    },
    classifiers=[
        "Programming Language :: Python :: 3",
        "Topic :: Security",
        "Topic :: Scientific/Engineering :: Information Analysis",
    ],
)
