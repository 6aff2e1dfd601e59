"""Named actions, gates and rules of the room topologies, one small module each.

Each module holds the pure logic (a tree, a ring, a grant allocation) and the thin action or
gate that applies it to a role; the role classes register the actions in their ``actions``
dicts, ``gates.py`` and ``rules.py`` register the rest. Nothing here names a topology: a spec
picks these by name.
"""
