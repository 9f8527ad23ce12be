"""Users' records in Beam: packed into blocks of whole users (``beam_dpsu.core.user_blocks``)
for ``"auto"`` Δ0, SIPS and DPNE's levels, and coded between SIPS rounds (``UserItemsCoder``).

Why blocks, and the coder: docs/explanation/transforms.md#user-blocks.
"""

from __future__ import annotations

import pickle
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam import coders

from beam_dpsu.core import hashing
from beam_dpsu.core.documents import check_document, element_document, element_tokens, plain_token
from beam_dpsu.core.tokenizer import Tokens
from beam_dpsu.core.user_blocks import document_blocks, record_blocks
from beam_dpsu.beam.bounding import distinct_element_id, element_items, plain_str_items
from beam_dpsu.beam.histograms import PARTIAL_HISTOGRAM_KEYS
from beam_dpsu.beam.output_types import opaque_output
from beam_dpsu.beam.randomness import draws_randomness
from beam_dpsu.beam.windowing import in_global_window

__all__ = ["PackRecordsFn", "USERS_PER_BLOCK", "TOKENS_PER_BLOCK", "UserRecords",
           "PackUserBlocksFn", "BlockHistogramFn", "element_as_user", "distinct_tokens",
           "UserItems", "UserItemsCoder"]


def _pickled(value) -> bytes:
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


class _PackFn(beam.DoFn):
    """Whole users → blocks (``_new_builder``), each sent ``in_global_window`` (``_flush``)."""

    def start_bundle(self):
        self._builder = self._new_builder()

    def finish_bundle(self):
        if self._builder.users:
            yield self._flush()


@opaque_output
class PackRecordsFn(_PackFn):
    """User records → blocks of their checked items, whole users each.

    A record is an element (checked here) or a (user_id, {item: occurrences}) record. Not
    ``beam.BatchElements``, which logs the number of users (docs/privacy.md, invariant 6).

    Args:
      elements: the records are elements of ``privacy_unit="element"`` input.
      occurrences: keep each item's occurrences (for a mechanism that reads them).
      edges: size bins' edges: blocks go out as (users per size bin, block); None: alone.
      key_seed: a seeded run's seed: each user is keyed by its (element) id; None: no keys.
    """

    def __init__(self, elements: bool, occurrences: bool = False, edges=None,
                 key_seed: int | None = None):
        if occurrences and key_seed is not None:
            raise ValueError("keyed blocks hold distinct items (SIPS): no occurrences")
        self._elements, self._occurrences, self._key_seed = elements, occurrences, key_seed
        self._edges = None if edges is None else np.asarray(edges, dtype=np.int64)
        self._builder: record_blocks.RecordBlockBuilder | None = None

    def _new_builder(self) -> record_blocks.RecordBlockBuilder:
        return record_blocks.RecordBlockBuilder(self._occurrences, keyed=self._key_seed is not None)

    def process(self, record):
        if self._elements:
            items = element_items(record, self._occurrences)
            # a Tokens list's set has passed the plain-str check already
            plain = (type(record) is Tokens and type(items) is set) or plain_str_items(items)
            key = None if self._key_seed is None else distinct_element_id(items, self._key_seed)
        else:
            key, items = record
            plain = plain_str_items(items)
        self._builder.add(items, plain, key)
        if self._builder.full:
            yield self._flush()

    def _flush(self):
        builder, self._builder = self._builder, self._new_builder()
        assert builder is not None, "start_bundle made one"
        return in_global_window(builder.packed() if self._edges is None
                                else builder.build(self._edges))


# A document block ends at whichever comes first: large enough to spread a level's cost
# per block over many users, small enough to keep its arrays to tens of MB.
USERS_PER_BLOCK = 1 << 16
TOKENS_PER_BLOCK = 1 << 20


@draws_randomness  # the element's id (unseeded)
def element_as_user(element, seed) -> tuple:
    """An element as (element id, (tokens,)) (``element_document``)."""
    user, tokens = element_document(element, seed)
    return user, (tokens,)


def distinct_tokens(docs) -> list:
    """A user's distinct tokens (level 1 of policy-gaussian)."""
    return list({t for doc in docs for t in doc})


class UserRecords(beam.PTransform):
    """Documents → (user_id, (tokens, ...)): one record per user with all their documents
    (with ``privacy_unit="element"``, each element under an id of its own)."""

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
class PackUserBlocksFn(_PackFn):
    """(user, documents) → pickled ``DocumentBlock``s of ≤ ``size`` users, ``max_tokens`` tokens.

    Without ``keep_ids`` the user ids are left out (only seeded samples read them); with
    ``elements`` the input is ``privacy_unit="element"`` elements, checked here.
    """

    def __init__(self, size: int, keep_ids: bool, max_tokens: int = TOKENS_PER_BLOCK,
                 elements: bool = False):
        self._size, self._keep_ids, self._max_tokens = size, keep_ids, max_tokens
        self._elements, self._builder = elements, None

    def _new_builder(self):
        return document_blocks.BlockBuilder(self._keep_ids, plain_token if self._elements else None)

    def process(self, user_docs):
        builder = self._builder
        if self._elements:
            if not isinstance(user_docs, list):
                element_tokens(user_docs)  # raises naming the type
            try:
                builder.add(None, (user_docs,))
            except (document_blocks.BadToken, TypeError):
                builder.add(None, (element_tokens(user_docs),))
        else:
            builder.add(*user_docs)
        if builder.users >= self._size or builder.tokens >= self._max_tokens:
            yield self._flush()

    def _flush(self):
        block, self._builder = self._builder.build(), self._new_builder()
        return in_global_window(_pickled(block))


@draws_randomness
@opaque_output
class BlockHistogramFn(beam.DoFn):
    """Pickled ``DocumentBlock``s → a bundle's partial sums of ``level_sums(block, *side
    inputs, rng=…)``, flushed at ``max_keys`` items; with ``count_holders``, (Σ, holders)."""

    def __init__(self, level_sums, max_keys: int = PARTIAL_HISTOGRAM_KEYS,
                 count_holders: bool = False):
        self._level_sums, self._max_keys, self._count_holders = level_sums, max_keys, count_holders
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
                so_far_weight, so_far_holders = get(item, (0.0, 0))
                partial[item] = (so_far_weight + weight, so_far_holders + holders)
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


class UserItems(tuple):
    """(user_id, items): one user's distinct items (a tuple of str or bytes)."""

    __slots__ = ()

    def __new__(cls, user_id, items: tuple):
        return tuple.__new__(cls, (user_id, items))

    def __reduce__(self):
        return UserItems, tuple(self)


# The first byte of an encoded user id, then of the encoded items.
_INT_ID, _STR_ID, _PICKLED_ID = 0, 1, 2
_JOINED_ITEMS, _PICKLED_ITEMS = b"j", b"p"
_INT_ID_LIMIT = 1 << 128


class UserItemsCoder(coders.Coder):
    """Codes ``UserItems`` exactly: str items NUL-joined as UTF-8, other items pickled."""

    def encode(self, record) -> bytes:
        user_id, items = record
        if type(user_id) is int and 0 <= user_id < _INT_ID_LIMIT:
            user = bytes((_INT_ID,)) + user_id.to_bytes(16, "big")
        else:
            kind, encoded = ((_STR_ID, user_id.encode("utf-8", "surrogatepass"))
                             if type(user_id) is str else (_PICKLED_ID, _pickled(user_id)))
            user = bytes((kind,)) + len(encoded).to_bytes(4, "big") + encoded
        try:
            joined = "\x00".join(items)
        except TypeError:  # a bytes (or other) item
            joined = None
        # As many NULs as separators: no item holds one, so the split is exact.
        if joined is not None and items and joined.count("\x00") == len(items) - 1:
            return user + _JOINED_ITEMS + joined.encode("utf-8", "surrogatepass")
        return user + _PICKLED_ITEMS + _pickled(tuple(items))

    def decode(self, data: bytes) -> UserItems:
        kind = data[0]
        user_id: object
        if kind == _INT_ID:
            user_id, start = int.from_bytes(data[1:17], "big"), 17
        else:
            size = int.from_bytes(data[1:5], "big")
            encoded, start = data[5:5 + size], 5 + size
            user_id = (encoded.decode("utf-8", "surrogatepass") if kind == _STR_ID
                       else pickle.loads(encoded))
        body = data[start + 1:]
        if data[start:start + 1] == _JOINED_ITEMS:
            items = tuple(body.decode("utf-8", "surrogatepass").split("\x00"))
        else:
            items = pickle.loads(body)
        return UserItems(user_id, items)

    def is_deterministic(self) -> bool:
        return False  # never a grouping key

    def to_type_hint(self):
        return UserItems

    def __eq__(self, other):
        return type(self) is type(other)

    def __hash__(self):
        return hash(type(self))


beam.coders.registry.register_coder(UserItems, UserItemsCoder)
