"""The datasets the bundled suites read, as a catalogue (:mod:`hammr.datasets.catalogue`):
where each official file comes from, where it goes under ``--data-dir``, its terms, sizes,
checksums and hub copies; :mod:`hammr.datasets.table` renders it for docs/data.md."""
