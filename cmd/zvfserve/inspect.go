package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/zvfserve/zvfserve/cmd/internal/cli"
	"github.com/zvfserve/zvfserve/zvf"
)

func inspectCommand() cli.Command {
	return cli.Command{Summary: "summarise a store: version, geometry, levels, counts, attributes", Run: runInspect}
}

const inspectUsage = `Usage: zvfserve inspect [--json] STORE

Summarises a store: zv_version and layout (per_chunk_arrays for ZVF 0.6/0.7, chunk_grid_arrays for
0.9), geometry, axes, bounds, capabilities, and per level the chunk and bin shape, counts of chunks,
vertices, objects and groups, the vertex attributes, and the link (per-edge) attributes of stores that
have any. --json prints the descriptor
GET /api/v1/stores/{store} returns, less the members that are a server's URLs (queryables,
neuroglancer).
`

func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("inspect", inspectUsage, stderr)
	asJSON := fs.Bool("json", false, "print the descriptor as JSON")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err // flag.ErrHelp, after the usage, exits 0
	}
	if fs.NArg() != 1 {
		return cli.Misuse(fs, "need one STORE")
	}
	s, closeStore, err := openOneFor(ctx, fs.Arg(0), "inspect", toolLogger(stderr))
	if err != nil {
		return err
	}
	defer closeStore()
	info := s.Info()
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(info)
	}
	axes := make([]string, len(info.Axes))
	for i, a := range info.Axes {
		axes[i] = a.Name
		if a.Unit != "" {
			axes[i] += " (" + a.Unit + ")"
		}
	}
	layout := info.Layout
	if info.Sharded {
		layout += ", sharded"
	}
	if info.SkeletonLayout != "" {
		layout += ", skeleton " + info.SkeletonLayout
	}
	fmt.Fprintf(stdout, "store        %s\nzv_version   %s\nlayout       %s\ngeometry     %s\naxes         %s\nbounds       %v – %v\nvertices     %s × %d\nlinks        %s\ncapabilities %s\n\n",
		info.Name, info.ZVVersion, layout, strings.Join(info.GeometryTypes, ", "), strings.Join(axes, ", "), info.Bounds[0], info.Bounds[1],
		info.VertexDType, info.Dims, info.LinksConvention, strings.Join(info.Capabilities, ", "))
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	// The link attributes column only for stores with some: the table of
	// every other store reads as it did.
	links := false
	for _, l := range info.Levels {
		links = links || len(l.LinkAttributes) > 0
	}
	head := "level\tchunk shape\tbin shape\tchunks\tvertices\tobjects\tgroups\tattributes"
	if links {
		head += "\tlink attributes"
	}
	fmt.Fprintln(tw, head)
	for _, l := range info.Levels {
		fmt.Fprintf(tw, "%d\t%v\t%v\t%d\t%d\t%d\t%d\t%s", l.Level, l.ChunkShape, l.BinShape, l.ChunkCount, l.VertexCount, l.ObjectCount, l.GroupCount, attrList(l.VertexAttributes))
		if links {
			fmt.Fprintf(tw, "\t%s", attrList(l.LinkAttributes))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// attrList is a table cell naming attributes: name:dtype, ×channels when
// several, the number of categories of a categorical one.
func attrList(as []zvf.AttrInfo) string {
	var out []string
	for _, a := range as {
		s := fmt.Sprintf("%s:%s", a.Name, a.DType)
		if a.Channels > 1 {
			s += fmt.Sprintf("×%d", a.Channels)
		}
		if a.Categories != nil {
			s += fmt.Sprintf("[%d categories]", len(a.Categories))
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}
