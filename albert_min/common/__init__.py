"""The bottom layer: what every other layer uses, and which imports nothing else of albert_min.

- ``errors``: ``AlbertMinError``, the base of every error the scripts print as one ``error:`` line;
- ``device``: where MindSpore runs (the one call of ``mindspore.set_device``), its CPU threads and memory pool;
- ``environment``: albert_min's environment variables, each read by one parser (``variable``), a bad value
  one error naming it;
- ``parallel``: which worker of a data-parallel (``msrun``) job this process is; ``worker_watch``: which
  worker of a failed job died first, as msrun's scheduler sees it;
- ``safe_output``, ``output_lock``: outputs written atomically, replacing only what albert_min wrote,
  one process per output;
- ``json_files``: JSON files read with every field checked, errors naming the file and key.
"""
