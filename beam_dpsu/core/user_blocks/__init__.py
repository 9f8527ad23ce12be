"""Users packed into compact blocks, whole users a block (pure Python/numpy, no Beam).

The steps that read every user many times, or hold all of them at once, read
blocks of users as arrays, not a Beam element per user. A user is never split
over blocks. Three forms, one module each:

* ``record_blocks``: users' checked items (distinct, or with occurrences): the
  records ``max_items_per_user="auto"`` holds until Δ0 is chosen, which count
  the users' size bins as they are packed, and SIPS's users between rounds
  (``RecordBlockBuilder``, ``unpack_block``, ``without_items``);
* ``document_blocks``: users' documents as token ids, and DPNE's level work on
  a block (``DocumentBlock``, ``BlockBuilder``, ``level1_sums``, ``level_sums``);
* ``shard_blocks``: the users of a sequential policy's shard, and the shard's
  histogram in keyed-hash order (``UserBlockBuilder``, ``shard_policy_histogram``).

The Beam steps that pack and read them are in ``beam_dpsu.beam.user_blocks`` and
their callers. Here are re-exported the modules and the names other modules
import; a caller that reads a module's functions by attribute imports the module
(``from beam_dpsu.core.user_blocks import record_blocks``).
"""

from beam_dpsu.core.user_blocks import document_blocks, record_blocks, shard_blocks
from beam_dpsu.core.user_blocks.document_blocks import DocumentBlock
from beam_dpsu.core.user_blocks.record_blocks import RecordBlockBuilder
from beam_dpsu.core.user_blocks.shard_blocks import (UserBlockBuilder, decode_user_block,
                                                     shard_policy_histogram)

__all__ = ["document_blocks", "record_blocks", "shard_blocks", "DocumentBlock",
           "RecordBlockBuilder", "UserBlockBuilder", "decode_user_block",
           "shard_policy_histogram"]
