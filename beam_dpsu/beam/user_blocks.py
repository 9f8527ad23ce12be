"""Users' records in Beam: packed into blocks of whole users, and coded between stages.

The blocks themselves (their bytes, how they are built and read) are
``beam_dpsu.core.user_blocks``; the steps here pack users into them and read
them.

**Item records** (``PackRecordsFn``; the blocks:
``beam_dpsu.core.user_blocks.record_blocks``). Two steps pack users:
``max_items_per_user="auto"``, whose records wait packed until Δ0 is chosen
(``beam_dpsu.beam.max_items_choice.selection``), and SIPS, whose rounds carry their users packed
(``beam_dpsu.beam.sips``). Both use ``PackRecordsFn``.

**Documents** → one record per user → blocks of users, and the blocks' partial
histograms (the blocks: ``beam_dpsu.core.user_blocks.document_blocks``). The levels of
DPNE (``beam_dpsu.extract_ngrams``) read the users' documents once per level, so the
users are packed once into blocks, and a level's per-user work (its items, the sample,
the weights) runs as array operations over a block of users, not as one Beam element per
user and step.

* ``UserRecords``: documents → (user_id, (tokens, ...)), one record per user
  (grouped by user id, or each element one person's only document).
* ``PackUserBlocksFn``: user records (or unseeded elements themselves) →
  pickled blocks (``USERS_PER_BLOCK``, ``TOKENS_PER_BLOCK``: where a block ends).
* ``BlockHistogramFn``: pickled blocks → partial sums of the users' weighted
  items at one level, per bundle.

**Records between stages**: per-user records of distinct items, which the SIPS rounds
write out and read back between rounds, coded compactly (``UserItems``,
``UserItemsCoder``, which says how). A PCollection gets the coder by being typed
``UserItems`` (``.with_output_types(UserItems)``) and holding ``UserItems`` elements.
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


# --- item records: PackRecordsFn ---------------------------------------------------------


@opaque_output
class PackRecordsFn(beam.DoFn):
    """User records → blocks of their checked items, a run of users each.

    Each record is one user's: with ``elements`` an element of
    ``privacy_unit="element"`` input, checked here (the rule of
    ``element_item_counts``: a bad element raises naming the problem, never a
    value), else a merged (user_id, {item: occurrences}) record. A user is
    added whole, then the block ends if it is full. Not
    ``beam.BatchElements``, which logs how many elements it batched (the
    number of users; docs/privacy.md, invariant 6). Every block goes out in
    the global window, stamped with its end (``in_global_window``), whether a
    full block is sent from ``process`` or the last from ``finish_bundle``.

    Args:
      elements: the records are elements of ``privacy_unit="element"`` input.
      occurrences: keep each item's occurrences (for a mechanism that reads them).
      edges: the size bins' edges: each block goes out as (users per size bin,
        block) (``RecordBlockBuilder.build``), for the choice of Δ0; None: the
        block alone.
      key_seed: a seeded run's seed: each user is keyed in its block by its id
        (a record's user id, or an element's seeded ``distinct_element_id``);
        None (unseeded): no keys, and an element draws no id.
    """

    def __init__(self, elements: bool, occurrences: bool = False, edges=None,
                 key_seed: int | None = None):
        if occurrences and key_seed is not None:
            raise ValueError("keyed blocks hold distinct items (SIPS): no occurrences")
        self._elements = elements
        self._occurrences = occurrences
        self._edges = None if edges is None else np.asarray(edges, dtype=np.int64)
        self._key_seed = key_seed
        self._builder: record_blocks.RecordBlockBuilder | None = None

    def _new_builder(self) -> record_blocks.RecordBlockBuilder:
        return record_blocks.RecordBlockBuilder(self._occurrences,
                                                keyed=self._key_seed is not None)

    def start_bundle(self):
        self._builder = self._new_builder()

    def process(self, record):
        if self._elements:
            items = element_items(record, self._occurrences)
            # a Tokens list's set has passed the plain-str check already
            plain = (type(record) is Tokens and type(items) is set) or plain_str_items(items)
            key = (None if self._key_seed is None
                   else distinct_element_id(items, self._key_seed))
        else:
            key, items = record
            plain = plain_str_items(items)
        self._builder.add(items, plain, key)
        if self._builder.full:
            yield self._flush()

    def finish_bundle(self):
        if self._builder.users:
            yield self._flush()

    def _flush(self):
        builder, self._builder = self._builder, self._new_builder()
        assert builder is not None, "start_bundle made one"
        return in_global_window(builder.packed() if self._edges is None
                                else builder.build(self._edges))


# --- documents: one record per user, blocks, the levels' partial sums --------------------


# A document block (``document_blocks.DocumentBlock``, pickled to one ``bytes`` value)
# ends at whichever comes first of these: large enough that a level's fixed cost per
# block (the released set's keys, one pickle) is spread over many users (MSNBC has a
# million), small enough to keep a block's arrays to tens of MB.
USERS_PER_BLOCK = 1 << 16
TOKENS_PER_BLOCK = 1 << 20


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


# --- records between stages: UserItems and its coder -------------------------------------


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


def _pickled(value) -> bytes:
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


class UserItemsCoder(coders.Coder):
    """Codes ``UserItems``: str items NUL-joined as UTF-8, other items pickled.

    The SIPS rounds read every user's distinct items once per round, and a
    round's release reaches the next round as a side input, so the records are
    written out and read back between rounds. Beam's default coder writes each
    item with a type tag and a length of its own and reads it back the same
    way; this one writes a record of str items as one UTF-8 string, the items
    joined by NUL characters, and reads it back with one ``split``: the same
    record, at a fraction of the per-item cost. A record it cannot write that
    way (bytes items, an item containing NUL, no items) is pickled instead, so
    every record comes back equal to what was written (lone surrogates
    included, passed through, which Beam's default coder refuses). Ids below
    2^128 (the random ids of ``privacy_unit="element"``) take 16 bytes, str
    ids their UTF-8, other ids are pickled.
    """

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
