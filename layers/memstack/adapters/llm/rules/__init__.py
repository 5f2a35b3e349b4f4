"""The offline extractor and summariser: English heuristics, no model and no network.

``extractor.RuleExtractor`` decides ADD / UPDATE / DELETE / NONE from rules (corrections, negations,
attribute changes, targets); its helpers are the word lists (``grammar``, ``cues``), the rewrites to
third person (``rewrite``), attribute and target matching (``attributes``, ``targets``).
``extractive_summariser`` is the offline summariser consolidation uses. Chosen with
``MEMSTACK_LLM=local`` (the default).
"""
