"""Documents → one record per user → blocks of users, and the blocks' partial histograms.

The levels of DPNE (``beam_dpsu.extract_ngrams``) read the users' documents
many times: once per level. So the users are packed once into blocks
(``beam_dpsu.core.user_blocks.document_blocks.DocumentBlock``, pickled to one ``bytes`` value),
and a level's per-user work (its items, the sample, the weights) runs as
array operations over a block of users, not as one Beam element per user and
step (MSNBC has a million users). A block ends at whichever comes first of
``USERS_PER_BLOCK`` users or ``TOKENS_PER_BLOCK`` tokens: large enough that a
level's fixed cost per block (the released set's keys, one pickle) is spread
over many users, small enough to keep a block's arrays to tens of MB.

* ``UserRecords``: documents → (user_id, (tokens, ...)), one record per user
  (grouped by user id, or each element one person's only document).
* ``PackUserBlocksFn``: user records (or unseeded elements themselves) →
  pickled blocks.
* ``BlockHistogramFn``: pickled blocks → partial sums of the users' weighted
  items at one level, per bundle.
* ``DOCUMENT_ELEMENT``: the input type hint of the n-gram transforms.
"""

from __future__ import annotations

import abc
import collections.abc
import pickle
from typing import Any, Iterable, Mapping, Union

import apache_beam as beam
import numpy as np

from beam_dpsu.core.user_blocks import document_blocks
from beam_dpsu.core import hashing
from beam_dpsu.core.documents import check_document, element_document, element_tokens, plain_token
from beam_dpsu.beam.histograms import PARTIAL_HISTOGRAM_KEYS
from beam_dpsu.beam.randomness import draws_randomness
from beam_dpsu.beam.windowing import in_global_window
from beam_dpsu.beam.output_types import opaque_output

__all__ = ["USERS_PER_BLOCK", "TOKENS_PER_BLOCK", "DOCUMENT_ELEMENT", "UserRecords",
           "PackUserBlocksFn", "BlockHistogramFn", "element_as_user", "distinct_tokens"]

USERS_PER_BLOCK = 1 << 16
TOKENS_PER_BLOCK = 1 << 20


class _DocumentLike(abc.ABC):  # noqa: B024  (a registry of classes, not an interface)
    """The plain classes an input element may be of: Beam's type check reads a plain
    class by ``issubclass``, so sequences (tuples and NamedTuples, lists and a
    Tokenizer's ``Tokens``, str), mappings, sets and arrays are registered here."""


for _cls in (collections.abc.Sequence, collections.abc.Mapping, collections.abc.Set,
             np.ndarray):
    _DocumentLike.register(_cls)

# The input type hint of ExtractNgrams and NgramsByDPSU: what an element of any of
# their input forms may be ((user_id, tokens) documents, lists of tokens, beam.Rows,
# NamedTuples, dicts). A PCollection of numbers or None fails when the pipeline is
# built; each element's form is checked when it is read (beam_dpsu.core.documents).
DOCUMENT_ELEMENT = Union[Iterable[Any], Mapping[Any, Any], beam.Row, _DocumentLike]


def _one_document(id_tokens: tuple) -> tuple:
    """(element id, tokens) → (element id, (tokens,)): a person with one document."""
    return id_tokens[0], (id_tokens[1],)


@draws_randomness  # the element's id (unseeded)
def element_as_user(element, seed) -> tuple:
    """An element as (element id, (tokens,)) (``element_document``)."""
    return _one_document(element_document(element, seed))


def distinct_tokens(docs) -> list:
    """A user's distinct tokens (level 1 of policy-gaussian)."""
    return list({t for doc in docs for t in doc})


class UserRecords(beam.PTransform):
    """Documents → (user_id, (tokens, ...)): one record per user with all their documents.

    With ``privacy_unit="user_id"`` the checked documents are grouped by user
    id; with ``"element"`` each element is one person's only document, with
    an id (random, or with a test-only seed a hash of the tokens) that only
    orders and seeds it (``element_document``).
    """

    def __init__(self, privacy_unit: str, seed: int | None):
        super().__init__()
        self._privacy_unit, self._seed = privacy_unit, seed

    def expand(self, documents):
        if self._privacy_unit == "element":
            return documents | "CheckElements" >> beam.Map(element_as_user, self._seed)
        check_documents = beam.Map(check_document).with_output_types(Any)
        return (documents
                | "CheckDocuments" >> check_documents  # (user_id, tokens)
                | "DocumentsPerUser" >> beam.GroupByKey()  # (user_id, [tokens, ...])
                | "AsTuples" >> beam.MapTuple(lambda user, docs: (user, tuple(docs))))


@opaque_output
class PackUserBlocksFn(beam.DoFn):
    """(user, documents) → blocks of users, as pickled ``DocumentBlock``s.

    A block holds up to ``size`` users and ends once it holds ``max_tokens``
    tokens; it is built user by user (``document_blocks.BlockBuilder``). It is one
    ``bytes`` value: every level re-reads all blocks (a stage each, after the
    level before), and Beam decodes one bytes value many times faster than a
    list of tuples of str. Unseeded, the user ids are left out (only seeded
    samples read them).

    With ``elements`` its input is ``privacy_unit="element"`` elements
    themselves (lists of tokens, no id): their type is checked here (the
    rule of ``element_tokens``), and each token the first time the block
    meets it (``plain_token``); an element with a token that fails is
    re-checked whole, which raises naming the token or makes it plain str.
    One Beam step per element instead of two.

    Not ``beam.BatchElements``: that logs how many elements it has batched,
    which here is the number of users (docs/privacy.md, invariant 6). Every
    block is stamped like the other outputs (``in_global_window``).
    """

    def __init__(self, size: int, keep_ids: bool, max_tokens: int = TOKENS_PER_BLOCK,
                 elements: bool = False):
        self._size = size
        self._keep_ids = keep_ids
        self._max_tokens = max_tokens
        self._elements = elements
        self._builder = None

    def _new_builder(self):
        return document_blocks.BlockBuilder(self._keep_ids,
                                      plain_token if self._elements else None)

    def start_bundle(self):
        self._builder = self._new_builder()

    def process(self, user_docs):
        builder = self._builder
        if self._elements:
            if not isinstance(user_docs, list):
                element_tokens(user_docs)  # raises naming the type
            try:
                builder.add_document(None, user_docs)
            except (document_blocks.BadToken, TypeError):
                builder.add_document(None, element_tokens(user_docs))
        else:
            builder.add(*user_docs)
        if builder.users >= self._size or builder.tokens >= self._max_tokens:
            yield self._flush()

    def finish_bundle(self):
        if self._builder.users:
            yield self._flush()

    def _flush(self):
        block, self._builder = self._builder.build(), self._new_builder()
        return in_global_window(pickle.dumps(block, protocol=pickle.HIGHEST_PROTOCOL))


@draws_randomness
@opaque_output
class BlockHistogramFn(beam.DoFn):
    """Pickled ``DocumentBlock``s → partial sums of the users' weighted level items.

    ``level_sums(block, *side inputs, rng=…)`` gives the block's
    [(item, Σ weights)]: each user's items at this level sampled to Δ_k and
    weighted 1/√|sample| (``beam_dpsu.core.user_blocks.document_blocks``). The partial sums of a
    bundle are added up per item and flushed at ``max_keys`` items (bounding
    a worker's memory) and at the bundle's end. The input has one element per
    user before blocking (after the ``GroupByKey``, or one element per
    person), so each user is bounded once. With ``count_holders`` the sums are
    (Σ weights, users holding it) pairs, for a pre-threshold.
    """

    def __init__(self, level_sums, max_keys: int = PARTIAL_HISTOGRAM_KEYS,
                 count_holders: bool = False):
        self._level_sums = level_sums
        self._max_keys = max_keys
        self._count_holders = count_holders
        self._partial: dict = {}
        self._rng = None

    def setup(self):
        self._rng = hashing.os_rng()  # a fresh OS-seeded generator per worker

    def start_bundle(self):
        self._partial = {}

    def process(self, block, *side_inputs):
        partial = self._partial
        get = partial.get
        sums = self._level_sums(pickle.loads(block), *side_inputs, rng=self._rng)
        if self._count_holders:
            for item, (weight, holders) in sums:
                so_far = get(item)
                partial[item] = ((weight, holders) if so_far is None
                                 else (so_far[0] + weight, so_far[1] + holders))
        else:
            for item, weight in sums:
                partial[item] = get(item, 0.0) + weight
        if len(partial) >= self._max_keys:
            yield from self._flush()

    def finish_bundle(self):
        yield from self._flush()

    def _flush(self):
        partial, self._partial = self._partial, {}
        # Bounding is global, so every partial sum belongs to the global window.
        return map(in_global_window, partial.items())
