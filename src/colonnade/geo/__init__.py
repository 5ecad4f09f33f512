"""Geo data beyond point keys: tile layers (see ``tiles``). The space-filling curves themselves
(``schema.curves``) and the curve transform (``schema.curve``) live with the partition
transforms, which every layer above builds on."""
