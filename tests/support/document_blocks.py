"""A ``DocumentBlock`` built from listed users, for tests of the per-user document blocks."""

from beam_dpsu.core.user_blocks.document_blocks import BlockBuilder


def encode_block(users, keep_ids):
    """``[(user_id, documents), …]`` → a ``DocumentBlock``, user by user."""
    builder = BlockBuilder(keep_ids)
    for user_id, documents in users:
        builder.add(user_id, documents)
    return builder.build()
