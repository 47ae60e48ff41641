package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/zvfserve/zvfserve/cmd/internal/cli"
	"github.com/zvfserve/zvfserve/zvf/demo"
	"github.com/zvfserve/zvfserve/zvf/storage/localfs"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

// demoCommand writes the synthetic demo stores (zvf/demo) into a folder or
// any storage URL.
func demoCommand() cli.Command {
	return cli.Command{Summary: "write the synthetic demo stores (cells, axons, skeletons, meshes) into OUT", Run: runDemo}
}

const demoUsage = `Usage: zvfserve demo [--seed S] [--scale N] [--codec none|zstd|blosc] [--truth FILE] OUT

Writes one ZVF store per geometry family into OUT (a folder, file://, mem://, s3://, gs:// or azblob:// URL).
OUT must not be inside a store (a folder with Zarr metadata, or one below it), nor a store itself.
`

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := cli.NewFlagSet("demo", demoUsage, stderr)
	seed := fs.Int64("seed", 1, "random seed of the scene")
	scale := fs.Float64("scale", 1, "multiplies object counts (1 is about 0.17 million vertices, 10 about 1.7 million)")
	codecName := fs.String("codec", "none", "blob codec of level 0: none, zstd or blosc")
	truthPath := fs.String("truth", "", "also write the scene's geometry as JSON to this file (for .ci/check_reference.sh)")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err // flag.ErrHelp, after the usage, exits 0
	}
	if fs.NArg() != 1 {
		return cli.Misuse(fs, "need exactly one OUT argument")
	}
	codec, err := writer.ParseCodec(*codecName)
	if err != nil {
		// The flag and what it takes, not the writer's error (which names
		// its own parameter, not the flag).
		return fmt.Errorf("%w: --codec %s: want none, zstd or blosc (the blob codec of level 0)", cli.ErrUsage, *codecName)
	}
	o := demo.Options{Seed: *seed, Scale: *scale, Codec: codec}
	out := fs.Arg(0)
	// The demo writes whole stores: inside another one they would become
	// part of it (and its validation's problems).
	local := ""
	switch {
	case !strings.Contains(out, "://"):
		local = out
	case strings.HasPrefix(out, "file://"):
		if u, err := url.Parse(out); err == nil {
			local = u.Path
		}
	}
	if local != "" {
		store, err := storeAround(local)
		if err != nil {
			return err
		}
		if abs, err := filepath.Abs(local); err == nil && store == abs {
			return fmt.Errorf("%w: %s is a store; write the demo into a folder outside any store", cli.ErrUsage, out)
		}
		if store != "" {
			return fmt.Errorf("%w: %s is inside the store %s; write the demo into a folder outside any store", cli.ErrUsage, out, store)
		}
	}
	if !strings.Contains(out, "://") {
		// A plain path is a folder the command may create; URLs name
		// buckets that must exist.
		if err := os.MkdirAll(out, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", out, err)
		}
	}
	w, err := openStore(ctx, out, localfs.Options{Logger: toolLogger(stderr)})
	if err != nil {
		return fmt.Errorf("open %s: %w", out, err)
	}
	defer func() {
		if cerr := w.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close %s: %w", out, cerr)
		}
	}()
	if local == "" {
		// An object store's prefix: it must not be a store itself (what
		// lies above a prefix is another URL).
		if l, err := w.List(ctx, ""); err == nil && isZarrNode(ctx, w, "", l) {
			return fmt.Errorf("%w: %s is a store; write the demo into a prefix outside any store", cli.ErrUsage, out)
		}
	}
	infos, err := demo.Build(ctx, w, o)
	if err != nil {
		return err
	}
	for _, in := range infos {
		fmt.Fprintf(stdout, "%-10s %-12s %9d vertices  %d levels  %s/%s\n", in.Name, in.Geometry, in.Vertices, in.Levels, out, in.Prefix)
	}
	if *truthPath != "" {
		return writeTruth(*truthPath, o)
	}
	return nil
}

func writeTruth(path string, o demo.Options) (err error) {
	sc, err := demo.Generate(o)
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("truth: %w", err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("truth: %w", cerr)
		}
	}()
	return sc.WriteTruth(f)
}
