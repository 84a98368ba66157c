"""Local models through transformers (``pip install 'hammr[local]'``), one module per family.

* :mod:`~hammr.backends.local.owlv2` -- :class:`OWLv2Detector` ('detect')
* :mod:`~hammr.backends.local.depth` -- :class:`DepthModel` ('depth')
* :mod:`~hammr.backends.local.clip` -- :class:`ClipEmbedder` ('similarity', 'object_in_image')
* :mod:`~hammr.backends.local.blip` -- :class:`BlipModel` ('caption', 'vqa')
* :mod:`~hammr.backends.local.blip2` -- :class:`Blip2Model` ('caption', 'vqa')

Importing this package (or any module in it) does not import torch or transformers; models
load on first use, on ``device`` ("auto": cuda, else mps, else cpu).
"""
