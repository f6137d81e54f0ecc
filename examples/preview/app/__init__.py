"""The preview server's process: the app of each database, its HTTP and websocket views.

Everything here runs in the server process, on trio: :class:`PreviewApp` (one
database's app, wired from its parts, design §7.2), :class:`Databases` (a server of
several, design §7.5), the image route (design §7.6) and the dashboard's static files
(design §7.7). It never draws a picture itself (the helpers draw, design §5.4: its
process loads neither numpy nor Pillow), and reads the database only through helper
jobs (:mod:`examples.preview.child`). The server's entry point is
:mod:`examples.preview.server`.
"""

from .config import PreviewConfig as PreviewConfig
from .config import default_cache_dir as default_cache_dir
from .databases import Databases as Databases
from .databases import find_databases as find_databases
from .preview_app import HELPER_PACKAGE as HELPER_PACKAGE
from .preview_app import OPERATION as OPERATION
from .preview_app import PreviewApp as PreviewApp
from .preview_app import open_database as open_database
from .runs import RunTable as RunTable
from .runtime_kinds import PNG_PAYLOADS as PNG_PAYLOADS
from .runtime_kinds import PREVIEW_KINDS as PREVIEW_KINDS
from .static_files import static_pages as static_pages

__all__ = [
    "Databases",
    "HELPER_PACKAGE",
    "OPERATION",
    "PNG_PAYLOADS",
    "PREVIEW_KINDS",
    "PreviewApp",
    "PreviewConfig",
    "RunTable",
    "default_cache_dir",
    "find_databases",
    "open_database",
    "static_pages",
]
