package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
)

// jsonJoin writes the JSON pages of one bbox answer (written to it one
// after another, each closed by endPage) as the one document the unpaged
// answer is: the first page's header members, every page's vertices,
// object ids and attribute values in order, every page's edges (with
// their edge_attributes values) and faces (their indices already count
// the whole answer), count the sum,
// number_matched from the last page, offset from the first, next null. An
// answer of one page comes out byte for byte.
//
// Vertices stream through as they arrive; what follows them in a page
// (ids, attribute values, connectivity: what the server too holds until a
// page's end) is kept until the last page closes the document. It relies
// on what the server's JSON encoder writes: one object without
// whitespace, the header first (no "vertices" member in it), then
// "vertices" (numbers and null only), object_ids, attributes, edges,
// edge_attributes, faces, the other members sorted, count, next.
type jsonJoin struct {
	w     io.Writer
	pages int  // pages ended
	wrote bool // vertex elements written

	// the page being written
	state int    // inHeader, inVertices, inTail
	carry []byte // the end of the header so far, where the marker may start
	depth int    // bracket depth inside the vertex array
	first bool   // the page's first vertex byte is next
	tail  []byte // from the vertex array's closing bracket on

	// the members after the vertices, joined over pages
	ids, edges, faces          []byte // array elements, brackets left off
	hasIDs, hasEdges, hasFaces bool
	attrNames                  []string
	attrs                      [][]byte
	hasEdgeAttrs               bool
	edgeAttrNames              []string
	edgeAttrs                  [][]byte
	extra                      map[string]json.RawMessage
	count                      int64
}

const (
	inHeader = iota
	inVertices
	inTail
)

var verticesMarker = []byte(`"vertices":[`)

// Write takes the next bytes of the current page.
func (j *jsonJoin) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		switch j.state {
		case inHeader:
			all := append(j.carry, p...)
			k := bytes.Index(all, verticesMarker)
			if k < 0 {
				if j.pages == 0 {
					if _, err := j.w.Write(p); err != nil {
						return 0, err
					}
				}
				j.carry = append(j.carry[:0], all[max(0, len(all)-len(verticesMarker)+1):]...)
				return n, nil
			}
			end := k + len(verticesMarker) - len(j.carry) // in p
			if j.pages == 0 {
				if _, err := j.w.Write(p[:end]); err != nil {
					return 0, err
				}
			}
			p = p[end:]
			j.state, j.depth, j.first, j.carry = inVertices, 1, true, j.carry[:0]
		case inVertices:
			i := 0
			for ; i < len(p); i++ {
				if p[i] == '[' {
					j.depth++
				} else if p[i] == ']' {
					if j.depth--; j.depth == 0 {
						break
					}
				}
			}
			if i > 0 {
				if j.first && j.wrote {
					if _, err := j.w.Write([]byte{','}); err != nil {
						return 0, err
					}
				}
				if _, err := j.w.Write(p[:i]); err != nil {
					return 0, err
				}
				j.first, j.wrote = false, true
			}
			p = p[i:]
			if len(p) > 0 {
				j.state = inTail
			}
		case inTail:
			j.tail = append(j.tail, p...)
			p = nil
		}
	}
	return n, nil
}

// endPage closes the current page and returns its next cursor ("" on the
// last page, whose end closes the document).
func (j *jsonJoin) endPage() (string, error) {
	tail := j.tail
	j.state, j.tail = inHeader, j.tail[:0]
	if len(tail) < 2 || tail[0] != ']' || tail[1] != ',' {
		return "", errors.New("a page of the answer is not a bbox document")
	}
	ms, err := members(append([]byte{'{'}, tail[2:]...))
	if err != nil {
		return "", fmt.Errorf("a page of the answer: %w", err)
	}
	first := j.pages == 0
	j.pages++
	next := ""
	for _, m := range ms {
		var err error
		switch m.key {
		case "object_ids":
			j.hasIDs = j.hasIDs || first
			err = joinElems(&j.ids, m.raw)
		case "attributes":
			err = joinNamed(&j.attrNames, &j.attrs, m.raw, first)
		case "edge_attributes":
			j.hasEdgeAttrs = j.hasEdgeAttrs || first
			err = joinNamed(&j.edgeAttrNames, &j.edgeAttrs, m.raw, first)
		case "edges":
			j.hasEdges = j.hasEdges || first
			err = joinElems(&j.edges, m.raw)
		case "faces":
			j.hasFaces = j.hasFaces || first
			err = joinElems(&j.faces, m.raw)
		case "count":
			var n int64
			if err = json.Unmarshal(m.raw, &n); err == nil {
				j.count += n
			}
		case "next":
			var s *string
			if err = json.Unmarshal(m.raw, &s); err == nil && s != nil {
				next = *s
			}
		default:
			if j.extra == nil {
				j.extra = map[string]json.RawMessage{}
			}
			if _, had := j.extra[m.key]; !had || m.key != "offset" { // the answer starts at the first page's offset
				j.extra[m.key] = m.raw
			}
		}
		if err != nil {
			return "", fmt.Errorf("a page of the answer: %s: %w", m.key, err)
		}
	}
	if next != "" {
		return next, nil
	}
	if first { // one page: as it came
		_, err := j.w.Write(tail)
		return "", err
	}
	return "", j.finish()
}

// members lists a JSON object's members in order, values as they stand.
func members(b []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	var out []member
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		out = append(out, member{k.(string), raw})
	}
	return out, nil
}

type member struct {
	key string
	raw json.RawMessage
}

// joinElems appends a compact JSON array's elements to a list of them.
func joinElems(dst *[]byte, raw json.RawMessage) error {
	if len(raw) < 2 || raw[0] != '[' || raw[len(raw)-1] != ']' {
		return fmt.Errorf("%.40q is not an array", raw)
	}
	elems := raw[1 : len(raw)-1]
	if len(elems) == 0 {
		return nil
	}
	if len(*dst) > 0 {
		*dst = append(*dst, ',')
	}
	*dst = append(*dst, elems...)
	return nil
}

// joinNamed appends a page's {name: [values]} object (attributes,
// edge_attributes) to the values joined so far, the first page naming
// them.
func joinNamed(names *[]string, vals *[][]byte, raw json.RawMessage, first bool) error {
	as, err := members(raw)
	if err != nil {
		return err
	}
	if first {
		for _, a := range as {
			*names = append(*names, a.key)
		}
		*vals = make([][]byte, len(as))
	}
	if len(as) != len(*names) {
		return errors.New("pages with different attributes")
	}
	for k, a := range as {
		if a.key != (*names)[k] {
			return errors.New("pages with different attributes")
		}
		if err := joinElems(&(*vals)[k], a.raw); err != nil {
			return err
		}
	}
	return nil
}

// appendKey appends a member's key (after a comma unless first).
func appendKey(dst []byte, k string, first bool) []byte {
	if !first {
		dst = append(dst, ',')
	}
	b, _ := json.Marshal(k)
	return append(append(dst, b...), ':')
}

func appendArray(dst []byte, k string, first bool, elems []byte) []byte {
	dst = append(appendKey(dst, k, first), '[')
	return append(append(dst, elems...), ']')
}

// finish closes the document after the last page, as the server's
// encoder would have.
func (j *jsonJoin) finish() error {
	out := []byte{']'}
	if j.hasIDs {
		out = appendArray(out, "object_ids", false, j.ids)
	}
	out = append(appendKey(out, "attributes", false), '{')
	for k, name := range j.attrNames {
		out = appendArray(out, name, k == 0, j.attrs[k])
	}
	out = append(out, '}')
	if j.hasEdges {
		out = appendArray(out, "edges", false, j.edges)
	}
	if j.hasEdgeAttrs {
		out = append(appendKey(out, "edge_attributes", false), '{')
		for k, name := range j.edgeAttrNames {
			out = appendArray(out, name, k == 0, j.edgeAttrs[k])
		}
		out = append(out, '}')
	}
	if j.hasFaces {
		out = appendArray(out, "faces", false, j.faces)
	}
	keys := make([]string, 0, len(j.extra))
	for k := range j.extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		out = append(appendKey(out, k, false), j.extra[k]...)
	}
	out = strconv.AppendInt(appendKey(out, "count", false), j.count, 10)
	out = append(appendKey(out, "next", false), "null}\n"...)
	_, err := j.w.Write(out)
	return err
}
