"""What clients talk to: the prompt service every front end shares (``service.py``), its client
sessions (``session.py``), the list_changed fan-out (``debounce.py``), the stdio front end and the HTTP one
(``http/``). Below it: identity, then the catalog.
"""
