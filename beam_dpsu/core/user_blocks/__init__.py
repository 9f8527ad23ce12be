"""Users packed into compact blocks, whole users a block (pure Python/numpy, no Beam).

``record_blocks``: users' checked items (the records "auto" holds, SIPS's rounds);
``document_blocks``: users' documents as token ids, for DPNE's levels;
``shard_blocks``: a sequential policy's shard. The Beam steps that pack and read
them: ``beam_dpsu.beam.user_blocks``. Why blocks: docs/explanation/bounding.md#user-blocks.
"""

from beam_dpsu.core.user_blocks import document_blocks, record_blocks, shard_blocks
from beam_dpsu.core.user_blocks.document_blocks import DocumentBlock
from beam_dpsu.core.user_blocks.record_blocks import RecordBlockBuilder
from beam_dpsu.core.user_blocks.shard_blocks import (UserBlockBuilder, decode_user_block,
                                                     shard_policy_histogram)

__all__ = ["document_blocks", "record_blocks", "shard_blocks", "DocumentBlock",
           "RecordBlockBuilder", "UserBlockBuilder", "decode_user_block", "shard_policy_histogram"]
