package cql2

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Expr is a boolean expression: *And, *Or, *Not, *Compare, *Between, *In,
// *Like, *IsNull or BoolLit. Text and JSON that mean the same give equal
// trees (reflect.DeepEqual): "a NOT LIKE p" is &Not{&Like{…}}, as the JSON
// {"op":"not","args":[{"op":"like",…}]} is; a chain "a AND b AND c" is one
// *And with three arguments, as {"op":"and","args":[a,b,c]} is, while
// "(a AND b) AND c" nests.
type Expr interface {
	// String is the expression in cql2-text; parsing it gives an equal tree.
	String() string
	appendText(b []byte) []byte
	appendJSON(b []byte) []byte
}

// Scalar is an operand: Property, NumberLit, StringLit or BoolLit.
type Scalar interface {
	String() string
	appendText(b []byte) []byte
	appendJSON(b []byte) []byte
	scalar()
}

// And is true when every argument is (two or more).
type And struct{ Args []Expr }

// Or is true when any argument is (two or more).
type Or struct{ Args []Expr }

// Not negates its argument (unknown stays unknown).
type Not struct{ Arg Expr }

// CompareOp is a binary comparison operator, spelled as in cql2-text.
type CompareOp string

// The comparison operators.
const (
	Eq CompareOp = "="
	Ne CompareOp = "<>"
	Lt CompareOp = "<"
	Le CompareOp = "<="
	Gt CompareOp = ">"
	Ge CompareOp = ">="
)

// flip is the operator with its operands swapped: 3 < x is x > 3.
func (op CompareOp) flip() CompareOp {
	switch op {
	case Lt:
		return Gt
	case Le:
		return Ge
	case Gt:
		return Lt
	case Ge:
		return Le
	}
	return op
}

// Compare is Left Op Right.
type Compare struct {
	Op          CompareOp
	Left, Right Scalar
}

// Between is Low <= Value <= High.
type Between struct{ Value, Low, High Scalar }

// In is true when Value equals one of List (not empty).
type In struct {
	Value Scalar
	List  []Scalar
}

// Like matches Value against Pattern: % any run of characters, _ one
// character, \ makes the next character literal; case-sensitive.
type Like struct {
	Value   Scalar
	Pattern string
}

// IsNull is true when Value is null.
type IsNull struct{ Value Scalar }

// Property names a queryable: an attribute, one channel of a multi-channel
// attribute (name[i]), object_id or group.
type Property struct{ Name string }

// NumberLit is a numeric literal. Float is its value read as float64
// (nearest); an integer literal (digits with an optional sign, no point or
// exponent) whose value fits 64 bits is also held exactly: Int is set and
// the value is Mag, negated when Neg (never a negative zero).
type NumberLit struct {
	Float float64
	Int   bool
	Neg   bool
	Mag   uint64
}

// StringLit is a character literal.
type StringLit struct{ Value string }

// BoolLit is TRUE or FALSE, as a filter of its own or as an operand.
type BoolLit struct{ Value bool }

func (Property) scalar()  {}
func (NumberLit) scalar() {}
func (StringLit) scalar() {}
func (BoolLit) scalar()   {}

func (e *And) String() string      { return string(e.appendText(nil)) }
func (e *Or) String() string       { return string(e.appendText(nil)) }
func (e *Not) String() string      { return string(e.appendText(nil)) }
func (e *Compare) String() string  { return string(e.appendText(nil)) }
func (e *Between) String() string  { return string(e.appendText(nil)) }
func (e *In) String() string       { return string(e.appendText(nil)) }
func (e *Like) String() string     { return string(e.appendText(nil)) }
func (e *IsNull) String() string   { return string(e.appendText(nil)) }
func (p Property) String() string  { return string(p.appendText(nil)) }
func (n NumberLit) String() string { return string(n.appendText(nil)) }
func (s StringLit) String() string { return string(s.appendText(nil)) }
func (v BoolLit) String() string   { return string(v.appendText(nil)) }

// FormatJSON is e in cql2-json; ParseJSON of it gives an equal tree.
func FormatJSON(e Expr) string { return string(e.appendJSON(nil)) }

// appendGroup writes args joined by sep, parenthesising those that are
// themselves AND or OR, so that the text keeps the tree's shape.
func appendGroup(b []byte, args []Expr, sep string) []byte {
	for i, a := range args {
		if i > 0 {
			b = append(b, sep...)
		}
		switch a.(type) {
		case *And, *Or:
			b = append(b, '(')
			b = a.appendText(b)
			b = append(b, ')')
		default:
			b = a.appendText(b)
		}
	}
	return b
}

func (e *And) appendText(b []byte) []byte { return appendGroup(b, e.Args, " AND ") }
func (e *Or) appendText(b []byte) []byte  { return appendGroup(b, e.Args, " OR ") }

func (e *Not) appendText(b []byte) []byte {
	// The negated predicates print in their own form; parsing it gives
	// Not{…} again.
	switch a := e.Arg.(type) {
	case *Like:
		b = a.Value.appendText(b)
		b = append(b, " NOT LIKE "...)
		return StringLit{a.Pattern}.appendText(b)
	case *Between:
		return a.appendTextOp(b, " NOT BETWEEN ")
	case *In:
		return a.appendTextOp(b, " NOT IN (")
	case *IsNull:
		b = a.Value.appendText(b)
		return append(b, " IS NOT NULL"...)
	}
	switch e.Arg.(type) {
	case *And, *Or:
		b = append(b, "NOT ("...)
		b = e.Arg.appendText(b)
		return append(b, ')')
	}
	// A comparison, NOT, TRUE or FALSE needs no parentheses (which would
	// count as nesting).
	b = append(b, "NOT "...)
	return e.Arg.appendText(b)
}

func (e *Compare) appendText(b []byte) []byte {
	b = e.Left.appendText(b)
	b = append(b, ' ')
	b = append(b, e.Op...)
	b = append(b, ' ')
	return e.Right.appendText(b)
}

func (e *Between) appendText(b []byte) []byte { return e.appendTextOp(b, " BETWEEN ") }

func (e *Between) appendTextOp(b []byte, op string) []byte {
	b = e.Value.appendText(b)
	b = append(b, op...)
	b = e.Low.appendText(b)
	b = append(b, " AND "...)
	return e.High.appendText(b)
}

func (e *In) appendText(b []byte) []byte { return e.appendTextOp(b, " IN (") }

func (e *In) appendTextOp(b []byte, op string) []byte {
	b = e.Value.appendText(b)
	b = append(b, op...)
	for i, v := range e.List {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = v.appendText(b)
	}
	return append(b, ')')
}

func (e *Like) appendText(b []byte) []byte {
	b = e.Value.appendText(b)
	b = append(b, " LIKE "...)
	return StringLit{e.Pattern}.appendText(b)
}

func (e *IsNull) appendText(b []byte) []byte {
	b = e.Value.appendText(b)
	return append(b, " IS NULL"...)
}

func (p Property) appendText(b []byte) []byte {
	if bareName(p.Name) {
		return append(b, p.Name...)
	}
	b = append(b, '"')
	b = append(b, strings.ReplaceAll(p.Name, `"`, `""`)...)
	return append(b, '"')
}

func (n NumberLit) appendText(b []byte) []byte {
	if n.Int {
		if n.Neg {
			b = append(b, '-')
		}
		return strconv.AppendUint(b, n.Mag, 10)
	}
	start := len(b)
	b = strconv.AppendFloat(b, n.Float, 'g', -1, 64)
	// A whole number printed without point or exponent would read back as
	// an integer literal; keep it a decimal one.
	if !strings.ContainsAny(string(b[start:]), ".eEnN") {
		b = append(b, ".0"...)
	}
	return b
}

func (s StringLit) appendText(b []byte) []byte {
	b = append(b, '\'')
	b = append(b, strings.ReplaceAll(s.Value, "'", "''")...)
	return append(b, '\'')
}

func (v BoolLit) appendText(b []byte) []byte {
	if v.Value {
		return append(b, "TRUE"...)
	}
	return append(b, "FALSE"...)
}

// jsonArg writes one argument of an operator: an operand's appendJSON or
// a list.
type jsonArg func([]byte) []byte

func (f jsonArg) appendJSON(b []byte) []byte { return f(b) }

// appendJSONOp writes an operator as cql2-json does: {"op": op, "args":
// [...]}.
func appendJSONOp[T interface{ appendJSON([]byte) []byte }](b []byte, op string, args []T) []byte {
	b = append(b, `{"op":`...)
	b = strconv.AppendQuote(b, op)
	b = append(b, `,"args":`...)
	b = appendJSONArray(b, args)
	return append(b, '}')
}

func appendJSONArray[T interface{ appendJSON([]byte) []byte }](b []byte, items []T) []byte {
	b = append(b, '[')
	for i, v := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = v.appendJSON(b)
	}
	return append(b, ']')
}

func (e *And) appendJSON(b []byte) []byte { return appendJSONOp(b, "and", e.Args) }
func (e *Or) appendJSON(b []byte) []byte  { return appendJSONOp(b, "or", e.Args) }
func (e *Not) appendJSON(b []byte) []byte { return appendJSONOp(b, "not", []Expr{e.Arg}) }
func (e *Compare) appendJSON(b []byte) []byte {
	return appendJSONOp(b, string(e.Op), []Scalar{e.Left, e.Right})
}
func (e *Between) appendJSON(b []byte) []byte {
	return appendJSONOp(b, "between", []Scalar{e.Value, e.Low, e.High})
}
func (e *In) appendJSON(b []byte) []byte {
	return appendJSONOp(b, "in", []jsonArg{e.Value.appendJSON, func(b []byte) []byte { return appendJSONArray(b, e.List) }})
}
func (e *Like) appendJSON(b []byte) []byte {
	return appendJSONOp(b, "like", []Scalar{e.Value, StringLit{e.Pattern}})
}
func (e *IsNull) appendJSON(b []byte) []byte { return appendJSONOp(b, "isNull", []Scalar{e.Value}) }

func (p Property) appendJSON(b []byte) []byte {
	b = append(b, `{"property":`...)
	b = appendJSONString(b, p.Name)
	return append(b, '}')
}

// appendJSON writes the literal as its text does: every number the text
// form prints is also a JSON number.
func (n NumberLit) appendJSON(b []byte) []byte { return n.appendText(b) }
func (s StringLit) appendJSON(b []byte) []byte { return appendJSONString(b, s.Value) }
func (v BoolLit) appendJSON(b []byte) []byte {
	if v.Value {
		return append(b, "true"...)
	}
	return append(b, "false"...)
}

// appendJSONString writes s as a JSON string: valid UTF-8 as it is (but
// for quotes, backslashes and control characters), anything else escaped.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// Identifier characters of cql2-text (the standard's identifierStart and
// identifierPart, to the precision of Unicode's categories).
func identStart(r rune) bool {
	return r == ':' || r == '_' || unicode.IsLetter(r)
}

func identPart(r rune) bool {
	return identStart(r) || r == '.' || ('0' <= r && r <= '9') || unicode.Is(unicode.Mn, r) || r == '\u203f' || r == '\u2040'
}

// keyword is the reserved word s spells (ASCII letters, any case), or "":
// a property of that name must be double-quoted.
func keyword(s string) string {
	if len(s) < 2 || len(s) > 7 {
		return ""
	}
	var up [7]byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		up[i] = c
	}
	switch k := string(up[:len(s)]); k {
	case "AND", "OR", "NOT", "LIKE", "BETWEEN", "IN", "IS", "NULL", "TRUE", "FALSE":
		return k
	}
	return ""
}

// bareName reports whether name reads back unquoted: an identifier that
// is no keyword, optionally followed by a channel suffix [digits].
func bareName(name string) bool {
	base := name
	if i := strings.IndexByte(name, '['); i >= 0 {
		base = name[:i]
		suffix := name[i:]
		if len(suffix) < 3 || suffix[len(suffix)-1] != ']' {
			return false
		}
		for _, c := range []byte(suffix[1 : len(suffix)-1]) {
			if c < '0' || c > '9' {
				return false
			}
		}
	}
	if base == "" || keyword(base) != "" || !utf8.ValidString(base) {
		return false
	}
	for i, r := range base {
		if i == 0 && !identStart(r) || !identPart(r) {
			return false
		}
	}
	return true
}
