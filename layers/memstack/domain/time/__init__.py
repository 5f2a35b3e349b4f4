"""Time in the domain: reading timestamps, resolving relative dates, query windows, allowed range.

``parse`` reads message timestamps (ISO 8601, epochs, human forms); ``relative`` rewrites "yesterday"
in a message against the message's own time; ``windows`` turns a query's time phrase into a window and
scores closeness to it; ``calendar_words`` is the English vocabulary both share; ``bounds`` is the one
range every stored or queried time must fall in.
"""
