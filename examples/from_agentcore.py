"""Bedrock AgentCore Memory's common calls, as memstack calls. Run it against `memstack serve`:

python examples/from_agentcore.py       # MEMSTACK_URL, MEMSTACK_API_KEY (default dev-key)
"""

import os
from datetime import UTC, datetime

from memstack.client import MemoryClient

client = MemoryClient(
    os.environ.get("MEMSTACK_URL", "http://127.0.0.1:8000"),
    api_key=os.environ.get("MEMSTACK_API_KEY", "dev-key"),
)
actor, session = "user-84", "session-2024-05-01"

# CreateEvent(memoryId, actorId, sessionId, eventTimestamp, payload=[conversational...], clientToken)
client.add(
    [
        {
            "role": "user",
            "content": "Book me a window seat, I always get airsick.",
            "timestamp": datetime.now(UTC),
        },
        {"role": "assistant", "content": "Window seat it is."},
    ],
    user_id=actor,
    session_id=session,
    idempotency_key="create-event-0001",  # clientToken
    metadata={"channel": "web"},  # CreateEvent(metadata={"channel": {"stringValue": "web"}})
    sync=True,
)

# ListEvents(actorId, sessionId): the raw turns (short-term memory)
events = client.list(user_id=actor, session_id=session, tier="stm").memories
# ListEvents(filter={eventMetadata: [{left: {metadataKey: "channel"}, operator: EQUALS_TO, right: "web"}]})
web = client.list(user_id=actor, session_id=session, tier="stm", metadata={"channel": "web"}).memories
assert len(web) == 2 == len(events), web

# RetrieveMemoryRecords(namespace, searchCriteria={searchQuery, topK})
records = client.search("seat preference", user_id=actor, top_k=5).results
print([(round(r.score, 3), r.content) for r in records])
# ... with metadataFilters: the event's metadata is on the records extracted from it
from_web = client.search(
    "seat preference", user_id=actor, filters={"tier": "ltm", "metadata": {"channel": "web"}}
)
assert from_web.results, "the extracted memories carry the event's metadata"

# BatchCreateMemoryRecords: a record you write yourself, under your own key (versioned when rewritten)
client.put_key("seat", "Prefers window seats (airsick).", user_id=actor, kind="preference")

print(client.get_key("seat", user_id=actor).content)

# ListMemoryRecords / GetMemoryRecord / DeleteMemoryRecord (pick a record by what it says)
long_term = client.list(user_id=actor, tier="ltm").memories
airsick = next(m for m in long_term if "airsick" in m.content and m.metadata.get("key") is None)
record = client.get(airsick.id, user_id=actor)
client.delete(record.id, user_id=actor)
client.delete_key("seat", user_id=actor)

# ListEvents + ListMemoryRecords page by page, then BatchCreateMemoryRecords elsewhere: export and import
lines = list(client.export_user(actor, page_size=100))
assert client.import_user(f"{actor}-copy", lines).imported == len(lines) - 1
client.erase_user(f"{actor}-copy")
client.erase_user(actor)
