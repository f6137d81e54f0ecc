"""The live measurement-preview server of QCoDeS databases (design §7.2), by process.

* :mod:`~examples.preview.server`: the server's entry point (``python -m
  examples.preview.server``, ``trio-actors-preview``), serving
  :mod:`~examples.preview.app`: what runs in the server process (the app of each
  database, its HTTP routes and websocket views);
* :mod:`~examples.preview.child`: what runs in a helper child (reading QCoDeS, drawing,
  a run's data for the browser), never trio;
* :mod:`~examples.preview.cli`: the command-line tools for a person (the client, the
  embedded runtime);
* :mod:`~examples.preview.sample_db`: the sample database the server serves when given
  none.

This façade imports nothing: a helper child imports the package on its way to
:mod:`~examples.preview.child`.
"""
