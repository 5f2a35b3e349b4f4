"""The offline extractor and summariser: English heuristics, no model and no network.

``extractor.RuleExtractor`` decides ADD / UPDATE / DELETE / NONE / CONFLICT from rules. It reads a
message sentence by sentence (``sentences``), each sentence clause by clause (``clauses``: an
elaboration joins the clause it elaborates), each clause as a statement (``statements``: is it
worth a memory, its third-person rewrite) and what it does to the speaker's memories
(``decisions``, ``corrections``), over what one message shares (``turn``). Its helpers are the
word lists (``grammar``, ``cues``), the rewrites to third person (``rewrite``), who "we" is
(``we``), "her" / "there" (``refs``), answers completed from a question (``answers``), clauses
without their "I" (``subjectless``), pasted code (``pasted``), attribute and target matching
(``attributes``, ``targets``). ``extractive_summariser`` is the offline summariser consolidation
uses. Chosen with ``MEMSTACK_LLM=local`` (the default).
"""
