"""Mem0's common calls, as memstack calls. Run it against `memstack serve`:

python examples/from_mem0.py            # MEMSTACK_URL, MEMSTACK_API_KEY (default dev-key)
"""

import os

from memstack.client import MemoryClient

client = MemoryClient(
    os.environ.get("MEMSTACK_URL", "http://127.0.0.1:8000"),
    api_key=os.environ.get("MEMSTACK_API_KEY", "dev-key"),
)

# m.add(messages, user_id=, agent_id=, run_id=, metadata=)
messages = [
    {"role": "user", "content": "I'm vegetarian and I'm allergic to peanuts."},
    {"role": "assistant", "content": "Noted: no meat, no peanuts."},
]
client.add(
    messages, user_id="alice", agent_id="chef-bot", run_id="dinner-1", metadata={"topic": "food"}, sync=True
)

client.add(
    "I run 5k every Sunday.", user_id="alice", agent_id="coach-bot", metadata={"topic": "sport"}, sync=True
)

# m.search(query, user_id=, limit=)
for hit in client.search("what can't alice eat?", user_id="alice", top_k=3).results:
    print(f"{hit.score:.3f} {hit.content}  (agent {hit.agent_id}, said in {hit.session_id})")

# m.search(query, user_id=, agent_id=, filters={"topic": {"in": [...]}})  -- metadata filters
chef = client.search(
    "what does alice like?", user_id="alice", agent_id="chef-bot", metadata={"topic": {"in": ["food"]}}
)
assert chef.results and {h.agent_id for h in chef.results} == {"chef-bot"}, chef.results

# m.get_all(user_id=)  -- every page; m.get_all(user_id=, agent_id=, filters=)
memories = list(client.iter_memories(user_id="alice", tier="ltm"))
sport = list(client.iter_memories(user_id="alice", agent_id="coach-bot", metadata={"topic": "sport"}))
assert sport and all(m.metadata["topic"] == "sport" for m in sport), sport
print(f"{len(memories)} long-term memories, {len(sport)} from the coach about sport")

# m.update(memory_id, data) -- pick the memory by what it says, never "the first one"
peanuts = next(m for m in memories if "peanut" in m.content)
new = client.update(peanuts.id, "Alice is allergic to peanuts and tree nuts.", user_id="alice")

# m.history(memory_id)
print([(m.version, m.content) for m in client.history(new.id, user_id="alice")])

# client.create_memory_export(...) + get_memory_export(...): the whole history at once, as JSON lines,
# which import_user loads as another user (or into another deployment); sent again, it skips it all
lines = list(client.export_user("alice"))
copied = client.import_user("alice-copy", lines)
assert copied.imported == len(lines) - 1 and client.import_user("alice-copy", lines).imported == 0
client.erase_user("alice-copy")

# client.project.update(custom_categories=[{"pets": "..."}], custom_instructions="...")
# per tenant, at run time; ignore / only rules hold the offline extractor too (mode "replace": only yours)
client.patch_config(
    {
        "categories": {
            "custom": [{"name": "pets", "description": "the user's pets", "keywords": ["dog", "vet"]}]
        },
        "extraction": {"instructions": "Never store passwords.", "ignore": {"keywords": ["password"]}},
    }
)
said = ["My dog Biscuit saw the vet today.", "My wifi password is hunter2."]
client.add([{"role": "user", "content": t} for t in said], user_id="alice", sync=True)
pets = client.list(user_id="alice", category="pets").memories
assert [m.category for m in pets] == ["pets"] and "Biscuit" in pets[0].content, pets
assert not any("hunter2" in m.content for m in client.iter_memories(user_id="alice", tier="ltm"))
client.put_config({})  # back to the defaults

# m.delete(memory_id), m.delete_all(user_id=)
client.delete(new.id, user_id="alice")
client.erase_user("alice")
