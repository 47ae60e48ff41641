package writer

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The reference writer serialises metadata with Python's json module, whose
// output differs from encoding/json (key order is insertion order, floats
// keep a trailing ".0", separators and indentation differ). A tiny ordered
// value type lets the writer reproduce those bytes exactly, so stores diff
// cleanly against reference stores.

// obj is a JSON object with insertion-ordered keys.
type obj []kv

type kv struct {
	k string
	v any
}

// set appends or replaces key k (replacing keeps the original position,
// like a Python dict update).
func (o obj) set(k string, v any) obj {
	for i := range o {
		if o[i].k == k {
			o[i].v = v
			return o
		}
	}
	return append(o, kv{k, v})
}

// jsonNull renders as null.
type jsonNull struct{}

// pyDumps renders v like Python's json.dumps(v) (separators ", " and ": ").
func pyDumps(v any) string {
	var b strings.Builder
	writeFlat(&b, normalise(v), ", ", ": ")
	return b.String()
}

// compactDumps renders v like json.dumps(v, separators=(",", ":")).
func compactDumps(v any) string {
	var b strings.Builder
	writeFlat(&b, normalise(v), ",", ":")
	return b.String()
}

// prettyDumps renders v like json.dumps(v, indent=2), which is how
// zarr-python writes zarr.json on its own encoder path.
func prettyDumps(v any) string {
	var b strings.Builder
	writeIndent(&b, normalise(v), 0)
	return b.String()
}

func writeFlat(b *strings.Builder, v any, itemSep, keySep string) {
	switch t := v.(type) {
	case obj:
		b.WriteByte('{')
		for i, e := range t {
			if i > 0 {
				b.WriteString(itemSep)
			}
			writeString(b, e.k)
			b.WriteString(keySep)
			writeFlat(b, e.v, itemSep, keySep)
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				b.WriteString(itemSep)
			}
			writeFlat(b, e, itemSep, keySep)
		}
		b.WriteByte(']')
	default:
		writeScalar(b, v)
	}
}

func writeIndent(b *strings.Builder, v any, depth int) {
	switch t := v.(type) {
	case obj:
		writeBlock(b, '{', '}', len(t), depth, func(i int) {
			writeString(b, t[i].k)
			b.WriteString(": ")
			writeIndent(b, t[i].v, depth+1)
		})
	case []any:
		writeBlock(b, '[', ']', len(t), depth, func(i int) {
			writeIndent(b, t[i], depth+1)
		})
	default:
		writeScalar(b, v)
	}
}

// writeBlock writes n items (item(i) writes the i-th) between open and
// closing, each on its own line one step deeper than depth, as
// json.dumps(indent=2) does; an empty block stays on one line.
func writeBlock(b *strings.Builder, open, closing byte, n, depth int, item func(i int)) {
	b.WriteByte(open)
	if n == 0 {
		b.WriteByte(closing)
		return
	}
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		newline(b, depth+1)
		item(i)
	}
	newline(b, depth)
	b.WriteByte(closing)
}

// newline starts a line indented depth steps of two spaces.
func newline(b *strings.Builder, depth int) {
	b.WriteByte('\n')
	for range depth {
		b.WriteString("  ")
	}
}

func writeScalar(b *strings.Builder, v any) {
	switch t := v.(type) {
	case nil, jsonNull:
		b.WriteString("null")
	case bool:
		if t {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case string:
		writeString(b, t)
	case int:
		b.WriteString(strconv.Itoa(t))
	case int64:
		b.WriteString(strconv.FormatInt(t, 10))
	case float64:
		b.WriteString(pyFloat(t))
	default:
		// Only the types above are ever built by this package; reaching
		// here is a programming error, rendered visibly rather than
		// panicking.
		b.WriteString("null")
	}
}

// normalise expands typed slices into []any so the indenting writer
// handles them like Python lists.
func normalise(v any) any {
	switch t := v.(type) {
	case obj:
		out := make(obj, len(t))
		for i, e := range t {
			out[i] = kv{e.k, normalise(e.v)}
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = normalise(e)
		}
		return out
	case []float64:
		return anys(t)
	case []int64:
		return anys(t)
	case []string:
		return anys(t)
	}
	return v
}

// anys is s as a []any.
func anys[T any](s []T) []any {
	out := make([]any, len(s))
	for i, e := range s {
		out[i] = e
	}
	return out
}

// pyFloat formats f like Python's float.__repr__ (what json.dumps uses):
// shortest round-trip digits, ".0" on integral values, exponent form
// outside [1e-4, 1e16).
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	a := math.Abs(f)
	if a >= 1e16 || a < 1e-4 {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		// Go writes "1e+16" / "1.5e-05" like Python; nothing to adjust.
		return s
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsRune(s, '.') {
		s += ".0"
	}
	return s
}

// writeString quotes s like Python's json.dumps with ensure_ascii=True.
func writeString(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20 || r > 0x7f:
			write16 := func(u rune) {
				b.WriteString(`\u`)
				b.WriteByte(hex[(u>>12)&0xf])
				b.WriteByte(hex[(u>>8)&0xf])
				b.WriteByte(hex[(u>>4)&0xf])
				b.WriteByte(hex[u&0xf])
			}
			if r > 0xffff {
				r -= 0x10000
				write16(0xd800 + (r>>10)&0x3ff)
				write16(0xdc00 + r&0x3ff)
			} else {
				write16(r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}
