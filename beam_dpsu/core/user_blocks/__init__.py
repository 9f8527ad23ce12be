"""Users packed into compact blocks, whole users a block (pure Python/numpy, no Beam).

``record_blocks``: users' checked items; ``document_blocks``: users' documents, for DPNE;
``shard_blocks``: a sequential policy's shard. Why: docs/explanation/bounding.md#user-blocks.
"""

from beam_dpsu.core.user_blocks import document_blocks, record_blocks, shard_blocks
from beam_dpsu.core.user_blocks.document_blocks import DocumentBlock
from beam_dpsu.core.user_blocks.record_blocks import RecordBlockBuilder
from beam_dpsu.core.user_blocks.shard_blocks import (UserBlockBuilder, decode_user_block,
                                                     shard_policy_histogram)

__all__ = ["document_blocks", "record_blocks", "shard_blocks", "DocumentBlock",
           "RecordBlockBuilder", "UserBlockBuilder", "decode_user_block", "shard_policy_histogram"]
