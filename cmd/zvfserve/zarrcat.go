package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path"
	"strconv"
	"strings"

	"github.com/zvfserve/zvfserve/cmd/internal/cli"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/localfs"
	"github.com/zvfserve/zvfserve/zvf/zarr"
)

func zarrCatCommand() cli.Command {
	return cli.Command{Summary: "print a Zarr v3 array's shape, type, fill value and every value (C order) as JSON", Run: runZarrCat}
}

// splitArrayTarget opens the store at the array's parent and returns the
// array's key there, for local paths and URLs alike.
func splitArrayTarget(target string) (root, key string) {
	q := ""
	if i := strings.IndexByte(target, '?'); i >= 0 {
		target, q = target[:i], target[i:]
	}
	target = strings.TrimRight(target, "/")
	i := strings.LastIndexByte(target, '/')
	if i < 0 || strings.HasSuffix(target[:i+1], "://") {
		// "mem://arr" or "arr": the array is the store root.
		return target + q, ""
	}
	return target[:i] + q, target[i+1:]
}

const zarrCatUsage = `Usage: zvfserve zarr-cat ARRAY

Prints any Zarr v3 array as JSON: shape, data type, fill value and every value in C order.
ARRAY is a local path or URL (file://, mem://, s3://…) of a Zarr v3 array node.
`

func runZarrCat(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("zarr-cat", zarrCatUsage, stderr)
	if err := cli.ParseFlags(fs, args); err != nil {
		return err // flag.ErrHelp, after the usage, exits 0
	}
	if fs.NArg() != 1 {
		return cli.Misuse(fs, "need one ARRAY")
	}
	root, key := splitArrayTarget(fs.Arg(0))
	st, err := openStore(ctx, root, localfs.Options{Logger: toolLogger(stderr)})
	if err != nil {
		return err
	}
	defer st.Close()
	a, err := zarr.OpenArray(ctx, st, key, nil)
	if err != nil {
		if members, ok := groupMembers(ctx, st, key); ok {
			return fmt.Errorf("%w: %s is a Zarr group, not an array; its members: %s", cli.ErrUsage, shownArg(fs.Arg(0)), members)
		}
		return err
	}
	c, err := a.Read(ctx)
	if err != nil {
		return err
	}
	m := a.Meta()
	w := bufio.NewWriter(stdout)
	shape, _ := json.Marshal(m.Shape)
	fmt.Fprintf(w, `{"shape":%s,"data_type":%q,"fill_value":%s,"values":[`, shape, m.DataType.Name, compactJSON(m.FillValue))
	n := int(c.Len())
	var buf []byte
	for i := 0; i < n; i++ {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendElement(buf, c, i)
		if len(buf) > 32<<10 {
			_, _ = w.Write(buf)
			buf = buf[:0]
		}
	}
	_, _ = w.Write(buf)
	_, _ = w.WriteString("]}\n")
	return w.Flush()
}

func compactJSON(raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return []byte("null")
	}
	var out bytes.Buffer
	if err := json.Compact(&out, raw); err != nil {
		return raw
	}
	return out.Bytes()
}

// appendElement renders element i: NaN and infinities as strings, bytes as
// base64, strings as JSON strings, integers exactly.
func appendElement(dst []byte, c *zarr.Chunk, i int) []byte {
	t := c.Type
	if t.Variable() {
		if t.Kind == zarr.KindString {
			b, _ := json.Marshal(string(c.Elems[i]))
			return append(dst, b...)
		}
		return strconv.AppendQuote(dst, base64.StdEncoding.EncodeToString(c.Elems[i]))
	}
	switch t.Kind {
	case zarr.KindBool:
		return strconv.AppendBool(dst, c.Data[i] != 0)
	case zarr.KindInt:
		return strconv.AppendInt(dst, t.At(c.Data, i).I, 10)
	case zarr.KindUint:
		return strconv.AppendUint(dst, t.At(c.Data, i).U, 10)
	case zarr.KindFloat:
		return appendFloatJSON(dst, t.At(c.Data, i).F, t.Size)
	case zarr.KindComplex:
		// Two floats of half the size: element 2i and 2i+1 of the parts.
		part := zarr.DataType{Kind: zarr.KindFloat, Size: t.Size / 2}
		dst = append(dst, '[')
		dst = appendFloatJSON(dst, part.At(c.Data, 2*i).F, part.Size)
		dst = append(dst, ',')
		dst = appendFloatJSON(dst, part.At(c.Data, 2*i+1).F, part.Size)
		return append(dst, ']')
	}
	return append(dst, "null"...)
}

func appendFloatJSON(dst []byte, v float64, size int) []byte {
	switch {
	case math.IsNaN(v):
		return append(dst, `"NaN"`...)
	case math.IsInf(v, 1):
		return append(dst, `"Infinity"`...)
	case math.IsInf(v, -1):
		return append(dst, `"-Infinity"`...)
	}
	bits := 64
	if size <= 4 {
		bits = 32
	}
	return strconv.AppendFloat(dst, v, 'g', -1, bits)
}

// groupMembers lists the members of the group at key with their kinds
// (the first few; the rest counted), for a user who named a group where an
// array was wanted; ok is false when key is no readable group.
func groupMembers(ctx context.Context, st storage.Store, key string) (list string, ok bool) {
	const shown = 8
	b, err := storage.ReadAll(ctx, st, path.Join(key, "zarr.json"), zarr.MaxMetadataBytes)
	if err != nil {
		return "", false
	}
	if n, err := zarr.ParseNode(b); err != nil || n.Type != zarr.NodeGroup {
		return "", false
	}
	prefix := ""
	if key != "" {
		prefix = key + "/"
	}
	l, err := st.List(ctx, prefix)
	if err != nil {
		return "", false
	}
	var names []string
	for _, p := range l.Prefixes[:min(len(l.Prefixes), shown)] {
		name := strings.TrimSuffix(strings.TrimPrefix(p, prefix), "/")
		kind := "not a Zarr node"
		if b, err := storage.ReadAll(ctx, st, path.Join(key, name, "zarr.json"), zarr.MaxMetadataBytes); err == nil {
			if n, err := zarr.ParseNode(b); err == nil {
				kind = string(n.Type)
			}
		}
		names = append(names, fmt.Sprintf("%s (%s)", name, kind))
	}
	if len(names) == 0 {
		return "none", true
	}
	list = strings.Join(names, ", ")
	if more := len(l.Prefixes) - len(names); more > 0 {
		list += fmt.Sprintf(" and %d more", more)
	}
	return list, true
}
