#!/usr/bin/env python3
"""Check zvfserve's demo stores with the ZVF reference implementation.

Usage: check_reference.py DEMO_DIR   (DEMO_DIR from `zvfserve demo --truth`)

Runs zarr_vectors.validate.validate(level=5) on every store, then compares
the reference readers' answers with the scene the stores were written from
(DEMO_DIR/truth.json), which is also what zvfserve's reader must return:

  cells      read_points (level 0) = input points (as a set of rows);
             read_object_vertices = each sampled cell's points
  axons      read_polylines (level 0) = input streamlines, vertex for vertex
  skeletons  read_graph edges include every input edge (the reference adds
             spurious parent edges at chunk starts: known quirk, reported)
  meshes     read_mesh faces = input faces (compared by corner coordinates)
  all        every level's full read returns zarr_vectors_level.vertex_count

Prints one line per check and exits 1 if any fails.
"""
import json
import sys
import warnings

import numpy as np

warnings.simplefilter("ignore")

from zarr_vectors.core.arrays import read_object_vertices  # noqa: E402
from zarr_vectors.core.store import (  # noqa: E402
    get_resolution_level, list_resolution_levels, open_store, read_level_metadata)
from zarr_vectors.types.graphs import read_graph  # noqa: E402
from zarr_vectors.types.meshes import read_mesh  # noqa: E402
from zarr_vectors.types.points import read_points  # noqa: E402
from zarr_vectors.types.polylines import read_polylines  # noqa: E402
from zarr_vectors.validate import validate  # noqa: E402

failed = []


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + (f"  ({detail})" if detail else ""))
    if not ok:
        failed.append(name)


def rows(a):
    return np.asarray(a, dtype=np.float32).reshape(-1, 3)


def sorted_rows(a):
    a = rows(a)
    return a[np.lexsort(a.T[::-1])] if len(a) else a


def level_counts(path, reader, per_object=False):
    """A full read of each level returns its vertex_count rows; with
    per_object (polylines) shared metavertices count once per object."""
    root = open_store(path)
    for lvl in list_resolution_levels(root):
        want = read_level_metadata(root, lvl).vertex_count
        if per_object and lvl > 0:
            from zarr_vectors.core.arrays import read_all_object_manifests, read_fragment
            lg = get_resolution_level(root, lvl)
            want = sum(len(read_fragment(lg, cc, f)) for m in read_all_object_manifests(lg) for cc, f in m)
        got = reader(path, lvl)
        check(f"{path.rsplit('/', 1)[-1]} level {lvl}: full read returns {'manifest rows' if per_object and lvl else 'vertex_count'}",
              got == want, f"{got} vs {want}")


def main(d):
    truth = json.load(open(f"{d}/truth.json"))
    for name in ("cells", "axons", "skeletons", "meshes"):
        try:
            r = validate(f"{d}/{name}", level=5)
        except ValueError as e:
            # Reference bug: its consistency check unpacks every
            # cross-chunk record as 2 endpoints, so it crashes on mesh
            # faces (3 endpoints) whenever cross_chunk_links/ has a
            # zarr.json, i.e. on any compressed mesh, its own included.
            if name == "meshes" and "unpack" in str(e):
                print(f"skip {name}: validate(level=5) crashes on 3-endpoint cross-chunk records "
                      "(reference bug, also on its own compressed meshes)")
                continue
            raise
        check(f"{name}: validate(level=5)", r.ok, "; ".join(r.errors[:3]) or f"{len(r.warnings)} warnings")

    # cells
    p = f"{d}/cells"
    t = truth["cells"]
    pos, oids = rows(t["positions"]), np.asarray(t["object_ids"])
    got = read_points(p, level=0)["positions"]
    check("cells: read_points = input points", np.array_equal(sorted_rows(got), sorted_rows(pos)),
          f"{len(got)} vs {len(pos)} rows")
    lg = get_resolution_level(open_store(p), 0)
    sample = sorted(set(np.linspace(0, oids.max(), 25).astype(int).tolist()))

    def obj_rows(o):  # one array per manifest fragment
        parts = [rows(f) for f in read_object_vertices(lg, o)]
        return np.concatenate(parts) if parts else np.zeros((0, 3), np.float32)

    bad = [o for o in sample if not np.array_equal(sorted_rows(obj_rows(o)), sorted_rows(pos[oids == o]))]
    check(f"cells: read_object_vertices = input cell ({len(sample)} cells)", not bad, f"differ: {bad[:5]}")
    level_counts(p, lambda s, lvl: int(read_points(s, level=lvl)["vertex_count"]))

    # axons
    p = f"{d}/axons"
    t = truth["axons"]
    pos, offs = rows(t["positions"]), t["offsets"]
    got = read_polylines(p, level=0)["polylines"]
    want = [pos[offs[i]:offs[i + 1]] for i in range(len(offs) - 1)]
    same = len(got) == len(want) and all(
        np.array_equal(np.concatenate(g) if len(g) else np.zeros((0, 3), np.float32), w) for g, w in zip(got, want))
    check("axons: read_polylines = input streamlines", same, f"{len(got)} vs {len(want)} polylines")
    level_counts(p, lambda s, lvl: int(read_polylines(s, level=lvl)["vertex_count"]), per_object=True)

    # skeletons
    p = f"{d}/skeletons"
    t = truth["skeletons"]
    pos = rows(t["positions"])
    g = read_graph(p, level=0)
    gp = rows(g["positions"])

    def canon(ps, edges):
        return {tuple(sorted((tuple(ps[a]), tuple(ps[b])))) for a, b in np.asarray(edges).reshape(-1, 2)}

    ref, inp = canon(gp, g["edges"]), canon(pos, t["edges"])
    check("skeletons: read_graph positions = input nodes", np.array_equal(sorted_rows(gp), sorted_rows(pos)))
    check("skeletons: every input edge is read back", inp <= ref,
          f"{len(inp - ref)} missing, {len(ref - inp)} spurious (reference quirk: implicit parent i-1 across chunks)")
    level_counts(p, lambda s, lvl: int(read_graph(s, level=lvl)["node_count"]))

    # meshes
    p = f"{d}/meshes"
    t = truth["meshes"]
    pos = rows(t["positions"])
    m = read_mesh(p, level=0)
    mv = rows(m["vertices"])

    def faces(ps, fs):
        out = []
        for f in np.asarray(fs, dtype=np.int64):
            r = [tuple(ps[i].tolist()) for i in f]
            k = min(range(len(r)), key=lambda i: r[i])
            out.append(tuple(r[k:] + r[:k]))
        return sorted(out)

    check("meshes: read_mesh vertices = input vertices", np.array_equal(sorted_rows(mv), sorted_rows(pos)))
    check("meshes: read_mesh faces = input faces", faces(mv, m["faces"]) == faces(pos, t["faces"]),
          f"{len(m['faces'])} vs {len(t['faces'])} faces")
    level_counts(p, lambda s, lvl: int(read_mesh(s, level=lvl)["vertex_count"]))

    print("FAILED: " + ", ".join(failed) if failed else "all reference checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
