"""The preview's command-line tools for a person, beside the server (design §7.2).

:mod:`~examples.preview.cli.client` saves the images a preview server pushes
(``trio-actors-preview-client``; :mod:`~examples.preview.cli.client_collection` is what
one session saw); :mod:`~examples.preview.cli.embed` draws a database's thumbnails
with the runtime embedded as a library, no server. Each is run with ``python -m``.
"""
