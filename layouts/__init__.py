"""gdsfactory layouts of LUMION meshes (optional extra ``layout``).

``layouts.mesh_cell.mesh_cell("smartlight")`` draws a mesh; ``layouts.export.write_layout``
writes the GDS, pad map and PNG (``lumion layout``). Importing this package does not
import gdsfactory: every function that draws imports it when called. See docs/layout.md.
"""

from photonics import __version__

__all__ = ["__version__"]
