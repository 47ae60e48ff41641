#!/usr/bin/env python3
"""Write sharded copies of reference fixtures with the reference's own sharder.

Usage: make_sharded_fixtures.py FIXTURES_DIR NAME [NAME ...]

For each NAME, copies FIXTURES_DIR/NAME.zarrvectors to
FIXTURES_DIR/NAME_sharded.zarrvectors and runs
zarr_vectors.sharding.io.shard_store(layout=octree, shard_size=4) on it: the
per-chunk blobs move into __shard_NNNNNN arrays with a shard_index. Then it
checks, with the reference, that the copy validates (level 5) and that every
level's full read returns the same rows as the unsharded store, so the
unsharded store's NAME.expected.json answers hold for the sharded copy too
(zvf/reference_test.go reuses them).

Run it with the refwriter venv (../shared/tools/refwriter/README.md).
"""
import shutil
import sys
import warnings
from pathlib import Path

import numpy as np

warnings.simplefilter("ignore")

from zarr_vectors.core.store import list_resolution_levels, open_store  # noqa: E402
from zarr_vectors.sharding.io import shard_store  # noqa: E402
from zarr_vectors.sharding.layout import ShardLayout  # noqa: E402
from zarr_vectors.types.points import read_points  # noqa: E402
from zarr_vectors.validate import validate  # noqa: E402


def level_rows(path):
    out = {}
    for lvl in list_resolution_levels(open_store(str(path))):
        pos = np.asarray(read_points(str(path), level=lvl)["positions"], dtype=np.float32).reshape(-1, 3)
        out[lvl] = pos[np.lexsort(pos.T[::-1])] if len(pos) else pos
    return out


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    root = Path(argv[1])
    failed = False
    for name in argv[2:]:
        src, dst = root / f"{name}.zarrvectors", root / f"{name}_sharded.zarrvectors"
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(src, dst)
        for p in dst.rglob("*"):  # fixtures are committed read-only
            p.chmod(0o755 if p.is_dir() else 0o644)
        info = shard_store(dst, ShardLayout.OCTREE, shard_size=4)
        report = validate(str(dst), level=5)
        ok = getattr(report, "ok", None)
        if ok is None:
            ok = bool(report.get("ok", report.get("valid", False))) if isinstance(report, dict) else bool(report)
        want, got = level_rows(src), level_rows(dst)
        same = want.keys() == got.keys() and all(np.array_equal(want[k], got[k]) for k in want)
        print(f"{name}: {info['shards_created']} shards, {info['chunks_packed']} chunks; "
              f"validate {'ok' if ok else 'FAILED'}; reads {'equal' if same else 'DIFFER'}")
        failed |= not (ok and same)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
