package cql2

import (
	"fmt"
	"strconv"
	"strings"
)

// Kind is the type of a queryable.
type Kind uint8

// The kinds of queryables.
const (
	// Float: float16, float32 or float64 values (Bits), compared as float64.
	Float Kind = iota + 1
	// Int: signed integers (int8 … int64).
	Int
	// Uint: unsigned integers (uint8 … uint64; bool reads as 0 and 1).
	Uint
	// Categorical: integer codes into Labels, compared by label.
	Categorical
	// String: strings, one per row.
	String
)

func (k Kind) String() string {
	switch k {
	case Float:
		return "float"
	case Int:
		return "int"
	case Uint:
		return "uint"
	case Categorical:
		return "categorical"
	case String:
		return "string"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// The special properties every level may offer (Schema.ObjectID,
// Schema.Group).
const (
	PropObjectID = "object_id"
	PropGroup    = "group"
)

// Queryable is an attribute a filter may name.
type Queryable struct {
	Name string
	Kind Kind
	// Bits is the width of the stored type (16, 32 or 64 for Float; 8 to 64
	// for Int and Uint); 0 leaves it open. A column bound for the attribute
	// must have that width.
	Bits int
	// Channels is the number of values per row; 0 means 1. A filter names
	// channel i of a multi-channel attribute as name[i] (0-based); the
	// attribute alone is not a queryable then.
	Channels int
	// Labels is a categorical attribute's dictionary: code i is Labels[i].
	// Evaluators start with it until a column binds its own.
	Labels []string
	// NullCode, when set, is a categorical attribute's null code: a row of
	// that code is null whatever label the dictionary gives it.
	// Evaluators start with it until a column binds its own.
	NullCode *int64
}

// Schema is what a filter may name at one level: its attributes, and the
// special properties object_id (the row's object, an integer) and group
// (membership of the row's object in a group).
type Schema struct {
	Queryables []Queryable
	ObjectID   bool // object_id is queryable: rows have objects
	Group      bool // group is queryable: the level has groups
}

// schemaIndex is a Schema checked and indexed by name.
type schemaIndex struct {
	s      *Schema
	byName map[string]int
}

func indexSchema(s *Schema) (*schemaIndex, error) {
	x := &schemaIndex{s: s, byName: make(map[string]int, len(s.Queryables))}
	for i, q := range s.Queryables {
		if q.Name == "" {
			return nil, fmt.Errorf("cql2: queryable %d has no name", i)
		}
		if _, dup := x.byName[q.Name]; dup {
			return nil, fmt.Errorf("cql2: queryable %q listed twice", q.Name)
		}
		if (s.ObjectID && q.Name == PropObjectID) || (s.Group && q.Name == PropGroup) {
			return nil, fmt.Errorf("cql2: queryable %q hides the special property of that name", q.Name)
		}
		if q.Kind < Float || q.Kind > String {
			return nil, fmt.Errorf("cql2: queryable %q has kind %v", q.Name, q.Kind)
		}
		if q.Channels < 0 || q.Bits < 0 || q.Bits > 64 {
			return nil, fmt.Errorf("cql2: queryable %q has %d channels, %d bits", q.Name, q.Channels, q.Bits)
		}
		x.byName[q.Name] = i
	}
	return x, nil
}

// Special references (ref.attr < 0).
const (
	refObjectID = -1
	refGroup    = -2
)

// ref is a resolved property: a queryable's channel, or a special one.
type ref struct {
	attr    int // index into Schema.Queryables, or refObjectID, refGroup
	channel int
}

// resolve finds the queryable name names.
func (x *schemaIndex) resolve(name string) (ref, error) {
	if i, ok := x.byName[name]; ok {
		q := x.s.Queryables[i]
		if q.Channels > 1 {
			return ref{}, propErrorf(name, "property %q has %d channels; name one as %s[0] to %s[%d]", name, q.Channels, name, name, q.Channels-1)
		}
		return ref{attr: i}, nil
	}
	if x.s.ObjectID && name == PropObjectID {
		return ref{attr: refObjectID}, nil
	}
	if x.s.Group && name == PropGroup {
		return ref{attr: refGroup}, nil
	}
	if open := strings.LastIndexByte(name, '['); open > 0 && strings.HasSuffix(name, "]") {
		base, digits := name[:open], name[open+1:len(name)-1]
		if i, ok := x.byName[base]; ok {
			q := x.s.Queryables[i]
			ch, err := strconv.Atoi(digits)
			if err != nil || strconv.Itoa(ch) != digits {
				return ref{}, propErrorf(name, "unknown property %q: a channel is named %s[i], i a decimal number without leading zeros", name, base)
			}
			if q.Channels <= 1 {
				return ref{}, propErrorf(name, "unknown property %q: %q has one channel; name it %s", name, base, base)
			}
			if ch >= q.Channels {
				return ref{}, propErrorf(name, "unknown property %q: %q has %d channels, %s[0] to %s[%d]", name, base, q.Channels, base, base, q.Channels-1)
			}
			return ref{attr: i, channel: ch}, nil
		}
	}
	return ref{}, propErrorf(name, "unknown property %q", name)
}

// describe names the type of a resolved property for messages: float32,
// int16, categorical, object_id (integer), …
func (x *schemaIndex) describe(r ref) string {
	switch r.attr {
	case refObjectID:
		return "an integer (object id)"
	case refGroup:
		return "a group"
	}
	q := x.s.Queryables[r.attr]
	switch q.Kind {
	case Float, Int, Uint:
		if q.Bits > 0 {
			return q.Kind.String() + strconv.Itoa(q.Bits)
		}
		return q.Kind.String()
	case Categorical:
		return "categorical (compared by label)"
	}
	return q.Kind.String()
}
