"""What runs in a helper child of the preview server (design §3.9, §5.4, §7.2).

:mod:`~examples.preview.child.helper` is the helper's entry point; it reads the QCoDeS
database (:mod:`~examples.preview.child.qcodes`), draws the thumbnails and previews
(:mod:`~examples.preview.child.draw` over :mod:`~examples.preview.child.drawing`) and
cuts a run's data for the browser (:mod:`~examples.preview.child.run_data`). Nothing
here imports trio (nor attrs or cattrs): the child stays light, and this façade imports
nothing, so the server may use the light modules (the image kinds, PNG checks, the
QCoDeS errors) without loading the rest.
"""
