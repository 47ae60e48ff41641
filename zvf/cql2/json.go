package cql2

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode/utf8"
)

// ParseJSON parses a cql2-json filter (OGC 21-065r2 §8, the comparison
// subset): {"op": …, "args": […]} objects, {"property": name}, strings,
// numbers and booleans; "in" takes [value, [list]], "between" three
// arguments, "and" and "or" two or more, "not" and "isNull" one.
func ParseJSON(src []byte) (Expr, error) {
	if len(src) > MaxLength {
		return nil, errorf("filter is %d bytes long; the most accepted is %d", len(src), MaxLength)
	}
	// Bound the nesting before decoding, so that the decoder's own
	// recursion stays shallow too.
	if off, ok := jsonDepthOK(src); !ok {
		pos := charPos(string(src), off)
		return nil, &Error{Msg: fmt.Sprintf("filter nested deeper than %d at position %d", MaxDepth, pos), Pos: pos}
	}
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, jsonSyntaxError(src, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		off := int(dec.InputOffset())
		pos := charPos(string(src), off)
		return nil, &Error{Msg: fmt.Sprintf("invalid JSON at position %d: data after the filter", pos), Pos: pos}
	}
	return jsonExpr(v, 0)
}

func jsonSyntaxError(src []byte, err error) error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		off := int(se.Offset)
		if off > 0 {
			off-- // Offset counts the byte that was wrong
		}
		pos := charPos(string(src), off)
		return &Error{Msg: fmt.Sprintf("invalid JSON at position %d: %s", pos, strings.TrimPrefix(se.Error(), "json: ")), Pos: pos}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		pos := charPos(string(src), len(src))
		if len(bytes.TrimSpace(src)) == 0 {
			return &Error{Msg: "empty filter", Pos: 0}
		}
		return &Error{Msg: fmt.Sprintf("invalid JSON at position %d: unexpected end of input", pos), Pos: pos}
	}
	return errorf("invalid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
}

// jsonDepthOK scans src for arrays and objects nested deeper than the
// grammar can use (each operator is an object holding an array), and
// returns the offset where the limit is crossed.
func jsonDepthOK(src []byte) (int, bool) {
	const most = 2*MaxDepth + 4
	depth, inString := 0, false
	for i := 0; i < len(src); i++ {
		c := src[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			depth++
			if depth > most {
				return i, false
			}
		case ']', '}':
			depth--
		}
	}
	return 0, true
}

// describe names a decoded JSON value's kind for a message.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return fmt.Sprintf("boolean %v", v)
	case json.Number:
		return "number " + truncate(string(v))
	case string:
		return "string " + truncate(string(StringLit{v}.appendText(nil)))
	case []any:
		return "an array"
	case map[string]any:
		if op, ok := v["op"].(string); ok {
			return fmt.Sprintf("operator %q", truncate(op))
		}
		return "an object with keys " + strings.Join(sortedKeys(v), ", ")
	}
	return fmt.Sprintf("%T", v)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, fmt.Sprintf("%q", truncate(k)))
	}
	sort.Strings(keys)
	return keys
}

// jsonExpr converts a decoded boolean expression.
func jsonExpr(v any, depth int) (Expr, error) {
	if depth > MaxDepth {
		return nil, errorf("filter nested deeper than %d", MaxDepth)
	}
	switch v := v.(type) {
	case bool:
		return BoolLit{Value: v}, nil
	case map[string]any:
		if _, ok := v["op"]; ok {
			return jsonOp(v, depth)
		}
	}
	return nil, errorf("expected a boolean expression ({\"op\": …, \"args\": […]}, true or false), got %s", describe(v))
}

func jsonOp(m map[string]any, depth int) (Expr, error) {
	op, ok := m["op"].(string)
	if !ok {
		return nil, errorf(`"op" must be a string, got %s`, describe(m["op"]))
	}
	for k := range m {
		if k != "op" && k != "args" {
			return nil, errorf("operator %q has an unknown member %q", truncate(op), truncate(k))
		}
	}
	rawArgs, ok := m["args"]
	if !ok {
		return nil, errorf(`operator %q has no "args"`, truncate(op))
	}
	args, ok := rawArgs.([]any)
	if !ok {
		return nil, errorf(`"args" of %q must be an array, got %s`, truncate(op), describe(rawArgs))
	}
	nargs := func(want int) error {
		if len(args) != want {
			return errorf("%q takes %d argument%s, got %d", op, want, plural(want), len(args))
		}
		return nil
	}
	// operand checks the argument count and converts the first argument,
	// the value each comparison-like operator tests.
	operand := func(want int) (Scalar, error) {
		if err := nargs(want); err != nil {
			return nil, err
		}
		return jsonScalar(args[0], op)
	}
	switch op {
	case "and", "or":
		if len(args) < 2 {
			return nil, errorf("%q takes at least 2 arguments, got %d", op, len(args))
		}
		list := make([]Expr, len(args))
		for i, a := range args {
			e, err := jsonExpr(a, depth+1)
			if err != nil {
				return nil, err
			}
			list[i] = e
		}
		if op == "and" {
			return &And{Args: list}, nil
		}
		return &Or{Args: list}, nil
	case "not":
		if err := nargs(1); err != nil {
			return nil, err
		}
		e, err := jsonExpr(args[0], depth+1)
		if err != nil {
			return nil, err
		}
		return &Not{Arg: e}, nil
	case "=", "<>", "<", "<=", ">", ">=":
		l, err := operand(2)
		if err != nil {
			return nil, err
		}
		r, err := jsonScalar(args[1], op)
		if err != nil {
			return nil, err
		}
		return &Compare{Op: CompareOp(op), Left: l, Right: r}, nil
	case "between":
		if err := nargs(3); err != nil {
			return nil, err
		}
		var s [3]Scalar
		for i := range s {
			v, err := jsonScalar(args[i], op)
			if err != nil {
				return nil, err
			}
			s[i] = v
		}
		return &Between{Value: s[0], Low: s[1], High: s[2]}, nil
	case "in":
		val, err := operand(2)
		if err != nil {
			return nil, err
		}
		raw, ok := args[1].([]any)
		if !ok || len(raw) == 0 {
			return nil, errorf(`"in" takes [value, [list]] with a list of at least one literal; got %s as the list`, describe(args[1]))
		}
		list := make([]Scalar, len(raw))
		for i, a := range raw {
			v, err := jsonScalar(a, op)
			if err != nil {
				return nil, err
			}
			list[i] = v
		}
		return &In{Value: val, List: list}, nil
	case "like":
		val, err := operand(2)
		if err != nil {
			return nil, err
		}
		pat, ok := args[1].(string)
		if !ok {
			return nil, errorf(`"like" pattern must be a string, got %s`, describe(args[1]))
		}
		if err := checkPattern(pat); err != "" {
			return nil, errorf("LIKE pattern %s %s", truncate(StringLit{pat}.String()), err)
		}
		return &Like{Value: val, Pattern: pat}, nil
	case "isNull":
		val, err := operand(1)
		if err != nil {
			return nil, err
		}
		return &IsNull{Value: val}, nil
	}
	return nil, errorf("operator %q is not supported (and, or, not, =, <>, <, <=, >, >=, between, in, like, isNull are)", truncate(op))
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// jsonScalar converts an operand of op.
func jsonScalar(v any, op string) (Scalar, error) {
	switch v := v.(type) {
	case string:
		return StringLit{Value: v}, nil
	case bool:
		return BoolLit{Value: v}, nil
	case json.Number:
		n, err := parseNumber(string(v))
		if err != "" {
			return nil, errorf("number %s %s", truncate(string(v)), err)
		}
		return n, nil
	case map[string]any:
		if raw, ok := v["property"]; ok {
			name, ok := raw.(string)
			if !ok {
				return nil, errorf(`"property" must be a string, got %s`, describe(raw))
			}
			if len(v) != 1 {
				return nil, errorf("property %q has other members: %s", truncate(name), strings.Join(sortedKeys(v), ", "))
			}
			if name == "" {
				return nil, errorf("empty property name")
			}
			if !utf8.ValidString(name) {
				return nil, errorf("property name %q is not valid UTF-8", truncate(name))
			}
			return Property{Name: name}, nil
		}
		if _, ok := v["op"]; ok {
			return nil, errorf("operands of %q must be properties or literals, got %s", op, describe(v))
		}
		for _, k := range []string{"date", "timestamp", "interval", "bbox", "type"} {
			if _, ok := v[k]; ok {
				return nil, errorf("%q literals are not supported (operand of %q)", k, op)
			}
		}
	}
	return nil, errorf("operands of %q must be properties or literals, got %s", op, describe(v))
}
