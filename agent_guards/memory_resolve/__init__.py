"""memory_resolve: the current instruction beats tool facts, official knowledge, long-term memory
and inferred preferences; expired and superseded memories are never injected.
"""

from agent_guards.memory_resolve.core import resolve_memory
from agent_guards.memory_resolve.graph import (
    LLMFactExtractor,
    MemoryFact,
    MemoryState,
    create_memory_resolve,
    format_memories,
)
from agent_guards.memory_resolve.model import (
    DEFAULT_SOURCE_RANKS,
    MEMORY_SOURCES,
    MEMORY_STATUSES,
    MemoryRecord,
    MemoryVerdict,
)
from agent_guards.memory_resolve.policy import MemoryPolicy
from agent_guards.memory_resolve.store import (
    aconfirm_memory,
    aload_memories,
    asave_memories,
    confirm_memory,
    load_memories,
    memory_namespace,
    namespace_label,
    save_memories,
)

__all__ = [
    "DEFAULT_SOURCE_RANKS",
    "MEMORY_SOURCES",
    "MEMORY_STATUSES",
    "LLMFactExtractor",
    "MemoryFact",
    "MemoryPolicy",
    "MemoryRecord",
    "MemoryState",
    "MemoryVerdict",
    "aconfirm_memory",
    "aload_memories",
    "asave_memories",
    "confirm_memory",
    "create_memory_resolve",
    "format_memories",
    "load_memories",
    "memory_namespace",
    "namespace_label",
    "resolve_memory",
    "save_memories",
]
